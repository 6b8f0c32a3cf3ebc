package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
)

// ListRow is one trace in the list: its store summary (store.Summarize's
// figures, the ones every view shows, with its call groups and never its
// calls) and the cost of its billed calls, priced from the groups
// (rollup.PriceGroups) to the same figure the trace page shows.
type ListRow struct {
	store.TraceSummary
	CostUSD *float64 `json:"cost_usd"`
	// KnownCostUSD is the priced part when CostUSD is unknown (nil).
	KnownCostUSD   float64  `json:"known_cost_usd"`
	UnpricedModels []string `json:"unpriced_models,omitempty"`
	// CostUnknown says, per model, how many calls have an unknown cost
	// and why (rollup.UnknownCallsText).
	CostUnknown string `json:"cost_unknown,omitempty"`
}

// ListRowOf prices a summary's call groups: the row the list page, the
// JSON API and `loom-eval traces list` show. A group the groups alone
// cannot price (its calls straddle a long-context threshold) is priced
// from the trace's calls: sum.Calls when set (a summary of spans at hand),
// else read from r when it is a store.CallReader. The row never carries
// the calls.
func ListRowOf(ctx context.Context, r TraceReader, sum store.TraceSummary, prices *pricing.Table) (ListRow, error) {
	var calls func() ([]store.Call, error)
	switch cr, ok := r.(store.CallReader); {
	case sum.Calls != nil:
		held := sum.Calls
		calls = func() ([]store.Call, error) { return held, nil }
	case ok:
		calls = func() ([]store.Call, error) { return cr.TraceCalls(ctx, sum.TraceID) }
	}
	p, err := rollup.PriceGroups(sum.Groups, prices, calls)
	if err != nil {
		return ListRow{}, fmt.Errorf("price trace %s: %w", sum.TraceID, err)
	}
	sum.Calls = nil
	row := ListRow{TraceSummary: sum, CostUSD: p.CostUSD, KnownCostUSD: p.KnownCostUSD, CostUnknown: rollup.UnknownCallsText(p.Unknown)}
	if len(p.UnpricedModels) > 0 {
		row.UnpricedModels = p.UnpricedModels
	}
	return row, nil
}

