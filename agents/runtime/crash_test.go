package runtime_test

// The crash test runs the agent in real child processes (this test binary,
// re-executed with crashChildEnv set, as the standard library's
// helper-process tests do) and kills them with SIGKILL at chosen points.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/internal/testtier"
)

const (
	crashChildEnv = "LOOMWORK_CRASH_CHILD" // the journal path
	crashModeEnv  = "LOOMWORK_CRASH_MODE"
	crashAtEnv    = "LOOMWORK_CRASH_AT" // the step whose effect triggers the kill; empty: run to the end
	crashSteps    = 12
	crashRunID    = "crash-run"
)

// Kill points, in the order they happen within one step.
const (
	// killAfterToolCall: the tool_call event is committed, the tool has not
	// run.
	killAfterToolCall = "after-tool-call"
	// killBeforeCommit: the tool has executed its INSERT inside the
	// journal transaction; neither the row nor its events are committed.
	killBeforeCommit = "before-commit"
	// killAfterCommit: the row, its effect event and the tool_result event
	// have committed together; the next step has not started.
	killAfterCommit = "after-commit"
)

// crashScript: twelve steps, each one ledger_append call, then an answer.
func crashScript() scripted.Script {
	var turns []scripted.Turn
	for i := 1; i <= crashSteps; i++ {
		turns = append(turns, scripted.Turn{ToolCalls: []llm.ToolCall{{
			ID: fmt.Sprintf("call-%d", i), Name: "ledger_append",
			Arguments: json.RawMessage(fmt.Sprintf(`{"account":"acct","amount_cents":%d,"memo":"step %d"}`, i, i)),
		}}, Usage: llm.Usage{InputTokens: int64(10 * i), OutputTokens: 5}})
	}
	turns = append(turns, scripted.Turn{Content: "twelve entries booked", Usage: llm.Usage{InputTokens: 200, OutputTokens: 4}})
	return scripted.Script{Model: "scripted-crash", Turns: turns}
}

func killSelf() {
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for {
		time.Sleep(time.Second) // SIGKILL cannot be caught; this is never reached for long
	}
}

// killingJournal kills the process right after the journal commits the
// chosen step's event.
type killingJournal struct {
	*journaldb.Store
	mode string
	at   int
}

func (k *killingJournal) Append(ctx context.Context, run string, recs ...journal.Record) ([]journal.Event, error) {
	evs, err := k.Store.Append(ctx, run, recs...)
	if err == nil && k.mode == killAfterToolCall && recs[0].Kind == journal.KindToolCall && recs[0].Step == k.at {
		killSelf()
	}
	return evs, err
}

func (k *killingJournal) AppendEffect(ctx context.Context, run string, c journal.EffectCall, fn journal.EffectFunc) ([]journal.Event, error) {
	evs, err := k.Store.AppendEffect(ctx, run, c, fn)
	if err == nil && k.mode == killAfterCommit && c.Step == k.at {
		killSelf()
	}
	return evs, err
}

type childReport struct {
	Answer      string `json:"answer"`
	ModelCalls  int    `json:"model_calls"`
	Reused      int    `json:"reused"`
	ToolRuns    int    `json:"tool_runs"`
	ToolsReused int    `json:"tools_reused"`
}

