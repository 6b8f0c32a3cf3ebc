package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/approvals/approvalstest"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/web"
)

// runHeld runs (or resumes) the mail agent as `loom-eval run` does once
// wired (approvals_wiring.go, run.go's runParts.run): the queue beside the journal file is the
// runtime's approvals source, the guard and the queue share the audit log;
// everything is opened from disk and closed before it returns. It returns
// what the command would print and its error.
func runHeld(t *testing.T, journalPath, auditPath, runID string) (string, error) {
	t.Helper()
	ctx := context.Background()
	audit, err := openAuditFlag(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	j, err := journaldb.Open(ctx, journaldb.Config{Path: journalPath})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	// The queue lives in the run's own journal file.
	q, _, err := openApprovalQueue(ctx, j, audit, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := approvalstest.Guard(audit)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r, err := runner.New(runner.Config{Agent: approvalstest.MailAgent(), Journal: j, JournalName: journalPath,
		Models: func(int) runtime.Model { return approvalstest.Obeying() }, RunID: runID, Authorizer: g, Approvals: q, Out: termSafe(&out)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx, []runner.Task{{Input: "why do checkouts time out?"}})
	if err != nil {
		return out.String(), runExit(err)
	}
	return res[0].Answer, nil
}

func outboxRows(t *testing.T, journalPath string) int {
	t.Helper()
	j, err := journaldb.Open(context.Background(), journaldb.Config{Path: journalPath})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(context.Background())
	var n int
	if err := j.DB().QueryRow(`SELECT COUNT(*) FROM outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The CLI on agent runs held by their policy: both runs suspend with the
// command to answer them and exit 4; loom-eval approvals lists them with
// tool, arguments and why; bad answers are refused with exit 2 naming the
// input and change nothing; approve and deny answer (audited with who and
// why); each run resumes — the approved mail sent once, the denied one
// not, its agent told who denied it and why — and the audit log verifies.
func TestApproveDenyHeldAgentRunCLI(t *testing.T) {
	dir := t.TempDir()
	jp, ap := filepath.Join(dir, "runs.journal.db"), filepath.Join(dir, "audit.jsonl")
	cli := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := newTestMain(&out, &errb, nil).Run(context.Background(), append(args, "--journal", jp))
		return out.String(), err
	}
	for _, run := range []string{"r-ok", "r-no"} {
		out, err := runHeld(t, jp, ap, run)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitSuspended ||
			out != "run "+run+" suspended at call c2 (tool send_email): loom-eval approve "+run+" c2 --approver WHO, then run it again\n"+
				"resume: run the same command again with --run-id "+run+" (runs already done are read from the journal)\n" {
			t.Fatalf("%s: %v\n%s", run, err, out)
		}
	}
	listed, err := cli("approvals", "--json")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(listed), "\n")
	if len(lines) != 2 {
		t.Fatalf("approvals --json:\n%s", listed)
	}
	for _, l := range lines {
		var e approvals.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind != "tool_call" || e.ID != "c2" || e.Tool != "send_email" || !strings.Contains(e.Arguments, "customer list") ||
			!strings.Contains(e.Reason, "human approval required") || !strings.Contains(e.Origin, "tool:search_docs") || e.Requested.IsZero() {
			t.Fatalf("listed %+v", e)
		}
	}
	if text, err := cli("approvals"); err != nil || !strings.Contains(text, "r-ok  c2  tool call send_email (agent mailer, step 2)  pending") ||
		!strings.Contains(text, "answer: loom-eval approve r-no c2 --approver WHO") {
		t.Fatalf("approvals: %v\n%s", err, text)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"approve", "nope", "c2", "--approver", "alice"}, "run nope not found"},
		{[]string{"approve", "r-ok", "c9", "--approver", "alice"}, `run r-ok has no approval "c9" (pending: c2)`},
		{[]string{"approve", "r-ok", "c2"}, "--approver must be set"},
		{[]string{"approve", "r-ok", "c2", "--approver", "  "}, "--approver must be set"},
		{[]string{"deny", "r-no", "c2", "--approver", "bob"}, "--reason must be set"},
		{[]string{"approve", "r-ok", "--approver", "alice"}, "want RUN ID"},
	} {
		_, err := cli(append(bad.args, "--audit", ap)...)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want exit 2 with %q", bad.args, err, bad.want)
		}
	}
	if again, _ := cli("approvals", "--json"); again != listed {
		t.Fatalf("a refused answer changed the queue:\n%s\n%s", listed, again)
	}
	out, err := cli("approve", "r-ok", "c2", "--approver", "alice", "--reason", "internal address", "--audit", ap)
	if err != nil || out != "run r-ok call c2 (tool send_email): approved by alice; run it again (the same run id) to resume it\n" {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	if _, err := cli("deny", "r-ok", "c2", "--approver", "bob", "--reason", "late", "--audit", ap); err == nil || !strings.Contains(err.Error(), "already approved by alice") {
		t.Fatalf("second answer: %v", err)
	}
	if _, err := cli("deny", "r-no", "c2", "--approver", "bob", "--reason", "no customer data by mail", "--audit", ap); err != nil {
		t.Fatal(err)
	}
	if got, err := runHeld(t, jp, ap, "r-ok"); err != nil || got != "mail: sent" {
		t.Fatalf("approved run resumed: %v %q", err, got)
	}
	if got, err := runHeld(t, jp, ap, "r-no"); err != nil || got != "mail: error: tool send_email was not run: approval denied by bob: no customer data by mail" {
		t.Fatalf("denied run resumed: %v %q", err, got)
	}
	if n := outboxRows(t, jp); n != 1 {
		t.Fatalf("%d mails sent, want the approved one", n)
	}
	if pending, _ := cli("approvals"); !strings.Contains(pending, "no run is waiting") {
		t.Fatalf("after the answers:\n%s", pending)
	}
	if out, err := cli("approvals", "--all"); err != nil || !strings.Contains(out, "denied by bob at") || !strings.Contains(out, "no customer data by mail") {
		t.Fatalf("approvals --all: %v\n%s", err, out)
	}
	l, err := policy.OpenAudit(ap, nil) // verifies the chain
	if err != nil {
		t.Fatal(err)
	}
	var who []string
	for _, e := range l.Entries() {
		if strings.HasPrefix(e.Action, "approval_") {
			who = append(who, e.Action+" "+e.Actor)
		}
	}
	if strings.Join(who, ", ") != "approval_requested agent:mailer, approval_requested agent:mailer, approval_granted alice, approval_denied bob" {
		t.Fatalf("audit: %v", who)
	}
}

// /approvals, in the navigation, lists a held call with its tool,
// arguments and why next to a workflow gate, and answers it; the run then
// resumes and sends the mail once.
func TestApprovalsPageListsAndAnswersAHeldCall(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	jp := filepath.Join(dir, "runs.journal.db")
	if _, err := runHeld(t, jp, "", "ui-held"); err == nil {
		t.Fatal("want suspended")
	}
	var out, errb bytes.Buffer
	if err := newTestMain(&out, &errb, nil).Run(ctx, []string{"workflow", "run", "incident", "--run", "ui-wf", "--journal", jp}); err != nil {
		t.Fatal(err)
	}
	// serve's wiring: the queue of the journal file, on its own.
	aq, err := openApprovalsFile(ctx, jp, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer aq.Close()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(ctx)
	const token = "0123456789abcdef-held-calls"
	srv, err := web.New(web.Config{AuthToken: token}, web.Deps{Traces: st, Approvals: aq.Web})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(form url.Values) int {
		resp, err := c.PostForm(ts.URL+"/approvals", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if resp, err := c.PostForm(ts.URL+"/login", url.Values{"token": {token}}); err != nil || resp.StatusCode >= 400 {
		t.Fatalf("login: %v", err)
	}
	resp, err := c.Get(ts.URL + "/approvals")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	m := approvalCSRF.FindStringSubmatch(page)
	for _, want := range []string{`<a href="/approvals" class="on">Approvals</a>`, "ui-held", "send_email", "c2, agent mailer", "customer list",
		"human approval required", "origin: derived from", "ui-wf", "approve_deploy", "workflow gate"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if m == nil || t.Failed() {
		t.Fatalf("page:\n%s", page)
	}
	if code := post(url.Values{"run": {"ui-held"}, "step": {"c2"}, "approver": {"on-call@example.invalid"}, "decision": {"approve"}, "csrf_token": {m[1]}}); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	if code := post(url.Values{"run": {"ui-held"}, "step": {"c2"}, "approver": {"other@example.invalid"}, "decision": {"approve"}, "csrf_token": {m[1]}}); code != http.StatusConflict {
		t.Fatalf("second answer: %d", code)
	}
	if got, err := runHeld(t, jp, "", "ui-held"); err != nil || got != "mail: sent" {
		t.Fatalf("resumed: %v %q", err, got)
	}
	if n := outboxRows(t, jp); n != 1 {
		t.Fatalf("%d mails sent", n)
	}
}
