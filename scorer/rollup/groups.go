package rollup

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/store"
)

// A trace's cost is priced per call group (store.CallGroup: its billed
// calls summed per request and response model), not per call: a list row
// carries the groups, never every call, and Price prices a trace's calls
// by grouping them first, so the trace page, the list, `traces get` and
// `traces list` show the same cost to the last bit. A group is priced
// whole: its explicit costs are an exact sum (picodollars), and its other
// calls are one price-table entry's (a table looks a call up by its
// response model, then its request model) at one tier, unless a
// long-context threshold falls between its smallest and largest prompt;
// only then are the calls read, and the group priced as two sums.

// UnknownCalls counts the calls of one model whose cost is unknown, for
// one reason.
type UnknownCalls struct {
	// Model is the name the calls are reported under, "(no model name)"
	// when they name none.
	Model string `json:"model"`
	// Source is SourceUnpriced (the price table lacks the model) or
	// SourceNoUsage (a successful call that reported no tokens).
	Source string `json:"source"`
	Calls  int64  `json:"calls"`
}

// GroupPriced is the cost of a trace's call groups: what a list row shows.
type GroupPriced struct {
	// CostUSD is nil when any call could not be priced; KnownCostUSD then
	// holds the part that could, a lower bound.
	CostUSD        *float64
	KnownCostUSD   float64
	UnpricedModels []string
	// Unknown are the calls whose cost is unknown, by model and reason,
	// sorted by model then reason.
	Unknown []UnknownCalls
	// ReadCalls is set when the groups alone could not be priced and the
	// trace's calls were read.
	ReadCalls bool
}

// ErrNeedCalls is wrapped by PriceGroups' error when a group cannot be
// priced without its calls and no way to read them was given.
var ErrNeedCalls = errors.New("the call groups cannot be priced without their calls")

// noModelName labels the calls that name no model.
const noModelName = "(no model name)"

// PriceGroups prices a trace's call groups with prices (nil prices
// nothing). calls reads the trace's billed calls (store.CallReader); it is
// called at most once, and only when a group cannot be priced exactly from
// its sums: priced calls on both sides of a long-context threshold, or
// explicit costs too large to sum exactly. Its error is returned wrapped;
// a nil calls makes such a group an error wrapping ErrNeedCalls.
func PriceGroups(groups []store.CallGroup, prices *pricing.Table, calls func() ([]store.Call, error)) (GroupPriced, error) {
	if !needsCalls(groups, prices) {
		return priceGroups(groups, prices, nil), nil
	}
	if calls == nil {
		return GroupPriced{}, ErrNeedCalls
	}
	all, err := calls()
	if err != nil {
		return GroupPriced{}, fmt.Errorf("read the trace's calls: %w", err)
	}
	p := priceGroups(groups, prices, all)
	p.ReadCalls = true
	return p, nil
}

// needsCalls reports whether a group cannot be priced without its calls.
func needsCalls(groups []store.CallGroup, prices *pricing.Table) bool {
	for i := range groups {
		g := &groups[i]
		if g.ExplicitCalls > 0 && !g.ExplicitExact() {
			return true
		}
		if g.Priced == 0 {
			continue
		}
		m, _, ok := lookupModels(prices, g.ResponseModel, g.RequestModel)
		if ok && m.LongContextApplies(g.MaxPrompt) && !m.LongContextApplies(g.MinPrompt) {
			return true
		}
	}
	return false
}

