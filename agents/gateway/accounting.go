package gateway

import (
	"fmt"
	"sync"

	"github.com/loomwork/loomwork/agents/llm"
)

// Cost prices a usage at the given prices. Usage.InputTokens includes cached
// input (the normalised convention), so cache reads and writes are taken out
// of it and priced at their own rates.
func Cost(p Prices, u llm.Usage) float64 {
	cacheRead := p.CacheReadPerMTok
	if cacheRead == 0 {
		cacheRead = p.InputPerMTok
	}
	cacheWrite := p.CacheWritePerMTok
	if cacheWrite == 0 {
		cacheWrite = p.InputPerMTok
	}
	uncached := u.InputTokens - u.CacheReadTokens - u.CacheCreationTokens
	if uncached < 0 { // inconsistent report; never price negative tokens
		uncached = 0
	}
	return (float64(uncached)*p.InputPerMTok +
		float64(u.CacheReadTokens)*cacheRead +
		float64(u.CacheCreationTokens)*cacheWrite +
		float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
}

// worstCaseCost is the most an attempt can cost: all input uncached (cache
// writes can cost more than plain input, so take the dearer rate) and the
// full output allowance.
func worstCaseCost(p Prices, inTokens, maxTokens int64) float64 {
	in := p.InputPerMTok
	if p.CacheWritePerMTok > in {
		in = p.CacheWritePerMTok
	}
	return (float64(inTokens)*in + float64(maxTokens)*p.OutputPerMTok) / 1e6
}

// EstimateInputTokens estimates a request's input tokens without a
// tokenizer: one token per 3 bytes of text, JSON arguments and tool schemas
// (BPE tokenizers average about 4 bytes per token on English prose, so this
// over-estimates ordinary text, the safe side for a budget and a context
// window; bytes rather than runes, because multi-byte scripts tokenise
// worse), plus a small per-message and per-tool framing allowance.
func EstimateInputTokens(req llm.Request) int64 {
	const perMessage, perTool = 4, 8
	bytes := len(req.System)
	n := int64(perMessage)
	for _, m := range req.Messages {
		n += perMessage
		bytes += len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			bytes += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += perTool
		bytes += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n + int64((bytes+2)/3)
}

// BudgetError is a refusal before any request was sent: the spend so far
// (including worst cases reserved by calls in flight) plus this attempt's
// worst case would exceed the budget.
type BudgetError struct {
	Model       string
	SpentUSD    float64 // settled spend plus in-flight reservations
	EstimateUSD float64 // this attempt's worst case
	BudgetUSD   float64
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("budget refused %s: spent $%.6f + worst case $%.6f > budget $%.6f",
		e.Model, e.SpentUSD, e.EstimateUSD, e.BudgetUSD)
}

// ModelAccount is the running account of one chain entry.
type ModelAccount struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	// Attempts counts every request sent, failed ones included.
	Attempts  int `json:"attempts"`
	Successes int `json:"successes"`
	Failures  int `json:"failures"`
	Retries   int `json:"retries"`   // attempts after the first on this model within one call
	Fallbacks int `json:"fallbacks"` // calls this model served as a fallback target
	// FailuresWithoutUsage are failed attempts the provider reported no usage
	// for: they are counted here because there is nothing to price.
	FailuresWithoutUsage int `json:"failures_without_usage"`
	// Refusals are attempts the budget refused before sending.
	Refusals int       `json:"refusals"`
	Usage    llm.Usage `json:"usage"`    // reported usage, failed attempts included
	CostUSD  float64   `json:"cost_usd"` // priced from Usage
}

// Snapshot is a consistent copy of the accounts.
type Snapshot struct {
	BudgetUSD   float64        `json:"budget_usd,omitempty"`
	SpentUSD    float64        `json:"spent_usd"`
	ReservedUSD float64        `json:"reserved_usd"` // worst cases of calls in flight
	Models      []ModelAccount `json:"models"`       // chain order
}

// Total sums the per-model accounts.
func (s Snapshot) Total() ModelAccount {
	t := ModelAccount{Name: "total"}
	for _, m := range s.Models {
		t.Attempts += m.Attempts
		t.Successes += m.Successes
		t.Failures += m.Failures
		t.Retries += m.Retries
		t.Fallbacks += m.Fallbacks
		t.FailuresWithoutUsage += m.FailuresWithoutUsage
		t.Refusals += m.Refusals
		t.Usage = t.Usage.Add(m.Usage)
		t.CostUSD += m.CostUSD
	}
	return t
}

// Accounting returns a snapshot of the per-model accounts.
func (g *Gateway) Accounting() Snapshot { return g.acct.snapshot() }

type accounts struct {
	mu       sync.Mutex
	budget   float64
	spent    float64
	reserved float64
	order    []string
	byName   map[string]*ModelAccount
}

func newAccounts(cfg Config) *accounts {
	a := &accounts{budget: cfg.BudgetUSD, byName: map[string]*ModelAccount{}}
	for _, m := range cfg.Models {
		n := m.entryName()
		a.order = append(a.order, n)
		a.byName[n] = &ModelAccount{Name: n, Provider: m.Provider}
	}
	return a
}

// reserve checks the budget and, if the worst case fits, holds it until the
// attempt settles, so concurrent calls cannot jointly overspend.
func (a *accounts) reserve(model string, worst float64) (float64, *BudgetError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.budget > 0 && a.spent+a.reserved+worst > a.budget {
		a.byName[model].Refusals++
		return 0, &BudgetError{Model: model, SpentUSD: a.spent + a.reserved, EstimateUSD: worst, BudgetUSD: a.budget}
	}
	a.reserved += worst
	return worst, nil
}

func (a *accounts) settle(model string, reservation float64, usage *llm.Usage, cost float64, ok, retry, fallback bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reserved -= reservation
	if a.reserved < 1e-12 {
		a.reserved = 0 // float drift
	}
	a.spent += cost
	m := a.byName[model]
	m.Attempts++
	if ok {
		m.Successes++
	} else {
		m.Failures++
		if usage == nil {
			m.FailuresWithoutUsage++
		}
	}
	if retry {
		m.Retries++
	}
	if fallback {
		m.Fallbacks++
	}
	if usage != nil {
		m.Usage = m.Usage.Add(*usage)
	}
	m.CostUSD += cost
}

func (a *accounts) snapshot() Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := Snapshot{BudgetUSD: a.budget, SpentUSD: a.spent, ReservedUSD: a.reserved}
	for _, n := range a.order {
		s.Models = append(s.Models, *a.byName[n])
	}
	return s
}
