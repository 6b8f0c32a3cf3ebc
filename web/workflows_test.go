package web

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type fakeWorkflows []WorkflowRun

func (f fakeWorkflows) WorkflowRuns(context.Context) ([]WorkflowRun, error) { return f, nil }

// /workflows lists each run with its steps' states, links a trace the
// store holds and only names one it does not, escapes what steps said,
// and says how to configure it when it has no journal.
func TestWorkflowsPage(t *testing.T) {
	st := openStore(t)
	spans := hostileTrace()
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	stored, missing := spans[0].TraceID, "ffffffffffffffffffffffffffffffff"
	runs := fakeWorkflows{{RunID: "t-1", Workflow: "docs_triage", State: "suspended", Started: epoch, Updated: epoch.Add(time.Second),
		Steps: []WorkflowStep{
			{Step: "ask_desk", Kind: "a2a", State: "succeeded", Attempts: 1, Retries: 2, Detail: "<script>alert(1)</script>"},
			{Step: "approve", Kind: "approval", State: "waiting for approval", Detail: "Research it?"},
		},
		TraceIDs: []string{stored, missing}}}
	srv, err := New(Config{}, Deps{Traces: st, Workflows: runs})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	code, body := get(t, ts, "/workflows")
	for _, want := range []string{`<a href="/workflows" class="on">Workflows</a>`, "t-1", "docs_triage", "ask_desk", "1/3", "waiting for approval",
		`href="/traces/` + stored + `"`, `title="not exported to this server">` + missing[:16], "&lt;script&gt;", `href="/approvals"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/workflows (%d) lacks %q:\n%s", code, want, body)
		}
	}
	if strings.Contains(body, "<script>alert(1)") || strings.Contains(body, `href="/traces/`+missing) {
		t.Fatal("unescaped step output, or a link to a trace the store does not hold")
	}
	plain := newServer(t, st, Config{})
	if _, body := get(t, plain, "/workflows"); !strings.Contains(body, "has no workflow journal") {
		t.Fatalf("unconfigured page:\n%s", body)
	}
}
