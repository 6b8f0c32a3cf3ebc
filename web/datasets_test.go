package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/tracecases"
)

// datasetsServer serves the seeded store, the two support trials and the
// hostile trace, with a datasets folder.
func datasetsServer(t *testing.T, cfg Config) (*httptest.Server, datasets.Registry) {
	t.Helper()
	st, _ := seeded(t)
	a, b := supportTraces()
	if err := st.WriteSpans(t.Context(), append(a, b...)); err != nil {
		t.Fatal(err)
	}
	reg := datasets.Registry{Dir: filepath.Join(t.TempDir(), "datasets")}
	srv, err := New(cfg, Deps{Traces: st, Datasets: reg.Dir})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, reg
}

// openDraft GETs the review form and returns its page and the values the
// browser would submit unchanged.
func openDraft(t *testing.T, ts *httptest.Server, c *http.Client, query string) (string, url.Values) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/datasets/draft?"+query, nil)
	code, page := sendReq(t, c, req)
	if code != http.StatusOK {
		t.Fatalf("draft %s: %d\n%s", query, code, page)
	}
	return page, formValues(t, page)
}

var (
	hiddenInput  = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`)
	textInput    = regexp.MustCompile(`<input name="(r\d+\.[a-z_]+)" value="([^"]*)"`)
	textareaIn   = regexp.MustCompile(`(?s)<textarea name="(r\d+\.task)"[^>]*>(.*?)</textarea>`)
	checkedInput = regexp.MustCompile(`<input type="checkbox" name="(r\d+\.[a-z_]+)" value="1" checked>`)
)

