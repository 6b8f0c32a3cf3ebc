package store

import (
	"cmp"
	"slices"
	"time"

	"github.com/loomwork/loomwork/semconv"
)

// SummaryBuilder keeps a trace's summary current as its spans arrive, in
// any order and in any number of batches: after any sequence of Add calls,
// Summary returns exactly what Summarize returns for every span added. An
// Add costs what its batch costs plus a walk up the tree from each span
// that carries usage, not the size of the trace, so a store can keep the
// summary of a 100,000-span trace exported 512 spans at a time without
// re-reading it per batch.
//
// A span id already added is ignored (the first copy wins, as stores keep
// it). A batch that closes a parent cycle (malformed input) switches the
// builder to recomputing with Summarize's tree on every Summary.
type SummaryBuilder struct {
	nodes   []bnode
	idx     map[string]int32
	waiting map[string][]int32 // a parent id not added yet → the spans naming it

	errors, toolCalls, fragments int64
	first, root                  int32 // earliest span, earliest parentless span; -1 when none
	end                          time.Time
	agents, models, labels       map[string]struct{}

	sums   TraceSummary // the billed calls' counts and tokens (countCall)
	cyclic bool

	// groups are the billed calls' CallGroups; a group in stale had a call
	// removed whose prompt bounded its range, recomputed by Summary.
	groups map[groupKey]*CallGroup
	stale  map[groupKey]bool
}

// bnode is what the builder keeps of a span.
type bnode struct {
	span   Span // the typed fields Summarize reads; no attributes
	parent int32
	// below: a descendant carries usage. carries, modelOp: the span's own.
	below, carries, modelOp bool
	role                    Role
}

// NewSummaryBuilder returns an empty builder.
func NewSummaryBuilder() *SummaryBuilder {
	return &SummaryBuilder{
		idx: map[string]int32{}, waiting: map[string][]int32{}, first: -1, root: -1,
		agents: map[string]struct{}{}, models: map[string]struct{}{}, labels: map[string]struct{}{},
		groups: map[groupKey]*CallGroup{}, stale: map[groupKey]bool{},
	}
}

// Len is the number of distinct spans added.
func (b *SummaryBuilder) Len() int { return len(b.nodes) }

// Has reports whether a span id was added.
func (b *SummaryBuilder) Has(spanID string) bool {
	_, ok := b.idx[spanID]
	return ok
}

// AddLabels adds model labels that spans added without their attributes
// carried (a store rebuilding a builder from its typed columns).
func (b *SummaryBuilder) AddLabels(labels ...string) {
	for _, l := range labels {
		if l != "" {
			b.labels[l] = struct{}{}
		}
	}
}

// before orders spans canonically: start time, then span id.
func before(a, b *Span) bool {
	if c := a.StartTime.Compare(b.StartTime); c != 0 {
		return c < 0
	}
	return a.SpanID < b.SpanID
}

// Add adds spans and returns the billed calls this batch added and removed
// (a call becomes an aggregate when a descendant carrying usage arrives).
// Neither list is in any particular order.
func (b *SummaryBuilder) Add(spans []Span) (added, removed []Call) {
	return b.add(spans, nil)
}

