package web

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/loomwork/loomwork/internal/testtier"
)

// docScreenshot is screenshot, and with -update (or
// LOOMWORK_DOC_SCREENSHOTS=1) also writes the picture to
// docs/screenshots/NAME.png, where the docs show it.
func docScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	screenshot(t, ctx, name)
	if !*update && os.Getenv("LOOMWORK_DOC_SCREENSHOTS") != "1" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func evalJS[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	return v
}

// overlapsJS lists, for every waterfall row, what a reader would see
// collide: a label over its bar, a label or bar outside its track, a name
// spilling out of its column. Measured with getBoundingClientRect.
const overlapsJS = `(() => {
  const bad = [];
  for (const row of document.querySelectorAll(".wf-row")) {
    const id = row.dataset.span;
    const track = row.querySelector(".wf-track").getBoundingClientRect();
    const bar = row.querySelector(".wf-bar").getBoundingClientRect();
    const label = row.querySelector(".wf-label");
    if (bar.left < track.left - 0.5 || bar.right > track.right + 0.5) bad.push(id + ": bar outside its track");
    if (label) {
      const l = label.getBoundingClientRect();
      if (l.width > 0 && l.right > bar.left && l.left < bar.right) bad.push(id + ": label " + JSON.stringify(label.textContent) + " overlaps its bar");
      if (l.left < track.left - 0.5 || l.right > track.right + 0.5) bad.push(id + ": label outside its track");
    }
    const name = row.querySelector(".wf-name").getBoundingClientRect();
    const link = row.querySelector(".span-link").getBoundingClientRect();
    if (link.right > name.right + 0.5) bad.push(id + ": name spills out of its column");
    const dur = row.querySelector(".wf-dur").getBoundingClientRect();
    if (dur.right > track.left + 0.5 || name.right > dur.left + 0.5) bad.push(id + ": columns overlap");
  }
  return bad;
})()`

func TestBrowserWaterfallAxisLabelsAndServices(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	st := openStore(t)
	if err := st.WriteSpans(t.Context(), agentTrace()); err != nil {
		t.Fatal(err)
	}
	srv, _ := New(Config{}, Deps{Traces: st})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces/"+agentTraceID), chromedp.WaitVisible("#waterfall"))

	ticks := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#wf-axis .wf-tick")].map(e => e.textContent)`)
	if len(ticks) < 5 || ticks[0] != "0" || !strings.HasSuffix(ticks[1], " s") {
		t.Fatalf("axis ticks %q: want at least five, from 0, in seconds for an 8.4 s trace", ticks)
	}
	// Ticks are left to right and do not collide.
	if bad := evalJS[[]string](t, ctx, `(() => { const r = [...document.querySelectorAll("#wf-axis .wf-tick")].map(e => e.getBoundingClientRect()); const bad = [];
		for (let i = 1; i < r.length; i++) if (r[i].left < r[i-1].right) bad.push(i); return bad; })()`); len(bad) > 0 {
		t.Errorf("axis tick labels overlap at %v", bad)
	}
	if bad := evalJS[[]string](t, ctx, overlapsJS); len(bad) > 0 {
		t.Errorf("waterfall layout: %s", strings.Join(bad, "; "))
	}
	if n := count(t, ctx, ".wf-label"); n < 6 {
		t.Errorf("only %d rows have a side label", n)
	}
	// The long tool name is cut with an ellipsis and complete on hover.
	long := `.wf-row[data-span="` + atFetch + `"] .span-link`
	if cut := evalJS[bool](t, ctx, `(() => { const a = document.querySelector(`+jsString(long)+`); return a.scrollWidth > a.clientWidth && getComputedStyle(a).textOverflow === "ellipsis"; })()`); !cut {
		t.Error("the long span name is not ellipsized")
	}
	if title := evalJS[string](t, ctx, `document.querySelector(`+jsString(long)+`).title`); title != "execute_tool "+atLongToolNm {
		t.Errorf("hover title %q, want the full name", title)
	}
	// Four services, each in the legend with its own colour.
	legend := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#wf-legend .svc-key")].map(e => e.textContent + "=" + getComputedStyle(e.querySelector("i")).backgroundColor)`)
	if len(legend) != 4 {
		t.Fatalf("legend %q, want the 4 services", legend)
	}
	colours := map[string]bool{}
	for _, l := range legend {
		colours[l[strings.Index(l, "="):]] = true
	}
	if len(colours) != 4 {
		t.Errorf("services share colours: %q", legend)
	}
	// A bar has its service's colour.
	bar := evalJS[string](t, ctx, `getComputedStyle(document.querySelector('.wf-row[data-span="`+atRetrieval+`"] .wf-bar')).backgroundColor`)
	if !containsSuffix(legend, "retrieval-svc="+bar) {
		t.Errorf("the retrieval bar is %s; legend %q", bar, legend)
	}

	// Selecting a span highlights its row.
	do(t, ctx, chromedp.Click(`.wf-row[data-span="`+atChat2+`"] .span-link`),
		chromedp.WaitVisible(`#span-panel .span-panel[data-span="`+atChat2+`"]`))
	if n := count(t, ctx, `.wf-row.selected`); n != 1 || count(t, ctx, `.wf-row.selected[data-span="`+atChat2+`"]`) != 1 {
		t.Fatalf("selected rows: %d", n)
	}
	docScreenshot(t, ctx, "waterfall")
}