// priceGroups is PriceGroups given the trace's calls, all (nil when
// needsCalls is false: they are not read then).
func priceGroups(groups []store.CallGroup, prices *pricing.Table, all []store.Call) GroupPriced {
	gs := slices.Clone(groups)
	slices.SortFunc(gs, func(a, b store.CallGroup) int {
		if c := cmp.Compare(a.RequestModel, b.RequestModel); c != 0 {
			return c
		}
		return cmp.Compare(a.ResponseModel, b.ResponseModel)
	})
	var p GroupPriced
	unknown := map[UnknownCalls]int64{}
	unpriced := map[string]bool{}
	known, costKnown := 0.0, true
	for i := range gs {
		g := &gs[i]
		label := g.Model()
		if label == "" {
			label = noModelName
		}
		explicit := 0.0
		if g.ExplicitCalls > 0 {
			if g.ExplicitExact() {
				explicit = store.USDOfPico(g.ExplicitPicoUSD)
			} else {
				for k := range all {
					if c := &all[k]; g.Holds(c) && c.CostUSD != nil {
						explicit += *c.CostUSD
					}
				}
			}
		}
		if g.NoUsage > 0 {
			unknown[UnknownCalls{Model: label, Source: SourceNoUsage}] += g.NoUsage
			costKnown = false
		}
		priced := 0.0
		if g.Priced > 0 {
			m, _, ok := lookupModels(prices, g.ResponseModel, g.RequestModel)
			switch {
			case !ok:
				unknown[UnknownCalls{Model: label, Source: SourceUnpriced}] += g.Priced
				unpriced[label] = true
				costKnown = false
			case !m.LongContextApplies(g.MaxPrompt):
				priced = m.CostAt(pricedSums(g), false)
			case m.LongContextApplies(g.MinPrompt):
				priced = m.CostAt(pricedSums(g), true)
			default:
				var base, long pricing.Usage
				for k := range all {
					c := &all[k]
					if !g.Holds(c) || !c.PricedByTable() {
						continue
					}
					u, _ := c.Usage()
					t := &base
					if m.LongContextApplies(u.Input()) {
						t = &long
					}
					t.Input += u.Uncached
					t.CacheRead += u.CacheRead
					t.CacheCreation += u.CacheCreation
					t.Output += u.Output
				}
				priced = m.CostAt(base, false) + m.CostAt(long, true)
			}
		}
		known += explicit + priced
	}
	p.KnownCostUSD = known
	if costKnown {
		p.CostUSD = ptr(known)
	}
	p.UnpricedModels = []string{}
	for m := range unpriced {
		p.UnpricedModels = append(p.UnpricedModels, m)
	}
	slices.Sort(p.UnpricedModels)
	for k, n := range unknown {
		k.Calls = n
		p.Unknown = append(p.Unknown, k)
	}
	sortUnknown(p.Unknown)
	return p
}

func pricedSums(g *store.CallGroup) pricing.Usage {
	return pricing.Usage{Input: g.PricedUncached, CacheRead: g.PricedCacheRead, CacheCreation: g.PricedCacheCreation, Output: g.PricedOutput}
}

func sortUnknown(u []UnknownCalls) {
	slices.SortFunc(u, func(a, b UnknownCalls) int {
		if c := cmp.Compare(a.Model, b.Model); c != 0 {
			return c
		}
		return cmp.Compare(a.Source, b.Source)
	})
}

// UnknownOf counts the calls of priced calls whose cost is unknown, by
// model and reason: GroupPriced.Unknown computed call by call.
func UnknownOf(calls []Call) []UnknownCalls {
	n := map[UnknownCalls]int64{}
	for _, c := range calls {
		if c.CostUSD != nil {
			continue
		}
		m := c.Model
		if m == "" {
			m = noModelName
		}
		n[UnknownCalls{Model: m, Source: c.Source}]++
	}
	var out []UnknownCalls
	for k, v := range n {
		k.Calls = v
		out = append(out, k)
	}
	sortUnknown(out)
	return out
}

// UnknownCallsText says why a cost is unknown, per model and reason, e.g.
// `2 calls of "gpt-x" reported no token usage; model "y" is not in the
// price table (1 call)`: the list's text (it names no span, since a list
// row carries no calls). "" when nothing is unknown.
func UnknownCallsText(unknown []UnknownCalls) string {
	var b strings.Builder
	for k, u := range unknown {
		if k > 0 {
			b.WriteString("; ")
		}
		calls := "1 call"
		if u.Calls != 1 {
			calls = fmt.Sprintf("%d calls", u.Calls)
		}
		switch u.Source {
		case SourceUnpriced:
			if u.Model == noModelName {
				fmt.Fprintf(&b, "%s name no model", calls)
			} else {
				fmt.Fprintf(&b, "model %q is not in the price table (%s)", u.Model, calls)
			}
		default:
			fmt.Fprintf(&b, "%s of %q reported no token usage", calls, u.Model)
		}
	}
	return b.String()
}