// add is Add taking spans in the order of the indexes order (all of them,
// in their own order, when order is nil).
func (b *SummaryBuilder) add(spans []Span, order []int) (added, removed []Call) {
	var before0 map[string]Call
	if b.cyclic {
		before0 = b.callSet()
	}
	start := len(b.nodes)
	b.nodes = slices.Grow(b.nodes, len(spans))
	for k := range spans {
		i := k
		if order != nil {
			i = order[k]
		}
		sp := &spans[i]
		if _, dup := b.idx[sp.SpanID]; dup {
			continue
		}
		n := int32(len(b.nodes))
		b.idx[sp.SpanID] = n
		light := Span{
			TraceID: sp.TraceID, SpanID: sp.SpanID, ParentSpanID: sp.ParentSpanID, Name: sp.Name,
			StartTime: sp.StartTime, EndTime: sp.EndTime, StatusCode: sp.StatusCode, ServiceName: sp.ServiceName,
			Operation: sp.Operation, RequestModel: sp.RequestModel, ResponseModel: sp.ResponseModel, AgentName: sp.AgentName,
			HasUsage: sp.HasUsage, CostUSD: sp.ExplicitCost(),
			InputTokens: sp.InputTokens, OutputTokens: sp.OutputTokens, CacheReadTokens: sp.CacheReadTokens,
			CacheCreationTokens: sp.CacheCreationTokens, ReasoningTokens: sp.ReasoningTokens,
		}
		b.nodes = append(b.nodes, bnode{span: light, parent: -1, carries: light.CarriesUsage(), modelOp: semconv.IsModelCallOperation(sp.Operation)})
		nd := &b.nodes[n].span
		if b.first < 0 || before(nd, &b.nodes[b.first].span) {
			b.first = n
		}
		if n == 0 || nd.EndTime.After(b.end) {
			b.end = nd.EndTime
		}
		if sp.ParentSpanID == "" && (b.root < 0 || before(nd, &b.nodes[b.root].span)) {
			b.root = n
		}
		if sp.IsError() {
			b.errors++
		}
		if sp.Operation == semconv.OpExecuteTool {
			b.toolCalls++
		}
		if sp.AgentName != "" {
			b.agents[sp.AgentName] = struct{}{}
		}
		for _, m := range [2]string{sp.RequestModel, sp.ResponseModel} {
			if m != "" {
				b.models[m] = struct{}{}
			}
		}
		if l, ok := sp.Attributes.String(semconv.AttrModelLabel); ok && l != "" {
			b.labels[l] = struct{}{}
		}
	}
	if len(b.nodes) == start {
		return nil, nil
	}
	// Link the new spans: to a parent already here, else wait for it; and
	// adopt the spans that were waiting for them.
	adopted := map[int32][]int32{}
	var adopters []int32
	for n := int32(start); n < int32(len(b.nodes)); n++ {
		nd := &b.nodes[n]
		p := nd.span.ParentSpanID
		switch pi, ok := b.idx[p]; {
		case p == "", ok && pi == n: // a root, or a span naming itself
			b.fragments++
		case ok:
			nd.parent = pi
		default:
			b.waiting[p] = append(b.waiting[p], n)
			b.fragments++
		}
		if kids, ok := b.waiting[nd.span.SpanID]; ok {
			delete(b.waiting, nd.span.SpanID)
			for _, c := range kids {
				b.nodes[c].parent = n
				b.fragments--
			}
			adopted[n] = kids
			adopters = append(adopters, n)
		}
	}
	// A cycle, if this batch closed one, runs through a new span: walk up
	// from each, each span at most once per batch (a walk stops at a span
	// an earlier walk finished; meeting its own path again is a cycle).
	state := map[int32]uint8{} // 1: on the current walk, 2: finished
	var path []int32
	for n := int32(start); n < int32(len(b.nodes)) && !b.cyclic; n++ {
		path = path[:0]
		p := n
		for p >= 0 && state[p] == 0 {
			state[p] = 1
			path = append(path, p)
			p = b.nodes[p].parent
		}
		if p >= 0 && state[p] == 1 {
			b.cyclic = true
		}
		for _, q := range path {
			state[q] = 2
		}
	}
	if b.cyclic {
		if before0 == nil {
			// Turned cyclic in this batch: the roles still hold the
			// billed set from before it.
			before0 = map[string]Call{}
			for n := int32(0); n < int32(start); n++ {
				if b.nodes[n].role == RoleCall {
					before0[b.nodes[n].span.SpanID] = b.callOf(n)
				}
			}
		}
		return diffCalls(before0, b.callSet())
	}
	// Mark the ancestors of what now carries usage below them; a billed
	// call so marked becomes an aggregate (or nothing, without usage of
	// its own). Marks stop at a span already marked: its ancestors are.
	mark := func(from int32) {
		for a := from; a >= 0 && !b.nodes[a].below; a = b.nodes[a].parent {
			nd := &b.nodes[a]
			nd.below = true
			if nd.role == RoleCall {
				removed = append(removed, b.unbill(a))
			}
			if nd.carries {
				nd.role = RoleAggregate
			} else {
				nd.role = RoleNone
			}
		}
	}
	for n := int32(start); n < int32(len(b.nodes)); n++ {
		if b.nodes[n].carries {
			mark(b.nodes[n].parent)
		}
	}
	for _, a := range adopters {
		for _, c := range adopted[a] {
			if b.nodes[c].below || b.nodes[c].carries {
				mark(a)
				break
			}
		}
	}
	for n := int32(start); n < int32(len(b.nodes)); n++ {
		nd := &b.nodes[n]
		if nd.below || !(nd.carries || nd.modelOp) {
			continue
		}
		nd.role = RoleCall
		added = append(added, b.bill(n))
	}
	return added, removed
}

// callOf is node n as a billed call.
func (b *SummaryBuilder) callOf(n int32) Call { return callOf(&b.nodes[n].span) }

func (b *SummaryBuilder) bill(n int32) Call   { return b.count(n, 1) }
func (b *SummaryBuilder) unbill(n int32) Call { return b.count(n, -1) }

// count adds (sign 1) or removes (-1) node n's call from the sums and its
// group.
func (b *SummaryBuilder) count(n int32, sign int64) Call {
	c := b.callOf(n)
	b.sums.countCall(c, sign)
	k := c.groupKey()
	g := b.groups[k]
	if g == nil {
		g = &CallGroup{RequestModel: k.req, ResponseModel: k.resp}
		b.groups[k] = g
	}
	if g.add(&c, sign) {
		b.stale[k] = true
	}
	if g.Calls == 0 {
		delete(b.groups, k)
		delete(b.stale, k)
	}
	return c
}

