package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
)

// A trace with more spans than Config.WindowSpans, on a store that offers
// store.WindowReader, is drawn by the window the user looks at: its rollup
// from what the store keeps (rollup.Window: the summary ingest keeps, the
// tree's part analysed once from the spans' bones and kept by the store),
// and its waterfall a page of tops and of each open span's children at a
// time, never the whole trace. Smaller traces, and any trace on a store
// without the capability, are read whole (loadTrace) as before.

// DefaultWindowSpans is Config.WindowSpans when left zero.
const DefaultWindowSpans = 10_000

// windowTops is how many tops one windowed page lists.
const windowTops = 50

// windowTrace is what the cache keeps of a windowed trace: its bounded
// rollup's head figures and each listed critical span's self time; never
// its spans.
type windowTrace struct {
	head     keptWindow
	critSelf map[string]float64
}

// keptWindow is what the web keeps of a windowed trace in the store
// (SaveDerived, under windowKind for the price table): the bounded rollup
// (rollup.Bounded: every figure of the full one, lists bounded) and what
// the page draws besides. A restart then opens a huge trace by one small
// read; a new span or another price table derives it again.
type keptWindow struct {
	Rollup    rollup.Rollup `json:"rollup"`
	Start     time.Time     `json:"start"`
	End       time.Time     `json:"end"`
	SpanCount int64         `json:"span_count"`
	Labels    []string      `json:"labels,omitempty"`
}

// windowKind is the derived kind of keptWindow for s's price table
// (fingerprinted once: the table does not change under a server).
func (s *Server) windowKind() string {
	s.kindOnce.Do(func() { s.kind = "web.window.v1." + s.deps.Prices.Fingerprint() })
	return s.kind
}

// windowOf returns the store's window capability.
func (s *Server) windowOf() (store.WindowReader, bool) {
	w, ok := s.deps.Traces.(store.WindowReader)
	return w, ok
}

// openTrace returns the cached trace id: read whole (c.window nil) when it
// is small or the store has no window capability, else windowed.
func (s *Server) openTrace(ctx context.Context, id string) (cachedTrace, error) {
	w, ok := s.windowOf()
	if !ok {
		return s.loadTrace(ctx, id)
	}
	now := s.cfg.Now()
	key := s.cacheScope + id
	if c, ok := s.cache.get(key); ok && now.Sub(c.loaded) < s.cfg.CacheFresh {
		return c, nil
	}
	n, err := w.TraceSize(ctx, id)
	if err != nil {
		return cachedTrace{}, err
	}
	if n <= int64(s.cfg.WindowSpans) {
		return s.loadTrace(ctx, id)
	}
	if c, ok := s.cache.get(key); ok && c.window != nil && c.window.head.SpanCount == n {
		c.loaded = now
		s.cache.put(key, c)
		return c, nil
	}
	kw, current, err := s.windowFor(ctx, w, id, n)
	if err != nil {
		return cachedTrace{}, err
	}
	wt := &windowTrace{head: kw, critSelf: make(map[string]float64, len(kw.Rollup.CriticalPath))}
	for _, e := range kw.Rollup.CriticalPath {
		wt.critSelf[e.SpanID] += e.SelfMS
	}
	c := cachedTrace{rollup: kw.Rollup, window: wt, labels: kw.Labels, loaded: now, bytes: rollupBytes(&kw.Rollup)}
	if current {
		// An older analysis served meanwhile is not cached: the next
		// request looks for the new one.
		s.cache.put(key, c)
	}
	return c, nil
}

// windowFor returns the trace's keptWindow for n spans and whether it is
// current (derived for n spans, or for what the trace holds now). While a
// Keeper runs, an analysis not kept yet is asked of it (web/analysis.go)
// and waited for AnalysisWait; past the wait, the trace's older kept
// analysis is served with a note saying so, else the error is *analysing.
// Without a Keeper the request derives it.
func (s *Server) windowFor(ctx context.Context, w store.WindowReader, id string, n int64) (keptWindow, bool, error) {
	old, ok, err := s.loadKept(ctx, w, id)
	if err != nil {
		return keptWindow{}, false, err
	}
	if ok && old.SpanCount == n {
		return old, true, nil
	}
	k := s.analysis.keeper()
	if k == nil {
		kw, err := s.deriveWindow(ctx, w, id, n)
		return kw, err == nil, err
	}
	a := k.request(store.ProjectOf(ctx), id, n)
	if a != nil {
		t := time.NewTimer(s.cfg.AnalysisWait)
		defer t.Stop()
		select {
		case <-a.done:
			return a.kw, a.err == nil, a.err
		case <-ctx.Done():
			return keptWindow{}, false, ctx.Err()
		case <-t.C:
		}
	}
	since := s.cfg.Now()
	if a != nil {
		since = a.since
	}
	if !ok {
		return keptWindow{}, false, &analysing{traceID: id, spans: n, since: since, now: s.cfg.Now()}
	}
	old.Rollup.Notes = append(slices.Clone(old.Rollup.Notes), fmt.Sprintf(
		"this analysis is of the trace's first %s spans; it now has %s, whose analysis is under way: reload in a few seconds",
		fmtInt(old.SpanCount), fmtInt(n)))
	return old, false, nil
}

