package store

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/loomwork/loomwork/semconv"
)

// This file holds the one rule that turns a trace's spans into the figures
// every view shows of it: the trace list (both backends, the JSON API, the
// CLI, the UI), the rollup, the trace page and `traces get`. A figure shown
// for a trace anywhere comes from Summarize, so two views of one trace
// cannot disagree, whatever order its spans arrived in.

// Call is one billed model call of a trace: a span that made a provider
// call (it reports usage or an explicit cost, or its operation is a model
// call) and none of whose descendants reports usage. Token counts are as the
// sender reported them; SplitUsage reads them.
type Call struct {
	SpanID        string    `json:"span_id"`
	Name          string    `json:"name"`
	Start         time.Time `json:"start"`
	RequestModel  string    `json:"request_model,omitempty"`
	ResponseModel string    `json:"response_model,omitempty"`
	Failed        bool      `json:"failed,omitempty"`
	// HasUsage is false for a call that reported no token counts.
	HasUsage            bool  `json:"has_usage,omitempty"`
	InputTokens         int64 `json:"input_tokens,omitempty"`
	OutputTokens        int64 `json:"output_tokens,omitempty"`
	CacheReadTokens     int64 `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
	ReasoningTokens     int64 `json:"reasoning_tokens,omitempty"`
	// CostUSD is the sender's explicit cost, nil when it set none.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// Model is the model name a call is reported under: the response model,
// else the request model, else "".
func (c *Call) Model() string {
	if c.ResponseModel != "" {
		return c.ResponseModel
	}
	return c.RequestModel
}

// Usage is a call's tokens split the way providers bill them: Uncached is
// input that was neither read from nor written to a cache.
type Usage struct {
	Uncached, CacheRead, CacheCreation, Output int64
}

// Input is all input tokens, cached or not: what the GenAI convention's
// gen_ai.usage.input_tokens counts.
func (u Usage) Input() int64 { return u.Uncached + u.CacheRead + u.CacheCreation }

// SplitUsage reads a call's reported tokens. In the GenAI convention input
// includes cache reads and writes; when input is smaller than the two cache
// counts, the sender used Anthropic's raw convention (input excludes both),
// so input is taken as the uncached part and raw is true. Negative counts
// are read as 0.
func SplitUsage(input, cacheRead, cacheCreation, output int64) (u Usage, raw bool) {
	u.CacheRead = max(cacheRead, 0)
	u.CacheCreation = max(cacheCreation, 0)
	u.Output = max(output, 0)
	in := max(input, 0)
	if in < u.CacheRead+u.CacheCreation {
		u.Uncached = in
		return u, true
	}
	u.Uncached = in - u.CacheRead - u.CacheCreation
	return u, false
}

// Usage is the call's tokens, split; raw as SplitUsage reports it.
func (c *Call) Usage() (u Usage, raw bool) {
	return SplitUsage(c.InputTokens, c.CacheReadTokens, c.CacheCreationTokens, c.OutputTokens)
}

// CanonicalOrder returns the indexes of spans ordered by start time, then
// span id, then position: the order GetTrace returns spans in, and the one
// every sum and list of a trace is taken in, so a file read in any order
// and the store give identical results.
func CanonicalOrder(spans []Span) []int {
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := spans[a].StartTime.Compare(spans[b].StartTime); c != 0 {
			return c
		}
		if c := cmp.Compare(spans[a].SpanID, spans[b].SpanID); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

// Tree is the parent/child structure of one trace, in the order of the
// spans it was built from: a span whose parent never arrived (an orphan),
// that names itself, or that sits on a parent cycle becomes a top of its
// own, and a span id repeated (a retried export) is kept once, its first
// copy. Indexes are into the spans given to BuildTree.
type Tree struct {
	// Children lists each span's children, in input order.
	Children [][]int
	// Tops are the spans without a parent in the tree, in input order:
	// the root(s), orphans and cycle breakers.
	Tops []int
	// Roots counts the tops that name no parent at all.
	Roots int
	// Orphans are the tops whose parent is not in the trace.
	Orphans []int
	// Cycles counts the parent links broken to end a cycle (a span naming
	// itself counts as one).
	Cycles int
	// Dup marks the repeated copies of a span id (every copy after the
	// first); they take no part in the tree.
	Dup []bool
	// Order is every kept span once, breadth first from the tops: parents
	// before children.
	Order []int
}

// BuildTree builds the tree of spans (one trace).
func BuildTree(spans []Span) *Tree {
	return BuildTreeOf(len(spans), func(i int) (string, string, time.Time) {
		return spans[i].SpanID, spans[i].ParentSpanID, spans[i].StartTime
	})
}

// BuildTreeOf is BuildTree over n spans given by at: span i's id, parent
// id and start time. It is the one tree rule for spans held whole and for
// a trace's bones (Bone) alike.
func BuildTreeOf(n int, at func(i int) (id, parent string, start time.Time)) *Tree {
	t := &Tree{Children: make([][]int, n), Dup: make([]bool, n)}
	idx := make(map[string]int, n)
	ids := make([]string, n)
	parents := make([]string, n)
	for i := range n {
		ids[i], parents[i], _ = at(i)
		if _, dup := idx[ids[i]]; dup {
			t.Dup[i] = true
			continue
		}
		idx[ids[i]] = i
	}
	for i := range n {
		if t.Dup[i] {
			continue
		}
		p := parents[i]
		switch pi, ok := idx[p]; {
		case p == "":
			t.Tops = append(t.Tops, i)
			t.Roots++
		case !ok:
			t.Tops = append(t.Tops, i)
			t.Orphans = append(t.Orphans, i)
		case pi == i:
			t.Tops = append(t.Tops, i)
			t.Cycles++
		default:
			t.Children[pi] = append(t.Children[pi], i)
		}
	}
	visited := make([]bool, n)
	t.Order = make([]int, 0, n)
	bfs := func(from int) {
		q := len(t.Order)
		visited[from] = true
		t.Order = append(t.Order, from)
		for ; q < len(t.Order); q++ {
			for _, c := range t.Children[t.Order[q]] {
				if !visited[c] {
					visited[c] = true
					t.Order = append(t.Order, c)
				}
			}
		}
	}
	for _, r := range t.Tops {
		bfs(r)
	}
	// Whatever is left sits on a parent cycle (A→B→A). Break each cycle at
	// its earliest-starting span so every span is still counted once.
	for {
		best := -1
		var bestStart time.Time
		for i := range n {
			if t.Dup[i] || visited[i] {
				continue
			}
			if _, _, st := at(i); best < 0 || st.Before(bestStart) {
				best, bestStart = i, st
			}
		}
		if best < 0 {
			break
		}
		t.Cycles++
		pi := idx[parents[best]]
		t.Children[pi] = slices.DeleteFunc(t.Children[pi], func(c int) bool { return c == best })
		t.Tops = append(t.Tops, best)
		bfs(best)
	}
	return t
}

// CarriesUsage reports whether a span reports usage or an explicit cost:
// either makes it billed unless a descendant carries usage too.
func (s *Span) CarriesUsage() bool { return s.HasUsage || s.ExplicitCost() != nil }

// ExplicitCost is the cost the sender set, nil when it set none or set a
// value that is no cost (NaN or infinite: backends store those differently,
// and no price is infinite).
func (s *Span) ExplicitCost() *float64 {
	if s.CostUSD == nil || math.IsNaN(*s.CostUSD) || math.IsInf(*s.CostUSD, 0) {
		return nil
	}
	return s.CostUSD
}

// Role is what the billing rule makes of a span: a billed call (RoleCall),
// an aggregate whose usage repeats its descendants' (RoleAggregate), or
// neither (RoleNone).
type Role uint8

// Roles of a span in the billing rule.
const (
	RoleNone Role = iota
	// RoleCall is a billed call: it carries usage or its operation is a
	// model call, and no descendant carries usage.
	RoleCall
	// RoleAggregate carries usage, but so does a descendant: its usage
	// attributes are copies (an agent or chain span summing its model
	// calls, an LLM span wrapping the provider SDK's own) and are not
	// added again.
	RoleAggregate
)

// Roles applies the billing rule to the spans of t. A model-call span
// without usage whose descendant carries usage is RoleNone: the descendant
// is the call.
func Roles(spans []Span, t *Tree) []Role {
	return RolesOf(len(spans), t, func(i int) bool { return spans[i].CarriesUsage() },
		func(i int) bool { return semconv.IsModelCallOperation(spans[i].Operation) })
}

// RolesOf is Roles over n spans of tree t given by carries (span i carries
// usage or an explicit cost) and modelOp (its operation is a model call):
// the one billing rule for spans held whole and for bones alike.
func RolesOf(n int, t *Tree, carries, modelOp func(i int) bool) []Role {
	roles := make([]Role, n)
	below := make([]bool, n)
	// Children before parents: reverse breadth-first order.
	for k := len(t.Order) - 1; k >= 0; k-- {
		i := t.Order[k]
		for _, c := range t.Children[i] {
			if below[c] || carries(c) {
				below[i] = true
				break
			}
		}
	}
	for _, i := range t.Order {
		switch {
		case below[i] && carries(i):
			roles[i] = RoleAggregate
		case below[i]:
		case carries(i) || modelOp(i):
			roles[i] = RoleCall
		}
	}
	return roles
}

// Summarize derives a trace's summary from its spans, given in any order
// (a span id given twice counts once). TraceID is the first span's trace
// id. The rule:
//
//   - Start and End span every span; Duration is End − Start, so work that
//     outlives its parent (async) is inside it, and AfterRoot says how much
//     of it came after the root ended (for a trace of one fragment; with
//     several, Fragments says so and the time between them is no async
//     work of the root's).
//   - RootName and ServiceName are the earliest-starting parentless span's
//     (ties: the smaller span id); without one, ServiceName is the
//     earliest span's.
//   - ModelCalls and the token sums cover the billed calls (Roles) only,
//     each call's input counted with its cache reads and writes (SplitUsage).
//   - ToolCalls counts execute_tool spans, ErrorCount spans with an error
//     status.
//   - ModelLabels are the loomwork.model.label values the spans carry.
func Summarize(spans []Span) TraceSummary {
	// In canonical order, so that of two copies of a span id the first in
	// that order counts, as in BuildTree over canonically ordered spans.
	b := NewSummaryBuilder()
	b.add(spans, CanonicalOrder(spans))
	return b.Summary()
}

// summarizeTree is Summarize by BuildTree and Roles over the whole trace:
// what SummaryBuilder falls back to for a trace with a parent cycle, and
// the reference its tests compare it with.
func summarizeTree(spans []Span) TraceSummary {
	var s TraceSummary
	if len(spans) == 0 {
		return s
	}
	order := CanonicalOrder(spans)
	sorted := make([]Span, len(spans))
	for k, i := range order {
		sorted[k] = spans[i]
	}
	t := BuildTree(sorted)
	roles := Roles(sorted, t)
	s.TraceID = sorted[0].TraceID
	s.Fragments = int64(len(t.Tops))
	agents, models, labels := map[string]struct{}{}, map[string]struct{}{}, map[string]struct{}{}
	root := -1
	for i := range sorted {
		if t.Dup[i] {
			continue
		}
		sp := &sorted[i]
		if s.SpanCount == 0 {
			s.Start, s.End = sp.StartTime, sp.EndTime
			s.ServiceName = sp.ServiceName // the earliest span's, until a root is found
		} else {
			s.End = maxTime(s.End, sp.EndTime)
		}
		s.SpanCount++
		if sp.ParentSpanID == "" && root < 0 {
			root = i
		}
		if sp.IsError() {
			s.ErrorCount++
		}
		if sp.Operation == semconv.OpExecuteTool {
			s.ToolCalls++
		}
		if sp.AgentName != "" {
			agents[sp.AgentName] = struct{}{}
		}
		for _, m := range [2]string{sp.RequestModel, sp.ResponseModel} {
			if m != "" {
				models[m] = struct{}{}
			}
		}
		if l, ok := sp.Attributes.String(semconv.AttrModelLabel); ok && l != "" {
			labels[l] = struct{}{}
		}
		if roles[i] != RoleCall {
			continue
		}
		c := callOf(sp)
		s.Calls = append(s.Calls, c)
		s.countCall(c, 1)
	}
	if root >= 0 {
		s.RootName, s.ServiceName = sorted[root].Name, sorted[root].ServiceName
		if after := s.End.Sub(sorted[root].EndTime); after > 0 && len(t.Tops) == 1 {
			s.AfterRoot = after
		}
	}
	s.Start, s.End = s.Start.UTC(), s.End.UTC()
	s.Duration = s.End.Sub(s.Start)
	s.AgentNames, s.Models, s.ModelLabels = sortedSet(agents), sortedSet(models), sortedSet(labels)
	s.Groups = GroupCalls(s.Calls)
	return s
}

// callOf is a billed span as a Call: its usage only when it reported some,
// its explicit cost only when it is a cost (ExplicitCost).
func callOf(sp *Span) Call {
	c := Call{
		SpanID: sp.SpanID, Name: sp.Name, Start: sp.StartTime,
		RequestModel: sp.RequestModel, ResponseModel: sp.ResponseModel, Failed: sp.IsError(),
		HasUsage: sp.HasUsage, CostUSD: sp.ExplicitCost(),
	}
	if sp.HasUsage {
		c.InputTokens, c.OutputTokens = sp.InputTokens, sp.OutputTokens
		c.CacheReadTokens, c.CacheCreationTokens, c.ReasoningTokens = sp.CacheReadTokens, sp.CacheCreationTokens, sp.ReasoningTokens
	}
	return c
}

// countCall adds (sign 1) or removes (-1) a billed call's count and tokens
// from the sums: the one place a call's usage enters a summary, for the
// whole-tree rule and the incremental builder alike.
func (s *TraceSummary) countCall(c Call, sign int64) {
	s.ModelCalls += sign
	if c.Failed {
		s.FailedModelCalls += sign
	}
	u, _ := c.Usage()
	s.InputTokens += sign * u.Input()
	s.OutputTokens += sign * u.Output
	s.CacheReadTokens += sign * u.CacheRead
	s.CacheCreationTokens += sign * u.CacheCreation
	s.ReasoningTokens += sign * max(c.ReasoningTokens, 0)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
