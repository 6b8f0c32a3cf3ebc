package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store/storeurl"
	"github.com/loomwork/loomwork/web"
)

// experimentUI runs the calc agent's v1 and v2 into one store and serves
// the UI over it on loopback, wired as `loom-eval serve` wires it.
func experimentUI(t *testing.T) (ts *httptest.Server, storePath, id1, id2 string) {
	t.Helper()
	dir := t.TempDir()
	storePath = filepath.Join(dir, "shared.db")
	_, _, id1, id2 = runCalcExperiments(t, dir, storePath)
	st, err := storeurl.Open(context.Background(), storePath, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Shutdown(context.Background()) })
	srv, err := web.New(web.Config{}, web.Deps{Traces: st, Experiments: newWebExperiments(st)})
	if err != nil {
		t.Fatal(err)
	}
	ts = httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, storePath, id1, id2
}

// apiCompare is /api/v1/experiments/compare as a client reads it.
type apiCompare struct {
	Experiments []struct{ ID string } `json:"experiments"`
	Cases       []struct {
		CaseID  string            `json:"case_id"`
		Changes []string          `json:"changes"`
		Sides   []compareSideJSON `json:"sides"`
	} `json:"cases"`
	comparisonGateJSON
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// The UI's compare (its JSON twin) and `experiment compare --store --json`
// agree case by case: the same passes, scores, costs, latencies, trace ids
// and answers, the same regressed cases, MDE and gate decision.
func TestExperimentCompareUIAgreesWithTheCommand(t *testing.T) {
	testtier.Slow(t)
	ts, storePath, id1, id2 := experimentUI(t)
	var api apiCompare
	if code := getJSON(t, ts.URL+"/api/v1/experiments/compare?ids="+id1+","+id2, &api); code != http.StatusOK {
		t.Fatalf("compare API: HTTP %d", code)
	}
	cli := compareOut(t, "--store", storePath, id1, id2)
	if len(api.Cases) != len(cli.Cases) || len(api.Cases) != 6 {
		t.Fatalf("API %d cases, CLI %d; want 6 each", len(api.Cases), len(cli.Cases))
	}
	for i, c := range cli.Cases {
		a := api.Cases[i]
		if a.CaseID != c.CaseID || a.Changes[1] != c.Change || !reflect.DeepEqual(a.Sides[0], c.A) || !reflect.DeepEqual(a.Sides[1], c.B) {
			t.Errorf("case %s: API %+v, CLI %+v", c.CaseID, a, c)
		}
	}
	if !reflect.DeepEqual(api.Comparison, cli.Comparison) || !reflect.DeepEqual(api.Gate, cli.Gate) {
		t.Errorf("API comparison %+v gate %+v; CLI %+v %+v", api.Comparison, api.Gate, cli.Comparison, cli.Gate)
	}
	if api.Gate.Passed || strings.Join(api.Comparison.Regressed, ",") != "even-4,even-6" || api.Comparison.PassRateMDE == nil {
		t.Errorf("API: gate passed %v, regressed %v, MDE %v; want a failed gate naming even-4, even-6 with an MDE", api.Gate.Passed, api.Comparison.Regressed, api.Comparison.PassRateMDE)
	}

	var list struct {
		Experiments []struct {
			ID       string   `json:"id"`
			PassRate *float64 `json:"pass_rate"`
			PassLow  *float64 `json:"pass_rate_low"`
		} `json:"experiments"`
	}
	if code := getJSON(t, ts.URL+"/api/v1/experiments", &list); code != http.StatusOK || len(list.Experiments) != 2 || list.Experiments[0].ID != id2 {
		t.Fatalf("list API: HTTP %d %+v; want v2 then v1", code, list)
	}
	if p := list.Experiments[0].PassRate; p == nil || *p != 8.0/12 || *list.Experiments[0].PassLow >= *p {
		t.Errorf("v2's pass rate %v (low %v), want 8/12 with a lower bound below it", p, list.Experiments[0].PassLow)
	}
	var e map[string]string
	if code := getJSON(t, ts.URL+"/api/v1/experiments/compare?ids="+id1+",nope", &e); code != http.StatusNotFound || !strings.Contains(e["error"], "nope") {
		t.Errorf("an unknown id: HTTP %d %v, want 404 naming it", code, e)
	}
	if code := getJSON(t, ts.URL+"/api/v1/experiments/compare?ids="+id1, &e); code != http.StatusBadRequest {
		t.Errorf("one id: HTTP %d %v, want 400", code, e)
	}
}

// browser starts Debian's headless Chromium, as web/e2e_test.go does:
// without it the test skips locally and fails in CI, which installs it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
		}
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1600, 1000))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func jsValue[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return jsValue[string](t, ctx, `document.querySelector(`+strconv.Quote(sel)+`).innerText`)
}