// loadKept returns the keptWindow the store keeps for the trace, of
// whatever span count; ok is false when none is kept (or it is
// unreadable: written by another version).
func (s *Server) loadKept(ctx context.Context, w store.WindowReader, id string) (keptWindow, bool, error) {
	data, kept, ok, err := w.LoadDerived(ctx, id, s.windowKind())
	if err != nil || !ok {
		return keptWindow{}, false, err
	}
	var kw keptWindow
	if err := json.Unmarshal(data, &kw); err != nil || kw.SpanCount != kept {
		return keptWindow{}, false, nil
	}
	return kw, true, nil
}

// keptWindow returns the trace's keptWindow for n spans: the store's
// copy, else derived (deriveWindow).
func (s *Server) keptWindow(ctx context.Context, w store.WindowReader, id string, n int64) (keptWindow, error) {
	if kw, ok, err := s.loadKept(ctx, w, id); err != nil {
		return keptWindow{}, err
	} else if ok && kw.SpanCount == n {
		return kw, nil
	}
	return s.deriveWindow(ctx, w, id, n)
}

// deriveWindow derives the trace's keptWindow (rollup.Window, then
// bounded) and keeps it when its reads saw n spans.
func (s *Server) deriveWindow(ctx context.Context, w store.WindowReader, id string, n int64) (keptWindow, error) {
	kind := s.windowKind()
	// The summary (its billed calls) and the tree's analysis (the spans'
	// bones) are separate reads of a huge trace: side by side.
	var a rollup.Analysis
	var aErr error
	var wg sync.WaitGroup
	wg.Go(func() { a, aErr = rollup.WindowAnalysis(ctx, w, id, n) })
	head, err := w.TraceHead(ctx, id)
	wg.Wait()
	if err != nil {
		return keptWindow{}, err
	}
	if aErr != nil {
		return keptWindow{}, aErr
	}
	full := rollup.FromAnalysis(a, head, s.deps.Prices)
	full.TraceID = id
	kw := keptWindow{Rollup: full.Bounded(rollup.BoundedPath, rollup.BoundedCalls), Start: head.Start, End: head.End,
		SpanCount: head.SpanCount, Labels: head.ModelLabels}
	// Kept only when the two reads saw the same spans (a trace still
	// growing is derived again on its next open).
	if head.SpanCount != n || int64(a.Spans) != n {
		return kw, nil
	}
	if data, err := json.Marshal(kw); err == nil {
		if err := w.SaveDerived(ctx, id, kind, head.SpanCount, data); err != nil && !errors.Is(err, store.ErrReadOnly) {
			s.log.Warn("keep a huge trace's rollup", "trace", id, "err", err)
		}
	}
	return kw, nil
}

// rollupBytes estimates a windowed trace's cached size: its rollup's calls
// and path entries dominate.
func rollupBytes(r *rollup.Rollup) int64 {
	return traceFixed + int64(len(r.Calls))*160 + int64(len(r.CriticalPath))*200 + int64(len(r.AggregateSpans)+len(r.Orphans))*40
}

// windowRows lays out one page of a windowed trace's waterfall: tops
// [(page-1)·windowTops, …), each open with its first children, and the
// spans q toggled open; every other span with children is collapsed, and
// a parent with more children than the page holds ends in a "more rows"
// row that fetches the next ones.
func (s *Server) windowRows(ctx context.Context, w store.WindowReader, id string, c cachedTrace, q waterfallQuery, page int) ([]Row, error) {
	tops := slices.Clone(c.rollup.Tops)
	lo := min((page-1)*windowTops, len(tops))
	hi := min(lo+windowTops, len(tops))
	ids := make([]string, 0, hi-lo)
	for _, t := range tops[lo:hi] {
		ids = append(ids, t.SpanID)
	}
	np, err := w.SpanNodes(ctx, id, store.NodeQuery{IDs: ids})
	if err != nil {
		return nil, err
	}
	lay := s.newLayout(id, c, q)
	for i := range np.Nodes {
		if err := lay.add(ctx, w, &np.Nodes[i], 0, true, ""); err != nil {
			return nil, err
		}
	}
	return lay.rows, nil
}

