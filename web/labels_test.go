package web

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/tracecases"
)

// browserClient keeps cookies and does not follow redirects.
func cookieClient(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func sendReq(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfInput = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// openForm GETs a label form and returns its CSRF token.
func openForm(t *testing.T, ts *httptest.Server, c *http.Client, query string) (string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/labels/new?"+query, nil)
	code, page := sendReq(t, c, req)
	m := csrfInput.FindStringSubmatch(page)
	if code != 200 || m == nil {
		t.Fatalf("label form %s: %d, token found %v\n%s", query, code, m != nil, page)
	}
	return m[1], page
}

func postLabel(t *testing.T, ts *httptest.Server, c *http.Client, vals url.Values, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/labels", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return sendReq(t, c, req)
}

func labelsServer(t *testing.T, cfg Config) (*httptest.Server, string) {
	t.Helper()
	st, _ := seeded(t)
	a, b := supportTraces()
	st.WriteSpans(t.Context(), append(a, b...))
	labels := filepath.Join(t.TempDir(), "labels.jsonl")
	srv, err := New(cfg, Deps{Traces: st, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, labels
}

func TestLabelPostWithoutOrWithAWrongTokenIsRefusedAndWritesNothing(t *testing.T) {
	ts, labels := labelsServer(t, Config{})
	c := cookieClient(t)
	token, page := openForm(t, ts, c, "trace="+supportTraceB[:10])
	if !strings.Contains(page, `name="case_id" value="refund-annual-plan" readonly`) || !strings.Contains(page, `name="trial" value="1"`) {
		t.Fatalf("the form does not carry the trace's case and trial:\n%s", page)
	}
	label := url.Values{"case_id": {supportCase}, "trial": {"1"}, "grader": {"answer_correct"}, "verdict": {"fail"}, "note": {"quotes a stale blog post"}}
	for _, c2 := range []struct {
		name  string
		c     *http.Client
		token string
		hdr   []string
	}{
		{"no token", c, "", nil},
		{"a wrong token", c, token[:len(token)-2] + "xx", nil},
		{"another session's token", cookieClient(t), token, nil},
		{"the right token from another site", c, token, []string{"Sec-Fetch-Site", "cross-site"}},
		{"the right token with a foreign Origin", c, token, []string{"Origin", "https://evil.example"}},
	} {
		vals := url.Values{}
		for k, v := range label {
			vals[k] = v
		}
		if c2.token != "" {
			vals.Set(csrfField, c2.token)
		}
		code, body := postLabel(t, ts, c2.c, vals, c2.hdr...)
		if code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", c2.name, code, body)
		}
		if _, err := os.Stat(labels); !os.IsNotExist(err) {
			t.Fatalf("%s: the refused POST wrote the labels file", c2.name)
		}
	}

	label.Set(csrfField, token)
	code, _ := postLabel(t, ts, c, label, "Origin", ts.URL, "Sec-Fetch-Site", "same-origin")
	if code != http.StatusSeeOther {
		t.Fatalf("a good POST: %d, want 303", code)
	}
	got, err := datasets.LoadLabels(labels)
	if err != nil || len(got) != 1 || got[0].CaseID != supportCase || got[0].Trial != 1 || got[0].Grader != "answer_correct" || got[0].Passed || got[0].Note != "quotes a stale blog post" {
		t.Fatalf("labels file: %+v %v", got, err)
	}
	// The same label twice is the file's duplicate rule: 409, nothing added.
	if code, body := postLabel(t, ts, c, label); code != http.StatusConflict || !strings.Contains(body, "already holds a label") {
		t.Fatalf("duplicate: %d %s", code, body)
	}
	// Bad fields are named.
	for field, bad := range map[string]string{"verdict": "maybe", "trial": "-1", "grader": " ", "case_id": ""} {
		vals := url.Values{}
		for k, v := range label {
			vals[k] = v
		}
		vals.Set(field, bad)
		vals.Set("labeler", "bo")
		if code, body := postLabel(t, ts, c, vals); code != http.StatusBadRequest || !strings.Contains(body, "field "+field) {
			t.Errorf("bad %s: %d %s", field, code, body)
		}
	}
	if got, _ := datasets.LoadLabels(labels); len(got) != 1 {
		t.Fatalf("refused POSTs wrote labels: %d in the file", len(got))
	}
}

func TestLabelFormRequiresTheAuthToken(t *testing.T) {
	const tok = "0123456789abcdef0123"
	ts, labels := labelsServer(t, Config{AuthToken: tok})
	c := cookieClient(t)
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/labels/new?trace="+supportTraceA, nil)
	if code, _ := sendReq(t, c, req); code != http.StatusUnauthorized {
		t.Fatalf("form without signing in: %d", code)
	}
	if code, _ := postLabel(t, ts, c, url.Values{"case_id": {"x"}, "trial": {"0"}, "grader": {"g"}, "verdict": {"pass"}}); code != http.StatusUnauthorized {
		t.Fatalf("POST without signing in: %d", code)
	}
	if resp, err := c.PostForm(ts.URL+"/login", url.Values{"token": {tok}}); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %v %v", resp, err)
	}
	token, page := openForm(t, ts, c, "trace="+supportTraceA)
	if strings.Contains(page, "without an auth token") {
		t.Fatal("the form says there is no auth token")
	}
	code, _ := postLabel(t, ts, c, url.Values{"case_id": {supportCase}, "trial": {"0"}, "grader": {"answer_correct"}, "verdict": {"pass"}, csrfField: {token}})
	if code != http.StatusSeeOther {
		t.Fatalf("signed-in POST: %d", code)
	}
	if got, _ := datasets.LoadLabels(labels); len(got) != 1 {
		t.Fatalf("%d labels", len(got))
	}
}

func TestLabelFormSaysWhenATraceHasNoCaseID(t *testing.T) {
	ts, _ := labelsServer(t, Config{})
	c := cookieClient(t)
	_, page := openForm(t, ts, c, "trace="+hostileTraceID)
	want := tracecases.UnmarkedCaseID(hostileTraceID)
	if !strings.Contains(page, "This trace has no case id") || !strings.Contains(page, `name="case_id" value="`+want+`" required`) ||
		!strings.Contains(page, "loomwork.case.id") {
		t.Fatalf("the form does not say the trace has no case id:\n%s", page)
	}
	code, body := get(t, ts, "/labels/new?trace=zz")
	if code != http.StatusBadRequest || !strings.Contains(body, "parameter trace") {
		t.Fatalf("bad trace: %d", code)
	}
}

// TestLabelsFromAReportTrialPairWithItsGrades labels a report's trial
// through the form and measures agreement on the file with the graders'
// own code, as `loom-eval labels agreement` does.
func TestLabelsFromAReportTrialPairWithItsGrades(t *testing.T) {
	st, _ := seeded(t)
	files := FileSources{ReportsDir: t.TempDir(), RunsDir: t.TempDir()}
	trials := writeGradedReport(t, files.ReportsDir)
	labels := filepath.Join(t.TempDir(), "labels.jsonl")
	srv, _ := New(Config{}, Deps{Traces: st, Files: &files, Labels: labels})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := cookieClient(t)
	token, page := openForm(t, ts, c, "report=graded.json&case=refund&trial=2")
	if !strings.Contains(page, `<option value="answer_correct">answer_correct — grader says pass</option>`) {
		t.Fatalf("the form does not offer the trial's grades with their verdicts:\n%s", page)
	}
	vals := url.Values{csrfField: {token}, "report": {"graded.json"}, "case_id": {"refund"}, "trial": {"2"}, "grader": {"no_such_grader"}, "verdict": {"fail"}}
	if code, body := postLabel(t, ts, c, vals); code != http.StatusBadRequest || !strings.Contains(body, "has no grade") {
		t.Fatalf("a grader the trial lacks: %d %s", code, body)
	}
	vals.Set("grader", "answer_correct")
	vals.Set("labeler", "ana")
	if code, body := postLabel(t, ts, c, vals); code != http.StatusSeeOther {
		t.Fatalf("label: %d %s", code, body)
	}
	got, err := datasets.LoadLabels(labels)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := grade.Agreement(got, trials, 0.95)
	if err != nil || len(rows) != 1 || rows[0].Grader != "answer_correct" || rows[0].Confusion.GraderOnly != 1 {
		t.Fatalf("agreement on the UI's labels: %+v %v", rows, err)
	}
	// The labels page lists it, the export is the file, the API its labels.
	code, body := get(t, ts, "/labels?added=1")
	if code != 200 || !strings.Contains(body, "Label added on line 1") || !strings.Contains(body, "answer_correct") {
		t.Fatalf("labels page %d", code)
	}
	raw, _ := os.ReadFile(labels)
	if code, body := get(t, ts, "/labels/export.jsonl"); code != 200 || body != string(raw) {
		t.Fatalf("export %d %q", code, body)
	}
	if code, body := get(t, ts, "/api/v1/labels"); code != 200 || !strings.Contains(body, `"labeler": "ana"`) {
		t.Fatalf("API %d %s", code, body)
	}
}
