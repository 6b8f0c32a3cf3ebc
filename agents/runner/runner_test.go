package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/approvals/approvalstest"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/journal/memjournal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/memory"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/scripted"
)

var clock = func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }

// notesAgent looks a question up in its notes (one tool) and answers.
func notesAgent() runtime.Agent {
	return runtime.Agent{Name: "notes", System: "Answer from the notes.", Tools: []runtime.Tool{{
		Name: "lookup", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
			return runtime.ToolOutput{Content: "Retries are set with retries: N in config.yml.", Documents: []string{"notes:retries"}}, nil
		}}}}
}

// trialModels gives trial t a scripted model of its own (named
// scripted-tT, answering "trial T: ..."), records which trials asked for
// one, and keeps the system prompt of each first request.
type trialModels struct {
	mu      sync.Mutex
	trials  []int
	systems []string
}

func (m *trialModels) model(trial int) runtime.Model {
	m.mu.Lock()
	m.trials = append(m.trials, trial)
	m.mu.Unlock()
	return scripted.NewFunc(fmt.Sprintf("scripted-t%d", trial), func(req llm.Request, turn int) (scripted.Turn, error) {
		if turn == 0 {
			m.mu.Lock()
			m.systems = append(m.systems, req.System)
			m.mu.Unlock()
			return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{"q":"retries"}`)}},
				Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}, nil
		}
		return scripted.Turn{Content: fmt.Sprintf("trial %d: set retries: N in config.yml [notes:retries]", trial),
			Usage: llm.Usage{InputTokens: 150, OutputTokens: 20}}, nil
	})
}

// price knows the trial models' price: $1 per million tokens.
func price(model string, u llm.Usage) (float64, bool) {
	if !strings.HasPrefix(model, "scripted-t") {
		return 0, false
	}
	return float64(u.InputTokens+u.OutputTokens) / 1e6, true
}

// estimate is a context layer that needs no tokenizer download.
func estimate() *runtime.ContextSpec {
	return &runtime.ContextSpec{Strategy: "truncate", Budget: 4000, Tokenizer: runtime.TokenizerEstimate}
}

func newRunner(t *testing.T, cfg runner.Config) *runner.Runner {
	t.Helper()
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every task runs Trials times; the trials are numbered from 0 in the run
// ids and the results, each trial gets the model the factory gives it, and
// each run is priced. Run again on the same journal, every run is read
// back from it: the same answers, no model asked.
func TestTrialsAreNumberedEachWithItsOwnModel(t *testing.T) {
	ctx := context.Background()
	j := memjournal.New(memjournal.Config{Clock: clock})
	models := &trialModels{}
	cfg := runner.Config{Agent: notesAgent(), Journal: j, JournalName: "mem", Models: models.model, Trials: 3, Price: price, Clock: clock}
	tasks := []runner.Task{{CaseID: "a", Input: "How are retries set?"}, {CaseID: "b", Input: "Where do retries go?"}}
	results, err := newRunner(t, cfg).Run(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	var ids, answers []string
	for i, res := range results {
		ids = append(ids, res.RunID)
		answers = append(answers, res.Answer)
		if res.Trial != i%3 || res.CaseID != tasks[i/3].CaseID || res.Agent != "notes" || res.Journal != "mem" || res.ModelLabel != llm.LabelScripted {
			t.Errorf("result %d: %+v", i, res)
		}
		if res.ModelCalls != 2 || res.Reused != 0 || res.Steps != 2 || res.TotalUsage.InputTokens != 250 ||
			res.CostUSD == nil || math.Abs(*res.CostUSD-280e-6) > 1e-12 || res.CostNote != "" || !reflect.DeepEqual(res.Documents, []string{"notes:retries"}) {
			t.Errorf("result %d: %+v (cost %v)", i, res, res.CostUSD)
		}
	}
	if want := []string{"notes-a-t0", "notes-a-t1", "notes-a-t2", "notes-b-t0", "notes-b-t1", "notes-b-t2"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("run ids %v, want %v", ids, want)
	}
	for i, a := range answers {
		if want := fmt.Sprintf("trial %d: ", i%3); !strings.HasPrefix(a, want) {
			t.Errorf("run %s answered %q: not trial %d's model", ids[i], a, i%3)
		}
	}
	if want := []int{0, 1, 2, 0, 1, 2}; !reflect.DeepEqual(models.trials, want) {
		t.Errorf("models made for trials %v, want %v", models.trials, want)
	}

	again, err := newRunner(t, cfg).Run(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	for i, res := range again {
		if res.RunID != ids[i] || res.Answer != answers[i] || res.ModelCalls != 0 || res.Reused != 2 {
			t.Errorf("run %s again: %+v", ids[i], res)
		}
	}
	if len(models.systems) != 6 {
		t.Errorf("the models were asked %d runs' first requests, want 6 (the second pass reads the journal)", len(models.systems))
	}
}

// A call the policy holds for a human suspends the run: Run stops with
// the runtime's SuspendedError and says on Out which call waits, how to
// answer it and which run id resumes it. Once approved, running again
// resumes the run at that call.
func TestASuspendedRunSaysHowToResume(t *testing.T) {
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "runs.journal.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	q, err := approvals.Open(ctx, approvals.Config{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	g, err := approvalstest.Guard(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cfg := runner.Config{Agent: approvalstest.MailAgent(), Journal: j, JournalName: "runs.journal.db",
		Models: func(int) runtime.Model { return approvalstest.Obeying() }, Authorizer: g, Approvals: q, Out: &out, Clock: clock}
	tasks := []runner.Task{{CaseID: "checkout", Input: "why do checkouts time out?"}}
	_, err = newRunner(t, cfg).Run(ctx, tasks)
	var sus *runtime.SuspendedError
	if !errors.As(err, &sus) || sus.RunID != "mailer-checkout-t0" || sus.CallID != "c2" {
		t.Fatalf("Run: %v", err)
	}
	want := "run mailer-checkout-t0 suspended at call c2 (tool send_email): loom-eval approve mailer-checkout-t0 c2 --approver WHO, then run it again\n" +
		"resume: run the same command again with --run-id mailer-checkout-t0 (runs already done are read from the journal)\n"
	if out.String() != want {
		t.Fatalf("out:\n%s\nwant:\n%s", out.String(), want)
	}

	if _, err := q.Answer(ctx, "mailer-checkout-t0", "c2", true, "alice", "internal address"); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	results, err := newRunner(t, cfg).Run(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Answer != "mail: sent" || out.Len() != 0 {
		t.Fatalf("resumed: %+v, out %q", results, out.String())
	}
}

// With a memory store, a new run recalls what earlier runs taught into its
// context's memory tier, and once finished is distilled into the store. A
// run resumed from the journal keeps the memory it recalled the first time
// and is not distilled again.
func TestMemoryIsRecalledThenDistilled(t *testing.T) {
	ctx := context.Background()
	mem, err := memory.Open(ctx, memory.Config{Path: filepath.Join(t.TempDir(), "memory.db"), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Shutdown(ctx)
	scope := memory.Scope{Tenant: "default", Agent: "notes", Namespace: "default"}
	j := memjournal.New(memjournal.Config{Clock: clock})
	models := &trialModels{}
	cfg := runner.Config{Agent: notesAgent(), Journal: j, Models: models.model, Context: estimate(),
		Memory: mem, MemoryScope: scope, Clock: clock}
	first := []runner.Task{{CaseID: "first", Input: "How do I configure retries?"}}
	res, err := newRunner(t, cfg).Run(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Recalled) != 0 {
		t.Fatalf("the first run recalled %v from an empty store", res[0].Recalled)
	}
	recs, err := mem.Records(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	var episode *memory.Record
	for i, r := range recs {
		if r.Kind == memory.Episodic && strings.Contains(r.Text, "configure retries") {
			episode = &recs[i]
		}
	}
	if episode == nil || !reflect.DeepEqual(episode.SourceRuns, []string{"notes-first-t0"}) {
		t.Fatalf("the first run distilled no episode of its own: %+v", recs)
	}

	second := []runner.Task{{CaseID: "second", Input: "Configure retries for uploads"}}
	res, err = newRunner(t, cfg).Run(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res[0].Recalled, []string{episode.Key}) {
		t.Fatalf("the second run recalled %v, want [%s]", res[0].Recalled, episode.Key)
	}
	if sys := models.systems[1]; !strings.Contains(sys, "configure retries") {
		t.Fatalf("the recalled memory is not in the second run's prompt:\n%s", sys)
	}
	distilled, err := mem.Records(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}

	// Both again: read back from the journal, with the memory they had.
	for _, task := range [][]runner.Task{first, second} {
		again, err := newRunner(t, cfg).Run(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		if again[0].ModelCalls != 0 {
			t.Fatalf("%s asked the model again", again[0].RunID)
		}
		if task[0].CaseID == "second" && !reflect.DeepEqual(again[0].Recalled, []string{episode.Key}) {
			t.Fatalf("resumed, the second run recalls %v, want [%s]", again[0].Recalled, episode.Key)
		}
	}
	after, err := mem.Records(ctx, scope)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, distilled) {
		t.Fatalf("resumed runs were distilled again:\nbefore %+v\nafter  %+v", distilled, after)
	}
}

// Evidence goes into every new run's context, in the evidence tier.
func TestEvidenceReachesThePrompt(t *testing.T) {
	models := &trialModels{}
	cfg := runner.Config{Agent: notesAgent(), Journal: memjournal.New(memjournal.Config{}), Models: models.model, Context: estimate(),
		Evidence: []runtime.TierDoc{{ID: "ticket:7", Text: "Uploads retry three times before failing.", Provenance: []string{"tickets"}}}}
	if _, err := newRunner(t, cfg).Run(context.Background(), []runner.Task{{Input: "How do uploads retry?"}}); err != nil {
		t.Fatal(err)
	}
	if len(models.systems) != 1 || !strings.Contains(models.systems[0], "Uploads retry three times") {
		t.Fatalf("prompts: %q", models.systems)
	}
}

// A run resumed under a policy that was recorded without one diverges at
// the policy's first decision: the error names the run and the journal,
// says how to resume it, and wraps the journal's DivergenceError.
func TestADivergedRunNamesItsJournal(t *testing.T) {
	ctx := context.Background()
	j := memjournal.New(memjournal.Config{Clock: clock})
	models := &trialModels{}
	cfg := runner.Config{Agent: notesAgent(), Journal: j, JournalName: "runs.journal.db", Models: models.model, RunID: "r1", Clock: clock}
	tasks := []runner.Task{{Input: "How are retries set?"}}
	if _, err := newRunner(t, cfg).Run(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	cfg.Authorizer = allowAll{}
	_, err := newRunner(t, cfg).Run(ctx, tasks)
	var de *journal.DivergenceError
	if !errors.As(err, &de) ||
		!strings.HasPrefix(err.Error(), "run r1: the journal runs.journal.db already holds this run id with different steps (it was recorded without a policy: resume it with --policy none): ") {
		t.Fatalf("Run: %v", err)
	}
}

// allowAll is a policy that allows every call.
type allowAll struct{}

func (allowAll) Authorize(context.Context, runtime.AuthCall) (runtime.Authorization, error) {
	return runtime.Authorization{Allow: true, Decision: map[string]string{"decision": "allow"}}, nil
}

// A configuration is checked whole: every problem is named.
func TestConfigValidate(t *testing.T) {
	err := runner.Config{Trials: -1, Evidence: []runtime.TierDoc{{ID: "e", Text: "x"}}}.Validate()
	for _, want := range []string{"agent must be set", "journal must be set", "models must be set", "must not be negative", "need a context"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	r := newRunner(t, runner.Config{Agent: notesAgent(), Journal: memjournal.New(memjournal.Config{}), Models: (&trialModels{}).model, RunID: "r1", Trials: 2})
	if _, err := r.Run(context.Background(), []runner.Task{{Input: "x"}}); err == nil || !strings.Contains(err.Error(), "names one run") {
		t.Fatalf("a run id with two trials: %v", err)
	}
}

// ScriptedPolicies are the reference agents' own: one model per trial.
func TestScriptedPolicies(t *testing.T) {
	for _, agent := range []string{"research", "coding"} {
		models, err := runner.ScriptedPolicies(agent, nil)
		if err != nil {
			t.Fatal(err)
		}
		m0, m1 := models(0), models(1)
		if l, ok := m0.(runtime.Labeler); m0 == nil || m1 == nil || m0 == m1 || !ok || l.Label() != llm.LabelScripted {
			t.Errorf("%s: models %v %v", agent, m0, m1)
		}
	}
	if _, err := runner.ScriptedPolicies("poet", nil); err == nil {
		t.Error("a scripted policy for an agent without one")
	}
}
