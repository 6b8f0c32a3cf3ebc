package rollup

import (
	"sort"
	"time"

	"github.com/loomwork/loomwork/store"
)

// PathEntry is one span's share of the critical path: the time during which
// that span itself (not one of its children) was what the trace waited on.
type PathEntry struct {
	SpanID string `json:"span_id"` // "" for idle time between fragments of a multi-root trace
	Name   string `json:"name"`
	// StartMS is when the span's first critical segment begins, relative to
	// the trace start; entries are ordered by it.
	StartMS float64 `json:"start_ms"`
	SelfMS  float64 `json:"self_ms"`
	// Segments counts the disjoint stretches the span was critical for (a
	// parent is critical before, between and after its critical children).
	Segments int `json:"segments"`
}

// Segment is one stretch of the critical path.
type Segment struct {
	SpanID string        `json:"span_id"`
	Start  time.Duration `json:"start_ns"` // relative to the trace start
	End    time.Duration `json:"end_ns"`
}

// tree is the parent/child structure of one trace, built once and shared by
// the critical path and the cost rollup.
type tree struct {
	st       *store.Tree
	spans    []store.Bone
	children [][]int // by span index, in input order
	tops     []int   // fragment roots: true roots, orphans, cycle breakers
	roots    int     // how many tops have no parent id at all
	orphans  []string
	cycles   int
	dupIDs   int
	order    []int // breadth-first order from the tops (parents before children)
}

// buildTree takes the structure from store.BuildTreeOf, the one tree rule.
func buildTree(spans []store.Bone) *tree {
	st := store.BuildTreeOf(len(spans), func(i int) (string, string, time.Time) {
		return spans[i].SpanID, spans[i].ParentSpanID, spans[i].StartTime
	})
	t := &tree{st: st, spans: spans, children: st.Children, tops: st.Tops, roots: st.Roots, cycles: st.Cycles, order: st.Order}
	for _, i := range st.Orphans {
		t.orphans = append(t.orphans, spans[i].SpanID)
	}
	for _, d := range st.Dup {
		if d {
			t.dupIDs++
		}
	}
	return t
}

// critical is the result of the critical-path walk.
type critical struct {
	start, end time.Time // the interval the path covers
	segments   []Segment // chronological
	entries    []PathEntry
	clipped    int // spans whose interval was cut to their parent's
	detached   int // spans entirely outside their parent (not blocking)
	inverted   int // spans whose end precedes their start
}