// formValues reads the draft form's fields as a browser submits them
// (only the POST form's; the target chooser above it is a GET form whose
// fields are also hidden inputs named trace and dataset, read once).
func formValues(t *testing.T, page string) url.Values {
	t.Helper()
	i := strings.Index(page, `id="draft-form"`)
	if i < 0 {
		t.Fatalf("no draft form:\n%s", page)
	}
	form := page[i:]
	v := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(form, -1) {
		v.Add(m[1], htmlUnescape(m[2]))
	}
	for _, m := range textInput.FindAllStringSubmatch(form, -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	for _, m := range textareaIn.FindAllStringSubmatch(form, -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	for _, m := range checkedInput.FindAllStringSubmatch(form, -1) {
		v.Set(m[1], "1")
	}
	return v
}

func htmlUnescape(s string) string {
	r := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&quot;", `"`, "&amp;", "&")
	return r.Replace(s)
}

func postDraft(t *testing.T, ts *httptest.Server, c *http.Client, vals url.Values) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/datasets/draft", strings.NewReader(vals.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = ioCopy(&b, resp)
	return resp.StatusCode, resp.Header.Get("Location"), b.String()
}

func ioCopy(b *strings.Builder, resp *http.Response) (int64, error) {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		n += int64(k)
		if err != nil {
			return n, nil
		}
	}
}

func latest(t *testing.T, reg datasets.Registry, name string) int {
	t.Helper()
	n, err := reg.Latest(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTracesBecomeAReviewedVersionedDataset(t *testing.T) {
	ts, reg := datasetsServer(t, Config{})
	c := cookieClient(t)

	// The trace list lets a person tick traces and make cases from them.
	_, list := get(t, ts, "/traces")
	if !strings.Contains(list, `name="trace" value="`+supportTraceA+`"`) || !strings.Contains(list, `id="make-cases"`) {
		t.Fatal("the trace list has no trace checkboxes or no make-cases button")
	}

	// Three traces: two trials of one case, and one with no case id whose
	// content tries to inject markup.
	q := "trace=" + supportTraceA + "&trace=" + supportTraceB[:12] + "&trace=" + hostileTraceID + "&dataset=support"
	page, vals := openDraft(t, ts, c, q)
	if strings.Contains(page, "<script>alert(4)") || !strings.Contains(page, "&lt;script&gt;alert(4)") {
		t.Fatal("a trace's task is not escaped on the review page")
	}
	if vals.Get("rows") != "2" || vals.Get("r1.id") != tracecases.UnmarkedCaseID(hostileTraceID) || vals.Get("r0.id") != supportCase {
		t.Fatalf("draft rows: %v", vals)
	}
	if got := vals["r0.source"]; !slices.Equal(got, []string{supportTraceA, supportTraceB}) {
		t.Fatalf("support case sources %v, want both trials (the prefix resolved)", got)
	}
	if vals.Get("parent") != "0" || !strings.Contains(page, "this makes its version 1") {
		t.Fatal("a new dataset's draft is not on parent 0")
	}
	if vals.Get("r0.task") != supportTask {
		t.Fatalf("support task %q", vals.Get("r0.task"))
	}
	// The reviewer renames the unmarked case and gives the support case an
	// answer check; the agent's answer was shown, not copied.
	if vals.Get("r0.check_value") != "" || vals.Get("r0.answer") == "" {
		t.Fatalf("answer copied into the check, or not shown: check %q answer %q", vals.Get("r0.check_value"), vals.Get("r0.answer"))
	}
	vals.Set("r1.id", "markup-probe")
	vals.Set("r0.check", "contains")
	vals.Set("r0.check_value", "14 days")
	vals.Set("author", "Ana")
	vals.Set("note", "refund questions from production")
	code, loc, body := postDraft(t, ts, c, vals)
	if code != http.StatusSeeOther || loc != "/datasets/support/v1?committed=1" {
		t.Fatalf("commit: %d %q\n%s", code, loc, body)
	}
	v1, cases, err := reg.Open("support", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 || cases[1].ID != "markup-probe" || cases[1].Task != "<script>alert(4)</script>" {
		t.Fatalf("v1 cases %+v: want the renamed probe with its task verbatim", cases)
	}
	if g := cases[0].Graders; len(g) != 1 || g[0].Type != datasets.GraderContains || *g[0].Value != "14 days" {
		t.Fatalf("support graders %+v", g)
	}
	if v1.Author != "Ana" || !slices.Equal(v1.Sources[supportCase], []string{supportTraceA, supportTraceB}) {
		t.Fatalf("v1 record %+v", v1)
	}

	// The dataset's pages show it; the file served is the file committed.
	_, dl := get(t, ts, "/datasets")
	if !strings.Contains(dl, `id="dataset-support"`) {
		t.Fatal("/datasets does not list support")
	}
	code, vp := get(t, ts, "/datasets/support/v1?committed=1")
	if code != 200 || !strings.Contains(vp, `id="dataset-committed"`) || !strings.Contains(vp, "/traces/"+supportTraceB) || strings.Contains(vp, "<script>alert(4)") {
		t.Fatalf("version page %d", code)
	}
	code, file := get(t, ts, "/datasets/support/v1/cases.jsonl")
	sum := sha256.Sum256([]byte(file))
	if code != 200 || hex.EncodeToString(sum[:]) != v1.SHA256 {
		t.Fatalf("cases.jsonl: %d, digest differs from the version's", code)
	}
	code, api := get(t, ts, "/api/v1/datasets/support")
	var got struct {
		Version datasets.Version `json:"version"`
		Cases   []datasets.Case  `json:"cases"`
	}
	if err := json.Unmarshal([]byte(api), &got); code != 200 || err != nil || got.Version.Number != 1 || len(got.Cases) != 2 {
		t.Fatalf("api: %d %v %+v", code, err, got.Version)
	}

	// Adding trace A again: its case exists in v1. Without "replace" it is
	// refused, nothing is written, and every edit comes back.
	_, vals = openDraft(t, ts, c, "trace="+supportTraceA+"&dataset=support")
	if vals.Get("parent") != "1" {
		t.Fatalf("parent %q, want 1", vals.Get("parent"))
	}
	vals.Set("r0.task", "EDITED: a refund after 20 days on the annual plan?")
	code, _, body = postDraft(t, ts, c, vals)
	if code != http.StatusBadRequest || !strings.Contains(body, "is already in version 1") || !strings.Contains(body, "EDITED: a refund") || latest(t, reg, "support") != 1 {
		t.Fatalf("duplicate id: %d, latest %d", code, latest(t, reg, "support"))
	}
	vals.Set("r0.replace", "1")
	code, loc, body = postDraft(t, ts, c, vals)
	if code != http.StatusSeeOther || loc != "/datasets/support/v2?committed=1" {
		t.Fatalf("replace: %d %q\n%s", code, loc, body)
	}
	v2, _, err := reg.Open("support", 2)
	if err != nil || !slices.Equal(v2.Changed, []string{supportCase}) || len(v2.Added) != 0 {
		t.Fatalf("v2 %+v %v", v2, err)
	}

	// The same form again, still on parent 1: someone committed first.
	vals.Set("r0.task", "EDITED twice")
	code, _, body = postDraft(t, ts, c, vals)
	if code != http.StatusConflict || !strings.Contains(body, "version 2 is now the latest") || !strings.Contains(body, `name="parent" value="2"`) || latest(t, reg, "support") != 2 {
		t.Fatalf("stale parent: %d, latest %d\n%s", code, latest(t, reg, "support"), body)
	}
}

func TestDatasetDraftRefusesBadInputAndWritesNothing(t *testing.T) {
	ts, reg := datasetsServer(t, Config{})
	c := cookieClient(t)
	_, vals := openDraft(t, ts, c, "trace="+supportTraceA+"&dataset=support")

	for name, status := range map[string]int{
		"/datasets/draft": http.StatusBadRequest, // no trace
		"/datasets/draft?trace=ffffffffffffffffffffffffffffffff":   http.StatusNotFound,
		"/datasets/draft?trace=" + supportTraceA + "&dataset=../x": http.StatusBadRequest,
		"/datasets/nothing":           http.StatusNotFound,
		"/datasets/support/v0":        http.StatusBadRequest,
		"/api/v1/datasets/Bad%20Name": http.StatusBadRequest,
	} {
		if code, _ := get(t, ts, name); code != status {
			t.Errorf("GET %s: %d, want %d", name, code, status)
		}
	}

	bad := func(edit func(url.Values), status int, want string) {
		t.Helper()
		v := url.Values{}
		for k, x := range vals {
			v[k] = slices.Clone(x)
		}
		edit(v)
		code, _, body := postDraft(t, ts, c, v)
		if code != status || !strings.Contains(body, want) {
			t.Errorf("%d, want %d with %q:\n%s", code, status, want, body)
		}
	}
	bad(func(v url.Values) { v.Del(csrfField) }, http.StatusForbidden, "csrf_token")
	bad(func(v url.Values) { v.Set("rows", "lots") }, http.StatusBadRequest, "field rows")
	bad(func(v url.Values) { v.Set("dataset", "../../etc") }, http.StatusBadRequest, "dataset name")
	bad(func(v url.Values) { v.Del("r0.include") }, http.StatusBadRequest, "no case is ticked")
	bad(func(v url.Values) { v.Set("r0.task", "  ") }, http.StatusBadRequest, `field &#34;task&#34;`)
	bad(func(v url.Values) { v.Set("r0.check", "regex"); v.Set("r0.check_value", "(") }, http.StatusBadRequest, "pattern")
	bad(func(v url.Values) { v.Set("r0.check", "contains") }, http.StatusBadRequest, "give the text")
	bad(func(v url.Values) { v.Set("r0.check", "python") }, http.StatusBadRequest, "want none, contains, equals or regex")
	bad(func(v url.Values) { v.Set("r0.source", "<img src=x>") }, http.StatusBadRequest, "is not a trace id")
	if names, _ := reg.Names(); len(names) != 0 {
		t.Fatalf("refused submissions wrote datasets %v", names)
	}
	if _, err := os.Stat(reg.Dir); err == nil {
		ents, _ := os.ReadDir(reg.Dir)
		if len(ents) != 0 {
			t.Fatalf("refused submissions left %v", ents)
		}
	}
}

func TestDatasetsWithoutAFolderSayHowToConfigureOne(t *testing.T) {
	st, _ := seeded(t)
	ts := newServer(t, st, Config{})
	if code, page := get(t, ts, "/datasets"); code != 200 || !strings.Contains(page, "--datasets DIR") {
		t.Fatalf("/datasets without a folder: %d", code)
	}
	if code, _ := get(t, ts, "/api/v1/datasets"); code != http.StatusNotFound {
		t.Fatalf("/api/v1/datasets without a folder: %d", code)
	}
	if code, body := get(t, ts, "/api/v1/audit"); code != http.StatusNotFound || !strings.Contains(body, "--audit FILE") {
		t.Fatalf("/api/v1/audit without a log: %d %s", code, body)
	}
}

func TestProjectDatasetsStayInTheirProject(t *testing.T) {
	ts, reg := datasetsServer(t, Config{Keys: webKeys})
	// Alpha commits through the API-key's browser session.
	c := cookieClient(t)
	login := url.Values{"token": {webAlphaKey}}
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/login", strings.NewReader(login.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if code, _ := sendReq(t, c, req); code != http.StatusSeeOther {
		t.Fatalf("login: %d", code)
	}
	// The traces are in the default project, which alpha cannot read.
	req, _ = http.NewRequest(http.MethodGet, ts.URL+"/datasets/draft?trace="+supportTraceA+"&dataset=support", nil)
	if code, _ := sendReq(t, c, req); code != http.StatusNotFound {
		t.Fatalf("alpha drafting from a default-project trace: %d, want 404", code)
	}
	// Alpha's own dataset lives under .projects/alpha, unseen by the default project.
	alpha := datasets.Registry{Dir: filepath.Join(reg.Dir, ".projects", "alpha")}
	if _, err := alpha.Commit("alpha-set", datasets.Change{Cases: []datasets.Case{{ID: "a", Task: "t"}}}); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodGet, ts.URL+"/api/v1/datasets", nil)
	if code, body := sendReq(t, c, req); code != 200 || !strings.Contains(body, "alpha-set") {
		t.Fatalf("alpha's list: %d %s", code, body)
	}
	if names, _ := reg.Names(); len(names) != 0 {
		t.Fatalf("the default project lists %v", names)
	}
}

