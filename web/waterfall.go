package web

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
)

// PageRows is how many waterfall rows one page shows.
const PageRows = 500

// bigTrace is the span count above which subtrees start collapsed.
const bigTrace = 2000

// traceIndex is the tree of one trace, built once per request.
type traceIndex struct {
	spans    []store.Span
	byID     map[string]int
	children [][]int
	roots    []int
	desc     []int // descendant counts
	depth    []int
	start    time.Time
	end      time.Time
	critSelf []float64 // each span's own time on the critical path, ms
	// services are the trace's service names in order of first appearance;
	// svc maps one to its index, which picks its colour (svcClass).
	services []string
	svc      map[string]int
}

func newTraceIndex(spans []store.Span, r *rollup.Rollup) *traceIndex {
	ix := buildTraceIndex(spans)
	ix.setCritical(r)
	return ix
}

// buildTraceIndex builds the index without the critical path, so it can
// run while the rollup is computed (setCritical adds it).
func buildTraceIndex(spans []store.Span) *traceIndex {
	ix := &traceIndex{spans: spans, byID: make(map[string]int, len(spans)), children: make([][]int, len(spans)),
		desc: make([]int, len(spans)), depth: make([]int, len(spans)), critSelf: make([]float64, len(spans)), svc: map[string]int{}}
	for i := range spans {
		ix.byID[spans[i].SpanID] = i
		if sv := spans[i].ServiceName; sv != "" {
			if _, ok := ix.svc[sv]; !ok {
				ix.svc[sv] = len(ix.services)
				ix.services = append(ix.services, sv)
			}
		}
		if i == 0 || spans[i].StartTime.Before(ix.start) {
			ix.start = spans[i].StartTime
		}
		if spans[i].EndTime.After(ix.end) {
			ix.end = spans[i].EndTime
		}
	}
	// The tree every view shares (orphans, self-parents, parent cycles and
	// repeated span ids handled once, in scorer/rollup).
	tree := rollup.NewTree(spans)
	ix.roots = tree.Tops()
	for i := range spans {
		ix.children[i] = tree.Children(i)
	}
	// Depths and descendant counts without recursion (traces can be deep).
	order := make([]int, 0, len(spans))
	tree.Walk(func(n, depth int) {
		ix.depth[n] = depth
		order = append(order, n)
	})
	for k := len(order) - 1; k >= 0; k-- {
		n := order[k]
		for _, c := range ix.children[n] {
			ix.desc[n] += 1 + ix.desc[c]
		}
	}
	return ix
}

// setCritical records each span's self time on r's critical path.
func (ix *traceIndex) setCritical(r *rollup.Rollup) {
	if r == nil {
		return
	}
	for _, e := range r.CriticalPath {
		if i, ok := ix.byID[e.SpanID]; ok {
			ix.critSelf[i] += e.SelfMS
		}
	}
}

// Row is one line of the waterfall.
type Row struct {
	SpanID      string
	Name        string
	Service     string
	Operation   string
	Depth       int
	OffsetPct   float64
	WidthPct    float64
	DurationMS  float64
	CritSelfMS  float64
	Error       bool
	Children    int
	Descendants int
	Collapsed   bool
	Match       bool // matched the in-trace search
	Detail      string
	// ServiceIdx is the service's index in the trace (its colour);
	// NewService is set on a root and on a span whose service differs from
	// its parent's, the rows that name their service.
	ServiceIdx int
	NewService bool
	// More, on a windowed trace, makes the row a "more rows…" link that
	// fetches the next children of span SpanID (this URL); the row shows
	// no span.
	More string
}

// waterfallQuery is the view state carried in the URL.
type waterfallQuery struct {
	Toggled map[string]bool // spans whose default collapsed state is flipped
	Search  string
	Page    int
	// Selected is the span whose detail is open ("span="): its row is
	// highlighted, and links to other pages and expansions keep it.
	Selected string
	pageSet  bool // the URL named a page ("p=")
}

func (ix *traceIndex) defaultCollapsed(i int) bool {
	return len(ix.spans) > bigTrace && ix.depth[i] >= 1 && len(ix.children[i]) > 0
}

