package main

import (
	"fmt"

	"github.com/loomwork/loomwork/agents/graders"
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

// price returns the cost of one call (graders.PriceCall: the response
// model, then the requested one); ok is false when the table knows
// neither name.
func (p callPricer) price(model string, u llm.Usage) (usd float64, ok bool) {
	return graders.PriceCall(p.table, u, model, p.requested)
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