// layout accumulates windowed rows within one page's budget.
type layout struct {
	id     string
	c      cachedTrace
	q      waterfallQuery
	rows   []Row
	svc    map[string]int
	start  time.Time
	total  time.Duration
	budget int
}

func (s *Server) newLayout(id string, c cachedTrace, q waterfallQuery) *layout {
	start := c.window.head.Start
	total := c.window.head.End.Sub(start)
	if total <= 0 {
		total = 1
	}
	return &layout{id: id, c: c, q: q, svc: map[string]int{}, start: start, total: total, budget: PageRows}
}

// row is node n as a waterfall row at depth.
func (l *layout) row(n *store.SpanNode, depth int, parentService string, collapsed bool) Row {
	sp := store.Span{SpanID: n.SpanID, RequestModel: n.RequestModel, ResponseModel: n.ResponseModel, ToolName: n.ToolName,
		HasUsage: n.HasUsage, InputTokens: n.InputTokens, OutputTokens: n.OutputTokens}
	if _, ok := l.svc[n.ServiceName]; !ok && n.ServiceName != "" {
		l.svc[n.ServiceName] = len(l.svc)
	}
	r := Row{SpanID: n.SpanID, Name: n.Name, Service: n.ServiceName, Operation: n.Operation, Depth: depth,
		OffsetPct:  100 * float64(n.StartTime.Sub(l.start)) / float64(l.total),
		WidthPct:   max(100*float64(n.EndTime.Sub(n.StartTime))/float64(l.total), 0),
		DurationMS: float64(n.EndTime.Sub(n.StartTime)) / 1e6, CritSelfMS: l.c.window.critSelf[n.SpanID],
		Error: n.StatusCode == store.StatusError, Children: int(n.Children), Descendants: int(n.Children), Collapsed: collapsed,
		Detail: spanDetail(&sp), ServiceIdx: l.svc[n.ServiceName], NewService: n.ServiceName != "" && n.ServiceName != parentService}
	return r
}

// add lays out node n at depth and, when it is open, its children from
// the page token after.
func (l *layout) add(ctx context.Context, w store.WindowReader, n *store.SpanNode, depth int, open bool, parentService string) error {
	if l.budget <= 0 {
		return nil
	}
	l.budget--
	l.rows = append(l.rows, l.row(n, depth, parentService, !open && n.Children > 0))
	if !open || n.Children == 0 {
		return nil
	}
	return l.children(ctx, w, n.SpanID, n.ServiceName, depth+1, "")
}

// children lays out a page of span parent's children at depth.
func (l *layout) children(ctx context.Context, w store.WindowReader, parent, parentService string, depth int, after string) error {
	limit := max(min(l.budget, store.MaxSpanPage), 1)
	page, err := w.SpanNodes(ctx, l.id, store.NodeQuery{Parent: parent, PageToken: after, Limit: limit})
	if err != nil {
		return err
	}
	for i := range page.Nodes {
		n := &page.Nodes[i]
		if l.budget <= 0 {
			// Out of room: the rest of this parent's children come from
			// here on, on request.
			page.NextPageToken = ""
			if i > 0 {
				prev := &page.Nodes[i-1]
				page.NextPageToken = store.EncodeSpanToken(prev.StartTime.UnixNano(), prev.SpanID)
			}
			l.more(parent, depth, page.NextPageToken)
			return nil
		}
		if err := l.add(ctx, w, n, depth, l.q.Toggled[n.SpanID], parentService); err != nil {
			return err
		}
	}
	if page.NextPageToken != "" {
		l.more(parent, depth, page.NextPageToken)
	}
	return nil
}

// more adds the row that fetches parent's children after the token.
func (l *layout) more(parent string, depth int, after string) {
	u := rowsURL(l.id, parent, l.q) + "&d=" + strconv.Itoa(depth)
	if after != "" {
		u += "&after=" + url.QueryEscape(after)
	}
	l.rows = append(l.rows, Row{SpanID: parent, Depth: depth, More: u})
}

// windowView is traceView for a windowed trace.
func (s *Server) windowView(r *http.Request, id string, c cachedTrace, wq waterfallQuery) (TraceView, error) {
	w, _ := s.windowOf()
	ctx := r.Context()
	pages := max((len(c.rollup.Tops)+windowTops-1)/windowTops, 1)
	wq.Page = min(max(wq.Page, 1), pages)
	v := TraceView{TraceID: id, Rollup: c.rollup, Page: wq.Page, Pages: pages, Query: wq, Big: true, Window: true,
		SpanCount: int(c.window.head.SpanCount), Labels: c.labels, Axis: axisFor(c.window.head.End.Sub(c.window.head.Start))}
	var err error
	if wq.Search != "" {
		v.Rows, v.SearchMore, err = s.windowSearch(ctx, w, id, c, wq, r.URL.Query().Get("after"))
	} else {
		v.Rows, err = s.windowRows(ctx, w, id, c, wq, wq.Page)
	}
	if err != nil {
		return TraceView{}, err
	}
	v.TotalRows = len(v.Rows)
	svc := map[string]bool{}
	for _, row := range v.Rows {
		if row.Service != "" && !svc[row.Service] {
			svc[row.Service] = true
			v.Services = append(v.Services, row.Service)
		}
	}
	if wq.Selected != "" {
		sp, err := w.GetSpan(ctx, id, wq.Selected)
		switch {
		case err == nil:
			v.Selected = &sp
		case errors.Is(err, store.ErrNotFound):
			v.Query.Selected = ""
		default:
			return TraceView{}, err
		}
	}
	return v, nil
}

