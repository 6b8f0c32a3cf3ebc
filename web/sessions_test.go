package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/store/storetest"
)

// conversationStore holds a five-turn support conversation, a two-turn one,
// and 20 traces of no conversation of their own (GenerateTraces gives each
// a one-turn conversation).
func conversationStore(t *testing.T) (*sqlite.Store, []store.Span) {
	t.Helper()
	st := openStore(t)
	at := time.Date(2026, 3, 2, 14, 5, 0, 0, time.UTC)
	spans := storetest.GenerateConversation("conv-7f3a-support", 5, 12, 31, at, 3*time.Minute+17*time.Second)
	spans = append(spans, storetest.GenerateConversation("conv-2b91-billing", 2, 8, 32, at.Add(-time.Hour), 90*time.Second)...)
	spans = append(spans, storetest.GenerateTraces(20, 10, 33)...)
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	return st, spans
}

func getURL(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSessionsAPITotalsAreSumsOfTheTraceList(t *testing.T) {
	st, _ := conversationStore(t)
	srv, err := New(Config{}, Deps{Traces: st})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	code, body := getURL(t, ts.URL+"/api/v1/sessions?limit=2")
	var page store.SessionPage
	if code != 200 || json.Unmarshal([]byte(body), &page) != nil || len(page.Sessions) != 2 || page.NextPageToken == "" {
		t.Fatalf("/api/v1/sessions?limit=2: %d %s", code, body)
	}
	code, body = getURL(t, ts.URL+"/api/v1/sessions/conv-7f3a-support")
	var sess store.Session
	if code != 200 || json.Unmarshal([]byte(body), &sess) != nil {
		t.Fatalf("/api/v1/sessions/conv-7f3a-support: %d %s", code, body)
	}
	code, body = getURL(t, ts.URL+"/api/v1/traces?session=conv-7f3a-support&sort=start&asc=true")
	var list struct {
		Traces []ListRow `json:"traces"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil {
		t.Fatalf("/api/v1/traces?session=: %d %s", code, body)
	}
	if sess.Turns != 5 || len(sess.Traces) != 5 || len(list.Traces) != 5 {
		t.Fatalf("session: %d turns, %d traces; the trace list: %d; want 5", sess.Turns, len(sess.Traces), len(list.Traces))
	}
	var in, out, errs int64
	for i, r := range list.Traces {
		if sess.Traces[i].TraceID != r.TraceID || sess.Traces[i].InputTokens != r.InputTokens || sess.Traces[i].ErrorCount != r.ErrorCount {
			t.Errorf("turn %d differs from the trace list's row", i+1)
		}
		in, out, errs = in+r.InputTokens, out+r.OutputTokens, errs+r.ErrorCount
	}
	if sess.InputTokens != in || sess.OutputTokens != out || sess.ErrorCount != errs {
		t.Errorf("session totals %d/%d/%d errors, sums of the list %d/%d/%d", sess.InputTokens, sess.OutputTokens, sess.ErrorCount, in, out, errs)
	}
	if code, body := getURL(t, ts.URL+"/api/v1/sessions/nobody"); code != 404 || !strings.Contains(body, "session not found") {
		t.Errorf("unknown session: %d %s", code, body)
	}
	if code, body := getURL(t, ts.URL+"/api/v1/sessions?limit=x"); code != 400 || !strings.Contains(body, "limit") {
		t.Errorf("bad limit: %d %s", code, body)
	}
	if code, body := getURL(t, ts.URL+"/api/v1/sessions?page_token=zzz"); code != 400 || !strings.Contains(body, "page_token") {
		t.Errorf("bad page token: %d %s", code, body)
	}
	// The search expression: a parse error names the clause (400), and
	// the API answers the same query the UI shows.
	if code, body := getURL(t, ts.URL+"/api/v1/traces?q="+url.QueryEscape("gen_ai.request.model=gpt-4o gen_ai.usage.input_tokens>lots")); code != 400 ||
		!strings.Contains(body, `clause 2 \"gen_ai.usage.input_tokens\u003elots\"`) {
		t.Errorf("bad search: %d %s", code, body)
	}
}

func TestBrowserSearchBoxWritesTheQueryIntoTheURLAndShowsErrorsInline(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	st, spans := conversationStore(t)
	srv, err := New(Config{}, Deps{Traces: st})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx := browser(t)

	expr := `gen_ai.request.model=gpt-4o gen_ai.usage.input_tokens>5000 name:"execute_tool web_search"`
	want := map[string]bool{}
	byTrace := map[string][]store.Span{}
	for _, sp := range spans {
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
	}
	clauses, _ := store.ParseSearch(expr)
	for id, tr := range byTrace {
		if store.TraceMatchesSearch(tr, clauses) {
			want[id] = true
		}
	}
	if len(want) == 0 || len(want) == len(byTrace) {
		t.Fatalf("fixture problem: the search matches %d of %d traces", len(want), len(byTrace))
	}

	do(t, ctx, chromedp.Navigate(ts.URL+"/traces"), chromedp.WaitVisible("#search-q"))
	do(t, ctx, chromedp.SendKeys("#search-q", expr))
	// Submit navigates: wait for the searched page's response, so no
	// later step runs against the page being left.
	if _, err := chromedp.RunResponse(ctx, chromedp.Submit("#filters")); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.WaitVisible("#trace-table"))
	loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(loc)
	if got := u.Query().Get("q"); got != expr {
		t.Fatalf("the URL's q is %q, want %q", got, expr)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#trace-table tbody tr a.root")].map(a => a.getAttribute("href").slice(8))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) {
		t.Fatalf("the search lists %d traces, want %d", len(rows), len(want))
	}
	for _, id := range rows {
		if !want[id] {
			t.Errorf("trace %s listed but does not match", id)
		}
	}
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#search-q").value`)); v != expr {
		t.Errorf("the search box shows %q after the search, want %q", v, expr)
	}
	docScreenshot(t, ctx, "search")

	// A reload of the URL gives the same list; a bad clause is shown under
	// the box, naming it, with the box keeping what was typed.
	bad := `gen_ai.request.model=gpt-4o gen_ai.usage.input_tokens>lots`
	do(t, ctx, chromedp.Navigate(ts.URL+"/traces?q="+url.QueryEscape(bad)), chromedp.WaitVisible("#search-error"))
	msg := text(t, ctx, "#search-error")
	if !strings.Contains(msg, `clause 2 "gen_ai.usage.input_tokens>lots"`) || !strings.Contains(msg, "not a finite number") {
		t.Errorf("inline error %q does not name the clause and the problem", msg)
	}
	if v, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#search-q").value`)); v != bad {
		t.Errorf("the search box shows %q after an error, want what was typed", v)
	}
	if n := count(t, ctx, "#trace-table"); n != 0 {
		t.Errorf("a trace table is shown under a search error")
	}
	screenshot(t, ctx, "search-error")
}

