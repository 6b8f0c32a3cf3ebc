package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
)

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

// costOf prices a finished run from its journal events and the summary
// calls this process made for it (calls is the run's own CallLog) with
// price (nil: nothing priced). A model summary reused from the journal (on
// resume) has no recorded usage: its cost is unknown, never taken as 0.
func costOf(ctx context.Context, j journal.Journal, runID string, price contextlayer.Pricer, calls []contextlayer.SummaryCall) (runCost, error) {
	evs, err := j.Events(ctx, runID)
	if err != nil {
		return runCost{}, fmt.Errorf("run %s: read journal for cost: %w", runID, err)
	}
	var rc runCost
	unpriced := map[string]bool{}
	known := true
	add := func(model string, u llm.Usage) {
		rc.Total = rc.Total.Add(u)
		if price != nil {
			if usd, ok := price(model, u); ok {
				rc.KnownCostUSD += usd
				return
			}
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
	rc.finish(unpriced, known)
	return rc, nil
}

// finish sets the cost (nil unless every part is known) and the note
// saying what is not.
func (rc *runCost) finish(unpriced map[string]bool, known bool) {
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
}
