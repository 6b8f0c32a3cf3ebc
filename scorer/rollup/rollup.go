// Package rollup turns the spans of one trace into the numbers a user acts
// on: wall time, the critical path with each span's critical self time,
// counts, tokens and cost.
//
// Cost is computed by structure, not by SDK special cases: only spans that
// made a provider call are billed, a span whose descendants carry usage is an
// aggregate whose own usage attributes are copies and are not added again, an
// explicit cost the sender set is used as given, cached input is priced at
// its own rates, failed attempts are billed like any other, and a model the
// price table does not know makes the trace's cost unknown (nil), never zero.
package rollup

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/store"
)

// Rollup is one trace's summary. Token counts follow the GenAI convention:
// TokensIn includes cache reads and cache writes.
type Rollup struct {
	TraceID  string    `json:"trace_id"`
	RootName string    `json:"root_name,omitempty"`
	Start    time.Time `json:"start"`
	// DurationMS is from the earliest span's start to the latest span's
	// end (store.TraceSummary.Duration); AfterRootMS is the part of it
	// after the root span ended (async work that outlived the root).
	DurationMS     float64     `json:"duration_ms"`
	AfterRootMS    float64     `json:"after_root_ms"`
	CriticalPathMS float64     `json:"critical_path_ms"`
	CriticalPath   []PathEntry `json:"critical_path"`

	// CostUSD is nil when any billed call could not be priced; KnownCostUSD
	// then holds the part that could, a lower bound.
	CostUSD        *float64 `json:"cost_usd"`
	KnownCostUSD   float64  `json:"known_cost_usd"`
	UnpricedModels []string `json:"unpriced_models"`

	TokensIn            int64 `json:"tokens_in"`
	TokensOut           int64 `json:"tokens_out"`
	CacheReadTokens     int64 `json:"cache_read_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	ReasoningTokens     int64 `json:"reasoning_tokens"`

	SpanCount        int `json:"span_count"`
	ModelCalls       int `json:"model_calls"`
	FailedModelCalls int `json:"failed_model_calls"`
	ToolCalls        int `json:"tool_calls"`
	ErrorCount       int `json:"error_count"`

	// Models breaks tokens and cost down by the model name as reported.
	Models []ModelUsage `json:"models"`
	// Calls lists every billed span with how its cost was found.
	Calls []Call `json:"calls"`
	// AggregateSpans are spans that carried usage but whose descendants did
	// too; their usage is not added.
	AggregateSpans []string `json:"aggregate_spans,omitempty"`

	Roots int `json:"roots"`
	// Tops are the spans the tree hangs from, by start: the root, and the
	// top of each further fragment (another root, or a span whose parent
	// never arrived).
	Tops    []Top    `json:"tops"`
	Orphans []string `json:"orphans,omitempty"` // spans whose parent is not in the trace
	// Notes explains anything the rollup repaired or could not know.
	Notes []string `json:"notes,omitempty"`

	// On a rollup bounded for a huge trace (Bounded), how many entries
	// the full critical path has, how many billed calls the trace has, and
	// UnknownCostText of all of them; unset on a full rollup.
	CriticalPathEntries int    `json:"critical_path_entries,omitempty"`
	CallCount           int    `json:"call_count,omitempty"`
	UnknownCost         string `json:"unknown_cost,omitempty"`
}

// Bounds of a bounded rollup (Bounded).
const (
	BoundedPath  = 2_000
	BoundedCalls = 1_000
)

// Bounded returns r with its lists bounded, for a huge trace whose full
// rollup runs to hundreds of megabytes: the critical path keeps its
// maxPath entries with the most self time (in path order), calls,
// aggregates and orphans their first maxCalls; every figure (times,
// costs, counts, per-model usage) stays the full rollup's, and a note
// says what was left out. A rollup within the bounds is returned as is.
func (r Rollup) Bounded(maxPath, maxCalls int) Rollup {
	if len(r.CriticalPath) > maxPath {
		keep := make([]int, len(r.CriticalPath))
		for i := range keep {
			keep[i] = i
		}
		slices.SortStableFunc(keep, func(a, b int) int { return cmp.Compare(r.CriticalPath[b].SelfMS, r.CriticalPath[a].SelfMS) })
		keep = keep[:maxPath]
		slices.Sort(keep)
		path := make([]PathEntry, 0, maxPath)
		for _, i := range keep {
			path = append(path, r.CriticalPath[i])
		}
		r.CriticalPathEntries = len(r.CriticalPath)
		r.Notes = append(slices.Clip(r.Notes), fmt.Sprintf("critical_path lists the %d of its %d entries with the most self time", maxPath, len(r.CriticalPath)))
		r.CriticalPath = path
	}
	if len(r.Calls) > maxCalls {
		r.UnknownCost = UnknownCostText(r.Calls)
		r.CallCount = len(r.Calls)
		r.Notes = append(slices.Clip(r.Notes), fmt.Sprintf("calls lists the first %d of %d billed calls", maxCalls, len(r.Calls)))
		r.Calls = r.Calls[:maxCalls:maxCalls]
	}
	if len(r.AggregateSpans) > maxCalls {
		r.Notes = append(slices.Clip(r.Notes), fmt.Sprintf("aggregate_spans lists the first %d of %d", maxCalls, len(r.AggregateSpans)))
		r.AggregateSpans = r.AggregateSpans[:maxCalls:maxCalls]
	}
	if len(r.Orphans) > maxCalls {
		r.Notes = append(slices.Clip(r.Notes), fmt.Sprintf("orphans lists the first %d of %d", maxCalls, len(r.Orphans)))
		r.Orphans = r.Orphans[:maxCalls:maxCalls]
	}
	return r
}

// CostUnknownText says why the rollup's cost is unknown: UnknownCostText
// of its calls, or of all of them on a bounded rollup.
func (r *Rollup) CostUnknownText() string {
	if r.UnknownCost != "" {
		return r.UnknownCost
	}
	return UnknownCostText(r.Calls)
}

// Top is a span without a parent in the trace.
type Top struct {
	SpanID string `json:"span_id"`
	Name   string `json:"name"`
	// Orphan is true when the span names a parent that is not in the
	// trace; RemoteParent when the sender flagged that parent as another
	// process's (OTLP IS_REMOTE), so it was never expected here.
	Orphan       bool `json:"orphan,omitempty"`
	RemoteParent bool `json:"remote_parent,omitempty"`
}

// ModelUsage is the per-model part of a rollup.
type ModelUsage struct {
	Model               string   `json:"model"`
	PricedAs            string   `json:"priced_as,omitempty"`
	Calls               int      `json:"calls"`
	TokensIn            int64    `json:"tokens_in"`
	TokensOut           int64    `json:"tokens_out"`
	CacheReadTokens     int64    `json:"cache_read_tokens"`
	CacheCreationTokens int64    `json:"cache_creation_tokens"`
	CostUSD             *float64 `json:"cost_usd"`
}

// Cost sources for Call.Source.
const (
	SourceExplicit = "explicit" // the sender's own cost attribute
	SourcePriced   = "priced"   // tokens × the price table
	SourceUnpriced = "unpriced" // model not in the price table: unknown
	SourceNoUsage  = "no_usage" // a successful model call that reported no tokens: unknown
	SourceFailed   = "failed_no_usage"
)

// Call is one billed span.
type Call struct {
	SpanID   string `json:"span_id"`
	Name     string `json:"name"`
	Model    string `json:"model,omitempty"`
	PricedAs string `json:"priced_as,omitempty"`
	Failed   bool   `json:"failed,omitempty"`
	Source   string `json:"source"`
	// Why says why the cost is unknown (SourceUnpriced, SourceNoUsage).
	Why       string   `json:"why,omitempty"`
	CostUSD   *float64 `json:"cost_usd"`
	TokensIn  int64    `json:"tokens_in"`
	TokensOut int64    `json:"tokens_out"`
}

// ComputeAll groups spans by trace id and rolls up each trace, ordered by
// trace start (then id).
func ComputeAll(spans []store.Span, prices *pricing.Table) []Rollup {
	groups := map[string][]store.Span{}
	var ids []string
	for _, s := range spans {
		if _, ok := groups[s.TraceID]; !ok {
			ids = append(ids, s.TraceID)
		}
		groups[s.TraceID] = append(groups[s.TraceID], s)
	}
	out := make([]Rollup, 0, len(ids))
	for _, id := range ids {
		out = append(out, Compute(groups[id], prices))
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Start.Equal(out[j].Start) {
			return out[i].Start.Before(out[j].Start)
		}
		return out[i].TraceID < out[j].TraceID
	})
	return out
}

// Compute rolls up the spans of one trace. prices may be nil, in which case
// every call without an explicit cost is unpriced. spans is not modified.
//
// It is the one rule: Analyze over the spans' bones, then FromAnalysis with
// store.Summarize's summary of the same spans. A store that keeps a huge
// trace's summary and serves its bones gives the same rollup, field for
// field, without the spans held whole (see Window).
func Compute(spans []store.Span, prices *pricing.Table) Rollup {
	if len(spans) == 0 {
		return FromAnalysis(Analysis{}, store.TraceSummary{}, prices)
	}
	// Everything below runs over the spans in canonical order (start, span
	// id), so the result does not depend on the order they arrived in.
	order := store.CanonicalOrder(spans)
	sorted := make([]store.Span, len(spans))
	bones := make([]store.Bone, len(spans))
	for k, i := range order {
		sorted[k] = spans[i]
		bones[k] = store.BoneOf(&spans[i])
	}
	traceIDs := map[string]bool{}
	for i := range sorted {
		traceIDs[sorted[i].TraceID] = true
	}
	r := FromAnalysis(analyzeSorted(bones), store.Summarize(sorted), prices)
	r.TraceID = sorted[0].TraceID
	if len(traceIDs) > 1 {
		r.Notes = append([]string{fmt.Sprintf("spans come from %d different trace ids; rolled up together", len(traceIDs))}, r.Notes...)
	}
	return r
}

// Analysis is what a rollup reads of a trace's tree: its tops, orphans,
// repairs, critical path and the spans whose usage repeats their
// descendants'. Analyze computes it from the trace's bones alone (ids,
// names, times, flags, whether a span carries usage), so a store can serve
// it for a trace too big to read whole, and a view can keep it
// (store.WindowReader.SaveDerived) while the trace's span count stays the
// same.
type Analysis struct {
	// Spans is how many bones were analysed (a copy of a span id
	// included).
	Spans          int         `json:"spans"`
	Roots          int         `json:"roots"`
	Tops           []Top       `json:"tops"`
	Orphans        []string    `json:"orphans,omitempty"`
	DupIDs         int         `json:"dup_ids,omitempty"`
	Cycles         int         `json:"cycles,omitempty"`
	CriticalPathNS int64       `json:"critical_path_ns"`
	CriticalPath   []PathEntry `json:"critical_path"`
	// Clipped, Detached and Inverted count the spans the critical path
	// clipped to their parent, left out as wholly outside it, and read as
	// zero-length (see criticalPath).
	Clipped  int `json:"clipped,omitempty"`
	Detached int `json:"detached,omitempty"`
	Inverted int `json:"inverted,omitempty"`
	// AggregateSpans are the spans carrying usage below which a span
	// carries usage too, parents before children (breadth first).
	AggregateSpans []string `json:"aggregate_spans,omitempty"`
}

// Analyze analyses a trace's bones, given in any order.
func Analyze(bones []store.Bone) Analysis {
	sorted := append([]store.Bone(nil), bones...)
	slices.SortStableFunc(sorted, func(a, b store.Bone) int {
		if c := a.StartTime.Compare(b.StartTime); c != 0 {
			return c
		}
		return cmp.Compare(a.SpanID, b.SpanID)
	})
	return analyzeSorted(sorted)
}

// analyzeSorted is Analyze over bones in canonical order.
func analyzeSorted(bones []store.Bone) Analysis {
	a := Analysis{Spans: len(bones), Tops: []Top{}, CriticalPath: []PathEntry{}}
	if len(bones) == 0 {
		return a
	}
	t := buildTree(bones)
	a.Roots, a.Cycles, a.DupIDs, a.Orphans = t.roots, t.cycles, t.dupIDs, t.orphans
	for _, i := range t.tops {
		top := Top{SpanID: bones[i].SpanID, Name: bones[i].Name, Orphan: bones[i].ParentSpanID != ""}
		if rp, known := bones[i].RemoteParent(); top.Orphan && rp && known {
			top.RemoteParent = true
		}
		a.Tops = append(a.Tops, top)
	}
	cp := t.criticalPath()
	for _, s := range cp.segments {
		a.CriticalPathNS += int64(s.End - s.Start)
	}
	a.CriticalPath = append(a.CriticalPath, cp.entries...)
	a.Clipped, a.Detached, a.Inverted = cp.clipped, cp.detached, cp.inverted
	roles := store.RolesOf(len(bones), t.st, func(i int) bool { return bones[i].Carries }, func(int) bool { return false })
	for _, i := range t.order {
		if roles[i] == store.RoleAggregate {
			a.AggregateSpans = append(a.AggregateSpans, bones[i].SpanID)
		}
	}
	return a
}

// FromAnalysis is the rollup of a trace whose tree is a and whose summary
// is sum (store.Summarize's, with its billed calls), priced with prices.
func FromAnalysis(a Analysis, sum store.TraceSummary, prices *pricing.Table) Rollup {
	r := Rollup{CriticalPath: []PathEntry{}, Tops: []Top{}, UnpricedModels: []string{}, Models: []ModelUsage{}, Calls: []Call{}}
	if a.Spans == 0 {
		r.Notes = append(r.Notes, "no spans")
		return r
	}
	r.TraceID = sum.TraceID
	r.Roots = a.Roots
	remote := 0
	for _, top := range a.Tops {
		if top.RemoteParent {
			remote++
		}
	}
	r.Tops = append(r.Tops, a.Tops...)
	r.Orphans = a.Orphans
	if a.DupIDs > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d duplicate span ids ignored (kept the first copy)", a.DupIDs))
	}
	// A span whose parent is in another process (OTLP's IS_REMOTE flag)
	// continues a trace begun elsewhere: its parent is not expected here,
	// and the trace is not incomplete for lacking it.
	switch {
	case a.Roots == 0 && remote > 0 && remote == len(a.Orphans):
		r.Notes = append(r.Notes, "no root span here: the trace continues a remote parent (another process's span, flagged remote by the sender)")
	case a.Roots == 0:
		r.Notes = append(r.Notes, "no root span (every span names a parent): the trace is incomplete")
	case a.Roots > 1:
		r.Notes = append(r.Notes, fmt.Sprintf("%d root spans: critical path spans all fragments", a.Roots))
	}
	if missing := len(a.Orphans) - remote; missing > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans whose parent is missing are treated as roots of separate fragments", missing))
	}
	if remote > 0 && (a.Roots > 0 || remote < len(a.Orphans)) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans continue a remote parent (flagged remote by the sender): roots of separate fragments", remote))
	}
	if a.Cycles > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d parent cycles broken", a.Cycles))
	}

	// Wall time and critical path.
	r.CriticalPathMS = ms(time.Duration(a.CriticalPathNS))
	r.CriticalPath = append(r.CriticalPath, a.CriticalPath...)
	if a.Clipped > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans extend outside their parent (async work or clock skew): clipped to the parent for the critical path", a.Clipped))
	}
	if a.Detached > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans lie wholly outside their parent: not on the critical path", a.Detached))
	}
	if a.Inverted > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans end before they start: treated as zero-length", a.Inverted))
	}

	// Counts, tokens and the billed calls come from store.Summarize, the
	// rule every view of a trace shows; this adds their prices.
	r.Start, r.RootName = sum.Start, sum.RootName
	r.DurationMS, r.AfterRootMS = ms(sum.Duration), ms(sum.AfterRoot)
	r.SpanCount = int(sum.SpanCount)
	r.ErrorCount = int(sum.ErrorCount)
	r.ToolCalls = int(sum.ToolCalls)
	r.ModelCalls = int(sum.ModelCalls)
	r.FailedModelCalls = int(sum.FailedModelCalls)
	r.TokensIn, r.TokensOut = sum.InputTokens, sum.OutputTokens
	r.CacheReadTokens, r.CacheCreationTokens, r.ReasoningTokens = sum.CacheReadTokens, sum.CacheCreationTokens, sum.ReasoningTokens
	r.AggregateSpans = a.AggregateSpans
	p := Price(sum.Calls, prices)
	r.Calls, r.Models, r.UnpricedModels, r.KnownCostUSD, r.CostUSD = p.Calls, p.Models, p.UnpricedModels, p.KnownCostUSD, p.CostUSD
	if n := countSource(r.Calls, SourceNoUsage); n > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d model calls reported no token usage: cost unknown", n))
	}
	if n := countSource(r.Calls, SourceFailed); n > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d failed model calls reported no token usage: charged 0", n))
	}
	if p.AnthropicRaw > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d calls report input tokens below their cache tokens (Anthropic's own convention): input read as uncached", p.AnthropicRaw))
	}
	return r
}

// Priced is the cost of a trace's billed calls.
type Priced struct {
	// Calls are the calls with their cost and how it was found, in the
	// order given.
	Calls []Call
	// CostUSD is nil when any call could not be priced; KnownCostUSD then
	// holds the part that could, a lower bound.
	CostUSD        *float64
	KnownCostUSD   float64
	UnpricedModels []string
	Models         []ModelUsage
	// AnthropicRaw counts calls whose input was below their cache tokens.
	AnthropicRaw int
}

// Price prices billed calls (store.TraceSummary.Calls) with prices (nil
// prices nothing): each call, for the list of calls and the per-model
// figures (summed in the order given, the canonical one), and the trace's
// total by PriceGroups over their groups (store.GroupCalls), so the trace
// page, `traces get` and `rollup FILE` show the total the trace list
// computes from the groups a store keeps, to the last bit.
func Price(calls []store.Call, prices *pricing.Table) Priced {
	p := Priced{Calls: []Call{}, UnpricedModels: []string{}, Models: []ModelUsage{}}
	unpriced := map[string]bool{}
	models := map[string]*ModelUsage{}
	// One lookup per distinct (response, request) model pair: a huge
	// trace's calls name a handful of models.
	type found struct {
		m    *pricing.Model
		name string
		ok   bool
	}
	looked := map[[2]string]found{}
	var modelOrder []string
	for k := range calls {
		sc := &calls[k]
		model := sc.Model()
		c := Call{SpanID: sc.SpanID, Name: sc.Name, Model: model, Failed: sc.Failed}
		u, raw := sc.Usage()
		if sc.HasUsage {
			if raw {
				p.AnthropicRaw++
			}
			c.TokensIn, c.TokensOut = u.Input(), u.Output
		}
		switch {
		case sc.CostUSD != nil:
			c.Source = SourceExplicit
			c.CostUSD = ptr(*sc.CostUSD)
		case !sc.HasUsage && sc.Failed:
			// Rejected before any token was processed (a 429, a 400):
			// nothing to price, and providers do not bill these.
			c.Source = SourceFailed
			c.CostUSD = ptr(0)
		case !sc.HasUsage:
			c.Source = SourceNoUsage
			c.Why = "reported no token usage"
		default:
			k := [2]string{sc.ResponseModel, sc.RequestModel}
			f, seen := looked[k]
			if !seen {
				f.m, f.name, f.ok = lookup(prices, sc)
				looked[k] = f
			}
			m, name, ok := f.m, f.name, f.ok
			if !ok {
				c.Source = SourceUnpriced
				label := model
				if label == "" {
					label = "(no model name)"
					c.Why = "names no model"
				} else {
					c.Why = fmt.Sprintf("model %q is not in the price table", model)
				}
				unpriced[label] = true
				break
			}
			c.Source = SourcePriced
			c.PricedAs = name
			c.CostUSD = ptr(m.Cost(pricing.Usage{Input: u.Uncached, CacheRead: u.CacheRead, CacheCreation: u.CacheCreation, Output: u.Output}))
		}
		p.Calls = append(p.Calls, c)

		mk := model
		if mk == "" {
			mk = "(no model name)"
		}
		mu, ok := models[mk]
		if !ok {
			mu = &ModelUsage{Model: mk, PricedAs: c.PricedAs, CostUSD: ptr(0)}
			models[mk] = mu
			modelOrder = append(modelOrder, mk)
		}
		mu.Calls++
		mu.TokensIn += c.TokensIn
		mu.TokensOut += c.TokensOut
		if sc.HasUsage {
			mu.CacheReadTokens += u.CacheRead
			mu.CacheCreationTokens += u.CacheCreation
		}
		if mu.CostUSD != nil {
			if c.CostUSD == nil {
				mu.CostUSD = nil
			} else {
				*mu.CostUSD += *c.CostUSD
			}
		}
	}
	// The total, by groups (the per-call and per-model costs above differ
	// from it at most in rounding).
	gp := priceGroups(store.GroupCalls(calls), prices, calls)
	p.KnownCostUSD, p.CostUSD = gp.KnownCostUSD, gp.CostUSD
	for m := range unpriced {
		p.UnpricedModels = append(p.UnpricedModels, m)
	}
	sort.Strings(p.UnpricedModels)
	sort.Strings(modelOrder)
	for _, m := range modelOrder {
		p.Models = append(p.Models, *models[m])
	}
	return p
}

// UnknownCostText says why a cost is unknown, naming each call (up to
// three, then how many more) and its reason, e.g. `"chat gpt-x" (span
// 1a2b3c4d) reported no token usage`. It is "" when every call was priced.
func UnknownCostText(calls []Call) string {
	var unknown []Call
	for _, c := range calls {
		if c.CostUSD == nil {
			unknown = append(unknown, c)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	var b strings.Builder
	for k, c := range unknown {
		if k == 3 {
			fmt.Fprintf(&b, "; and %d more", len(unknown)-3)
			break
		}
		if k > 0 {
			b.WriteString("; ")
		}
		id := c.SpanID
		if len(id) > 8 {
			id = id[:8]
		}
		fmt.Fprintf(&b, "%q (span %s) %s", c.Name, id, c.Why)
	}
	return b.String()
}

func lookup(prices *pricing.Table, s *store.Call) (*pricing.Model, string, bool) {
	return lookupModels(prices, s.ResponseModel, s.RequestModel)
}

// lookupModels finds the price entry of the first of names the table
// knows: a call's response model, then its request model.
func lookupModels(prices *pricing.Table, names ...string) (*pricing.Model, string, bool) {
	for _, name := range names {
		if name == "" {
			continue
		}
		if m, key, ok := prices.Lookup(name); ok {
			return m, key, true
		}
	}
	return nil, "", false
}

func countSource(calls []Call, src string) int {
	n := 0
	for _, c := range calls {
		if c.Source == src {
			n++
		}
	}
	return n
}

func ptr(f float64) *float64 { return &f }
