package main

import (
	"fmt"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/scorer/pricing"
)

// callPricer prices model calls the way the trace rollup does
// (scorer/rollup): the response model first, then the requested one, at the
// price table's rates (cache reads and writes apart, long-context tier).
type callPricer struct {
	table     *pricing.Table
	requested string // --model ("" for the scripted policies)
}

// price returns the cost of one call and the model name it was looked up
// as; ok is false when the table knows neither name.
func (p callPricer) price(model string, u llm.Usage) (usd float64, ok bool) {
	for _, name := range []string{model, p.requested} {
		if name == "" {
			continue
		}
		if m, _, found := p.table.Lookup(name); found {
			return m.Cost(billedUsage(u)), true
		}
	}
	return 0, false
}

// billedUsage splits normalised usage (input includes cached input) into
// the parts providers bill separately, as the rollup does.
func billedUsage(u llm.Usage) pricing.Usage {
	b, _ := pricing.Split(u.InputTokens, u.CacheReadTokens, u.CacheCreationTokens, u.OutputTokens)
	return b
}

// formatCost is a cost for people: dollars, or "unknown" with the reason
// and the part that is known — never a 0 standing in for "no price".
func formatCost(r runner.Result) string {
	if r.CostUSD != nil {
		return fmt.Sprintf("$%.6f", *r.CostUSD)
	}
	s := "unknown (" + r.CostNote
	if r.KnownCostUSD > 0 {
		s += fmt.Sprintf("; at least $%.6f", r.KnownCostUSD)
	}
	return s + ")"
}

// gatewayPrices hands the scorer's price for a model to the gateway, whose
// budget refuses calls by their worst-case cost. This is wiring: agents do
// not import the scorer, so the conversion lives where both are visible.
func gatewayPrices(pm *pricing.Model) gateway.Prices {
	p := gateway.Prices{InputPerMTok: pm.Input, OutputPerMTok: pm.Output}
	if pm.CacheRead != nil {
		p.CacheReadPerMTok = *pm.CacheRead
	}
	if pm.CacheWrite != nil {
		p.CacheWritePerMTok = *pm.CacheWrite
	}
	return p
}
