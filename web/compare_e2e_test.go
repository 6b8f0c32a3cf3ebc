package web

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
)

// visibleRows counts the comparison's rows the browser displays.
func visibleRows(t *testing.T, ctx context.Context) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("#cmp-table tbody tr")].filter(r => r.offsetParent !== null).length`))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBrowserCompareTwoTracesOfTheSameCaseFromTheTracePage(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	ts, _ := compareServer(t)
	ctx := browser(t)
	// From trace A's page, "compare with…" lists trial 1 of the same case first.
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces/"+supportTraceA), chromedp.WaitVisible("#compare-with"))
	do(t, ctx, chromedp.Click("#compare-with"), chromedp.WaitVisible("#candidates"))
	if first := text(t, ctx, "#candidates tbody tr"); !strings.Contains(first, "same case") || !strings.Contains(first, supportTraceB[:8]) {
		t.Fatalf("first candidate %q, want trial 1 of the same case", first)
	}
	do(t, ctx, chromedp.Click("#candidates tbody tr a.compare-link"), chromedp.WaitVisible("#cmp-table"))

	head := text(t, ctx, "#first-divergence")
	for _, want := range []string{"First divergence at step 2", "tool call search_docs: result differs", "blog/2023-refund-changes.md", "docs/billing/refunds.md#annual-plans"} {
		if !strings.Contains(head, want) {
			t.Errorf("first divergence box lacks %q:\n%s", want, head)
		}
	}
	if n := count(t, ctx, "#cmp-table tr.first"); n != 1 {
		t.Fatalf("%d rows marked first", n)
	}
	if n := count(t, ctx, "#cmp-table tr.only_b td.gap"); n != 3 {
		t.Fatalf("%d gap cells on A's side, want the 3 steps B inserted", n)
	}
	// Every later difference is marked: the changed values are highlighted.
	if n := count(t, ctx, "#cmp-table tr.changed mark.ins"); n < 4 {
		t.Fatalf("%d highlighted changes on B's side", n)
	}
	if rows := visibleRows(t, ctx); rows != 9 {
		t.Fatalf("%d rows shown, want 9 (6 paired steps, 3 inserted)", rows)
	}
	docScreenshot(t, ctx, "compare")
	// Hiding the identical steps leaves the differences.
	do(t, ctx, chromedp.Click("#hide-same"))
	if rows := visibleRows(t, ctx); rows != 8 {
		t.Fatalf("%d rows shown with identical steps hidden, want 8", rows)
	}
	// The step links open the span on its trace page.
	searchB := supportTraceB[:12] + "0003" // B's search_docs span
	do(t, ctx, chromedp.Click(`#row-2 td:nth-child(4) .step-head a`), chromedp.WaitVisible(`#span-panel .span-panel[data-span="`+searchB+`"]`))
	if p := text(t, ctx, "#span-panel"); !strings.Contains(p, "execute_tool search_docs") {
		t.Fatalf("the step's link opened the span panel %q", p)
	}
}

func TestBrowserCompareTwoRunsFromTheRunPage(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	ts, _ := compareServer(t)
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(ts.URL+"/runs/good.jsonl/bookkeeper-case-lunch-t0"), chromedp.WaitVisible("#compare-run"))
	do(t, ctx, chromedp.Click("#compare-run"), chromedp.WaitVisible("#candidates"))
	do(t, ctx, chromedp.Click("#candidates tbody tr a.compare-link"), chromedp.WaitVisible("#cmp-table"))
	head := text(t, ctx, "#first-divergence")
	if !strings.Contains(head, "tool call calculator") || !strings.Contains(head, "LWR1100") || !strings.Contains(head, `"b":1200`) {
		t.Fatalf("first divergence %q", head)
	}
	screenshot(t, ctx, "compare-runs")
}