// ListRows prices a page of summaries (ListRowOf each): the rows of
// `loom-eval traces list` and its MCP tool.
func ListRows(ctx context.Context, r TraceReader, sums []store.TraceSummary, prices *pricing.Table) ([]ListRow, error) {
	rows := make([]ListRow, 0, len(sums))
	for _, sum := range sums {
		row, err := ListRowOf(ctx, r, sum, prices)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// ListView is the trace list page.
type ListView struct {
	Query    url.Values
	Rows     []ListRow
	NextPage string
	MinCost  float64
	Scanned  int // summaries scanned to fill a min_cost page
	// SearchError is why the search expression (q=) could not be parsed,
	// shown under the search box (see searchError).
	SearchError string
}

func (s *Server) listTraces(r *http.Request) (ListView, error) {
	vals := r.URL.Query()
	minCost, err := parseMinCost(vals)
	if err != nil {
		return ListView{}, err
	}
	storeVals := url.Values{}
	for k, v := range vals {
		if k != "min_cost" {
			storeVals[k] = v
		}
	}
	// One parser for the CLI, the JSON API and these pages.
	q, err := store.ParseTraceQuery(storeVals, s.cfg.Now())
	if err != nil {
		return ListView{}, badRequest{err.Error()}
	}
	view := ListView{Query: vals, MinCost: minCost}
	want := q.Limit
	if want == 0 {
		want = store.DefaultPageSize
	}
	// Cost is known only once priced, so a min_cost filter reads pages
	// until it has filled one (at most 20 pages, then it says so).
	for pages := 0; pages < 20; pages++ {
		page, err := s.deps.Traces.ListTraces(r.Context(), q)
		if err != nil {
			if errors.Is(err, store.ErrBadPageToken) {
				return ListView{}, badRequest{"page_token: " + err.Error()}
			}
			return ListView{}, err
		}
		for _, sum := range page.Traces {
			view.Scanned++
			row, err := ListRowOf(r.Context(), s.deps.Traces, sum, s.deps.Prices)
			if err != nil {
				return ListView{}, err
			}
			if minCost > 0 && (row.CostUSD == nil || *row.CostUSD < minCost) {
				continue
			}
			view.Rows = append(view.Rows, row)
		}
		view.NextPage = page.NextPageToken
		if minCost == 0 || len(view.Rows) >= want || page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	return view, nil
}

func (s *Server) traceList(w http.ResponseWriter, r *http.Request) {
	if msg := searchError(r); msg != "" {
		w.WriteHeader(http.StatusBadRequest)
		render(w, r, TraceListPage(ListView{Query: r.URL.Query(), SearchError: msg}))
		return
	}
	view, err := s.listTraces(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, TraceListPage(view))
}

func (s *Server) apiTraceList(w http.ResponseWriter, r *http.Request) {
	view, err := s.listTraces(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if view.Rows == nil {
		view.Rows = []ListRow{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"traces": view.Rows, "next_page_token": view.NextPage})
}

// TraceView is the trace page.
type TraceView struct {
	TraceID   string
	Rollup    rollup.Rollup
	Rows      []Row
	Page      int
	Pages     int
	TotalRows int
	Query     waterfallQuery
	Big       bool
	Selected  *store.Span
	Evidence  Evidence
	SpanCount int
	Services  []string // in order of first appearance; index i is colour svcClass(i)
	Labels    []string // model labels on the spans, e.g. "scripted"
	Axis      Axis
	// Window: the trace is drawn by window (web/window.go): pages of
	// tops, children a page at a time, search without ancestors.
	Window bool
	// SearchMore links to the next page of a windowed search's matches.
	SearchMore string
}

// Evidence compares what the trace retrieved with what it cited.
type Evidence struct {
	Retrieved []string
	Cited     []string
	// CitedNotRetrieved are citations of documents no retrieval returned.
	CitedNotRetrieved []string
}

func evidenceOf(spans []store.Span) Evidence {
	var ev Evidence
	got := map[string]bool{}
	cited := map[string]bool{}
	for i := range spans {
		for _, d := range spans[i].RetrievedDocs {
			if !got[d] {
				got[d] = true
				ev.Retrieved = append(ev.Retrieved, d)
			}
		}
		for _, d := range spans[i].CitedDocs {
			if !cited[d] {
				cited[d] = true
				ev.Cited = append(ev.Cited, d)
			}
		}
	}
	for _, d := range ev.Cited {
		if !got[d] {
			ev.CitedNotRetrieved = append(ev.CitedNotRetrieved, d)
		}
	}
	return ev
}

func parseWaterfallQuery(v url.Values) (waterfallQuery, error) {
	q := waterfallQuery{Toggled: map[string]bool{}, Search: v.Get("q"), Page: 1, Selected: v.Get("span")}
	for _, id := range strings.Split(v.Get("t"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			q.Toggled[id] = true
		}
	}
	if p := v.Get("p"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return q, badRequest{"parameter p: " + strconv.Quote(p) + " is not a page number"}
		}
		q.Page = n
		q.pageSet = true
	}
	return q, nil
}

// traceID returns the full id of the trace the request's {id} names: the
// id itself when it is a full id, lower-cased (GetTrace then says whether
// the trace exists), else the one trace it is a prefix of, at least
// store.MinTraceIDPrefix hex digits of either case. Its error wraps
// store.ErrBadTraceID, store.ErrAmbiguousTraceID or store.ErrNotFound for
// an id that is malformed, shared by several traces or unknown.
func (s *Server) traceID(r *http.Request) (string, error) {
	return store.TraceIDOf(r.Context(), s.deps.Traces, r.PathValue("id"))
}

// pageTraceID is traceID for the HTML routes under /traces/{id}, whose
// URLs name a trace by its full id: when the request named it otherwise
// (a prefix, upper case), it redirects to the same page, rest being the
// path after the id, under the full id with the query string kept, and
// returns false, as it does after answering with an error.
func (s *Server) pageTraceID(w http.ResponseWriter, r *http.Request, rest string) (string, bool) {
	id, err := s.traceID(r)
	if err != nil {
		s.fail(w, r, err)
		return "", false
	}
	if id != r.PathValue("id") {
		u := "/traces/" + id + rest
		if r.URL.RawQuery != "" {
			u += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, u, http.StatusFound)
		return "", false
	}
	return id, true
}

func (s *Server) traceView(r *http.Request, id string) (TraceView, error) {
	wq, err := parseWaterfallQuery(r.URL.Query())
	if err != nil {
		return TraceView{}, err
	}
	c, err := s.openTrace(r.Context(), id)
	if err != nil {
		return TraceView{}, err
	}
	if c.window != nil {
		return s.windowView(r, id, c, wq)
	}
	sel, selOK := c.index.byID[wq.Selected]
	if !selOK {
		wq.Selected = ""
	}
	// A link to a span (the critical-path list, a report) opens the page
	// holding its row, with its collapsed ancestors opened.
	if selOK && !wq.pageSet && wq.Search == "" {
		c.index.reveal(sel, wq)
	}
	all := c.index.rows(c.index.roots, wq)
	if selOK && !wq.pageSet {
		for k := range all {
			if all[k].SpanID == wq.Selected {
				wq.Page = k/PageRows + 1
				break
			}
		}
	}
	pages := (len(all) + PageRows - 1) / PageRows
	if pages == 0 {
		pages = 1
	}
	if wq.Page > pages {
		wq.Page = pages
	}
	lo := (wq.Page - 1) * PageRows
	hi := min(lo+PageRows, len(all))
	v := TraceView{TraceID: id, Rollup: c.rollup, Rows: all[lo:hi], Page: wq.Page, Pages: pages, TotalRows: len(all),
		Query: wq, Big: len(c.spans) > bigTrace, Evidence: evidenceOf(c.spans), SpanCount: len(c.spans), Labels: c.labels,
		Services: c.index.services, Axis: axisFor(c.index.end.Sub(c.index.start))}
	if selOK {
		v.Selected = &c.spans[sel]
	}
	return v, nil
}

func (s *Server) tracePage(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pageTraceID(w, r, "")
	if !ok {
		return
	}
	v, err := s.traceView(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, TracePage(v))
}

// traceRows returns the rows of one span's subtree (its children and their
// visible descendants) as an HTML fragment, for expanding without a reload.
func (s *Server) traceRows(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pageTraceID(w, r, "/rows")
	if !ok {
		return
	}
	wq, err := parseWaterfallQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := s.openTrace(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if c.window != nil {
		s.windowFragment(w, r, id, c, wq)
		return
	}
	parent := r.URL.Query().Get("parent")
	i, ok := c.index.byID[parent]
	if !ok {
		s.fail(w, r, badRequest{"parameter parent: span " + strconv.Quote(parent) + " is not in trace " + id})
		return
	}
	offset := 0
	if o := r.URL.Query().Get("offset"); o != "" {
		if offset, err = strconv.Atoi(o); err != nil || offset < 0 {
			s.fail(w, r, badRequest{"parameter offset: " + strconv.Quote(o) + " is not a row offset"})
			return
		}
	}
	rows := c.index.rows(c.index.children[i], wq)
	more := ""
	if offset > len(rows) {
		offset = len(rows)
	}
	rows = rows[offset:]
	if len(rows) > PageRows {
		rows = rows[:PageRows]
		more = rowsURL(id, parent, wq) + "&offset=" + strconv.Itoa(offset+PageRows)
	}
	v := TraceView{TraceID: id, Query: wq, Rollup: c.rollup}
	render(w, r, WaterfallFragment(v, rows, more, traceURL(id, waterfallQuery{Toggled: map[string]bool{parent: !c.index.defaultCollapsed(i)}}, 1, "", "")))
}

func (s *Server) spanPage(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pageTraceID(w, r, "/spans/"+url.PathEscape(r.PathValue("span")))
	if !ok {
		return
	}
	c, err := s.openTrace(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if c.window != nil {
		s.windowSpan(w, r, id, c)
		return
	}
	i, ok := c.index.byID[r.PathValue("span")]
	if !ok {
		s.fail(w, r, store.ErrNotFound)
		return
	}
	if r.URL.Query().Get("fragment") == "1" {
		render(w, r, SpanPanel(id, &c.spans[i], c.index.critSelf[i]))
		return
	}
	u := "/traces/" + id + "?span=" + url.QueryEscape(c.spans[i].SpanID)
	http.Redirect(w, r, u, http.StatusFound)
}

// TraceResponse is the body of GET /api/v1/traces/{id} (and of `loom-eval
// traces get --json`): the trace's full id, one page of its spans in
// canonical order (start, span id), the token of the next page ("" on the
// last), and, on the first page only, the trace's rollup.
type TraceResponse struct {
	TraceID       string         `json:"trace_id"`
	Rollup        *rollup.Rollup `json:"rollup,omitempty"`
	Spans         []store.Span   `json:"spans"`
	NextPageToken string         `json:"next_page_token,omitempty"`
}

// APISpanPage is /api/v1/traces/{id}'s page size when the request names
// none: a trace of up to this many spans comes whole in one answer.
const APISpanPage = store.MaxSpanPage

// apiTrace serves GET /api/v1/traces/{id}?limit=N&page_token=T: {id} may
// be a unique prefix (see traceID; the full id is in trace_id, no
// redirect). limit is 1 to store.MaxSpanPage spans (default APISpanPage);
// page_token is the previous page's next_page_token.
func (s *Server) apiTrace(w http.ResponseWriter, r *http.Request) {
	id, err := s.traceID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit := APISpanPage
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > store.MaxSpanPage {
			s.fail(w, r, badRequest{"parameter limit: " + strconv.Quote(l) + " is not a page size (1 to " + strconv.Itoa(store.MaxSpanPage) + " spans)"})
			return
		}
		limit = n
	}
	tok := r.URL.Query().Get("page_token")
	if _, _, err := store.DecodeSpanToken(tok); err != nil {
		s.fail(w, r, badRequest{"parameter page_token: " + err.Error()})
		return
	}
	resp, err := s.apiTracePage(r.Context(), id, tok, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// apiTracePage is one page of the API's answer for trace id.
func (s *Server) apiTracePage(ctx context.Context, id, tok string, limit int) (TraceResponse, error) {
	resp := TraceResponse{TraceID: id}
	c, err := s.openTrace(ctx, id)
	if err != nil {
		return resp, err
	}
	if tok == "" {
		resp.Rollup = &c.rollup
	}
	if c.window != nil {
		wr, _ := s.windowOf()
		page, err := wr.SpanPage(ctx, id, tok, limit)
		if err != nil {
			return resp, err
		}
		resp.Spans, resp.NextPageToken = page.Spans, page.NextPageToken
		return resp, nil
	}
	resp.Spans, resp.NextPageToken = pageSpans(c.spans, tok, limit)
	return resp, nil
}

// pageSpans is the page of spans (in canonical order, as GetTrace returns
// them) after the keyset token tok (checked by the caller).
func pageSpans(spans []store.Span, tok string, limit int) ([]store.Span, string) {
	afterNS, afterID, _ := store.DecodeSpanToken(tok)
	lo := 0
	if afterID != "" {
		lo = sort.Search(len(spans), func(i int) bool {
			ns := spans[i].StartTime.UnixNano()
			return ns > afterNS || ns == afterNS && spans[i].SpanID > afterID
		})
	}
	hi := min(lo+limit, len(spans))
	next := ""
	if hi < len(spans) {
		last := &spans[hi-1]
		next = store.EncodeSpanToken(last.StartTime.UnixNano(), last.SpanID)
	}
	return spans[lo:hi], next
}

// apiRollup serves GET /api/v1/traces/{id}/rollup: the trace's rollup,
// bounded for a trace drawn by window (rollup.Bounded: every figure, the
// lists cut, a note saying so) unless full=1 asks for the full one, which
// for a huge trace is read and derived again (seconds, and hundreds of
// megabytes of JSON for a million spans).
func (s *Server) apiRollup(w http.ResponseWriter, r *http.Request) {
	id, err := s.traceID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := s.openTrace(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if wr, ok := s.windowOf(); ok && c.window != nil && r.URL.Query().Get("full") == "1" {
		full, _, err := rollup.Window(r.Context(), wr, id, s.deps.Prices)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, full)
		return
	}
	writeJSON(w, http.StatusOK, c.rollup)
}
