package web

import (
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
	critSelf map[string]float64
}

func newTraceIndex(spans []store.Span, r *rollup.Rollup) *traceIndex {
	ix := &traceIndex{spans: spans, byID: make(map[string]int, len(spans)), children: make([][]int, len(spans)),
		desc: make([]int, len(spans)), depth: make([]int, len(spans)), critSelf: map[string]float64{}}
	for i := range spans {
		ix.byID[spans[i].SpanID] = i
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
	if r != nil {
		for _, e := range r.CriticalPath {
			ix.critSelf[e.SpanID] += e.SelfMS
		}
	}
	return ix
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
}

// waterfallQuery is the view state carried in the URL.
type waterfallQuery struct {
	Toggled map[string]bool // spans whose default collapsed state is flipped
	Search  string
	Page    int
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
			CritSelfMS: ix.critSelf[s.SpanID],
			Error:      s.StatusCode == store.StatusError,
			Children:   len(ix.children[i]), Descendants: ix.desc[i], Collapsed: coll,
			Match:  term != "" && ix.matches(i, term),
			Detail: spanDetail(s),
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