// A user opens Experiments, ticks v1 and v2 and compares them: the two
// regressed cases are marked, the gate says FAIL with its MDE, and every
// trace link opens the trial's trace page. The screenshot is kept.
func TestBrowserComparesTwoExperiments(t *testing.T) {
	testtier.Slow(t)
	ts, _, id1, id2 := experimentUI(t)
	ctx := browser(t)
	run(t, ctx, chromedp.Navigate(ts.URL+"/"), chromedp.WaitVisible(`a[href="/experiments"]`), chromedp.Click(`a[href="/experiments"]`),
		chromedp.WaitVisible("#experiment-table"))
	if row := textOf(t, ctx, "#exp-"+id2); !strings.Contains(row, "calc v2") || !strings.Contains(row, "FAIL") || !strings.Contains(row, "6 × 2") || !strings.Contains(row, "67%") {
		t.Errorf("v2's row says %q; want its name, 6 × 2, a 67%% pass rate and a failed gate", row)
	}
	if row := textOf(t, ctx, "#exp-"+id1); !strings.Contains(row, "calc v1") || !strings.Contains(row, "100%") {
		t.Errorf("v1's row says %q", row)
	}
	run(t, ctx, chromedp.Click(`input[value="`+id1+`"]`), chromedp.Click(`input[value="`+id2+`"]`), chromedp.Click("#compare-selected"),
		chromedp.WaitVisible("#exp-cases"))

	if v := textOf(t, ctx, "#gate-verdict"); v != "Gate: FAIL" {
		t.Errorf("gate verdict %q, want Gate: FAIL", v)
	}
	var api apiCompare
	getJSON(t, ts.URL+"/api/v1/experiments/compare?ids="+id1+","+id2, &api)
	if m := textOf(t, ctx, "#gate-mde"); !strings.Contains(m, fmt.Sprintf("(MDE): %.3f", *api.Comparison.PassRateMDE)) {
		t.Errorf("gate box %q does not state the MDE %.3f", m, *api.Comparison.PassRateMDE)
	}
	if head := textOf(t, ctx, "#side-0"); !strings.Contains(head, "baseline") || !strings.Contains(head, id1) {
		t.Errorf("the baseline card %q is not v1 (the oldest ticked)", head)
	}
	marked := jsValue[[]string](t, ctx, `[...document.querySelectorAll("#exp-cases tr.regressed")].map(r => r.id)`)
	if strings.Join(marked, ",") != "case-even-4,case-even-6" {
		t.Errorf("rows marked regressed: %v, want case-even-4, case-even-6", marked)
	}
	red := jsValue[string](t, ctx, `getComputedStyle(document.querySelector("#case-even-4 td.passes.regressed")).color`)
	if cell := textOf(t, ctx, "#case-even-4"); !strings.Contains(cell, "2/2") || !strings.Contains(cell, "0/2") || !strings.Contains(cell, "regressed") || red == "" {
		t.Errorf("even-4's row %q (B's cell colour %q); want 2/2 then 0/2 marked regressed", cell, red)
	}
	if cell := textOf(t, ctx, "#case-odd-3"); strings.Contains(cell, "regressed") {
		t.Errorf("odd-3 is marked regressed: %q", cell)
	}
	links := jsValue[[]string](t, ctx, `[...document.querySelectorAll("#exp-cases a.trace-link")].map(a => a.href)`)
	if len(links) != 24 {
		t.Fatalf("%d trace links, want 24 (6 cases × 2 experiments × 2 trials)", len(links))
	}
	for _, l := range links {
		resp, err := http.Get(l)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("trace link %s: %v %v", l, err, resp.Status)
		}
		resp.Body.Close()
	}
	shot := keepScreenshot(t, ctx, "experiments-compare")

	run(t, ctx, chromedp.Click("#case-even-4 a.trace-link"), chromedp.WaitVisible("#waterfall"))
	if tr := jsValue[string](t, ctx, `document.querySelector("#waterfall").dataset.trace`); !strings.Contains(links[0], tr) || tr == "" {
		t.Errorf("the first trace link of even-4 opened trace %q, want %s", tr, links[0])
	}
	t.Logf("screenshot: %s", shot)
}

// keepScreenshot saves a full-page PNG under $LOOMWORK_ARTIFACTS, else a
// temporary folder, after checking it is a real page's picture.
func keepScreenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(buf))
	if err != nil || cfg.Width < 1000 || cfg.Height < 500 || len(buf) < 20<<10 {
		t.Fatalf("screenshot %s: %dx%d, %d bytes (%v); want a page of at least 1000x500", name, cfg.Width, cfg.Height, len(buf), err)
	}
	dir := os.Getenv("LOOMWORK_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