// criticalPath computes the critical path the way CRISP (Zhang et al.,
// USENIX ATC 2022) and the Jaeger UI's TracePage/CriticalPath do: start at
// the end of the root, step back into the child that finished last before
// the current point, recurse into it, and on return continue from that
// child's start with the next-latest child that finished before it; time not
// covered by any chosen child is the parent's own (self) time. The segments
// therefore tile [root start, root end] exactly, so for one root the path
// length equals the root's wall time. Differences from Jaeger UI:
//   - a child that ends exactly when the next critical child starts is
//     eligible (Jaeger requires ending strictly before, which hands a
//     back-to-back predecessor's time to the parent);
//   - intervals are clipped top-down to the already-clipped parent, so a
//     grandchild cannot escape through a clipped parent;
//   - the walk is iterative (a 100k-deep chain does not overflow a stack);
//   - several fragments (multiple roots, orphans whose parent never arrived)
//     sit under a virtual root spanning all of them, whose self time is
//     reported as idle time with an empty span id.
func (t *tree) criticalPath() critical {
	var cp critical
	n := len(t.spans)
	if len(t.tops) == 0 {
		return cp
	}
	// Clipped intervals in nanoseconds relative to the earliest top start.
	s := make([]int64, n)
	e := make([]int64, n)
	detached := make([]bool, n)
	origin := t.spans[t.tops[0]].StartTime
	for _, r := range t.tops {
		if t.spans[r].StartTime.Before(origin) {
			origin = t.spans[r].StartTime
		}
	}
	rel := func(x time.Time) int64 { return int64(x.Sub(origin)) }
	isTop := make([]bool, n)
	for _, r := range t.tops {
		isTop[r] = true
	}
	parentOf := make([]int, n)
	for i := range parentOf {
		parentOf[i] = -1
	}
	for p, cs := range t.children {
		for _, c := range cs {
			parentOf[c] = p
		}
	}
	for _, i := range t.order {
		sp := &t.spans[i]
		si, ei := rel(sp.StartTime), rel(sp.EndTime)
		if ei < si {
			cp.inverted++
			ei = si
		}
		if p := parentOf[i]; p >= 0 && !isTop[i] {
			if detached[p] {
				detached[i] = true
				continue
			}
			ps, pe := s[p], e[p]
			switch {
			case ei < ps || si > pe || (si == pe && ei > pe) || (ei == ps && si < ps):
				// Wholly outside the parent: it cannot have blocked it
				// (fire-and-forget work, or skew too large to repair).
				detached[i] = true
				cp.detached++
				continue
			case si < ps || ei > pe:
				cp.clipped++
				si, ei = max(si, ps), min(ei, pe)
			}
		}
		s[i], e[i] = si, ei
	}

	// Children sorted by end descending (ties: longer first, then id) so a
	// single forward pointer per span finds each next-latest finisher.
	kids := make([][]int, n)
	for p, cs := range t.children {
		if detached[p] || len(cs) == 0 {
			continue
		}
		k := make([]int, 0, len(cs))
		for _, c := range cs {
			if !detached[c] {
				k = append(k, c)
			}
		}
		sort.Slice(k, func(a, b int) bool {
			x, y := k[a], k[b]
			if e[x] != e[y] {
				return e[x] > e[y]
			}
			if s[x] != s[y] {
				return s[x] < s[y]
			}
			return t.spans[x].SpanID < t.spans[y].SpanID
		})
		kids[p] = k
	}

	// The virtual root (index n) holds the tops when there are several.
	const virtual = -1
	rootNode := t.tops[0]
	var vs, ve int64
	if len(t.tops) > 1 {
		rootNode = virtual
		vs, ve = s[t.tops[0]], e[t.tops[0]]
		for _, r := range t.tops {
			vs, ve = min(vs, s[r]), max(ve, e[r])
		}
		vk := append([]int(nil), t.tops...)
		sort.Slice(vk, func(a, b int) bool {
			x, y := vk[a], vk[b]
			if e[x] != e[y] {
				return e[x] > e[y]
			}
			if s[x] != s[y] {
				return s[x] < s[y]
			}
			return t.spans[x].SpanID < t.spans[y].SpanID
		})
		kids = append(kids, vk)
	}
	start := func(i int) int64 {
		if i == virtual {
			return vs
		}
		return s[i]
	}
	end := func(i int) int64 {
		if i == virtual {
			return ve
		}
		return e[i]
	}
	children := func(i int) []int {
		if i == virtual {
			return kids[n]
		}
		return kids[i]
	}

	type frame struct {
		node int
		t    int64
		next int
	}
	type seg struct {
		node     int
		from, to int64
	}
	var segs []seg // reverse chronological
	emit := func(node int, from, to int64) {
		if to <= from {
			return
		}
		// Merge with the previous segment when the same span continues.
		if k := len(segs); k > 0 && segs[k-1].node == node && segs[k-1].from == to {
			segs[k-1].from = from
			return
		}
		segs = append(segs, seg{node: node, from: from, to: to})
	}
	stack := []frame{{node: rootNode, t: end(rootNode)}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		ch := children(f.node)
		for f.next < len(ch) && end(ch[f.next]) > f.t {
			f.next++ // finished after the current point: ran in parallel, not on the path
		}
		if f.next < len(ch) {
			c := ch[f.next]
			f.next++
			emit(f.node, end(c), f.t)
			f.t = start(c)
			stack = append(stack, frame{node: c, t: end(c)})
			continue
		}
		emit(f.node, start(f.node), f.t)
		stack = stack[:len(stack)-1]
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	cp.start = origin.Add(time.Duration(start(rootNode)))
	cp.end = origin.Add(time.Duration(end(rootNode)))
	// Report offsets relative to the path's start. Self time is summed in
	// integer nanoseconds and converted once, so the entries add up to the
	// path length exactly.
	shift := start(rootNode)
	// Entry index per span (n: the virtual root), -1 until seen.
	byNode := make([]int32, n+1)
	for i := range byNode {
		byNode[i] = -1
	}
	var selfNS []int64
	cp.segments = make([]Segment, len(segs))
	for k, sg := range segs {
		id, name := "", "(idle between trace fragments)"
		if sg.node != virtual {
			id, name = t.spans[sg.node].SpanID, t.spans[sg.node].Name
		}
		cp.segments[k] = Segment{SpanID: id, Start: time.Duration(sg.from - shift), End: time.Duration(sg.to - shift)}
		slot := sg.node
		if slot == virtual {
			slot = n
		}
		j := int(byNode[slot])
		if j < 0 {
			j = len(cp.entries)
			byNode[slot] = int32(j)
			cp.entries = append(cp.entries, PathEntry{SpanID: id, Name: name, StartMS: ms(time.Duration(sg.from - shift))})
			selfNS = append(selfNS, 0)
		}
		selfNS[j] += sg.to - sg.from
		cp.entries[j].Segments++
	}
	for j := range cp.entries {
		cp.entries[j].SelfMS = ms(time.Duration(selfNS[j]))
	}
	return cp
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
