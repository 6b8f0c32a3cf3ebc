package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/workflow"
)

// The child process of the SIGKILL tests: it runs a workflow on the journal
// named by the environment and, where told to, blocks until it is killed.
// quietRace is the GORACE setting for a child process that is this test
// binary: a -race binary sleeps atexit_sleep_ms (1 s by default) before
// exiting 0, waiting for late race reports, and a child's work is done by
// then. Race detection in the child is unchanged.
func quietRace() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

func TestMain(m *testing.M) {
	if mode := os.Getenv("LOOM_WF_CHILD"); mode != "" {
		os.Exit(child(mode, os.Getenv("LOOM_WF_DIR")))
	}
	os.Exit(m.Run())
}

func mark(dir, name string) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	fmt.Fprintln(f, time.Now().UnixNano())
	f.Close()
}

func count(t *testing.T, dir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

const prsDDL = `CREATE TABLE IF NOT EXISTS prs (key TEXT PRIMARY KEY, number INTEGER NOT NULL)`

func childWorkflow(mode, dir string) (*workflow.Workflow, error) {
	switch {
	case strings.HasPrefix(mode, "approval"):
		return workflow.New("incident", []workflow.Step{
			{Name: "plan", Kind: workflow.KindModel, Action: constant("diagnose checkout failures")},
			{Name: "open_pr", Kind: workflow.KindTool, Requires: []string{"plan"}, Key: "pr:checkout-fix", EffectSchema: prsDDL,
				Action: func(ctx context.Context, in workflow.Input) (any, error) {
					mark(dir, "open_pr.count") // counts executions, outside the transaction
					if err := in.Tx.Exec(ctx, `INSERT INTO prs(key, number) VALUES (?, ?)`, in.Key, 41); err != nil {
						return nil, err
					}
					return map[string]any{"pr": 41}, nil
				}},
			{Name: "approve_deploy", Kind: workflow.KindApproval, Requires: []string{"open_pr"}, Action: func(_ context.Context, in workflow.Input) (any, error) {
				return "deploy approved by " + in.Approval.Approver, nil
			}},
			{Name: "report", Kind: workflow.KindModel, Requires: []string{"approve_deploy"}, Action: constant("reported")},
		})
	case strings.HasPrefix(mode, "retry"):
		return workflow.New("retry", []workflow.Step{
			{Name: "deploy_fix", Kind: workflow.KindTool, Retries: 2, Key: "deploy:checkout-fix", EffectSchema: prsDDL,
				Action: func(ctx context.Context, in workflow.Input) (any, error) {
					mark(dir, "deploy.count")
					if in.Attempt == 1 {
						return nil, errors.New("deploy backend unavailable")
					}
					if err := in.Tx.Exec(ctx, `INSERT INTO prs(key, number) VALUES (?, ?)`, in.Key, 812); err != nil {
						return nil, err
					}
					if mode == "retry-block" {
						// Inside the transaction, the effect applied but
						// not committed: wait to be killed.
						mark(dir, "inside")
						time.Sleep(time.Hour)
					}
					return "deployed", nil
				}},
			{Name: "report", Kind: workflow.KindModel, Requires: []string{"deploy_fix"}, Action: constant("reported")},
		})
	}
	return nil, fmt.Errorf("unknown child mode %q", mode)
}

func child(mode, dir string) int {
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(dir, "journal.db")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	wf, err := childWorkflow(mode, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	rn, _ := workflow.NewRunner(workflow.Config{Journal: j})
	_, err = rn.Run(ctx, wf, "run-1", workflow.RunOptions{})
	var sus *workflow.SuspendedError
	if errors.As(err, &sus) {
		mark(dir, "suspended")
		time.Sleep(time.Hour) // a process waiting for a human; killed by the test
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mark(dir, "done")
	return 0
}

func startChild(t *testing.T, mode, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), quietRace(), "LOOM_WF_CHILD="+mode, "LOOM_WF_DIR="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func waitFor(t *testing.T, dir, name string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for count(t, dir, name) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("child never wrote %s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
}

func runChild(t *testing.T, mode, dir string) {
	t.Helper()
	cmd := startChild(t, mode, dir)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child %s: %v", mode, err)
	}
}

func readBack(t *testing.T, dir string) (*journaldb.Store, []workflow.StepEvent) {
	t.Helper()
	j, err := journaldb.Open(context.Background(), journaldb.Config{Path: filepath.Join(dir, "journal.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Shutdown(context.Background()) })
	if err := j.Verify(context.Background(), "run-1"); err != nil {
		t.Fatal(err)
	}
	evs, _, _, err := workflow.Status(context.Background(), j, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	return j, evs
}

func steps(evs []workflow.StepEvent) string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s/%s/%d", e.Step, e.Event, e.Attempt))
	}
	return strings.Join(out, " ")
}

// A real process is SIGKILLed while suspended at an approval gate; the
// approval is recorded by another handle, and a third process resumes the
// run exactly: the keyed effect happened once.
func TestSIGKILLDuringSuspendedApproval(t *testing.T) {
	dir := t.TempDir()
	first := startChild(t, "approval", dir)
	waitFor(t, dir, "suspended")
	kill(t, first)

	j, evs := readBack(t, dir)
	if got, want := steps(evs), "plan/started/1 plan/succeeded/1 open_pr/started/1 open_pr/succeeded/1 approve_deploy/approval_required/0"; got != want {
		t.Fatalf("after kill: %s\nwant %s", got, want)
	}
	if err := workflow.Record(context.Background(), j, "run-1", "approve_deploy", workflow.Approval{Approved: true, Approver: "on-call@example.invalid", Reason: "diff reviewed", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	runChild(t, "approval", dir)
	j2, evs := readBack(t, dir)
	want := "plan/started/1 plan/succeeded/1 open_pr/started/1 open_pr/succeeded/1 approve_deploy/approval_required/0 " +
		"plan/replayed/0 open_pr/replayed/0 approve_deploy/started/1 approve_deploy/succeeded/1 report/started/1 report/succeeded/1"
	if got := steps(evs); got != want {
		t.Fatalf("resumed: %s\nwant %s", got, want)
	}
	if n := count(t, dir, "open_pr.count"); n != 1 {
		t.Fatalf("open_pr executed %d times across both processes", n)
	}
	var rows int
	if err := j2.DB().QueryRow(`SELECT COUNT(*) FROM prs`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("prs rows %d (%v)", rows, err)
	}
	if !strings.Contains(string(evs[8].Result), "on-call@example.invalid") {
		t.Fatalf("approval step result %s does not name the approver", evs[8].Result)
	}
}

// A real process is SIGKILLed inside the second attempt of a retried keyed
// step, after its effect statement ran but before the commit; the resumed
// process marks the attempt interrupted, runs it again, and the effect
// exists once.
func TestSIGKILLDuringRetriedStep(t *testing.T) {
	dir := t.TempDir()
	first := startChild(t, "retry-block", dir)
	waitFor(t, dir, "inside")
	kill(t, first)

	_, evs := readBack(t, dir)
	if got, want := steps(evs), "deploy_fix/started/1 deploy_fix/failed/1 deploy_fix/retried/1 deploy_fix/started/2"; got != want {
		t.Fatalf("after kill: %s\nwant %s", got, want)
	}
	runChild(t, "retry", dir)
	j, evs := readBack(t, dir)
	want := "deploy_fix/started/1 deploy_fix/failed/1 deploy_fix/retried/1 deploy_fix/started/2 " +
		"deploy_fix/interrupted/2 deploy_fix/started/2 deploy_fix/succeeded/2 report/started/1 report/succeeded/1"
	if got := steps(evs); got != want {
		t.Fatalf("resumed: %s\nwant %s", got, want)
	}
	var rows int
	if err := j.DB().QueryRow(`SELECT COUNT(*) FROM prs WHERE key='deploy:checkout-fix'`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("effect rows %d (%v), want exactly 1", rows, err)
	}
	// Three action calls (failed, killed, succeeded), one effect.
	if n := count(t, dir, "deploy.count"); n != 3 {
		t.Fatalf("action called %d times, want 3", n)
	}
	// A third process finds everything done: replays, executes nothing.
	runChild(t, "retry", dir)
	_, evs = readBack(t, dir)
	if got := steps(evs[len(evs)-2:]); got != "deploy_fix/replayed/0 report/replayed/0" {
		t.Fatalf("third run: %s", got)
	}
	if n := count(t, dir, "deploy.count"); n != 3 {
		t.Fatalf("action called %d times after a completed run was resumed", n)
	}
}
