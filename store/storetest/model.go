package storetest

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// refTrace is the reference model's view of one trace: the summary a
// backend must return, plus what the filters look at.
type refTrace struct {
	sum      store.TraceSummary
	services map[string]bool
	agents   map[string]bool
	models   map[string]bool
	names    []string
	spans    []store.Span // for the search and session filters (search.go)
	calls    []store.Call // the billed calls, in canonical order (store.CallReader)
}

// refModel holds every span the suite has written, deduplicated on
// (trace id, span id) exactly as a backend must.
type refModel struct {
	spans map[string]map[string]store.Span // trace → span → span
}

func newRefModel() *refModel {
	return &refModel{spans: map[string]map[string]store.Span{}}
}

func (m *refModel) add(spans ...store.Span) {
	for _, sp := range spans {
		t := m.spans[sp.TraceID]
		if t == nil {
			t = map[string]store.Span{}
			m.spans[sp.TraceID] = t
		}
		if _, ok := t[sp.SpanID]; !ok {
			t[sp.SpanID] = sp
		}
	}
}

// trace returns a trace's spans in GetTrace order.
func (m *refModel) trace(id string) []store.Span {
	var out []store.Span
	for _, sp := range m.spans[id] {
		out = append(out, sp)
	}
	sortSpans(out)
	return out
}

