package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
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

// runCost is a run's tokens and cost: its model steps (as journaled,
// recorded or made now) plus the context layer's summary calls.
type runCost struct {
	SummaryCalls    int
	SummaryUsage    llm.Usage
	SummariesReused int
	Total           llm.Usage
	CostUSD         *float64 // nil: unknown
	KnownCostUSD    float64
	Unpriced        []string
	Note            string
}

// costOfRun prices a finished run from its journal events and the summary
// calls this process made for it (calls is the run's own CallLog). A model
// summary reused from the journal (on resume) has no recorded usage: its
// cost is unknown, never taken as 0.
func costOfRun(ctx context.Context, j *journaldb.Store, runID string, p callPricer, calls []contextlayer.SummaryCall) (runCost, error) {
	evs, err := j.Events(ctx, runID)
	if err != nil {
		return runCost{}, fmt.Errorf("run %s: read journal for cost: %w", runID, err)
	}
	var rc runCost
	unpriced := map[string]bool{}
	known := true
	add := func(model string, u llm.Usage) {
		rc.Total = rc.Total.Add(u)
		if usd, ok := p.price(model, u); ok {
			rc.KnownCostUSD += usd
			return
		}
		known = false
		if model == "" {
			model = "(no model name)"
		}
		unpriced[model] = true
	}
	journaled := map[int]bool{} // steps whose request carries a model summary
	for _, e := range evs {
		switch e.Kind {
		case journal.KindModelResponse:
			var resp llm.Response
			if err := json.Unmarshal(e.Payload, &resp); err != nil {
				return runCost{}, fmt.Errorf("run %s seq %d: decode model_response usage: %w", runID, e.Seq, err)
			}
			add(resp.Model, resp.Usage)
		case journal.KindModelRequest:
			var p journal.ModelRequest
			if json.Unmarshal(e.Payload, &p) == nil && p.Context != nil && p.Context.SummaryText != "" {
				journaled[e.Step] = true
			}
		}
	}
	made := map[int]bool{}
	for _, c := range calls {
		if c.Err != nil { // a failed summary call fails the run; nothing to add
			continue
		}
		rc.SummaryCalls++
		rc.SummaryUsage = rc.SummaryUsage.Add(c.Usage)
		made[c.Step] = true
		add(c.Model, c.Usage)
	}
	for step := range journaled {
		if !made[step] {
			rc.SummariesReused++
		}
	}
	for m := range unpriced {
		rc.Unpriced = append(rc.Unpriced, m)
	}
	sort.Strings(rc.Unpriced)
	var notes []string
	if len(rc.Unpriced) > 0 {
		notes = append(notes, "no price for "+strings.Join(rc.Unpriced, ", "))
	}
	if rc.SummariesReused > 0 {
		known = false
		notes = append(notes, fmt.Sprintf("%d context summaries reused from the journal (their usage is not recorded)", rc.SummariesReused))
	}
	if known {
		rc.CostUSD = &rc.KnownCostUSD
	}
	rc.Note = strings.Join(notes, "; ")
	return rc, nil
}

// formatCost is a cost for people: dollars, or "unknown" with the reason
// and the part that is known — never a 0 standing in for "no price".
func formatCost(r runResult) string {
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
