package web

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/loomwork/loomwork/internal/testtier"
)

// artifactDir is where screenshots go: $LOOMWORK_ARTIFACTS, else
// testartifacts/ at the repository root (git-ignored).
func artifactDir(t *testing.T) string {
	dir := os.Getenv("LOOMWORK_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "testartifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(artifactDir(t), name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(selector)+`).length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func text(t *testing.T, ctx context.Context, selector string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(selector))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBrowserTraceListFilterTraceCriticalPathAndSpanPanel(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	st, _ := seeded(t)
	srv, err := New(Config{}, Deps{Traces: st})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx := browser(t)

	// The list.
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces"), chromedp.WaitVisible("#trace-table"))
	if rows := count(t, ctx, "#trace-table tbody tr"); rows != 31 {
		t.Fatalf("list shows %d traces, want 31", rows)
	}
	screenshot(t, ctx, "01-trace-list")

	// Filter by status and service through the form.
	do(t, ctx,
		chromedp.SetValue(`select[name="status"]`, "error"),
		chromedp.SetValue(`input[name="service"]`, "svc-<i>x</i>"),
		chromedp.Submit(`#filters`),
		chromedp.WaitVisible(`#trace-table`),
	)
	// Submit navigates; wait until the filtered page is the one shown.
	do(t, ctx, chromedp.Poll[chromedp.Void](`document.querySelectorAll("#trace-table tbody tr").length === 1`))
	screenshot(t, ctx, "02-trace-list-filtered")

	// Open the trace: the critical path is highlighted.
	do(t, ctx, chromedp.Click(`#trace-table tbody tr a.root`), chromedp.WaitVisible("#waterfall"))
	if crit := count(t, ctx, ".wf-row.crit"); crit != 3 {
		t.Fatalf("critical rows highlighted: %d, want 3", crit)
	}
	if root := text(t, ctx, ".wf-row .span-link"); !strings.Contains(root, "<script>") {
		t.Fatalf("the span name should render as literal text, got %q", root)
	}
	screenshot(t, ctx, "03-trace-waterfall")

	// Open a span: the panel loads in place with attributes and messages.
	do(t, ctx,
		chromedp.Click(`.wf-row[data-span="00000000000000a2"] .span-link`),
		chromedp.WaitVisible(`#span-panel .span-panel[data-span="00000000000000a2"]`),
	)
	panel := text(t, ctx, "#span-panel")
	for _, want := range []string{"chat gpt-4o", "gen_ai.input.messages", "<script>alert(4)</script>", "cache read 1000"} {
		if !strings.Contains(panel, want) {
			t.Errorf("span panel lacks %q", want)
		}
	}
	if sel := count(t, ctx, `.wf-row.selected[data-span="00000000000000a2"]`); sel != 1 {
		t.Errorf("selected row not marked")
	}
	screenshot(t, ctx, "04-span-panel")
}

func TestBrowserBigTraceExpandsASubtreeInPlace(t *testing.T) {
	testtier.NoRace(t, "TestBrowserReportComparisonAndItsTraces")
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	ts, spans := sharedBigTraceServer(t)
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces/"+spans[0].TraceID), chromedp.WaitVisible("#waterfall"))
	before := count(t, ctx, ".wf-row")
	do(t, ctx, chromedp.Click(`.wf-row[data-span="`+spans[1].SpanID+`"] a.toggle`), chromedp.WaitVisible(`.wf-more a.more`))
	after := count(t, ctx, ".wf-row")
	if before != 51 || after != 51+PageRows {
		t.Fatalf("rows before/after expanding: %d/%d, want 51/%d", before, after, 51+PageRows)
	}
	screenshot(t, ctx, "05-big-trace-expanded")
}

func TestBrowserReportComparisonAndItsTraces(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	ts, _ := fileServer(t)
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(ts.URL+"/reports"), chromedp.WaitVisible("#report-table"))
	do(t, ctx, chromedp.Click(`#report-table a`), chromedp.WaitVisible("#comparison"))
	if n := count(t, ctx, "#deltas tr.change-regressed"); n != 1 {
		t.Fatalf("regressed rows: %d, want 1 (c2)", n)
	}
	if g := text(t, ctx, "#gate h2"); !strings.Contains(g, "regression") {
		t.Fatalf("gate heading %q", g)
	}
	screenshot(t, ctx, "06-report-comparison")
	// Each trial links to its trace.
	do(t, ctx, chromedp.Click(`#case-c2 a[href^="/traces/"]`), chromedp.WaitVisible("#waterfall"))
	if crit := count(t, ctx, ".wf-row.crit"); crit == 0 {
		t.Fatal("trace opened from the report shows no critical path")
	}
	do(t, ctx, chromedp.Navigate(ts.URL+"/runs"), chromedp.WaitVisible("#run-table"))
	do(t, ctx, chromedp.Click(`#run-table a`), chromedp.WaitVisible("#steps"))
	screenshot(t, ctx, "07-run-steps")
	do(t, ctx, chromedp.Navigate(ts.URL+"/ablations/mkdocs.json"), chromedp.WaitVisible("#ablation-table"))
	screenshot(t, ctx, "08-ablation")
}