// crashChild is the child process's main.
func crashChild() int {
	ctx := context.Background()
	path, mode := os.Getenv(crashChildEnv), os.Getenv(crashModeEnv)
	at, _ := strconv.Atoi(os.Getenv(crashAtEnv))
	j, err := journaldb.Open(ctx, journaldb.Config{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer j.Shutdown(ctx)
	agent := bookkeeper.Agent()
	for i, t := range agent.Tools {
		if t.Name != "ledger_append" {
			continue
		}
		inner := t.Run
		agent.Tools[i].Run = func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			out, err := inner(ctx, in) // the INSERT has run inside the journal transaction
			if err == nil && mode == killBeforeCommit && in.Step == at {
				killSelf()
			}
			return out, err
		}
	}
	m, err := scripted.New(crashScript())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	rt, err := runtime.New(runtime.Config{Model: m, Journal: &killingJournal{Store: j, mode: mode, at: at}, MaxSteps: 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	res, err := rt.Run(ctx, agent, runtime.Task{RunID: crashRunID, Input: "Book twelve entries."})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	json.NewEncoder(os.Stdout).Encode(childReport{Answer: res.Answer, ModelCalls: res.ModelCalls, Reused: res.Reused, ToolRuns: res.ToolRuns, ToolsReused: res.ToolsReused})
	return 0
}

func runChild(t *testing.T, path, mode string, at int) (*os.ProcessState, []byte) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// atexit_sleep_ms=0: a -race binary otherwise sleeps a second at exit
	// (for late race reports from goroutines still running); the child's
	// work is done by then, and half of the crash test's time was that
	// sleep in each restarted child.
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashModeEnv+"="+mode,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	if at > 0 {
		cmd.Env = append(cmd.Env, crashAtEnv+"="+strconv.Itoa(at))
	}
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("start child: %v", err)
	}
	if ee != nil && len(ee.Stderr) > 0 {
		t.Logf("child stderr: %s", ee.Stderr)
	}
	return cmd.ProcessState, out
}

func ledgerCount(t *testing.T, path string) (rows, distinctKeys, sum int) {
	t.Helper()
	j := openJournal(t, path)
	var s *int
	err := j.DB().QueryRow(`SELECT COUNT(*), COUNT(DISTINCT idempotency_key), SUM(amount_cents) FROM ledger_entries`).Scan(&rows, &distinctKeys, &s)
	if err != nil {
		t.Fatal(err)
	}
	if s != nil {
		sum = *s
	}
	j.Shutdown(context.Background())
	return rows, distinctKeys, sum
}

// crashKillSteps are the steps the crash test kills at. The suite kills at
// every kind of step: the first (nothing recorded before it, one answer to
// reuse), one in the middle (recorded answers and effects on both sides)
// and the last tool step (only the final answer left to ask for) — each
// under all three kill points, 9 kills. The long tier kills at every step
// of the twelve, 36 kills.
func crashKillSteps() []int {
	if testtier.Long() {
		all := make([]int, crashSteps)
		for i := range all {
			all[i] = i + 1
		}
		return all
	}
	return []int{1, crashSteps / 2, crashSteps}
}

func TestSIGKILLAtEveryStepLeavesExactlyTwelveEffects(t *testing.T) {
	testtier.Slow(t) // two child processes per kill
	for _, mode := range []string{killAfterToolCall, killBeforeCommit, killAfterCommit} {
		for _, k := range crashKillSteps() {
			t.Run(fmt.Sprintf("%s/step%02d", mode, k), func(t *testing.T) {
				t.Parallel() // each kill has its own journal file and child processes
				path := filepath.Join(t.TempDir(), "journal.db")
				st, _ := runChild(t, path, mode, k)
				ws, ok := st.Sys().(syscall.WaitStatus)
				if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("first child was not killed by SIGKILL: %v", st)
				}
				// Where exactly did it die? The committed rows say.
				wantRows := k // after-commit: step k's row is in
				if mode != killAfterCommit {
					wantRows = k - 1 // step k's row never committed
				}
				if rows, _, _ := ledgerCount(t, path); rows != wantRows {
					t.Fatalf("after the kill: %d committed effects, want %d", rows, wantRows)
				}

				st, out := runChild(t, path, mode, 0)
				if !st.Success() {
					t.Fatalf("restarted child failed: %v", st)
				}
				var rep childReport
				if err := json.Unmarshal(out, &rep); err != nil {
					t.Fatalf("child report %q: %v", out, err)
				}
				rows, keys, sum := ledgerCount(t, path)
				if rows != crashSteps || keys != crashSteps || sum != crashSteps*(crashSteps+1)/2 {
					t.Fatalf("after restart: %d effects (%d distinct keys, sum %d), want %d", rows, keys, sum, crashSteps)
				}
				// Recorded answers are reused: the restarted process asks
				// the model only for steps k+1..13.
				if rep.ModelCalls != crashSteps+1-k || rep.Reused != k {
					t.Fatalf("restarted process made %d model calls and reused %d answers, want %d and %d", rep.ModelCalls, rep.Reused, crashSteps+1-k, k)
				}
				wantRuns := crashSteps - wantRows
				if rep.ToolRuns != wantRuns || rep.ToolsReused != wantRows {
					t.Fatalf("restarted process ran the tool %d times and reused %d results, want %d and %d", rep.ToolRuns, rep.ToolsReused, wantRuns, wantRows)
				}
				if rep.Answer != "twelve entries booked" {
					t.Fatalf("answer = %q", rep.Answer)
				}
				j := openJournal(t, path)
				if err := j.Verify(context.Background(), crashRunID); err != nil {
					t.Fatal(err)
				}
				evs, _ := j.Events(context.Background(), crashRunID)
				count := map[journal.Kind]int{}
				for _, e := range evs {
					count[e.Kind]++
				}
				if count[journal.KindEffect] != crashSteps || count[journal.KindToolResult] != crashSteps ||
					count[journal.KindToolCall] != crashSteps || count[journal.KindModelResponse] != crashSteps+1 || count[journal.KindRunFinished] != 1 {
					t.Fatalf("journal event counts = %v", count)
				}
			})
		}
	}
}