// callGroups returns the groups, sorted, first recomputing the prompt
// range of the stale ones from the billed nodes.
func (b *SummaryBuilder) callGroups() []CallGroup {
	if len(b.groups) == 0 {
		return nil
	}
	for k := range b.stale {
		b.groups[k].setPromptRange(func(yield func(*Call) bool) {
			for n := range b.nodes {
				if b.nodes[n].role != RoleCall {
					continue
				}
				sp := &b.nodes[n].span
				if sp.RequestModel != k.req || sp.ResponseModel != k.resp {
					continue
				}
				c := b.callOf(int32(n))
				if !yield(&c) {
					return
				}
			}
		})
		delete(b.stale, k)
	}
	out := make([]CallGroup, 0, len(b.groups))
	for _, g := range b.groups {
		out = append(out, *g)
	}
	sortGroups(out)
	return out
}

// Summary returns the trace's summary, with its billed calls in canonical
// order (start, span id).
func (b *SummaryBuilder) Summary() TraceSummary { return b.summary(true) }

// Figures is Summary without the list of calls (which a store that keeps
// the calls apart, by Add's deltas, need not rebuild per batch): what a
// list row holds, the call groups included.
func (b *SummaryBuilder) Figures() TraceSummary { return b.summary(false) }

func (b *SummaryBuilder) summary(withCalls bool) TraceSummary {
	var s TraceSummary
	if len(b.nodes) == 0 {
		return s
	}
	if b.cyclic {
		s = summarizeTree(b.lightSpans())
		if !withCalls {
			s.Calls = nil
		}
	} else {
		first := &b.nodes[b.first].span
		s.TraceID = first.TraceID
		s.ServiceName = first.ServiceName
		s.Start, s.End = first.StartTime, b.end
		s.SpanCount = int64(len(b.nodes))
		s.ErrorCount, s.ToolCalls, s.Fragments = b.errors, b.toolCalls, b.fragments
		s.ModelCalls, s.FailedModelCalls = b.sums.ModelCalls, b.sums.FailedModelCalls
		s.InputTokens, s.OutputTokens, s.ReasoningTokens = b.sums.InputTokens, b.sums.OutputTokens, b.sums.ReasoningTokens
		s.CacheReadTokens, s.CacheCreationTokens = b.sums.CacheReadTokens, b.sums.CacheCreationTokens
		s.Groups = b.callGroups()
		if b.root >= 0 {
			root := &b.nodes[b.root].span
			s.RootName, s.ServiceName = root.Name, root.ServiceName
			if after := s.End.Sub(root.EndTime); after > 0 && s.Fragments == 1 {
				s.AfterRoot = after
			}
		}
		var billed []int32
		for n := range b.nodes {
			if !withCalls {
				break
			}
			if b.nodes[n].role == RoleCall {
				billed = append(billed, int32(n))
			}
		}
		slices.SortFunc(billed, func(x, y int32) int {
			sx, sy := &b.nodes[x].span, &b.nodes[y].span
			if c := sx.StartTime.Compare(sy.StartTime); c != 0 {
				return c
			}
			return cmp.Compare(sx.SpanID, sy.SpanID)
		})
		for _, n := range billed {
			s.Calls = append(s.Calls, b.callOf(n))
		}
		s.Start, s.End = s.Start.UTC(), s.End.UTC()
		s.Duration = s.End.Sub(s.Start)
		s.AgentNames, s.Models = sortedSet(b.agents), sortedSet(b.models)
	}
	s.ModelLabels = sortedSet(b.labels)
	return s
}

// lightSpans are the spans added, in canonical order.
func (b *SummaryBuilder) lightSpans() []Span {
	out := make([]Span, len(b.nodes))
	for i := range b.nodes {
		out[i] = b.nodes[i].span
	}
	slices.SortFunc(out, func(x, y Span) int {
		if c := x.StartTime.Compare(y.StartTime); c != 0 {
			return c
		}
		return cmp.Compare(x.SpanID, y.SpanID)
	})
	return out
}

// callSet is the billed calls by span id (for a cyclic builder, whose roles
// are recomputed by Summary rather than kept).
func (b *SummaryBuilder) callSet() map[string]Call {
	out := map[string]Call{}
	for _, c := range b.Summary().Calls {
		out[c.SpanID] = c
	}
	return out
}

func diffCalls(was, now map[string]Call) (added, removed []Call) {
	for id, c := range now {
		if _, ok := was[id]; !ok {
			added = append(added, c)
		}
	}
	for id, c := range was {
		if _, ok := now[id]; !ok {
			removed = append(removed, c)
		}
	}
	return added, removed
}

func sortedSet(m map[string]struct{}) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
