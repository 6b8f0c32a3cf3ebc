package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/workflow"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/web"
)

var approvalCSRF = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// The UI approves a suspended gate: only with the token, the session's CSRF
// token and a same-origin request; the answer is journaled with the
// approver and the workflow resumes from it. A denial needs a reason and
// stops the run.
func TestApprovalsPageAuthCSRFAndResume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(dir, "wf.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(ctx)
	wf, _ := workflow.Incident()
	rn, _ := workflow.NewRunner(workflow.Config{Journal: j})
	for _, run := range []string{"ui-1", "ui-2"} {
		if _, err := rn.Run(ctx, wf, run, workflow.RunOptions{}); err == nil {
			t.Fatalf("%s: want suspended", run)
		}
	}
	const token = "0123456789abcdef-approvals"
	srv, err := web.New(web.Config{AuthToken: token}, web.Deps{Traces: st, Approvals: webApprovals{j: j, clock: time.Now}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values, hdr map[string]string) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, ts.URL+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do("GET", "/approvals", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", code)
	}
	if code, _ := do("POST", "/login", url.Values{"token": {token}}, nil); code >= 400 {
		t.Fatalf("login: %d", code)
	}
	code, page := do("GET", "/approvals", nil, nil)
	m := approvalCSRF.FindStringSubmatch(page)
	if code != 200 || m == nil || !strings.Contains(page, "ui-1") || !strings.Contains(page, "approve_deploy") {
		t.Fatalf("page %d:\n%s", code, page)
	}
	form := url.Values{"run": {"ui-1"}, "step": {"approve_deploy"}, "approver": {"on-call@example.invalid"}, "decision": {"approve"}, "csrf_token": {m[1]}}
	// Refused: no CSRF token, a wrong one, a cross-site request.
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Del("csrf_token")
	if code, _ := do("POST", "/approvals", bad, nil); code != http.StatusForbidden {
		t.Fatalf("no csrf token: %d", code)
	}
	bad.Set("csrf_token", "forged")
	if code, _ := do("POST", "/approvals", bad, nil); code != http.StatusForbidden {
		t.Fatalf("wrong csrf token: %d", code)
	}
	if code, _ := do("POST", "/approvals", form, map[string]string{"Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Fatalf("cross-site: %d", code)
	}
	if _, _, pending, _ := workflow.Status(ctx, j, "ui-1"); len(pending) != 1 {
		t.Fatalf("a refused request answered the gate: pending %v", pending)
	}
	if code, body := do("POST", "/approvals", form, nil); code != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", code, body)
	}
	if code, _ := do("POST", "/approvals", form, nil); code != http.StatusConflict {
		t.Fatalf("second answer: %d", code)
	}
	deny := url.Values{"run": {"ui-2"}, "step": {"approve_deploy"}, "approver": {"sec@example.invalid"}, "decision": {"deny"}, "csrf_token": {m[1]}}
	if code, _ := do("POST", "/approvals", deny, nil); code != http.StatusBadRequest {
		t.Fatalf("deny without a reason: %d", code)
	}
	deny.Set("reason", "change freeze")
	if code, _ := do("POST", "/approvals", deny, nil); code != http.StatusSeeOther {
		t.Fatalf("deny: %d", code)
	}
	if res, err := rn.Run(ctx, wf, "ui-1", workflow.RunOptions{}); err != nil || len(res.Completed) != 5 {
		t.Fatalf("approved run resumes: %v %v", res.Completed, err)
	}
	_, err = rn.Run(ctx, wf, "ui-2", workflow.RunOptions{})
	var d *workflow.DeniedError
	if !errors.As(err, &d) || d.Approver != "sec@example.invalid" || d.Reason != "change freeze" {
		t.Fatalf("denied run: %v", err)
	}
	if _, page := do("GET", "/approvals", nil, nil); !strings.Contains(page, "No run is waiting") {
		t.Fatalf("page after answers:\n%s", page)
	}
}

// Without a token the server refuses answers, whatever the form says.
func TestApprovalsRefusedWithoutAuth(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j, _ := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(dir, "wf.db")})
	defer j.Shutdown(ctx)
	st, _ := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "traces.db")})
	defer st.Shutdown(ctx)
	srv, _ := web.New(web.Config{}, web.Deps{Traces: st, Approvals: webApprovals{j: j, clock: time.Now}})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	resp, err := http.PostForm(ts.URL+"/approvals", url.Values{"run": {"x"}, "step": {"y"}, "approver": {"z"}, "decision": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("no auth: %d", resp.StatusCode)
	}
}