// labelsE2EServer serves the support traces, the graded report and a
// labels file.
func labelsE2EServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	st, _ := seeded(t)
	a, b := supportTraces()
	st.WriteSpans(t.Context(), append(a, b...))
	files := FileSources{ReportsDir: t.TempDir(), RunsDir: t.TempDir()}
	writeGradedReport(t, files.ReportsDir)
	labels := filepath.Join(t.TempDir(), "labels.jsonl")
	srv, err := New(Config{}, Deps{Traces: st, Files: &files, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, labels
}

func TestBrowserLabelATrialFromTheReportAndFromATrace(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	ts, labels := labelsE2EServer(t)
	ctx := browser(t)
	// From the report: trial 1 of refund (trace B), which its grader failed.
	do(t, ctx, chromedp.Navigate(ts.URL+"/reports/graded.json"), chromedp.WaitVisible("#case-refund"))
	do(t, ctx, chromedp.Click(`#case-refund tr[data-trial="1"] a.label-link`), chromedp.WaitVisible("#label-form"))
	if v := text(t, ctx, "#grader-verdicts"); !strings.Contains(v, "answer_correct") || !strings.Contains(v, "says no refund after 14 days") {
		t.Fatalf("the form does not show the grader's verdict: %q", v)
	}
	do(t, ctx,
		chromedp.Click(`input[name="verdict"][value="fail"]`),
		chromedp.SetValue(`input[name="labeler"]`, "ana"),
		chromedp.SetValue(`textarea[name="note"]`, "Quotes a 2023 blog post about monthly plans; the annual plan policy allows 30 days."),
	)
	docScreenshot(t, ctx, "labels")
	do(t, ctx, chromedp.Click("#label-submit"), chromedp.WaitVisible("#label-added"))
	if row := text(t, ctx, "#labels-table tbody tr.added"); !strings.Contains(row, "refund") || !strings.Contains(row, "answer_correct") || !strings.Contains(row, "fail") {
		t.Fatalf("added row %q", row)
	}
	// From trace B's page: trial 1 again, whose grade the report has.
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces/"+supportTraceB), chromedp.WaitVisible("#label-trace"))
	do(t, ctx, chromedp.Click("#label-trace"), chromedp.WaitVisible("#label-form"))
	if v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('input[name="trial"]').value`)); err != nil || v != "1" {
		t.Fatalf("trial field %q %v", v, err)
	}
	// The labeler is remembered; a tampered CSRF token is refused.
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('input[name="labeler"]').value`)); v != "ana" {
		t.Fatalf("labeler not remembered: %q", v)
	}
	do(t, ctx,
		chromedp.Click(`input[name="verdict"][value="pass"]`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('input[name="csrf_token"]').value = "forged"`),
		chromedp.Click("#label-submit"),
		chromedp.WaitVisible("section.error"),
	)
	if e := text(t, ctx, "section.error"); !strings.Contains(e, "403") || !strings.Contains(e, "does not match") {
		t.Fatalf("forged token page %q", e)
	}
	got, err := datasets.LoadLabels(labels)
	if err != nil || len(got) != 1 || got[0].Trial != 1 || got[0].Passed || got[0].Labeler != "ana" {
		t.Fatalf("labels file %+v %v", got, err)
	}
	do(t, ctx, chromedp.Navigate(ts.URL+"/labels"), chromedp.WaitVisible("#labels-table"))
	screenshot(t, ctx, "labels-list")
}

func TestBrowserReportShowsFailingCasesFirst(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	ts, _ := labelsE2EServer(t)
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(ts.URL+"/reports/graded.json"), chromedp.WaitVisible("#failing-cases"))
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("section.case")].map(s => s.id)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "case-lookup,case-refund,case-greet" {
		t.Fatalf("cases in order %v", ids)
	}
	color, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('#case-refund tr[data-trial="2"] .verdict-word')).color`))
	if err != nil || color == "rgb(43, 138, 62)" {
		t.Fatalf("trial 2 of refund, which did not cite the required evidence, shows a green verdict (%s, %v)", color, err)
	}
	docScreenshot(t, ctx, "report")
}
