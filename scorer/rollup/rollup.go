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
	"time"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Rollup is one trace's summary. Token counts follow the GenAI convention:
// TokensIn includes cache reads and cache writes.
type Rollup struct {
	TraceID  string    `json:"trace_id"`
	RootName string    `json:"root_name,omitempty"`
	Start    time.Time `json:"start"`
	// DurationMS is the root span's wall time; for a trace with several
	// fragments, the span from the earliest start to the latest end.
	DurationMS     float64     `json:"duration_ms"`
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

	Roots   int      `json:"roots"`
	Orphans []string `json:"orphans,omitempty"` // spans whose parent is not in the trace
	// Notes explains anything the rollup repaired or could not know.
	Notes []string `json:"notes,omitempty"`
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
	SpanID    string   `json:"span_id"`
	Name      string   `json:"name"`
	Model     string   `json:"model,omitempty"`
	PricedAs  string   `json:"priced_as,omitempty"`
	Failed    bool     `json:"failed,omitempty"`
	Source    string   `json:"source"`
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
	r := Rollup{CriticalPath: []PathEntry{}, UnpricedModels: []string{}, Models: []ModelUsage{}, Calls: []Call{}}
	if len(spans) == 0 {
		r.Notes = append(r.Notes, "no spans")
		return r
	}
	r.TraceID = spans[0].TraceID
	traceIDs := map[string]bool{}
	for i := range spans {
		traceIDs[spans[i].TraceID] = true
	}
	if len(traceIDs) > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("spans come from %d different trace ids; rolled up together", len(traceIDs)))
	}

	t := buildTree(spans)
	r.SpanCount = len(t.order)
	r.Roots = t.roots
	r.Orphans = t.orphans
	if t.dupIDs > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d duplicate span ids ignored (kept the first copy)", t.dupIDs))
	}
	if t.roots == 0 {
		r.Notes = append(r.Notes, "no root span (every span names a parent): the trace is incomplete")
	} else if t.roots > 1 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d root spans: critical path spans all fragments", t.roots))
	}
	if len(t.orphans) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d spans whose parent is missing are treated as roots of separate fragments", len(t.orphans)))
	}
	if t.cycles > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d parent cycles broken", t.cycles))
	}

	// Wall time and critical path.
	cp := t.criticalPath()
	r.Start = cp.start
	if len(t.tops) == 1 {
		r.RootName = spans[t.tops[0]].Name
	}
	r.DurationMS = ms(cp.end.Sub(cp.start))
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

	// Which spans have a usage-carrying descendant? Walk children before
	// parents (reverse breadth-first order).
	carries := func(s *store.Span) bool { return s.HasUsage || s.CostUSD != nil }
	below := make([]bool, len(spans))
	for k := len(t.order) - 1; k >= 0; k-- {
		i := t.order[k]
		for _, c := range t.children[i] {
			if below[c] || carries(&spans[c]) {
				below[i] = true
				break
			}
		}
	}

	unpriced := map[string]bool{}
	models := map[string]*ModelUsage{}
	var modelOrder []string
	known, costKnown := 0.0, true
	var anthropicRaw int
	for _, i := range t.order {
		s := &spans[i]
		if s.IsError() {
			r.ErrorCount++
		}
		if s.Operation == semconv.OpExecuteTool {
			r.ToolCalls++
		}
		isCall := carries(s) || semconv.IsModelCallOperation(s.Operation)
		if !isCall {
			continue
		}
		if below[i] {
			if carries(s) {
				r.AggregateSpans = append(r.AggregateSpans, s.SpanID)
			}
			continue
		}
		r.ModelCalls++
		if s.IsError() {
			r.FailedModelCalls++
		}
		model := s.ResponseModel
		if model == "" {
			model = s.RequestModel
		}
		c := Call{SpanID: s.SpanID, Name: s.Name, Model: model, Failed: s.IsError()}
		var u pricing.Usage
		if s.HasUsage {
			var raw bool
			u, raw = splitUsage(s)
			if raw {
				anthropicRaw++
			}
			c.TokensIn = u.Input + u.CacheRead + u.CacheCreation
			c.TokensOut = u.Output
			r.TokensIn += c.TokensIn
			r.TokensOut += u.Output
			r.CacheReadTokens += u.CacheRead
			r.CacheCreationTokens += u.CacheCreation
			r.ReasoningTokens += s.ReasoningTokens
		}
		var m *pricing.Model
		switch {
		case s.CostUSD != nil:
			c.Source = SourceExplicit
			c.CostUSD = ptr(*s.CostUSD)
		case !s.HasUsage && s.IsError():
			// Rejected before any token was processed (a 429, a 400):
			// nothing to price, and providers do not bill these.
			c.Source = SourceFailed
			c.CostUSD = ptr(0)
		case !s.HasUsage:
			c.Source = SourceNoUsage
		default:
			var name string
			var ok bool
			m, name, ok = lookup(prices, s)
			if !ok {
				c.Source = SourceUnpriced
				label := model
				if label == "" {
					label = "(no model name)"
				}
				unpriced[label] = true
				break
			}
			c.Source = SourcePriced
			c.PricedAs = name
			c.CostUSD = ptr(m.Cost(u))
		}
		if c.CostUSD != nil {
			known += *c.CostUSD
		} else {
			costKnown = false
		}
		r.Calls = append(r.Calls, c)

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
		mu.CacheReadTokens += u.CacheRead
		mu.CacheCreationTokens += u.CacheCreation
		if mu.CostUSD != nil {
			if c.CostUSD == nil {
				mu.CostUSD = nil
			} else {
				*mu.CostUSD += *c.CostUSD
			}
		}
	}
	r.KnownCostUSD = known
	if costKnown {
		r.CostUSD = ptr(known)
	}
	for m := range unpriced {
		r.UnpricedModels = append(r.UnpricedModels, m)
	}
	sort.Strings(r.UnpricedModels)
	sort.Strings(modelOrder)
	for _, m := range modelOrder {
		r.Models = append(r.Models, *models[m])
	}
	if n := countSource(r.Calls, SourceNoUsage); n > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d model calls reported no token usage: cost unknown", n))
	}
	if n := countSource(r.Calls, SourceFailed); n > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d failed model calls reported no token usage: charged 0", n))
	}
	if anthropicRaw > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d calls report input tokens below their cache tokens (Anthropic's own convention): input read as uncached", anthropicRaw))
	}
	return r
}

// splitUsage turns a span's usage into the billed parts (pricing.Split);
// anthropicRaw reports a sender that used Anthropic's raw convention.
func splitUsage(s *store.Span) (u pricing.Usage, anthropicRaw bool) {
	return pricing.Split(s.InputTokens, s.CacheReadTokens, s.CacheCreationTokens, s.OutputTokens)
}

func lookup(prices *pricing.Table, s *store.Span) (*pricing.Model, string, bool) {
	for _, name := range []string{s.ResponseModel, s.RequestModel} {
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
