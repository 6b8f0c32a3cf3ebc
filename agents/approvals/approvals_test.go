package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/approvals/approvalstest"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/workflow"
)

func guard(t *testing.T, audit *policy.AuditLog) *policy.Guard {
	t.Helper()
	g, err := approvalstest.Guard(audit)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// proc is what one process holds: the journal, the audit log and the
// queue, opened from disk and closed by done.
type proc struct {
	j     *journaldb.Store
	audit *policy.AuditLog
	q     *approvals.Store
}

type files struct {
	journal, audit string
	jclock         func() time.Time // the journal's clock, continued across processes
}

func open(t *testing.T, f files) *proc {
	t.Helper()
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: f.journal, Clock: f.jclock})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := policy.OpenAudit(f.audit, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := approvals.Open(ctx, approvals.Config{Journal: j, Audit: audit})
	if err != nil {
		t.Fatal(err)
	}
	return &proc{j: j, audit: audit, q: q}
}

func (p *proc) done(t *testing.T) {
	t.Helper()
	if err := p.j.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// run runs (or resumes) the agent as a fresh process would: guard with the
// audit log, the queue as the runtime's approvals source.
func (p *proc) run(t *testing.T, runID string) (runtime.Result, error) {
	t.Helper()
	rt, err := runtime.New(runtime.Config{Model: approvalstest.Obeying(), Journal: p.j, Authorizer: guard(t, p.audit), Approvals: p.q})
	if err != nil {
		t.Fatal(err)
	}
	return rt.Run(context.Background(), approvalstest.MailAgent(), runtime.Task{RunID: runID, Input: "why do checkouts time out?"})
}

func (p *proc) sent(t *testing.T) int {
	t.Helper()
	var n int
	if err := p.j.DB().QueryRow(`SELECT COUNT(*) FROM outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (p *proc) events(t *testing.T, runID string) []journal.Event {
	t.Helper()
	evs, err := p.j.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func kinds(evs []journal.Event) string {
	var ks []string
	for _, e := range evs {
		ks = append(ks, string(e.Kind))
	}
	return strings.Join(ks, " ")
}

// A write the policy holds suspends the run durably; the answer, given
// by another process through the queue (what loom-eval approve / deny and
// the /approvals page call), lets the next process resume it: approved,
// the mail is sent exactly once; denied, nothing is sent and the model is
// told who denied it and why. Every process opens everything from disk.
// A resume while pending is suspended again with no new event or audit
// entry; the audit log verifies and holds the request and the answer.
// (The finished journal's replay: replay.TestReplayOfAHeldCallNeedsNoQueue.)
func TestHeldWriteSuspendsAndResumesOnTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approved bool
		reason   string
		sent     int
		answer   string
	}{
		{"approve", true, "", 1, "mail: sent"},
		{"deny", false, "customer data never leaves by mail", 0, "mail: error: tool send_email was not run: approval denied by alice: customer data never leaves by mail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			f := files{journal: filepath.Join(dir, "runs.journal.db"), audit: filepath.Join(dir, "audit.jsonl"),
				jclock: journaldb.DeterministicClock()}
			const runID = "mail-1"

			// Process 1: the run is held at the write and suspends.
			p := open(t, f)
			_, err := p.run(t, runID)
			var sus *runtime.SuspendedError
			if !errors.As(err, &sus) || sus.RunID != runID || sus.CallID != "c2" || sus.Tool != "send_email" || sus.Step != 2 {
				t.Fatalf("first run: got %v, want suspended at c2 (send_email)", err)
			}
			if n := p.sent(t); n != 0 {
				t.Fatalf("%d mails sent before any approval", n)
			}
			held := p.events(t, runID)
			if got := kinds(held); !strings.HasSuffix(got, "tool_call policy_decision approval_requested") {
				t.Fatalf("journal ends %q, want the held call's request last", got)
			}
			p.done(t)

			// Process 2: resumed while pending, it suspends again and
			// records nothing new anywhere.
			p = open(t, f)
			pend, err := p.q.Pending(ctx)
			if err != nil || len(pend) != 1 {
				t.Fatalf("pending %+v, %v", pend, err)
			}
			e := pend[0]
			if e.RunID != runID || e.ID != "c2" || e.Kind != approvals.KindToolCall || e.Tool != "send_email" || e.Name != "mailer" ||
				!strings.Contains(e.Arguments, `"body":"customer list"`) || !strings.Contains(e.Reason, "human approval required") ||
				!strings.Contains(e.Origin, "doc:doc:runbook#pool via tool:search_docs") {
				t.Fatalf("pending entry %+v", e)
			}
			auditBefore := len(p.audit.Entries())
			if _, err := p.run(t, runID); !errors.As(err, &sus) {
				t.Fatalf("resume while pending: %v, want suspended", err)
			}
			if got := len(p.events(t, runID)); got != len(held) {
				t.Fatalf("resume while pending appended %d events", got-len(held))
			}
			if got := len(p.audit.Entries()); got != auditBefore {
				t.Fatalf("resume while pending audited %d more entries", got-auditBefore)
			}
			p.done(t)

			// Process 3: the human answers.
			p = open(t, f)
			if _, err := p.q.Answer(ctx, runID, "c2", tc.approved, "alice", tc.reason); err != nil {
				t.Fatal(err)
			}
			p.done(t)

			// Process 4: the run resumes and finishes.
			p = open(t, f)
			res, err := p.run(t, runID)
			if err != nil {
				t.Fatalf("resume after the answer: %v", err)
			}
			if res.Answer != tc.answer {
				t.Fatalf("answer %q, want %q", res.Answer, tc.answer)
			}
			if n := p.sent(t); n != tc.sent {
				t.Fatalf("%d mails sent, want %d", n, tc.sent)
			}
			evs := p.events(t, runID)
			var ans journal.ApprovalAnswer
			for _, e := range evs {
				if e.Kind == journal.KindApproval {
					if err := json.Unmarshal(e.Payload, &ans); err != nil {
						t.Fatal(err)
					}
				}
			}
			if ans.CallID != "c2" || ans.Approved != tc.approved || ans.Approver != "alice" || ans.Reason != tc.reason || ans.Time.IsZero() {
				t.Fatalf("journaled answer %+v", ans)
			}
			// Resuming the finished run runs nothing again.
			res, err = p.run(t, runID)
			if err != nil || res.ToolRuns != 0 || p.sent(t) != tc.sent {
				t.Fatalf("second resume: %v, %d tool runs, %d sent", err, res.ToolRuns, p.sent(t))
			}
			if len(p.events(t, runID)) != len(evs) {
				t.Fatal("second resume appended events")
			}

			// The audit log verifies and holds the request and the answer
			// with who and why.
			if err := p.audit.Verify(); err != nil {
				t.Fatal(err)
			}
			var actions []string
			for _, a := range p.audit.Entries() {
				actions = append(actions, a.Action)
				if a.Action == "approval_granted" || a.Action == "approval_denied" {
					var d map[string]string
					if err := json.Unmarshal(a.Data, &d); err != nil {
						t.Fatal(err)
					}
					if a.Actor != "alice" || d["approver"] != "alice" || d["reason"] != tc.reason || d["run"] != runID || d["id"] != "c2" {
						t.Fatalf("audit answer %s %s", a.Actor, a.Data)
					}
				}
				if a.Action == "approval_requested" && (!strings.Contains(string(a.Data), "human approval required") || !strings.Contains(string(a.Data), "customer list")) {
					t.Fatalf("audit request %s", a.Data)
				}
			}
			want := map[bool]string{true: "approval_granted", false: "approval_denied"}[tc.approved]
			if strings.Join(actions, " ") != "tool_call tool_call approval_requested "+want {
				t.Fatalf("audit actions %v", actions)
			}

			p.done(t)
		})
	}
}

// Without an approvals source the runtime behaves as before: the held
// call is refused, the model is told, and the run goes on to its answer.
func TestWithoutAQueueTheHeldCallIsRefused(t *testing.T) {
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	rt, err := runtime.New(runtime.Config{Model: approvalstest.Obeying(), Journal: j, Authorizer: guard(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.Run(ctx, approvalstest.MailAgent(), runtime.Task{RunID: "r", Input: "why?"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Answer, "mail: error: tool send_email was not run: write to 'send_email' carries untrusted argument") {
		t.Fatalf("answer %q", res.Answer)
	}
	evs, _ := j.Events(ctx, "r")
	if strings.Contains(kinds(evs), "approval") {
		t.Fatalf("events %s", kinds(evs))
	}
}

// Bad answers are refused with a message naming the input, and change
// nothing: unknown run, unknown id, empty approver, a denial without a
// reason, a second answer.
func TestBadAnswersAreRefusedAndChangeNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := open(t, files{journal: filepath.Join(dir, "j.db"), audit: filepath.Join(dir, "audit.jsonl")})
	defer p.done(t)
	if _, err := p.run(t, "held-1"); !errors.As(err, new(*runtime.SuspendedError)) {
		t.Fatalf("run: %v", err)
	}
	snapshot := func() string {
		all, err := p.q.All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(all)
		return string(b) + "|" + kinds(p.events(t, "held-1"))
	}
	before, audits := snapshot(), len(p.audit.Entries())
	for _, tc := range []struct {
		run, id, approver, reason string
		approved                  bool
		want                      string
	}{
		{"nope", "c2", "alice", "", true, "run nope not found"},
		{"held-1", "c9", "alice", "", true, `run held-1 has no approval "c9" (pending: c2)`},
		{"held-1", "c2", " ", "", true, "approver must be set"},
		{"held-1", "c2", "alice", "", false, "a reason must be set"},
	} {
		_, err := p.q.Answer(ctx, tc.run, tc.id, tc.approved, tc.approver, tc.reason)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("answer %+v: %v, want %q", tc, err, tc.want)
		}
	}
	if after := snapshot(); after != before || len(p.audit.Entries()) != audits {
		t.Fatalf("a refused answer changed something:\n%s\n%s", before, after)
	}
	if _, err := p.q.Answer(ctx, "held-1", "c2", true, "alice", ""); err != nil {
		t.Fatal(err)
	}
	answered, audits := snapshot(), len(p.audit.Entries())
	_, err := p.q.Answer(ctx, "held-1", "c2", false, "bob", "too late")
	if err == nil || !strings.Contains(err.Error(), "deny held-1 c2: already approved by alice") {
		t.Fatalf("second answer: %v", err)
	}
	if snapshot() != answered || len(p.audit.Entries()) != audits {
		t.Fatal("a second answer changed something")
	}
}

// A workflow's approval gate and a held call share the queue: both are
// listed, and the gate's answer through the queue resumes the workflow
// (journaled in the workflow's run as before).
func TestWorkflowGatesShareTheQueue(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := files{journal: filepath.Join(dir, "j.db"), audit: filepath.Join(dir, "audit.jsonl")}
	p := open(t, f)
	if _, err := p.run(t, "held-1"); !errors.As(err, new(*runtime.SuspendedError)) {
		t.Fatalf("run: %v", err)
	}
	steps := []workflow.Step{
		{Name: "plan", Kind: workflow.KindModel, Action: func(context.Context, workflow.Input) (any, error) { return "plan", nil }},
		{Name: "sign-off", Kind: workflow.KindApproval, Requires: []string{"plan"}, Action: func(_ context.Context, in workflow.Input) (any, error) {
			return in.Approval.Approver, nil
		}},
	}
	wf, err := workflow.New("release", steps)
	if err != nil {
		t.Fatal(err)
	}
	rn, err := workflow.NewRunner(workflow.Config{Journal: p.j, Gate: p.q})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rn.Run(ctx, wf, "wf-1", workflow.RunOptions{}); !errors.As(err, new(*workflow.SuspendedError)) {
		t.Fatalf("workflow: %v", err)
	}
	pend, err := p.q.Pending(ctx)
	if err != nil || len(pend) != 2 || pend[0].Kind != approvals.KindToolCall || pend[1].Kind != approvals.KindWorkflow ||
		pend[1].RunID != "wf-1" || pend[1].ID != "sign-off" || pend[1].Name != "release" {
		t.Fatalf("pending %+v, %v", pend, err)
	}
	p.done(t)

	p = open(t, f)
	defer p.done(t)
	if _, err := p.q.Answer(ctx, "wf-1", "sign-off", true, "bob", "ship it"); err != nil {
		t.Fatal(err)
	}
	_, approvalsInJournal, pendingInJournal, err := workflow.Status(ctx, p.j, "wf-1")
	if err != nil || len(approvalsInJournal) != 1 || approvalsInJournal[0].Approver != "bob" || len(pendingInJournal) != 0 {
		t.Fatalf("workflow journal: %+v pending %v, %v", approvalsInJournal, pendingInJournal, err)
	}
	rn, err = workflow.NewRunner(workflow.Config{Journal: p.j, Gate: p.q})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rn.Run(ctx, wf, "wf-1", workflow.RunOptions{})
	if err != nil || string(res.Results["sign-off"]) != `"bob"` {
		t.Fatalf("resumed workflow: %v, %s", err, res.Results["sign-off"])
	}
	if pend, _ := p.q.Pending(ctx); len(pend) != 1 || pend[0].RunID != "held-1" {
		t.Fatalf("pending after the gate's answer: %+v", pend)
	}
}

// A workflow suspended on the journal alone (the Runner's default gate, or
// before the queue existed) is listed, and taken into the queue when it is
// answered.
func TestAnswerAdoptsARequestOnlyTheJournalHolds(t *testing.T) {
	ctx := context.Background()
	p := open(t, files{journal: filepath.Join(t.TempDir(), "j.db")})
	defer p.done(t)
	wf, err := workflow.New("release", []workflow.Step{{Name: "sign-off", Kind: workflow.KindApproval,
		Action: func(context.Context, workflow.Input) (any, error) { return "ok", nil }}})
	if err != nil {
		t.Fatal(err)
	}
	rn, _ := workflow.NewRunner(workflow.Config{Journal: p.j}) // the journal gate: nothing queued
	if _, err := rn.Run(ctx, wf, "old-1", workflow.RunOptions{}); !errors.As(err, new(*workflow.SuspendedError)) {
		t.Fatalf("workflow: %v", err)
	}
	if all, _ := p.q.All(ctx); len(all) != 0 {
		t.Fatalf("queued without the queue: %+v", all)
	}
	if pend, _ := p.q.Pending(ctx); len(pend) != 1 || pend[0].RunID != "old-1" || pend[0].ID != "sign-off" || pend[0].Name != "release" {
		t.Fatalf("a journal-only gate is not listed: %+v", pend)
	}
	e, err := p.q.Answer(ctx, "old-1", "sign-off", true, "carol", "")
	if err != nil || e.Kind != approvals.KindWorkflow || e.Name != "release" || e.Status != approvals.StatusApproved {
		t.Fatalf("answer: %+v, %v", e, err)
	}
	if _, err := rn.Run(ctx, wf, "old-1", workflow.RunOptions{}); err != nil {
		t.Fatalf("resumed: %v", err)
	}
}

func TestClipKeepsShortArgumentsAndCutsLongOnes(t *testing.T) {
	if got := approvals.Clip(json.RawMessage(` {"b": 1, "a": "x"} `)); got != `{"a":"x","b":1}` {
		t.Fatalf("short: %q", got)
	}
	long := json.RawMessage(`{"body":"` + strings.Repeat("é", 400) + `"}`)
	got := approvals.Clip(long)
	if !strings.HasSuffix(got, "… (811 bytes)") || len([]rune(got)) != approvals.ArgumentsMax+len([]rune("… (811 bytes)")) {
		t.Fatalf("long: %q", got)
	}
}

// A workflow gate's prompt — what its approval step asks the human,
// rendered from the run's results — is queued with the gate: Pending and
// All list it, the audit entry of the request holds it, and it survives
// the process. A gate that suspended on the journal alone is listed with
// the prompt its approval_required event holds, and adopted with it.
func TestAGateIsQueuedWithItsPrompt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := files{journal: filepath.Join(dir, "j.db"), audit: filepath.Join(dir, "audit.jsonl")}
	const asks = "The desk says the pool is exhausted (pool_size=4). Deploy the fix?"
	wf, err := workflow.New("release", []workflow.Step{
		{Name: "plan", Kind: workflow.KindModel, Action: func(context.Context, workflow.Input) (any, error) { return "pool_size=4", nil }},
		{Name: "sign-off", Kind: workflow.KindApproval, Requires: []string{"plan"},
			Prompt: func(in workflow.Input) (string, error) {
				var plan string
				json.Unmarshal(in.Results["plan"], &plan)
				return "The desk says the pool is exhausted (" + plan + "). Deploy the fix?", nil
			},
			Action: func(_ context.Context, in workflow.Input) (any, error) { return in.Approval.Approver, nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := open(t, f)
	rn, _ := workflow.NewRunner(workflow.Config{Journal: p.j, Gate: p.q})
	if _, err := rn.Run(ctx, wf, "wf-p", workflow.RunOptions{}); !errors.As(err, new(*workflow.SuspendedError)) {
		t.Fatalf("workflow: %v", err)
	}
	// The Runner's default gate queues nothing: a second run suspends on
	// the journal alone.
	plain, _ := workflow.NewRunner(workflow.Config{Journal: p.j})
	if _, err := plain.Run(ctx, wf, "wf-j", workflow.RunOptions{}); !errors.As(err, new(*workflow.SuspendedError)) {
		t.Fatalf("workflow on the journal gate: %v", err)
	}
	p.done(t)

	p = open(t, f)
	defer p.done(t)
	pend, err := p.q.Pending(ctx)
	if err != nil || len(pend) != 2 {
		t.Fatalf("pending %+v, %v", pend, err)
	}
	for _, e := range pend {
		if e.Kind != approvals.KindWorkflow || e.Prompt != asks {
			t.Fatalf("pending gate %s/%s has prompt %q, want %q", e.RunID, e.ID, e.Prompt, asks)
		}
	}
	if _, err := p.q.Answer(ctx, "wf-j", "sign-off", false, "bob", "not on a Friday"); err != nil {
		t.Fatal(err)
	}
	all, _ := p.q.All(ctx)
	if len(all) != 2 || all[0].Prompt != asks || all[1].Prompt != asks {
		t.Fatalf("all: %+v", all)
	}
	var requests int
	for _, e := range p.audit.Entries() {
		if e.Action == "approval_requested" {
			requests++
			if !strings.Contains(string(e.Data), "Deploy the fix?") {
				t.Fatalf("the request's audit entry lacks the prompt: %s", e.Data)
			}
		}
	}
	if requests != 2 {
		t.Fatalf("%d approval_requested audit entries, want 2 (queued, adopted)", requests)
	}
}

// A queue made before gates had prompts (no prompt column) is migrated
// when opened: its rows stay, and new gates are queued with their prompt.
func TestAnOlderQueueGainsThePromptColumn(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journaldb.Open(ctx, journaldb.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	const old = `CREATE TABLE approvals (run_id TEXT NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL DEFAULT '',
	  step INTEGER NOT NULL DEFAULT 0, tool TEXT NOT NULL DEFAULT '', arguments TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
	  origin TEXT NOT NULL DEFAULT '', requested_ns INTEGER NOT NULL, status TEXT NOT NULL DEFAULT 'pending', approver TEXT NOT NULL DEFAULT '',
	  answer_reason TEXT NOT NULL DEFAULT '', answered_ns INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run_id, id)) WITHOUT ROWID;
	  INSERT INTO approvals (run_id, id, kind, tool, requested_ns) VALUES ('old-1', 'gate', 'workflow', 'gate', 1);`
	if _, err := j.DB().ExecContext(ctx, old); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second open finds the column
		q, err := approvals.Open(ctx, approvals.Config{Journal: j})
		if err != nil {
			t.Fatal(err)
		}
		all, err := q.All(ctx)
		if err != nil || len(all) != 1 || all[0].RunID != "old-1" || all[0].Prompt != "" {
			t.Fatalf("after the migration: %+v, %v", all, err)
		}
	}
	j.Shutdown(ctx)
}