func (ix *traceIndex) collapsed(i int, q waterfallQuery) bool {
	return ix.defaultCollapsed(i) != q.Toggled[ix.spans[i].SpanID]
}

// matches reports whether span i matches a lower-cased search term.
func (ix *traceIndex) matches(i int, term string) bool {
	s := &ix.spans[i]
	for _, f := range []string{s.Name, s.Operation, s.ToolName, s.RequestModel, s.ResponseModel, s.ServiceName, s.SpanID, s.StatusMessage} {
		if f != "" && strings.Contains(strings.ToLower(f), term) {
			return true
		}
	}
	return false
}

// rows flattens the visible tree depth-first, starting at the given roots.
// With a search term, only matching spans and their ancestors are shown and
// nothing is collapsed.
func (ix *traceIndex) rows(roots []int, q waterfallQuery) []Row {
	term := strings.ToLower(strings.TrimSpace(q.Search))
	var keep []bool
	if term != "" {
		keep = make([]bool, len(ix.spans))
		for i := range ix.spans {
			if ix.matches(i, term) {
				for j, ok := i, true; ok && !keep[j]; {
					keep[j] = true
					p, found := ix.byID[ix.spans[j].ParentSpanID]
					ok = found && p != j
					j = p
				}
			}
		}
	}
	total := ix.end.Sub(ix.start)
	if total <= 0 {
		total = 1
	}
	var out []Row
	stack := make([]int, 0, 64)
	for k := len(roots) - 1; k >= 0; k-- {
		stack = append(stack, roots[k])
	}
	visited := make(map[int]bool)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if visited[i] || (keep != nil && !keep[i]) {
			continue
		}
		visited[i] = true
		s := &ix.spans[i]
		coll := term == "" && ix.collapsed(i, q)
		row := Row{
			SpanID: s.SpanID, Name: s.Name, Service: s.ServiceName, Operation: s.Operation, Depth: ix.depth[i],
			OffsetPct:  100 * float64(s.StartTime.Sub(ix.start)) / float64(total),
			WidthPct:   100 * float64(s.EndTime.Sub(s.StartTime)) / float64(total),
			DurationMS: float64(s.EndTime.Sub(s.StartTime)) / 1e6,
			CritSelfMS: ix.critSelf[i],
			Error:      s.StatusCode == store.StatusError,
			Children:   len(ix.children[i]), Descendants: ix.desc[i], Collapsed: coll,
			Match:  term != "" && ix.matches(i, term),
			Detail: spanDetail(s),
		}
		row.ServiceIdx = ix.svc[s.ServiceName]
		if p, ok := ix.byID[s.ParentSpanID]; !ok || p == i || ix.spans[p].ServiceName != s.ServiceName {
			row.NewService = s.ServiceName != ""
		}
		if row.WidthPct < 0 {
			row.WidthPct = 0
		}
		out = append(out, row)
		if coll {
			continue
		}
		ch := ix.children[i]
		for k := len(ch) - 1; k >= 0; k-- {
			stack = append(stack, ch[k])
		}
	}
	return out
}

func spanDetail(s *store.Span) string {
	var parts []string
	if m := s.ResponseModel; m != "" {
		parts = append(parts, m)
	} else if s.RequestModel != "" {
		parts = append(parts, s.RequestModel)
	}
	if s.ToolName != "" {
		parts = append(parts, "tool "+s.ToolName)
	}
	if s.HasUsage {
		parts = append(parts, itoa64(s.InputTokens)+"→"+itoa64(s.OutputTokens)+" tok")
	}
	if len(s.RetrievedDocs) > 0 {
		parts = append(parts, itoa64(int64(len(s.RetrievedDocs)))+" docs")
	}
	return strings.Join(parts, " · ")
}

// reveal flips the collapsed ancestors of span i open in q, so a selected
// span hidden inside a collapsed subtree gets a row.
func (ix *traceIndex) reveal(i int, q waterfallQuery) {
	seen := map[int]bool{i: true}
	for {
		p, ok := ix.byID[ix.spans[i].ParentSpanID]
		if !ok || seen[p] {
			return
		}
		seen[p] = true
		if ix.collapsed(p, q) {
			q.Toggled[ix.spans[p].SpanID] = !q.Toggled[ix.spans[p].SpanID]
		}
		i = p
	}
}