func TestBrowserTickTracesReviewAndCommitADatasetVersion(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	ts, reg := datasetsServer(t, Config{})
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces?service=support-bot"), chromedp.WaitVisible("#trace-table"))
	do(t, ctx,
		chromedp.Click(`#trace-table input[value="`+supportTraceA+`"]`),
		chromedp.Click(`#trace-table input[value="`+supportTraceB+`"]`),
		chromedp.Click("#make-cases"), chromedp.WaitVisible("#draft-target"))
	// A new dataset: name it, and the form says what it will make.
	// The click submits the form; the old page's #draft-form is visible
	// until the new one replaces it, so wait for the new page's words.
	do(t, ctx, chromedp.SetValue("#target-dataset", "support"), chromedp.Click("#change-target"))
	if s := waitText(ctx, "#draft-target", "this makes its version 1"); !strings.Contains(s, "this makes its version 1") {
		t.Fatalf("target says %q", s)
	}
	if n := count(t, ctx, "section.draft-case"); n != 1 {
		t.Fatalf("%d draft cases from two trials of one case, want 1", n)
	}
	do(t, ctx,
		chromedp.SetValue(`select[name="r0.check"]`, "contains"),
		chromedp.SetValue(`input[name="r0.check_value"]`, "30 days"),
		chromedp.SetValue(`input[name="author"]`, "ana"),
		chromedp.SetValue(`input[name="note"]`, "annual-plan refunds that went wrong in production"))
	docScreenshot(t, ctx, "dataset-draft")
	do(t, ctx, chromedp.Click("#commit-version"), chromedp.WaitVisible("#dataset-committed"))
	if s := text(t, ctx, "#dataset-committed"); !strings.Contains(s, "Version 1 committed: +1 added") {
		t.Fatalf("banner %q", s)
	}
	if row := text(t, ctx, "#dataset-cases tbody tr"); !strings.Contains(row, supportCase) || !strings.Contains(row, `contains "30 days"`) || !strings.Contains(row, supportTraceA[:8]) {
		t.Fatalf("case row %q", row)
	}
	docScreenshot(t, ctx, "dataset-version")
	if _, cases, err := reg.Open("support", 1); err != nil || len(cases) != 1 || cases[0].Graders[0].Type != datasets.GraderContains {
		t.Fatalf("committed version: %v %+v", err, cases)
	}
}