// windowSearch lists a page of the spans matching the search (the fields
// a small trace's search matches), flat, each marked as a match.
func (s *Server) windowSearch(ctx context.Context, w store.WindowReader, id string, c cachedTrace, wq waterfallQuery, after string) ([]Row, string, error) {
	page, err := w.SpanNodes(ctx, id, store.NodeQuery{Text: wq.Search, PageToken: after, Limit: PageRows})
	if err != nil {
		if errors.Is(err, store.ErrBadPageToken) {
			return nil, "", badRequest{"parameter after: " + err.Error()}
		}
		return nil, "", err
	}
	lay := s.newLayout(id, c, wq)
	for i := range page.Nodes {
		row := lay.row(&page.Nodes[i], 0, "", page.Nodes[i].Children > 0)
		row.Match = true
		lay.rows = append(lay.rows, row)
	}
	more := ""
	if page.NextPageToken != "" {
		more = traceURL(id, wq, 1, "", "") + "&after=" + url.QueryEscape(page.NextPageToken)
	}
	return lay.rows, more, nil
}

// windowFragment serves /traces/{id}/rows for a windowed trace: a page of
// parent's children (from the token after) at depth d.
func (s *Server) windowFragment(w http.ResponseWriter, r *http.Request, id string, c cachedTrace, wq waterfallQuery) {
	wr, _ := s.windowOf()
	vals := r.URL.Query()
	parent := vals.Get("parent")
	if !store.IsSpanID(parent) {
		s.fail(w, r, badRequest{"parameter parent: " + strconv.Quote(parent) + " is not a span id (16 lower-case hex digits)"})
		return
	}
	depth := 1
	if d := vals.Get("d"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 10_000 {
			s.fail(w, r, badRequest{"parameter d: " + strconv.Quote(d) + " is not a depth"})
			return
		}
		depth = n
	} else if n, err := wr.SpanNodes(r.Context(), id, store.NodeQuery{IDs: []string{parent}}); err == nil && len(n.Nodes) == 1 {
		depth = s.depthOf(r.Context(), wr, id, &n.Nodes[0]) + 1
	}
	lay := s.newLayout(id, c, wq)
	if err := lay.children(r.Context(), wr, parent, "", depth, vals.Get("after")); err != nil {
		if errors.Is(err, store.ErrBadPageToken) {
			err = badRequest{"parameter after: " + err.Error()}
		}
		s.fail(w, r, err)
		return
	}
	v := TraceView{TraceID: id, Query: wq, Rollup: c.rollup, Window: true}
	render(w, r, WaterfallFragment(v, lay.rows, "", traceURL(id, waterfallQuery{Toggled: map[string]bool{parent: true}}, 1, "", "")))
}

// depthOf walks up from n to its top (at most 64 steps: a deeper span is
// drawn at depth 64) and returns its depth.
func (s *Server) depthOf(ctx context.Context, w store.WindowReader, id string, n *store.SpanNode) int {
	seen := map[string]bool{n.SpanID: true}
	depth, p := 0, n.ParentSpanID
	for p != "" && !seen[p] && depth < 64 {
		seen[p] = true
		page, err := w.SpanNodes(ctx, id, store.NodeQuery{IDs: []string{p}})
		if err != nil || len(page.Nodes) == 0 {
			break
		}
		depth++
		p = page.Nodes[0].ParentSpanID
	}
	return depth
}

// windowSpan serves /traces/{id}/spans/{span} for a windowed trace: the
// span panel from the one span, or a redirect to the page selecting it.
func (s *Server) windowSpan(w http.ResponseWriter, r *http.Request, id string, c cachedTrace) {
	wr, _ := s.windowOf()
	sp, err := wr.GetSpan(r.Context(), id, r.PathValue("span"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("fragment") == "1" {
		render(w, r, SpanPanel(id, &sp, c.window.critSelf[sp.SpanID]))
		return
	}
	http.Redirect(w, r, "/traces/"+id+"?span="+url.QueryEscape(sp.SpanID), http.StatusFound)
}
