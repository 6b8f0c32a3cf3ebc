package store

import (
	"cmp"
	"context"
	"math"
	"slices"
)

// CallGroup is the billed calls of a trace that name one (request model,
// response model) pair, summed: what a list row carries instead of every
// call, so a million-span trace's row is as small as a ten-span one's. It
// holds exactly what pricing needs (scorer/rollup.PriceGroups): a price
// table looks a call up by its response model, then its request model, so
// every call of a group is priced by one entry; the usage of the calls it
// prices is summed split (SplitUsage); explicit costs are summed exactly;
// and the smallest and largest prompt say whether a long-context tier (a
// price for the whole request above a prompt size) applies to all of them,
// none, or some, in which case the group alone cannot be priced and the
// calls are read (CallReader).
//
// Stores keep the groups current at ingest (SummaryBuilder); GroupCalls is
// the rule, applied to a trace's calls.
type CallGroup struct {
	RequestModel  string `json:"request_model,omitempty"`
	ResponseModel string `json:"response_model,omitempty"`
	// Calls counts the group's billed calls, Failed those with an error
	// status.
	Calls  int64 `json:"calls"`
	Failed int64 `json:"failed,omitempty"`
	// The token sums of the calls that reported usage, counted as
	// TraceSummary counts them (input with its cache reads and writes).
	InputTokens         int64 `json:"input_tokens,omitempty"`
	OutputTokens        int64 `json:"output_tokens,omitempty"`
	CacheReadTokens     int64 `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
	ReasoningTokens     int64 `json:"reasoning_tokens,omitempty"`
	// ExplicitCalls have a cost the sender set (used as given, whatever
	// their usage). ExplicitPicoUSD is the sum of those costs in units of
	// 1e-12 USD, each rounded to the nearest unit and added modulo 2^64,
	// so the sum is the same whatever order calls are added and removed in;
	// it is the exact sum while ExplicitExact holds (a group beyond it is
	// priced from its calls). ExplicitOutOfRange counts costs beyond ±1e6
	// USD, which are not added; ExplicitMagnitude is the sum of the costs'
	// magnitudes in units of 2^20 picodollars (about 1e-6 USD), rounded
	// down: how far from overflowing the sum can be.
	ExplicitCalls      int64 `json:"explicit_calls,omitempty"`
	ExplicitPicoUSD    int64 `json:"explicit_pico_usd,omitempty"`
	ExplicitOutOfRange int64 `json:"explicit_out_of_range,omitempty"`
	ExplicitMagnitude  int64 `json:"explicit_magnitude,omitempty"`
	// NoUsage counts calls without an explicit cost that reported no usage
	// and did not fail (their cost is unknown); FailedNoUsage the failed
	// ones (charged 0: providers do not bill a rejected request).
	NoUsage       int64 `json:"no_usage,omitempty"`
	FailedNoUsage int64 `json:"failed_no_usage,omitempty"`
	// Priced counts the calls a price table prices: no explicit cost,
	// usage reported. Their usage, split by SplitUsage, is summed in the
	// Priced* fields; Raw counts those whose input was below their cache
	// tokens (SplitUsage's raw convention).
	Priced              int64 `json:"priced,omitempty"`
	PricedUncached      int64 `json:"priced_uncached,omitempty"`
	PricedCacheRead     int64 `json:"priced_cache_read,omitempty"`
	PricedCacheCreation int64 `json:"priced_cache_creation,omitempty"`
	PricedOutput        int64 `json:"priced_output,omitempty"`
	Raw                 int64 `json:"raw,omitempty"`
	// MinPrompt and MaxPrompt are the smallest and largest prompt
	// (Usage.Input: uncached, cache read and cache write tokens) of one
	// priced call; 0 when Priced is 0.
	MinPrompt int64 `json:"min_prompt,omitempty"`
	MaxPrompt int64 `json:"max_prompt,omitempty"`
}

// Model is the name the group's calls are reported under (Call.Model).
func (g *CallGroup) Model() string {
	if g.ResponseModel != "" {
		return g.ResponseModel
	}
	return g.RequestModel
}

// Holds reports whether call c belongs to the group.
func (g *CallGroup) Holds(c *Call) bool {
	return c.RequestModel == g.RequestModel && c.ResponseModel == g.ResponseModel
}

// PricedByTable reports whether a price table prices call c (no explicit
// cost, usage reported): the calls the Priced fields sum.
func (c *Call) PricedByTable() bool { return c.CostUSD == nil && c.HasUsage }

// picoPerUSD is the unit of CallGroup.ExplicitPicoUSD.
const picoPerUSD = 1e12

// maxExplicitUSD bounds one call's explicit cost held exactly: its
// picodollars and a few million more stay inside int64.
const maxExplicitUSD = 1e6

// PicoUSD is an explicit cost in CallGroup.ExplicitPicoUSD's unit, rounded
// to the nearest; ok is false for a cost beyond ±1e6 USD.
func PicoUSD(usd float64) (pico int64, ok bool) {
	if math.IsNaN(usd) || math.Abs(usd) > maxExplicitUSD {
		return 0, false
	}
	return int64(math.Round(usd * picoPerUSD)), true
}

// magnitudeShift is the unit of CallGroup.ExplicitMagnitude: 2^20
// picodollars.
const magnitudeShift = 20

// ExplicitExact reports whether ExplicitPicoUSD is the exact sum of the
// group's explicit costs: none was out of range, and the sum of their
// magnitudes (so the sum itself) is below 2^63 picodollars (about 9.2
// million USD). Every |pico| is below (its magnitude units + 1) · 2^20, so
// the magnitudes plus one per call bound the sum.
func (g *CallGroup) ExplicitExact() bool {
	return g.ExplicitOutOfRange == 0 && g.ExplicitMagnitude+g.ExplicitCalls <= 1<<(63-magnitudeShift)
}

// USDOfPico converts picodollars to dollars.
func USDOfPico(pico int64) float64 { return float64(pico) / picoPerUSD }

type groupKey struct{ req, resp string }

func (c *Call) groupKey() groupKey { return groupKey{c.RequestModel, c.ResponseModel} }

// add adds (sign 1) or removes (-1) call c. Removing a call whose prompt
// was the group's smallest or largest leaves MinPrompt and MaxPrompt as
// they were: stale reports that they may now be too wide, and the caller
// recomputes them from the group's calls.
func (g *CallGroup) add(c *Call, sign int64) (stale bool) {
	g.Calls += sign
	if c.Failed {
		g.Failed += sign
	}
	u, raw := c.Usage()
	if c.HasUsage {
		g.InputTokens += sign * u.Input()
		g.OutputTokens += sign * u.Output
		g.CacheReadTokens += sign * u.CacheRead
		g.CacheCreationTokens += sign * u.CacheCreation
		g.ReasoningTokens += sign * max(c.ReasoningTokens, 0)
	}
	switch {
	case c.CostUSD != nil:
		g.ExplicitCalls += sign
		pico, ok := PicoUSD(*c.CostUSD)
		if !ok {
			g.ExplicitOutOfRange += sign
			break
		}
		g.ExplicitPicoUSD += sign * pico // wraps modulo 2^64: see ExplicitExact
		mag := pico
		if mag < 0 {
			mag = -mag
		}
		g.ExplicitMagnitude += sign * (mag >> magnitudeShift)
	case !c.HasUsage && c.Failed:
		g.FailedNoUsage += sign
	case !c.HasUsage:
		g.NoUsage += sign
	default:
		p := u.Input()
		if sign > 0 {
			if g.Priced == 0 {
				g.MinPrompt, g.MaxPrompt = p, p
			} else {
				g.MinPrompt, g.MaxPrompt = min(g.MinPrompt, p), max(g.MaxPrompt, p)
			}
		} else if p == g.MinPrompt || p == g.MaxPrompt {
			stale = true
		}
		g.Priced += sign
		g.PricedUncached += sign * u.Uncached
		g.PricedCacheRead += sign * u.CacheRead
		g.PricedCacheCreation += sign * u.CacheCreation
		g.PricedOutput += sign * u.Output
		if raw {
			g.Raw += sign
		}
		if g.Priced == 0 {
			g.MinPrompt, g.MaxPrompt, stale = 0, 0, false
		}
	}
	return stale
}

// setPromptRange recomputes MinPrompt and MaxPrompt from the group's
// priced calls.
func (g *CallGroup) setPromptRange(calls func(yield func(*Call) bool)) {
	first := true
	g.MinPrompt, g.MaxPrompt = 0, 0
	for c := range calls {
		if !g.Holds(c) || !c.PricedByTable() {
			continue
		}
		u, _ := c.Usage()
		p := u.Input()
		if first {
			g.MinPrompt, g.MaxPrompt, first = p, p, false
			continue
		}
		g.MinPrompt, g.MaxPrompt = min(g.MinPrompt, p), max(g.MaxPrompt, p)
	}
}

// GroupCalls sums billed calls into their groups, ordered by request
// model, then response model: the rule a store keeps at ingest.
func GroupCalls(calls []Call) []CallGroup {
	if len(calls) == 0 {
		return nil
	}
	at := map[groupKey]int{}
	var out []CallGroup
	for i := range calls {
		c := &calls[i]
		k := c.groupKey()
		j, ok := at[k]
		if !ok {
			j = len(out)
			at[k] = j
			out = append(out, CallGroup{RequestModel: k.req, ResponseModel: k.resp})
		}
		out[j].add(c, 1)
	}
	sortGroups(out)
	return out
}

func sortGroups(gs []CallGroup) {
	slices.SortFunc(gs, func(a, b CallGroup) int {
		if c := cmp.Compare(a.RequestModel, b.RequestModel); c != 0 {
			return c
		}
		return cmp.Compare(a.ResponseModel, b.ResponseModel)
	})
}

// CallReader is an optional capability of a Reader: the billed calls of
// one trace, in canonical order (start, span id), exactly the Calls
// Summarize gives for its stored spans. A list prices a trace from its
// CallGroups; it reads the calls only for a group the groups alone cannot
// price (one whose calls straddle a long-context threshold). Find it with
// a type assertion; both backends implement it.
type CallReader interface {
	TraceCalls(ctx context.Context, traceID string) ([]Call, error)
}