func TestExperimentListNamesTheDatasetVersionItRan(t *testing.T) {
	reg := datasets.Registry{Dir: t.TempDir()}
	v1, err := reg.Commit("calc", datasets.Change{Cases: []datasets.Case{{ID: "a", Task: "add 1 and 2"}}})
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	srv, err := New(Config{}, Deps{Traces: st, Datasets: reg.Dir})
	if err != nil {
		t.Fatal(err)
	}
	items := []ExperimentItem{
		{Experiment: &datasets.Experiment{ID: "on-v1", Dataset: datasets.ExperimentDataset{SHA256: v1.SHA256}}},
		{Experiment: &datasets.Experiment{ID: "elsewhere", Dataset: datasets.ExperimentDataset{SHA256: strings.Repeat("0", 64)}}},
	}
	srv.nameDatasetVersions(items)
	if dv := items[0].DatasetVersion; dv == nil || dv.Dataset != "calc" || dv.Number != 1 {
		t.Fatalf("experiment on v1 names %+v", dv)
	}
	if items[1].DatasetVersion != nil {
		t.Fatalf("an experiment on another file names %+v", items[1].DatasetVersion)
	}
}

// waitText reads sel's text until it contains want, or 15 s have passed,
// and returns the last text read: after a click that submits a form, the
// old page answers until the new one replaces it (and a read during the
// navigation fails, which is retried).
func waitText(ctx context.Context, sel, want string) string {
	var got string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if s, err := chromedp.Run(ctx, chromedp.Text(sel)); err == nil {
			got = s
			if strings.Contains(s, want) {
				return s
			}
		}
	}
	return got
}
