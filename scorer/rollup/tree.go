package rollup

import (
	"sort"

	"github.com/loomwork/loomwork/store"
)

// Tree is the parent/child structure of one trace, the one every view
// builds on (the rollup and critical path here, the UI's waterfall, `traces
// get`): a span whose parent never arrived, that names itself, or that sits
// on a parent cycle becomes a top of its own, and a span id repeated (a
// retried export) is kept once, its first copy.
type Tree struct {
	sorted   [][]int
	tops     []int
	orphaned []bool
}

// NewTree builds the tree of spans (one trace). Indexes are into spans.
func NewTree(spans []store.Span) *Tree {
	t := store.BuildTree(spans)
	tr := &Tree{sorted: make([][]int, len(spans)), orphaned: make([]bool, len(spans))}
	byStart := func(list []int) []int {
		out := append([]int(nil), list...)
		sort.SliceStable(out, func(a, b int) bool {
			sa, sb := &spans[out[a]], &spans[out[b]]
			if !sa.StartTime.Equal(sb.StartTime) {
				return sa.StartTime.Before(sb.StartTime)
			}
			return sa.SpanID < sb.SpanID
		})
		return out
	}
	for i, cs := range t.Children {
		if len(cs) > 0 {
			tr.sorted[i] = byStart(cs)
		}
	}
	tr.tops = byStart(t.Tops)
	ids := make(map[string]bool, len(spans))
	for i := range spans {
		ids[spans[i].SpanID] = true
	}
	for _, i := range t.Tops {
		if p := spans[i].ParentSpanID; p != "" && !ids[p] {
			tr.orphaned[i] = true
		}
	}
	return tr
}

// Tops are the spans with no parent in the tree, by start time then span
// id: the root, and the tops of fragments.
func (tr *Tree) Tops() []int { return tr.tops }

// Children are span i's children, by start time then span id.
func (tr *Tree) Children(i int) []int { return tr.sorted[i] }

// Orphaned reports whether span i names a parent that did not arrive.
func (tr *Tree) Orphaned(i int) bool { return tr.orphaned[i] }

// Walk visits every span once, parents before children, depth first in
// start order, with its depth (tops are 0). It is iterative: a very deep
// trace does not overflow the stack.
func (tr *Tree) Walk(visit func(i, depth int)) {
	type frame struct{ i, depth int }
	stack := make([]frame, 0, len(tr.tops))
	for k := len(tr.tops) - 1; k >= 0; k-- {
		stack = append(stack, frame{tr.tops[k], 0})
	}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visit(f.i, f.depth)
		cs := tr.sorted[f.i]
		for k := len(cs) - 1; k >= 0; k-- {
			stack = append(stack, frame{cs[k], f.depth + 1})
		}
	}
}