func (m *refModel) traceIDs() []string {
	var ids []string
	for id := range m.spans {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func sortSpans(spans []store.Span) {
	sort.Slice(spans, func(i, j int) bool {
		a, b := spans[i], spans[j]
		if !a.StartTime.Equal(b.StartTime) {
			return a.StartTime.Before(b.StartTime)
		}
		return a.SpanID < b.SpanID
	})
}

// earlier reports whether a starts before b, ties broken by span id.
func earlier(a, b *store.Span) bool {
	if !a.StartTime.Equal(b.StartTime) {
		return a.StartTime.Before(b.StartTime)
	}
	return a.SpanID < b.SpanID
}

// summarize computes the summary the store contract defines (see the
// package doc for the rules the contract leaves open).
func summarize(traceID string, spans []store.Span) refTrace {
	rt := refTrace{services: map[string]bool{}, agents: map[string]bool{}, models: map[string]bool{}}
	s := &rt.sum
	s.TraceID = traceID
	var root, first *store.Span
	for i := range spans {
		sp := &spans[i]
		if first == nil || earlier(sp, first) {
			first = sp
		}
		if sp.ParentSpanID == "" && (root == nil || earlier(sp, root)) {
			root = sp
		}
		if i == 0 || sp.StartTime.Before(s.Start) {
			s.Start = sp.StartTime
		}
		if i == 0 || sp.EndTime.After(s.End) {
			s.End = sp.EndTime
		}
		s.SpanCount++
		if sp.IsError() {
			s.ErrorCount++
		}
		if sp.Operation == semconv.OpExecuteTool {
			s.ToolCalls++
		}
		if sp.ServiceName != "" {
			rt.services[sp.ServiceName] = true
		}
		if sp.AgentName != "" {
			rt.agents[sp.AgentName] = true
		}
		for _, mdl := range []string{sp.RequestModel, sp.ResponseModel} {
			if mdl != "" {
				rt.models[mdl] = true
			}
		}
		rt.names = append(rt.names, sp.Name)
	}
	if root != nil {
		s.RootName = root.Name
		s.ServiceName = root.ServiceName
	} else if first != nil {
		s.ServiceName = first.ServiceName
	}
	s.Start, s.End = s.Start.UTC(), s.End.UTC()
	s.Duration = s.End.Sub(s.Start)
	s.AgentNames = sortedSet(rt.agents)
	s.Models = sortedSet(rt.models)
	rt.calls = refBilling(spans, s)
	s.Groups = refGroups(rt.calls)
	if s.Fragments == 1 && root != nil && s.End.After(root.EndTime) {
		s.AfterRoot = s.End.Sub(root.EndTime)
	}
	labels := map[string]bool{}
	for i := range spans {
		if l, ok := spans[i].Attributes.String(semconv.AttrModelLabel); ok && l != "" {
			labels[l] = true
		}
	}
	s.ModelLabels = sortedSet(labels)
	return rt
}

// refBilling applies the billing rule the naive way, independently of
// store.Summarize: walk up from every span carrying usage (or a finite
// explicit cost) and mark its ancestors; a span carrying usage or making a
// model call is billed unless marked. It also counts the fragments: spans
// with no parent in the trace, plus one per parent cycle. spans are
// distinct and in GetTrace order. It returns the billed calls, in that
// order.
func refBilling(spans []store.Span, s *store.TraceSummary) []store.Call {
	byID := map[string]int{}
	for i := range spans {
		byID[spans[i].SpanID] = i
	}
	cost := func(sp *store.Span) *float64 {
		if sp.CostUSD == nil || math.IsNaN(*sp.CostUSD) || math.IsInf(*sp.CostUSD, 0) {
			return nil
		}
		return sp.CostUSD
	}
	carries := func(sp *store.Span) bool { return sp.HasUsage || cost(sp) != nil }
	var calls []store.Call
	marked := make([]bool, len(spans))
	for i := range spans {
		if !carries(&spans[i]) {
			continue
		}
		seen := map[int]bool{i: true}
		for p, ok := byID[spans[i].ParentSpanID]; ok && !seen[p]; p, ok = byID[spans[p].ParentSpanID] {
			seen[p] = true
			marked[p] = true
		}
	}
	for i := range spans {
		sp := &spans[i]
		if marked[i] || !(carries(sp) || semconv.IsModelCallOperation(sp.Operation)) {
			continue
		}
		c := store.Call{SpanID: sp.SpanID, Name: sp.Name, Start: sp.StartTime.UTC(), RequestModel: sp.RequestModel,
			ResponseModel: sp.ResponseModel, Failed: sp.IsError(), HasUsage: sp.HasUsage, CostUSD: cost(sp)}
		s.ModelCalls++
		if c.Failed {
			s.FailedModelCalls++
		}
		if sp.HasUsage {
			c.InputTokens, c.OutputTokens, c.CacheReadTokens = sp.InputTokens, sp.OutputTokens, sp.CacheReadTokens
			c.CacheCreationTokens, c.ReasoningTokens = sp.CacheCreationTokens, sp.ReasoningTokens
			cr, cc, in := max(sp.CacheReadTokens, 0), max(sp.CacheCreationTokens, 0), max(sp.InputTokens, 0)
			if in < cr+cc { // Anthropic's raw convention: input excludes the cache
				in += cr + cc
			}
			s.InputTokens += in
			s.OutputTokens += max(sp.OutputTokens, 0)
			s.CacheReadTokens += cr
			s.CacheCreationTokens += cc
			s.ReasoningTokens += max(sp.ReasoningTokens, 0)
		}
		calls = append(calls, c)
	}
	// Fragments: tops, then one per cycle left unreached.
	children := map[int][]int{}
	var tops []int
	for i := range spans {
		p, ok := byID[spans[i].ParentSpanID]
		if spans[i].ParentSpanID == "" || !ok || p == i {
			tops = append(tops, i)
			continue
		}
		children[p] = append(children[p], i)
	}
	reached := make([]bool, len(spans))
	var reach func(i int)
	reach = func(i int) {
		if reached[i] {
			return
		}
		reached[i] = true
		for _, c := range children[i] {
			reach(c)
		}
	}
	for _, i := range tops {
		reach(i)
		s.Fragments++
	}
	for i := range spans {
		if !reached[i] {
			s.Fragments++
			reach(i)
		}
	}
	return calls
}

// refGroups sums calls per (request model, response model) the naive way,
// independently of store.GroupCalls, as store.CallGroup documents it.
func refGroups(calls []store.Call) []store.CallGroup {
	byKey := map[[2]string]*store.CallGroup{}
	for _, c := range calls {
		k := [2]string{c.RequestModel, c.ResponseModel}
		g := byKey[k]
		if g == nil {
			g = &store.CallGroup{RequestModel: k[0], ResponseModel: k[1]}
			byKey[k] = g
		}
		g.Calls++
		if c.Failed {
			g.Failed++
		}
		cr, cc, out := max(c.CacheReadTokens, 0), max(c.CacheCreationTokens, 0), max(c.OutputTokens, 0)
		in, raw := max(c.InputTokens, 0), false
		if in < cr+cc { // Anthropic's raw convention: input excludes the cache
			in, raw = in+cr+cc, true
		}
		if c.HasUsage {
			g.InputTokens += in
			g.OutputTokens += out
			g.CacheReadTokens += cr
			g.CacheCreationTokens += cc
			g.ReasoningTokens += max(c.ReasoningTokens, 0)
		}
		switch {
		case c.CostUSD != nil:
			g.ExplicitCalls++
			if math.Abs(*c.CostUSD) > 1e6 {
				g.ExplicitOutOfRange++
				break
			}
			pico := int64(math.Round(*c.CostUSD * 1e12))
			g.ExplicitPicoUSD += pico
			g.ExplicitMagnitude += max(pico, -pico) >> 20
		case !c.HasUsage && c.Failed:
			g.FailedNoUsage++
		case !c.HasUsage:
			g.NoUsage++
		default:
			if g.Priced == 0 || in < g.MinPrompt {
				g.MinPrompt = in
			}
			if g.Priced == 0 || in > g.MaxPrompt {
				g.MaxPrompt = in
			}
			g.Priced++
			g.PricedUncached += in - cr - cc
			g.PricedCacheRead += cr
			g.PricedCacheCreation += cc
			g.PricedOutput += out
			if raw {
				g.Raw++
			}
		}
	}
	if len(byKey) == 0 {
		return nil
	}
	out := make([]store.CallGroup, 0, len(byKey))
	for _, g := range byKey {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].RequestModel != out[j].RequestModel {
			return out[i].RequestModel < out[j].RequestModel
		}
		return out[i].ResponseModel < out[j].ResponseModel
	})
	return out
}