// svcPalette is how many service colours app.css defines (.svc-0 …);
// services beyond it reuse them in turn.
const svcPalette = 10

func svcClass(i int) string { return "svc-" + itoa64(int64(i%svcPalette)) }

// Tick is one mark of the waterfall's time axis.
type Tick struct {
	Pct   float64 // position, percent of the trace's span of time
	Label string
}

// Axis is the waterfall's time axis: ticks at a round step, labelled in
// one unit chosen for the trace's length.
type Axis struct {
	Ticks   []Tick
	StepPct float64 // the step as a percentage of the axis (the grid lines' spacing)
}

// axisFor lays ticks over a trace lasting total: five to ten, at a step of
// 1, 2 or 5 times a power of ten, labelled in µs, ms, s or min (whichever
// keeps the numbers short), with as many decimals as the step needs.
func axisFor(total time.Duration) Axis {
	if total <= 0 {
		return Axis{Ticks: []Tick{{0, "0"}}, StepPct: 100}
	}
	unit, name := time.Duration(1), "ns"
	switch {
	case total >= 2*time.Minute:
		unit, name = time.Minute, "min"
	case total >= time.Second:
		unit, name = time.Second, "s"
	case total >= time.Millisecond:
		unit, name = time.Millisecond, "ms"
	case total >= time.Microsecond:
		unit, name = time.Microsecond, "µs"
	}
	// A round step in the label unit, so labels read 0, 10, 20 min rather
	// than 0, 8.3, 16.7 min.
	raw := float64(total) / float64(unit) / 10
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	stepU := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw*(1-1e-9) {
			stepU = m * mag
			break
		}
	}
	step := stepU * float64(unit)
	decimals := 0
	if stepU < 1 {
		decimals = int(math.Ceil(-math.Log10(stepU) - 1e-9))
	}
	var a Axis
	a.StepPct = 100 * step / float64(total)
	for k := 0; float64(k)*step <= float64(total)*(1+1e-9); k++ {
		v := float64(k) * step / float64(unit)
		label := "0"
		if k > 0 {
			label = strconv.FormatFloat(v, 'f', decimals, 64) + " " + name
		}
		a.Ticks = append(a.Ticks, Tick{Pct: 100 * float64(k) * step / float64(total), Label: label})
	}
	return a
}

// labelMinPct is the least room (percent of the track) a bar's side label
// is placed in; with less on both sides the row has no label (its tooltip
// and the duration column still say it).
const labelMinPct = 8

// labelPlacement says where a row's label goes: "right" of its bar, "left"
// of it, or "" (nowhere). The label is kept off the bar by construction:
// it is positioned from the bar's edge outward and its width is capped to
// the room on that side (labelStyle).
func labelPlacement(r Row) string {
	end := r.OffsetPct + max(r.WidthPct, 0)
	right, left := 100-end, r.OffsetPct
	switch {
	case right >= left && right >= labelMinPct:
		return "right"
	case left >= labelMinPct:
		return "left"
	}
	return ""
}

func labelStyle(r Row) string {
	end := r.OffsetPct + max(r.WidthPct, 0)
	if labelPlacement(r) == "left" {
		return fmt.Sprintf("right:calc(%.3f%% + 6px);max-width:calc(%.3f%% - 10px)", 100-r.OffsetPct, r.OffsetPct)
	}
	return fmt.Sprintf("left:calc(%.3f%% + 6px);max-width:calc(%.3f%% - 10px)", end, 100-end)
}

// rowLabel is what a row's side label says: the span's detail (model,
// tokens, tool, documents) and its own time on the critical path.
func rowLabel(r Row) string {
	parts := []string{}
	if r.Detail != "" {
		parts = append(parts, r.Detail)
	}
	if critical(r) {
		parts = append(parts, fmtMS(r.CritSelfMS)+" on the critical path")
	}
	return strings.Join(parts, " · ")
}

// rowTitle is a row's tooltip: the full name and everything the row shows
// in short.
func rowTitle(r Row) string {
	t := r.Name + "\n" + fmtMS(r.DurationMS)
	if r.Service != "" {
		t += " · " + r.Service
	}
	if l := rowLabel(r); l != "" {
		t += "\n" + l
	}
	return t
}