func TestBrowserSessionsListAndSessionPage(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a tab of the shared browser
	st, _ := conversationStore(t)
	srv, err := New(Config{}, Deps{Traces: st})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx := browser(t)

	want, err := store.ReadSession(context.Background(), st, "conv-7f3a-support")
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.Navigate(ts.URL+"/sessions"), chromedp.WaitVisible("#session-table"))
	if n := count(t, ctx, "#session-table tbody tr"); n != 22 {
		t.Fatalf("sessions listed: %d, want 22 (two conversations and 20 one-turn ones)", n)
	}
	first := text(t, ctx, "#session-table tbody tr:first-child")
	if !strings.Contains(first, "conv-7f3a-support") || !strings.Contains(first, fmtInt(want.InputTokens)) {
		t.Errorf("the most recent session row %q: want conv-7f3a-support with %s input tokens", first, fmtInt(want.InputTokens))
	}
	screenshot(t, ctx, "sessions")

	do(t, ctx, chromedp.Click(`#session-table a[href="/sessions/conv-7f3a-support"]`), chromedp.WaitVisible("#turn-table"))
	if n := count(t, ctx, "#turn-table tbody tr[data-trace]"); n != 5 {
		t.Fatalf("turns shown: %d, want 5", n)
	}
	order, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#turn-table tbody tr[data-trace]")].map(r => r.dataset.trace)`))
	if err != nil {
		t.Fatal(err)
	}
	for i, tr := range want.Traces {
		if order[i] != tr.TraceID {
			t.Errorf("turn %d is %s, want %s (time order)", i+1, order[i], tr.TraceID)
		}
	}
	total := text(t, ctx, "#turn-total")
	if !strings.Contains(total, fmtInt(want.InputTokens)+" / "+fmtInt(want.OutputTokens)) {
		t.Errorf("total row %q lacks the summed tokens %d/%d", total, want.InputTokens, want.OutputTokens)
	}
	// The session's cost is the sum of its turns' costs as the trace list
	// prices each (in turn order), and every turn shows its own.
	cost := 0.0
	for i, tr := range want.Traces {
		row, err := ListRowOf(context.Background(), srv.deps.Traces, tr, srv.deps.Prices)
		if err != nil {
			t.Fatal(err)
		}
		if row.CostUSD == nil {
			t.Fatalf("fixture problem: turn %d has no known cost", i+1)
		}
		cost += *row.CostUSD
		if cell := text(t, ctx, fmt.Sprintf(`#turn-table tbody tr[data-trace="%s"]`, tr.TraceID)); !strings.Contains(cell, fmtCost(row.CostUSD)) {
			t.Errorf("turn %d row %q lacks its cost %s", i+1, cell, fmtCost(row.CostUSD))
		}
	}
	if !strings.Contains(total, fmtCost(&cost)) {
		t.Errorf("total row %q lacks the summed cost %s", total, fmtCost(&cost))
	}
	docScreenshot(t, ctx, "session")

	// A turn opens its trace.
	do(t, ctx, chromedp.Click(`#turn-table tbody tr:first-child a.root`), chromedp.WaitVisible("#waterfall"))
}