func sortedSet(m map[string]bool) []string {
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

func (m *refModel) summaries() []refTrace {
	var out []refTrace
	for _, id := range m.traceIDs() {
		spans := m.trace(id)
		rt := summarize(id, spans)
		rt.spans = spans
		out = append(out, rt)
	}
	return out
}

// matches applies the filters of q (not sort or paging).
func (rt *refTrace) matches(q store.TraceQuery) bool {
	s := rt.sum
	if !q.Start.IsZero() && s.Start.Before(q.Start) {
		return false
	}
	if !q.End.IsZero() && !s.Start.Before(q.End) {
		return false
	}
	if q.Service != "" && !rt.services[q.Service] {
		return false
	}
	if q.Agent != "" && !rt.agents[q.Agent] {
		return false
	}
	if q.Model != "" && !rt.models[q.Model] {
		return false
	}
	switch q.Status {
	case store.StatusOK:
		if s.ErrorCount > 0 {
			return false
		}
	case store.StatusError:
		if s.ErrorCount == 0 {
			return false
		}
	}
	if q.MinDuration > 0 && s.Duration < q.MinDuration {
		return false
	}
	if q.Text != "" {
		text := strings.ToLower(q.Text)
		found := false
		for _, n := range rt.names {
			if strings.Contains(strings.ToLower(n), text) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return rt.matchesSearch(q)
}

func sortValue(s *store.TraceSummary, key string) int64 {
	switch key {
	case store.SortDuration:
		return int64(s.Duration)
	case store.SortSpans:
		return s.SpanCount
	case store.SortErrors:
		return s.ErrorCount
	case store.SortTokens:
		return s.InputTokens + s.OutputTokens
	default:
		return s.Start.UnixNano()
	}
}

// expect returns every summary matching q in q's order (all pages).
func (m *refModel) expect(q store.TraceQuery) []store.TraceSummary {
	var out []store.TraceSummary
	for _, rt := range m.summaries() {
		if rt.matches(q) {
			out = append(out, rt.sum)
		}
	}
	key := q.SortBy
	sort.Slice(out, func(i, j int) bool {
		a, b := sortValue(&out[i], key), sortValue(&out[j], key)
		less := a < b || (a == b && out[i].TraceID < out[j].TraceID)
		if q.Ascending {
			return less
		}
		return !less && !(a == b && out[i].TraceID == out[j].TraceID)
	})
	return out
}

// normTime returns t in UTC, so times compare by instant.
func normTime(t time.Time) time.Time { return t.UTC() }
