package main

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/workflow"
	"github.com/loomwork/loomwork/agents/workflow/workflowtest"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/web"
)

// docExample is the workflow file of docs/workflow.md's "Write your own
// workflow" section: its first ```json block.
func docExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "workflow.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Write your own workflow")
	if i < 0 {
		t.Fatal(`docs/workflow.md has no "Write your own workflow" section`)
	}
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(s[i:])
	if m == nil {
		t.Fatal("the section has no json example")
	}
	return m[1]
}

// TestWorkflowFileFromTheDocs runs the documented example workflow with
// the CLI, each command its own Main so only the journal survives between
// them: an A2A step against a real server on loopback, a research tool
// step, an approval gate, the research agent (scripted policy) under
// --policy, and an echo report, with spans sent to a real collector. The
// run suspends at the gate, resumes after approve, and ends with each step
// run exactly once; the research run's task carries the peer's origin.
func TestWorkflowFileFromTheDocs(t *testing.T) {
	testtier.Slow(t) // the research agent on the shipped index, a collector
	ctx := context.Background()
	dir := t.TempDir()
	peer, tasks := workflowtest.Peer(t, "oncall_desk", "Set primary in the theme palette of mkdocs.yml.")
	file := filepath.Join(dir, "docs_triage.json")
	example := docExample(t)
	if !strings.Contains(example, "http://127.0.0.1:8766") {
		t.Fatal("the example's a2a step no longer points at a2a serve's default address")
	}
	os.WriteFile(file, []byte(strings.Replace(example, "http://127.0.0.1:8766", peer, 1)), 0o644)
	rules := filepath.Join(dir, "policy.json")
	os.WriteFile(rules, []byte(`{"version": 1, "scope": "docs", "rules": [{"tool": "search_docs", "decision": "allow"}, {"tool": "read_doc", "decision": "allow"}]}`), 0o644)
	b, err := startTraceBackend(ctx, filepath.Join(dir, "traces.db"), "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown(ctx)
	jp, audit := filepath.Join(dir, "runs.db"), filepath.Join(dir, "audit.jsonl")
	common := []string{"--journal", jp, "--dataset", datasettest.ShippedDir(t), "--index-cache", indexCache(t),
		"--policy", rules, "--audit", audit, "--otlp-endpoint", b.GRPCAddr()}
	run := func(args ...string) (string, int) {
		out, errOut, code := cli(t, append(append([]string{"workflow", "run", file, "--run", "t-1"}, args...), common...)...)
		if errOut != "" {
			t.Logf("stderr: %s", errOut)
		}
		return out, code
	}
	out, code := run("--input", "How do I change the primary color?")
	if code != ExitOK || !strings.Contains(out, "run t-1 suspended at approve: loom-eval approve t-1 approve") {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	status, _, code := cli(t, "workflow", "status", "t-1", "--journal", jp)
	for _, want := range []string{"run t-1 (workflow docs_triage): suspended", "approve           approval  waiting for approval",
		"The desk says: Set primary in the theme palette of mkdocs.yml. Research it?", "research          agent     not started"} {
		if code != ExitOK || !strings.Contains(status, want) {
			t.Fatalf("status lacks %q:\n%s", want, status)
		}
	}
	checkGatePrompt(t, jp, b.Reader(), "The desk says: Set primary in the theme palette of mkdocs.yml. Research it?")
	if out, _, code := cli(t, "approve", "t-1", "approve", "--approver", "lead@example.invalid", "--journal", jp, "--audit", audit); code != ExitOK {
		t.Fatalf("approve: exit %d %s", code, out)
	}
	out, code = run() // the input is the one the run started with
	if code != ExitOK || !strings.Contains(out, "run t-1 completed: [ask_desk lookup approve research report]") {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	traceID := regexp.MustCompile(`spans: trace ([0-9a-f]{32})`).FindStringSubmatch(out)
	if traceID == nil {
		t.Fatalf("the resumed run names no trace:\n%s", out)
	}
	checkDocRun(t, jp, tasks)
	checkDocSpans(t, b.Reader(), traceID[1])
	checkDocUI(t, jp, b.Reader(), traceID[1])
	if out, _, code := cli(t, "audit", "verify", audit); code != ExitOK || !strings.Contains(out, "chain verifies") {
		t.Fatalf("audit verify: exit %d %s", code, out)
	}
}

// checkGatePrompt: the gate waiting in the queue shows what it asks —
// the approval step's rendered prompt — in loom-eval approvals (human and
// --json) and on the /approvals page.
func checkGatePrompt(t *testing.T, jp string, r store.Reader, prompt string) {
	t.Helper()
	out, _, code := cli(t, "approvals", "--journal", jp)
	if code != ExitOK || !strings.Contains(out, "t-1  approve  workflow gate (docs_triage)  pending") || !strings.Contains(out, "    asks: "+prompt) {
		t.Fatalf("approvals: exit %d, want the gate with its prompt:\n%s", code, out)
	}
	out, _, code = cli(t, "approvals", "--journal", jp, "--json")
	var e approvals.Entry
	if code != ExitOK || json.Unmarshal([]byte(strings.TrimSpace(out)), &e) != nil || e.Prompt != prompt || e.Kind != approvals.KindWorkflow {
		t.Fatalf("approvals --json: exit %d, want one gate with prompt %q:\n%s", code, prompt, out)
	}
	ctx := context.Background()
	aq, err := openApprovalsFile(ctx, jp, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer aq.Close()
	srv, err := web.New(web.Config{}, web.Deps{Traces: r, Approvals: aq.Web})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/approvals", nil))
	if page := rec.Body.String(); rec.Code != http.StatusOK || !strings.Contains(page, `<td class="approval-prompt">`+html.EscapeString(prompt)+`</td>`) {
		t.Fatalf("/approvals: %d, want the gate's prompt in its row:\n%s", rec.Code, page)
	}
}

// checkDocRun: every step succeeded exactly once, the peer got one task,
// and the research run's task carries the peer as its input origin.
func checkDocRun(t *testing.T, jp string, tasks *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: jp})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	sum, ok, err := workflow.Summarize(ctx, j, "t-1")
	if err != nil || !ok || sum.State != workflow.RunCompleted || sum.Input != "How do I change the primary color?" {
		t.Fatalf("summary %+v %v %v", sum, ok, err)
	}
	evs, _, _, _ := workflow.Status(ctx, j, "t-1")
	started := map[string]int{}
	for _, e := range evs {
		if e.Event == workflow.StatusStarted {
			started[e.Step]++
		}
	}
	for _, s := range sum.Steps {
		if s.State != workflow.StateSucceeded || started[s.Step] != 1 {
			t.Errorf("step %s: %s, started %d times", s.Step, s.State, started[s.Step])
		}
	}
	if tasks.Load() != 1 {
		t.Errorf("the peer was sent %d tasks, want 1", tasks.Load())
	}
	if report := sum.Steps[len(sum.Steps)-1].Output; !strings.Contains(report, "Answer: ") || !strings.Contains(report, "Gate: approved by lead@example.invalid") {
		t.Errorf("report = %q", report)
	}
	rev, _ := j.Events(ctx, "t-1/research")
	origin := ""
	for _, e := range rev {
		if e.Kind == journal.KindRunStarted {
			var p struct {
				Attributes map[string]json.RawMessage `json:"attributes"`
			}
			json.Unmarshal(e.Payload, &p)
			json.Unmarshal(p.Attributes[semconv.AttrRunInputOrigin], &origin)
		}
	}
	if origin != "a2a:oncall_desk via step ask_desk" {
		t.Errorf("the research run's input origin is %q; want the peer's", origin)
	}
}

// checkDocSpans: the resumed process's trace reached the collector with
// its workflow span, a span per step, and the research agent's
// invoke_agent under the research step's span.
func checkDocSpans(t *testing.T, r store.Reader, traceID string) {
	t.Helper()
	var spans []store.Span
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		spans, _ = r.GetTrace(context.Background(), traceID)
		if len(spans) > 0 && hasSpan(spans, semconv.OpInvokeWorkflow+" docs_triage") {
			break
		}
	}
	root := findSpan(spans, func(s store.Span) bool { return s.Name == semconv.OpInvokeWorkflow+" docs_triage" })
	if root == nil {
		t.Fatalf("no invoke_workflow span in trace %s (%d spans)", traceID, len(spans))
	}
	if st, _ := root.Attributes.String(semconv.AttrWorkflowState); st != semconv.WorkflowCompleted {
		t.Errorf("run state %q", st)
	}
	states := map[string]string{}
	var research *store.Span
	for i, s := range spans {
		if s.ParentSpanID != root.SpanID || !strings.HasPrefix(s.Name, semconv.OpWorkflowStep+" ") {
			continue
		}
		step, _ := s.Attributes.String(semconv.AttrWorkflowStep)
		state, _ := s.Attributes.String(semconv.AttrWorkflowStepState)
		states[step] += state + " "
		if step == "research" {
			research = &spans[i]
		}
	}
	want := map[string]string{"ask_desk": "replayed ", "lookup": "replayed ", "approve": "approved succeeded ", "research": "succeeded ", "report": "succeeded "}
	for k, v := range want {
		if states[k] != v {
			t.Errorf("step %s spans: %q, want %q (all: %v)", k, states[k], v, states)
		}
	}
	if research == nil || findSpan(spans, func(s store.Span) bool {
		return s.ParentSpanID == research.SpanID && s.Operation == semconv.OpInvokeAgent
	}) == nil {
		t.Error("the research agent's invoke_agent span is not a child of its step's span")
	}
}

func hasSpan(spans []store.Span, name string) bool {
	return findSpan(spans, func(s store.Span) bool { return s.Name == name }) != nil
}

func findSpan(spans []store.Span, f func(store.Span) bool) *store.Span {
	for i := range spans {
		if f(spans[i]) {
			return &spans[i]
		}
	}
	return nil
}

// checkDocUI: serve's /workflows (wired as serve wires it, from the
// approvals journal) lists the run, completed, with each step and a link
// to the trace the collector holds.
func checkDocUI(t *testing.T, jp string, r store.Reader, traceID string) {
	t.Helper()
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: jp})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	var approvals web.Approvals = webApprovals{j: j, clock: time.Now}
	workflows, _ := approvals.(web.Workflows)
	srv, err := web.New(web.Config{}, web.Deps{Traces: r, Approvals: approvals, Workflows: workflows})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/workflows", nil))
	body := rec.Body.String()
	for _, want := range []string{`id="run-t-1"`, "docs_triage", ">completed<", "ask_desk", "research", "approved by lead@example.invalid",
		`href="/traces/` + traceID + `"`} {
		if rec.Code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/workflows (%d) lacks %q:\n%s", rec.Code, want, body)
		}
	}
}

