package web

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// Secrets shaped like internal/projects keys.
var (
	webAlphaKey = "lwk_" + strings.Repeat("A", 42) + "1"
	webAlphaRO  = "lwk_" + strings.Repeat("R", 42) + "2"
	webBetaKey  = "lwk_" + strings.Repeat("B", 42) + "3"
	webToken    = "shared-ui-token-0123456789"
)

func webKeys(secret string) (string, bool, bool) {
	switch secret {
	case webAlphaKey:
		return "alpha", true, true
	case webAlphaRO:
		return "alpha", false, true
	case webBetaKey:
		return "beta", true, true
	}
	return "", false, false
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type projectFixture struct {
	ts                      *httptest.Server
	logs                    *lockedBuf
	alpha, beta, shared, df []store.Span
}

// projectsFixture stores traces of projects alpha and beta (beta also
// holds a trace with alpha's trace id) and of the default project, and
// gives each project its own run journal, score report and ablation
// result under RUNS/<project>, REPORTS/<project>, ABLATIONS/<project>.
func projectsFixture(t *testing.T) projectFixture {
	t.Helper()
	st := openStore(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f := projectFixture{
		alpha:  storetest.GenerateConversation("conv-alpha", 1, 6, 11, base, time.Minute),
		beta:   storetest.GenerateConversation("conv-beta", 1, 5, 22, base.Add(time.Minute), time.Minute),
		shared: storetest.GenerateConversation("conv-beta-shared", 1, 4, 33, base.Add(2*time.Minute), time.Minute),
		df:     storetest.GenerateConversation("conv-default", 1, 3, 44, base.Add(3*time.Minute), time.Minute),
	}
	for i := range f.alpha {
		f.alpha[i].Project = "alpha"
	}
	for i := range f.beta {
		f.beta[i].Project = "beta"
	}
	for i := range f.shared {
		f.shared[i].Project, f.shared[i].TraceID = "beta", f.alpha[0].TraceID
		f.shared[i].Links = nil
	}
	for _, b := range [][]store.Span{f.alpha, f.beta, f.shared, f.df} {
		if err := st.WriteSpans(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	files := FileSources{RunsDir: t.TempDir(), ReportsDir: t.TempDir(), AblationsDir: t.TempDir()}
	journal, err := os.ReadFile(filepath.Join("..", "replay", "testdata", "good.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"alpha", "beta", "default"} {
		for _, d := range []string{files.RunsDir, files.ReportsDir, files.AblationsDir} {
			if err := os.MkdirAll(filepath.Join(d, p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.WriteFile(filepath.Join(files.RunsDir, p, p+"-run.jsonl"), journal, 0o644)
		rep := writeReport(t, t.TempDir())
		b, _ := os.ReadFile(rep)
		os.WriteFile(filepath.Join(files.ReportsDir, p, p+"-report.json"), b, 0o644)
		tmp := t.TempDir()
		writeAblation(t, tmp)
		b, _ = os.ReadFile(filepath.Join(tmp, "mkdocs.json"))
		os.WriteFile(filepath.Join(files.AblationsDir, p, p+"-ablation.json"), b, 0o644)
	}
	f.logs = &lockedBuf{}
	srv, err := New(Config{AuthToken: webToken, Keys: webKeys},
		Deps{Traces: st, Files: &files, Logger: slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(srv)
	t.Cleanup(f.ts.Close)
	return f
}

// TestCrossProjectReadsFailOnEveryPath: with beta's key, every read of
// alpha's (or the default project's) traces, sessions, runs, reports and
// ablations fails or shows nothing of them — lists, get by id, a guessed
// id and a guessed prefix, search, sessions, compare, report and ablation
// pages, the JSON API and the exports — and beta's own things are there.
// The same trace id in both projects shows each project its own spans,
// even after the other project's view was cached. No key appears in any
// response or log line.
func TestCrossProjectReadsFailOnEveryPath(t *testing.T) {
	f := projectsFixture(t)
	alphaID, betaID, defID := f.alpha[0].TraceID, f.beta[0].TraceID, f.df[0].TraceID
	var bodies strings.Builder
	as := func(key, path string) (int, string) {
		t.Helper()
		code, body := get(t, f.ts, path, "Authorization", "Bearer "+key)
		bodies.WriteString(body)
		return code, body
	}
	// forbidden are strings that must not appear: alpha's and the default
	// project's trace ids (alpha's id appears for beta only through the
	// shared trace, checked separately), session ids, span ids and file
	// names.
	forbidden := []string{alphaID[:store.MinTraceIDPrefix], defID[:store.MinTraceIDPrefix], "conv-alpha", "conv-default",
		"alpha-run", "alpha-report", "alpha-ablation", "default-run", "default-report", "default-ablation",
		f.alpha[1].SpanID, f.df[1].SpanID}
	lists := []struct {
		path string
		own  string // what beta must see
	}{
		{"/traces", betaID[:store.MinTraceIDPrefix]},
		{"/api/v1/traces", betaID},
		{"/traces?q=" + "conv-alpha", ""},
		{"/api/v1/traces?session=conv-alpha", ""},
		{"/api/v1/traces?text=" + f.alpha[0].Name, ""},
		{"/sessions", "conv-beta"},
		{"/api/v1/sessions", "conv-beta"},
		{"/runs", "beta-run"},
		{"/reports", "beta-report"},
		{"/ablations", "beta-ablation"},
		{"/compare", ""},
		{"/compare/runs", ""},
		{"/labels", ""},
		{"/api/v1/labels", ""},
		{"/labels/export.jsonl", ""},
	}
	for _, l := range lists {
		code, body := as(webBetaKey, l.path)
		if code >= 500 {
			t.Errorf("GET %s as beta: %d", l.path, code)
		}
		for _, bad := range forbidden {
			// Beta holds a trace with alpha's id (checked below by its
			// spans); a query echoed in the search box is not a leak.
			if strings.Contains(body, bad) && bad != alphaID[:store.MinTraceIDPrefix] && !strings.Contains(l.path, bad) {
				t.Errorf("GET %s as beta shows %q (another project's)", l.path, bad)
			}
		}
		if l.own != "" && !strings.Contains(body, l.own) {
			t.Errorf("GET %s as beta: its own %q is missing (status %d)", l.path, l.own, code)
		}
	}
	// Direct reads of another project's things: every one is a 404 (or
	// 400 for a malformed reference), never a 200.
	direct := []string{
		"/traces/" + defID, "/api/v1/traces/" + defID, "/api/v1/traces/" + defID + "/rollup",
		"/traces/" + defID[:store.MinTraceIDPrefix], "/api/v1/traces/" + defID[:12],
		"/traces/" + defID + "/rows", "/traces/" + defID + "/spans/" + f.df[1].SpanID,
		"/traces/" + alphaID + "/spans/" + f.alpha[1].SpanID,
		"/sessions/conv-alpha", "/api/v1/sessions/conv-alpha", "/sessions/conv-default",
		"/compare?a=" + defID + "&b=" + betaID, "/api/v1/compare?a=" + betaID + "&b=" + defID,
		"/runs/alpha-run.jsonl", "/runs/default-run.jsonl", "/runs/alpha-run.jsonl/bookkeeper-case-lunch-t0",
		"/compare/runs?a=alpha-run.jsonl/bookkeeper-case-lunch-t0&b=beta-run.jsonl/bookkeeper-case-lunch-t0",
		"/api/v1/compare/runs?a=beta-run.jsonl/bookkeeper-case-lunch-t0&b=alpha-run.jsonl/bookkeeper-case-lunch-t0",
		"/reports/alpha-report.json", "/api/v1/reports/alpha-report.json", "/api/v1/reports/default-report.json",
		"/reports/..%2Falpha%2Falpha-report.json", "/api/v1/reports/..%2Falpha%2Falpha-report.json",
		"/ablations/alpha-ablation.json", "/ablations/alpha-ablation.json/chart.svg",
		"/ablations/..%2Falpha%2Falpha-ablation.json",
	}
	for _, p := range direct {
		code, body := as(webBetaKey, p)
		if code == http.StatusOK || code >= 500 {
			t.Errorf("GET %s as beta: %d, want a 4xx", p, code)
		}
		for _, bad := range forbidden[2:] {
			if strings.Contains(body, bad) && !strings.Contains(p, bad) {
				t.Errorf("GET %s as beta: the error shows %q", p, bad)
			}
		}
	}
	// Beta reads its own things by id.
	for _, p := range []string{"/traces/" + betaID, "/api/v1/traces/" + betaID, "/sessions/conv-beta", "/runs/beta-run.jsonl/bookkeeper-case-lunch-t0",
		"/reports/beta-report.json", "/ablations/beta-ablation.json"} {
		if code, _ := as(webBetaKey, p); code != http.StatusOK {
			t.Errorf("GET %s as beta: %d, want 200", p, code)
		}
	}
	// Beta's list shows its own trace under the shared id: 4 spans, not
	// alpha's 6.
	var page store.TracePage
	_, body := as(webBetaKey, "/api/v1/traces")
	if err := json.Unmarshal([]byte(body), &page); err != nil {
		t.Fatal(err)
	}
	for _, tr := range page.Traces {
		if tr.TraceID == alphaID && tr.SpanCount != int64(len(f.shared)) {
			t.Errorf("beta lists the shared id with %d spans, want its own %d", tr.SpanCount, len(f.shared))
		}
	}
	if len(page.Traces) != 2 {
		t.Errorf("beta lists %d traces, want 2", len(page.Traces))
	}
	// The shared trace id: alpha opens it first (cached), then beta; each
	// sees only its own spans.
	_, a := as(webAlphaKey, "/api/v1/traces/"+alphaID)
	_, b := as(webBetaKey, "/api/v1/traces/"+alphaID)
	if !strings.Contains(a, f.alpha[1].SpanID) || strings.Contains(a, f.shared[1].SpanID) {
		t.Errorf("alpha's view of the shared id is not alpha's spans")
	}
	if !strings.Contains(b, f.shared[1].SpanID) || strings.Contains(b, f.alpha[1].SpanID) {
		t.Errorf("beta's view of the shared id shows alpha's (cached) spans")
	}
	// Alpha's key reads nothing of beta's either (spot check both ways).
	for _, p := range []string{"/api/v1/traces/" + betaID, "/runs/beta-run.jsonl", "/reports/beta-report.json", "/ablations/beta-ablation.json", "/sessions/conv-beta"} {
		if code, _ := as(webAlphaKey, p); code == http.StatusOK {
			t.Errorf("GET %s as alpha: 200", p)
		}
	}
	// The shared token is the default project: it sees the default trace,
	// not the projects'.
	if code, _ := get(t, f.ts, "/api/v1/traces/"+defID, "Authorization", "Bearer "+webToken); code != http.StatusOK {
		t.Errorf("default trace with the token: %d", code)
	}
	if code, _ := get(t, f.ts, "/api/v1/traces/"+betaID, "Authorization", "Bearer "+webToken); code != http.StatusNotFound {
		t.Errorf("beta's trace with the token: %d, want 404", code)
	}
	// No credentials, a wrong key: 401.
	for _, k := range []string{"", "lwk_" + strings.Repeat("Z", 43)} {
		if code, _ := as(k, "/api/v1/traces"); code != http.StatusUnauthorized {
			t.Errorf("key %.8q…: %d, want 401", k, code)
		}
	}
	// A read-only key reads, and may not write.
	if code, _ := as(webAlphaRO, "/api/v1/traces/"+alphaID); code != http.StatusOK {
		t.Errorf("read-only key reading: %d", code)
	}
	req, _ := http.NewRequest(http.MethodPost, f.ts.URL+"/labels", strings.NewReader("trace_id="+alphaID))
	req.Header.Set("Authorization", "Bearer "+webAlphaRO)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("read-only key POST /labels: %v %v, want 403", resp.Status, err)
	}
	// Keys in no response and no log line.
	out := bodies.String() + f.logs.String()
	for _, k := range []string{webAlphaKey, webAlphaRO, webBetaKey, webToken} {
		if strings.Contains(out, k) {
			t.Errorf("a key appears in a response or the log")
		}
	}
	if !strings.Contains(f.logs.String(), "request refused") {
		t.Errorf("the log capture saw no refusal: the key check above proves nothing")
	}
}

// TestKeyLoginSetsACookieThatReadsOnlyItsProject: browsers sign in once
// by POSTing token=KEY to /login; the session cookie then scopes the UI to
// the key's project.
func TestKeyLoginSetsACookieThatReadsOnlyItsProject(t *testing.T) {
	f := projectsFixture(t)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(f.ts.URL+"/login", url.Values{"token": {webBetaKey}})
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %v %v", resp, err)
	}
	cookies := resp.Cookies()
	for _, p := range []struct {
		path string
		want int
	}{{"/api/v1/traces/" + f.beta[0].TraceID, 200}, {"/api/v1/traces/" + f.df[0].TraceID, 404}} {
		req, _ := http.NewRequest(http.MethodGet, f.ts.URL+p.path, nil)
		for _, ck := range cookies {
			req.AddCookie(ck)
		}
		r, err := c.Do(req)
		if err != nil || r.StatusCode != p.want {
			t.Errorf("GET %s with the login cookie: %v %v, want %d", p.path, r.Status, err, p.want)
		}
	}
	if resp, _ := c.PostForm(f.ts.URL+"/login", url.Values{"token": {"lwk_wrong"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a wrong key: %d", resp.StatusCode)
	}
}