func containsSuffix(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func jsString(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func TestBrowserConversationView(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	st := openStore(t)
	if err := st.WriteSpans(t.Context(), agentTrace()); err != nil {
		t.Fatal(err)
	}
	srv, _ := New(Config{}, Deps{Traces: st})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx := browser(t)
	do(t, ctx, chromedp.EmulateViewport(1500, 1700))
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces/"+agentTraceID), chromedp.WaitVisible("#waterfall"),
		chromedp.Click(`.wf-row[data-span="`+atChat2+`"] .span-link`),
		chromedp.WaitVisible(`#conversation`))
	roles := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#conversation .msg-head .role")].map(e => e.textContent)`)
	if strings.Join(roles, ",") != "user,assistant,tool,assistant" {
		t.Errorf("roles %q, want user, assistant, tool, assistant", roles)
	}
	args := text(t, ctx, `#conversation .tool-call pre.args`)
	if !strings.Contains(args, "\n  \"query\": \"upload retry backoff 503\"") {
		t.Errorf("tool call arguments are not pretty-printed: %q", args)
	}
	if res := text(t, ctx, `#conversation .tool-result pre`); !strings.Contains(res, "docs/uploads/retries.md#configuration") {
		t.Errorf("tool result %q", res)
	}
	// The event's raw JSON is folded away, not shown under Events.
	if open := evalJS[bool](t, ctx, `[...document.querySelectorAll("#span-panel .event details.raw")].some(d => d.open)`); open {
		t.Error("the raw message JSON is shown open")
	}
	if n := count(t, ctx, `#span-panel .event details.raw`); n != 1 {
		t.Errorf("the inference-details event's messages should be folded once, got %d", n)
	}
	if !evalJS[bool](t, ctx, `(() => { const p = document.getElementById("span-panel").getBoundingClientRect(); const c = document.getElementById("conversation").getBoundingClientRect(); return c.top >= p.top && c.top < p.bottom; })()`) {
		t.Error("the conversation is not in view in the panel")
	}
	docScreenshot(t, ctx, "conversation")

	// A model call without captured content says so.
	do(t, ctx, chromedp.Click(`.wf-row[data-span="`+atChatNone+`"] .span-link`), chromedp.WaitVisible(`#no-content`))
	if s := text(t, ctx, "#no-content"); !strings.Contains(s, "content capture is off at the sender") {
		t.Errorf("no-content note %q", s)
	}
	// OpenInference's flattened messages read as a conversation too.
	do(t, ctx, chromedp.Click(`.wf-row[data-span="`+atChatOI+`"] .span-link`), chromedp.WaitVisible(`#span-panel .span-panel[data-span="`+atChatOI+`"] #conversation`))
	if s := text(t, ctx, "#conversation"); !strings.Contains(s, "retry.backoff: exponential") || !strings.Contains(s, "system") {
		t.Errorf("OpenInference conversation %q", s)
	}
}

// The selection survives expanding subtrees (rows fetched after it was
// made) and paging.
func TestBrowserSelectionSurvivesExpandAndPaging(t *testing.T) {
	testtier.NoRace(t, "TestBrowserReportComparisonAndItsTraces")
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	ts, spans := sharedBigTraceServer(t)
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces/"+spans[0].TraceID), chromedp.WaitVisible("#waterfall"))
	sub0, sub1 := spans[1].SpanID, ""
	for _, s := range spans[2:] {
		if s.ParentSpanID == spans[0].SpanID {
			sub1 = s.SpanID
			break
		}
	}
	// Expand sub-agent 0, select one of its steps, then expand sub-agent 1.
	do(t, ctx, chromedp.Click(`.wf-row[data-span="`+sub0+`"] a.toggle`), chromedp.WaitVisible(`.wf-more a.more`))
	child := evalJS[string](t, ctx, `[...document.querySelectorAll('.wf-row[data-depth="2"]')].find(r => r.textContent.includes("read_file")).dataset.span`)
	do(t, ctx, chromedp.Click(`.wf-row[data-span="`+child+`"] .span-link`), chromedp.WaitVisible(`#span-panel .span-panel[data-span="`+child+`"]`))
	do(t, ctx, chromedp.Click(`.wf-row[data-span="`+sub1+`"] a.toggle`),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll(".wf-more a.more").length === 2`))
	if sel := evalJS[[]string](t, ctx, `[...document.querySelectorAll(".wf-row.selected")].map(r => r.dataset.span)`); len(sel) != 1 || sel[0] != child {
		t.Fatalf("after expanding another subtree the selected rows are %q, want [%s]", sel, child)
	}
	// Rows of the selected span's subtree fetched later ("more rows") keep it too.
	do(t, ctx, chromedp.Click(`.wf-more a.more`), chromedp.Poll[chromedp.Void](`document.querySelectorAll(".wf-more a.more").length === 1`))
	if n := count(t, ctx, `.wf-row.selected[data-span="`+child+`"]`); n != 1 {
		t.Fatalf("after more rows: %d selected rows", n)
	}
	// Paging (a search spreads the trace over pages) keeps the selection.
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces/"+spans[0].TraceID+"?q=read_file&span="+child+"&p=1"), chromedp.WaitVisible("#wf-next"))
	do(t, ctx, chromedp.Click("#wf-next"), chromedp.WaitVisible("#wf-prev"))
	do(t, ctx, chromedp.Click("#wf-prev"), chromedp.WaitVisible("#wf-next"))
	if n := count(t, ctx, `.wf-row.selected[data-span="`+child+`"]`); n != 1 {
		t.Fatalf("after paging away and back: %d selected rows", n)
	}
	if s := text(t, ctx, "#span-panel h2"); s == "" {
		t.Error("the span panel lost the selection")
	}
}
