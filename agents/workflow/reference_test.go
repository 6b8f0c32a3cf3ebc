package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/agents/workflow"
)

func openJournal(t *testing.T) *journaldb.Store {
	t.Helper()
	j, err := journaldb.Open(context.Background(), journaldb.Config{Path: filepath.Join(t.TempDir(), "journal.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Shutdown(context.Background()) })
	return j
}

func constant(v any) func(context.Context, workflow.Input) (any, error) {
	return func(context.Context, workflow.Input) (any, error) { return v, nil }
}

// incident is the reference design's incident workflow (runtime.py).
func incident(openPRCalls *int) []workflow.Step {
	return []workflow.Step{
		{Name: "plan", Kind: workflow.KindModel, Action: constant("diagnose checkout failures")},
		{Name: "retrieve_runbook", Kind: workflow.KindTool, Requires: []string{"plan"}, Action: constant([]string{"runbook://checkout-timeout"})},
		{Name: "open_pr", Kind: workflow.KindTool, Requires: []string{"retrieve_runbook"}, Key: "pr:checkout-fix",
			Action: func(context.Context, workflow.Input) (any, error) {
				*openPRCalls++
				return map[string]any{"pr": 41, "url": "https://example.invalid/pr/41"}, nil
			}},
		{Name: "approve_deploy", Kind: workflow.KindApproval, Requires: []string{"open_pr"}, Action: constant("deploy approved by on-call")},
		{Name: "report", Kind: workflow.KindModel, Requires: []string{"approve_deploy"}, Action: constant("reported")},
	}
}

func eventLog(evs []workflow.StepEvent) string {
	var b strings.Builder
	for i, e := range evs {
		fmt.Fprintf(&b, "%2d  %-17s %-12s attempt=%d\n", i, e.Step, e.Event, e.Attempt)
	}
	return b.String()
}

// The reference design's printed example: topological order, crash after
// open_pr, resume, ledger, the full event log, and the denied gate.
func TestReferenceIncidentExample(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t)
	calls := 0
	wf, err := workflow.New("incident", incident(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(wf.Order()), "[plan retrieve_runbook open_pr approve_deploy report]"; got != want {
		t.Fatalf("topological order: %s, want %s", got, want)
	}
	rn, err := workflow.NewRunner(workflow.Config{Journal: j, Gate: workflow.GateFunc(func(string) bool { return true })})
	if err != nil {
		t.Fatal(err)
	}
	st, err := rn.Run(ctx, wf, "incident-1", workflow.RunOptions{CrashAfter: "open_pr"})
	var crash *workflow.CrashError
	if !errors.As(err, &crash) {
		t.Fatalf("want a crash, got %v", err)
	}
	if got := fmt.Sprintf("crashed with %d steps done: %v", len(st.Completed), st.Completed); got != "crashed with 3 steps done: [plan retrieve_runbook open_pr]" {
		t.Fatal(got)
	}
	// A new runner (a new process) on the same journal resumes.
	rn2, _ := workflow.NewRunner(workflow.Config{Journal: j, Gate: workflow.GateFunc(func(string) bool { return true })})
	resumed, err := rn2.Run(ctx, wf, "incident-1", workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(resumed.Completed); got != "[plan retrieve_runbook open_pr approve_deploy report]" {
		t.Fatalf("completed: %s", got)
	}
	if calls != 1 {
		t.Fatalf("open_pr executed %d time(s) across both runs, want 1", calls)
	}
	ledger, _ := json.Marshal(resumed.Ledger)
	if got := string(ledger); got != `{"pr:checkout-fix":{"pr":41,"url":"https://example.invalid/pr/41"}}` {
		t.Fatalf("ledger: %s", got)
	}
	var replayed []string
	for _, e := range resumed.Events {
		if e.Event == workflow.StatusReplayed {
			replayed = append(replayed, e.Step)
		}
	}
	if got := fmt.Sprint(replayed); got != "[plan retrieve_runbook open_pr]" {
		t.Fatalf("replayed steps: %s", got)
	}
	want := ` 0  plan              started      attempt=1
 1  plan              succeeded    attempt=1
 2  retrieve_runbook  started      attempt=1
 3  retrieve_runbook  succeeded    attempt=1
 4  open_pr           started      attempt=1
 5  open_pr           succeeded    attempt=1
 6  plan              replayed     attempt=0
 7  retrieve_runbook  replayed     attempt=0
 8  open_pr           replayed     attempt=0
 9  approve_deploy    approval_required attempt=0
10  approve_deploy    started      attempt=1
11  approve_deploy    succeeded    attempt=1
12  report            started      attempt=1
13  report            succeeded    attempt=1
`
	if got := eventLog(resumed.Events); got != want {
		t.Fatalf("event log:\n%s\nwant:\n%s", got, want)
	}
	// The ledger row is in the journal database, once.
	var n int
	if err := j.DB().QueryRow(`SELECT COUNT(*) FROM workflow_ledger WHERE run_id='incident-1' AND key='pr:checkout-fix'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("ledger rows: %d, %v", n, err)
	}

	// The denied gate stops the run at the boundary.
	guarded, _ := workflow.New("guarded", incident(&calls))
	rn3, _ := workflow.NewRunner(workflow.Config{Journal: j, Gate: workflow.GateFunc(func(name string) bool { return name != "approve_deploy" })})
	res, err := rn3.Run(ctx, guarded, "guarded-1", workflow.RunOptions{})
	var denied *workflow.DeniedError
	if !errors.As(err, &denied) || denied.Step != "approve_deploy" {
		t.Fatalf("want stopped at approve_deploy, got %v", err)
	}
	if got := fmt.Sprint(res.Completed); got != "[plan retrieve_runbook open_pr]" {
		t.Fatalf("guarded completed %s", got)
	}
	last := res.Events[len(res.Events)-1]
	if last.Event != workflow.StatusDenied || last.Approver != "gate" || last.Reason == "" {
		t.Fatalf("denied event %+v", last)
	}
}

// The reference design's retry example: one failure, one retry, and the
// attempts visible in the event log.
func TestReferenceRetries(t *testing.T) {
	j := openJournal(t)
	attempts := 0
	wf, err := workflow.New("retry", []workflow.Step{
		{Name: "diagnose", Kind: workflow.KindTool, Retries: 1, Action: func(context.Context, workflow.Input) (any, error) {
			attempts++
			if attempts == 1 {
				return nil, errors.New("log backend unavailable")
			}
			return "checkout timeouts trace to deploy 812", nil
		}},
		{Name: "report", Kind: workflow.KindModel, Requires: []string{"diagnose"}, Action: constant("reported")},
	})
	if err != nil {
		t.Fatal(err)
	}
	rn, _ := workflow.NewRunner(workflow.Config{Journal: j})
	res, err := rn.Run(context.Background(), wf, "retry-1", workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 2 {
		t.Fatalf("action attempts: %d", attempts)
	}
	var got []string
	for _, e := range res.Events {
		got = append(got, fmt.Sprintf("('%s', '%s', %d)", e.Step, e.Event, e.Attempt))
	}
	want := "[('diagnose', 'started', 1), ('diagnose', 'failed', 1), ('diagnose', 'retried', 1), ('diagnose', 'started', 2), ('diagnose', 'succeeded', 2), ('report', 'started', 1), ('report', 'succeeded', 1)]"
	if g := "[" + strings.Join(got, ", ") + "]"; g != want {
		t.Fatalf("events: %s\nwant   %s", g, want)
	}
	// Bounded: a step that always fails stops after 1+Retries attempts.
	always := 0
	wf2, _ := workflow.New("bounded", []workflow.Step{{Name: "flaky", Kind: workflow.KindTool, Retries: 2,
		Action: func(context.Context, workflow.Input) (any, error) { always++; return nil, errors.New("down") }}})
	_, err = rn.Run(context.Background(), wf2, "bounded-1", workflow.RunOptions{})
	var se *workflow.StepError
	if !errors.As(err, &se) || se.Step != "flaky" || se.Attempts != 3 || always != 3 {
		t.Fatalf("bounded retries: err %v, calls %d", err, always)
	}
}

func TestGraphErrorsNameTheStep(t *testing.T) {
	a := constant(1)
	_, err := workflow.New("cyc", []workflow.Step{
		{Name: "a", Kind: workflow.KindTool, Action: a},
		{Name: "b", Kind: workflow.KindTool, Requires: []string{"a", "d"}, Action: a},
		{Name: "c", Kind: workflow.KindTool, Requires: []string{"b"}, Action: a},
		{Name: "d", Kind: workflow.KindTool, Requires: []string{"c"}, Action: a},
	})
	var ce *workflow.CycleError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "b -> d -> c -> b") {
		t.Fatalf("cycle error: %v", err)
	}
	_, err = workflow.New("unk", []workflow.Step{{Name: "a", Kind: workflow.KindTool, Requires: []string{"nope"}, Action: a}})
	if err == nil || !strings.Contains(err.Error(), `step "a" requires unknown step "nope"`) {
		t.Fatalf("unknown dependency: %v", err)
	}
}

// Durable approval: the run suspends (a new runner resumes it), an answer
// recorded in the journal resumes or stops it, and the denial carries the
// approver and reason.
func TestDurableApproval(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t)
	for _, approve := range []bool{true, false} {
		calls := 0
		wf, _ := workflow.New("incident", incident(&calls))
		run := fmt.Sprintf("approval-%v", approve)
		rn, _ := workflow.NewRunner(workflow.Config{Journal: j})
		_, err := rn.Run(ctx, wf, run, workflow.RunOptions{})
		var sus *workflow.SuspendedError
		if !errors.As(err, &sus) || sus.Step != "approve_deploy" {
			t.Fatalf("want suspended, got %v", err)
		}
		// Still suspended on a second try without an answer, no new event.
		res, err := rn.Run(ctx, wf, run, workflow.RunOptions{})
		if !errors.As(err, &sus) {
			t.Fatalf("want suspended again, got %v", err)
		}
		if err := workflow.Record(ctx, j, run, "report", workflow.Approval{Approved: true, Approver: "x"}); err == nil {
			t.Fatal("approving a step that is not pending must fail")
		}
		if err := workflow.Record(ctx, j, run, "approve_deploy", workflow.Approval{Approved: approve, Approver: "on-call@example.invalid", Reason: "checked the diff"}); err != nil {
			t.Fatal(err)
		}
		if err := workflow.Record(ctx, j, run, "approve_deploy", workflow.Approval{Approved: true, Approver: "other"}); err == nil {
			t.Fatal("a second answer must be refused")
		}
		res, err = rn.Run(ctx, wf, run, workflow.RunOptions{})
		if approve {
			if err != nil || len(res.Completed) != 5 {
				t.Fatalf("approved run: %v %v", res.Completed, err)
			}
		} else {
			var d *workflow.DeniedError
			if !errors.As(err, &d) || d.Approver != "on-call@example.invalid" || d.Reason != "checked the diff" {
				t.Fatalf("denied: %v", err)
			}
		}
		if calls != 1 {
			t.Fatalf("open_pr ran %d times", calls)
		}
		asked := 0
		for _, e := range res.Events {
			if e.Event == workflow.StatusApprovalRequired {
				asked++
			}
		}
		if asked != 1 {
			t.Fatalf("approval_required journaled %d times", asked)
		}
	}
}

// A step that used up its retries stays failed when the run is resumed:
// resuming does not buy new attempts.
func TestExhaustedStepStaysFailed(t *testing.T) {
	j := openJournal(t)
	calls := 0
	wf, _ := workflow.New("fail", []workflow.Step{{Name: "s", Kind: workflow.KindTool, Retries: 1,
		Action: func(context.Context, workflow.Input) (any, error) { calls++; return nil, errors.New("down") }}})
	rn, _ := workflow.NewRunner(workflow.Config{Journal: j})
	for i := 0; i < 2; i++ {
		_, err := rn.Run(context.Background(), wf, "f-1", workflow.RunOptions{})
		var se *workflow.StepError
		if !errors.As(err, &se) {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if calls != 2 {
		t.Fatalf("action called %d times, want 2 (1 + 1 retry, none on resume)", calls)
	}
}

// A whole agent loop as one step: it runs on the runtime under its own run
// id, its result feeds the next step, and after a crash the loop is
// replayed from the workflow's record — the model is not asked again.
func TestAgentStep(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t)
	model := scripted.NewFunc("scripted-triage", func(req llm.Request, turn int) (scripted.Turn, error) {
		if turn == 0 {
			return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "logs", Arguments: json.RawMessage(`{}`)}}}, nil
		}
		return scripted.Turn{Content: "pool exhausted since deploy 812"}, nil
	})
	rt, err := runtime.New(runtime.Config{Model: model, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	agent := runtime.Agent{Name: "triage", System: "triage", Tools: []runtime.Tool{{Name: "logs", Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
			return runtime.ToolOutput{Content: "pool exhausted"}, nil
		}}}}
	var reported string
	wf, err := workflow.New("triage", []workflow.Step{
		{Name: "triage", Kind: workflow.KindAgent, Action: workflow.AgentAction(rt, agent, func(workflow.Input) runtime.Task {
			return runtime.Task{Input: "why is checkout failing?"}
		})},
		{Name: "report", Kind: workflow.KindModel, Requires: []string{"triage"}, Action: func(_ context.Context, in workflow.Input) (any, error) {
			var r workflow.AgentResult
			if err := json.Unmarshal(in.Results["triage"], &r); err != nil {
				return nil, err
			}
			reported = r.Answer
			return "reported: " + r.Answer, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rn, _ := workflow.NewRunner(workflow.Config{Journal: j})
	if _, err := rn.Run(ctx, wf, "tri-1", workflow.RunOptions{CrashAfter: "triage"}); err == nil {
		t.Fatal("want the simulated crash")
	}
	calls := model.Calls()
	res, err := rn.Run(ctx, wf, "tri-1", workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if model.Calls() != calls || calls != 2 {
		t.Fatalf("model calls %d then %d: the agent loop ran again", calls, model.Calls())
	}
	if reported != "pool exhausted since deploy 812" || res.Events[len(res.Events)-3].Event != workflow.StatusReplayed {
		t.Fatalf("reported %q, events %v", reported, res.Events)
	}
	if evs, _ := j.Events(ctx, "tri-1/triage"); len(evs) == 0 {
		t.Fatal("the agent loop has no journal of its own")
	}
}
