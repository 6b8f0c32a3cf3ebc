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
	"fmt"
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
func Compute(spans []store.Span, prices *pricing.Table) Rollup {
	r := Rollup{CriticalPath: []PathEntry{}, Tops: []Top{}, UnpricedModels: []string{}, Models: []ModelUsage{}, Calls: []Call{}}
	if len(spans) == 0 {
		r.Notes = append(r.Notes, "no spans")
		return r
	}
	// Everything below runs over the spans in canonical order (start, span
	// id), so the result does not depend on the order they arrived in.
	order := store.CanonicalOrder(spans)
	sorted := make([]store.Span, len(spans))
	for k, i := range order {
		sorted[k] = spans[i]
	}
	spans = sorted
	r.TraceID = spans[0].TraceID
	traceIDs := map[string]bool{}
	for i := range spans {
		traceIDs[spans[i].TraceID] = true
	}
	if len(traceIDs) > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("spans come from %d different trace ids; rolled up together", len(traceIDs)))
	}

	t := buildTree(spans)
	r.Roots = t.roots
	remote := 0
	for _, i := range t.tops {
		top := Top{SpanID: spans[i].SpanID, Name: spans[i].Name, Orphan: spans[i].ParentSpanID != ""}
		if rp, known := spans[i].RemoteParent(); top.Orphan && rp && known {
			top.RemoteParent = true
			remote++
		}
		r.Tops = append(r.Tops, top)
	}
	r.Orphans = t.orphans
	if t.dupIDs > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d duplicate span ids ignored (kept the first copy)", t.dupIDs))
	}
	// A span whose parent is in another process (OTLP's IS_REMOTE flag)
	// continues a trace begun elsewhere: its parent is not expected here,
	// and the trace is not incomplete for lacking it.
	switch {
	case t.roots == 0 && remote > 0 && remote == len(t.orphans):
		r.Notes = append(r.Notes, "no root span here: the trace continues a remote parent (another process's span, flagged remote by the sender)")
	case t.roots == 0:
		r.Notes = append(r.Notes, "no root span (every span names a parent): the trace is incomplete")
	case t.roots > 1:
		r.Notes = append(r.Notes, fmt.Sprintf("%d root spans: critical path spans all fragments", t.roots))
	}
	if missing := len(t.orphans) - remote; missing > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans whose parent is missing are treated as roots of separate fragments", missing))
	}
	if remote > 0 && (t.roots > 0 || remote < len(t.orphans)) {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans continue a remote parent (flagged remote by the sender): roots of separate fragments", remote))
	}
	if t.cycles > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d parent cycles broken", t.cycles))
	}

	// Wall time and critical path.
	cp := t.criticalPath()
	var pathNS time.Duration
	for _, s := range cp.segments {
		pathNS += s.End - s.Start
	}
	r.CriticalPathMS = ms(pathNS)
	r.CriticalPath = append(r.CriticalPath, cp.entries...)
	if cp.clipped > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans extend outside their parent (async work or clock skew): clipped to the parent for the critical path", cp.clipped))
	}
	if cp.detached > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans lie wholly outside their parent: not on the critical path", cp.detached))
	}
	if cp.inverted > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans end before they start: treated as zero-length", cp.inverted))
	}

	// Counts, tokens and the billed calls come from store.Summarize, the
	// rule every view of a trace shows; this adds their prices.
	sum := store.Summarize(spans)
	r.Start, r.RootName = sum.Start, sum.RootName
	r.DurationMS, r.AfterRootMS = ms(sum.Duration), ms(sum.AfterRoot)
	r.SpanCount = int(sum.SpanCount)
	r.ErrorCount = int(sum.ErrorCount)
	r.ToolCalls = int(sum.ToolCalls)
	r.ModelCalls = int(sum.ModelCalls)
	r.FailedModelCalls = int(sum.FailedModelCalls)
	r.TokensIn, r.TokensOut = sum.InputTokens, sum.OutputTokens
	r.CacheReadTokens, r.CacheCreationTokens, r.ReasoningTokens = sum.CacheReadTokens, sum.CacheCreationTokens, sum.ReasoningTokens
	roles := store.Roles(spans, t.st)
	for _, i := range t.order {
		if roles[i] == store.RoleAggregate {
			r.AggregateSpans = append(r.AggregateSpans, spans[i].SpanID)
		}
	}
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
			m, name, ok := lookup(prices, sc)
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