// A file whose step keeps failing exits 1 after the declared retries,
// naming the step; a bad file is refused (usage) naming the file, the step
// and the field; a file that is not there is neither a workflow nor a file.
func TestWorkflowFileCLIRetriesAndRefusals(t *testing.T) {
	dir := t.TempDir()
	jp := filepath.Join(dir, "j.db")
	run := func(args ...string) (string, int, string) {
		var out, errb bytes.Buffer
		err := newTestMain(&out, &errb, nil).Run(context.Background(), append(args, "--journal", jp))
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		return out.String(), exitCode(err, io.Discard), msg
	}
	flaky := filepath.Join(dir, "flaky.json")
	// Port 9 (discard) on loopback: nothing listens, every attempt fails.
	os.WriteFile(flaky, []byte(`{"name":"flaky","steps":[{"id":"ask","kind":"a2a","url":"http://127.0.0.1:9","input":"hi","retries":1,"backoff":"10ms"}]}`), 0o644)
	out, code, msg := run("workflow", "run", flaky, "--run", "f-1")
	if code != ExitFailure || !strings.Contains(msg, "run f-1: step ask failed after 2 attempt(s)") ||
		strings.Count(out, "ask               failed") != 2 || strings.Count(out, "retried") != 1 {
		t.Fatalf("flaky: exit %d %s\n%s", code, msg, out)
	}
	status, _, _ := run("workflow", "status", "f-1")
	if !strings.Contains(status, "run f-1 (workflow flaky): failed") || !strings.Contains(status, "attempts=2/2") {
		t.Fatalf("status:\n%s", status)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"name":"bad","steps":[{"id":"a","kind":"tool","tool":"echo","input":"x","needs":["ghost"]}]}`), 0o644)
	if _, code, msg := run("workflow", "run", bad, "--run", "b-1"); code != ExitUsage ||
		!strings.Contains(msg, `workflow file `+bad+`: step "a": field "needs": needs unknown step "ghost"`) {
		t.Fatalf("bad file: exit %d %s", code, msg)
	}
	if _, code, msg := run("workflow", "run", filepath.Join(dir, "nope.json"), "--run", "n-1"); code != ExitUsage ||
		!strings.Contains(msg, "is neither a built-in workflow (incident) nor a workflow file") {
		t.Fatalf("missing file: exit %d %s", code, msg)
	}
}
