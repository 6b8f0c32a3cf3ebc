package journal

// ContextRecord is what the runtime journals about one context-layer
// compaction, under the key "context" of a model_request payload, and puts
// on the chat span. The context layer (agents/contextlayer) fills the
// report; the format is defined here so that every reader of a journal —
// the runtime resuming a run, the replayer, loom-eval run's cost, the UI —
// decodes the same type.
type ContextRecord struct {
	Strategy string `json:"strategy"`
	ContextReport
	// SummaryText is the raw text of a model-made summary (journaled so a
	// resume or replay reuses it instead of asking a model again).
	SummaryText string `json:"summary_text,omitempty"`
	// Tiers is the tiered builder's report when the spec asks for tiers.
	Tiers *TierReport `json:"tiers,omitempty"`
}

// ContextReport is what one compaction did to a request (the context
// layer's Report; the runtime also puts it on the model-call span).
type ContextReport struct {
	Tokenizer     string       `json:"tokenizer"`
	Budget        int          `json:"budget"`
	TokensBefore  int          `json:"tokens_before"`
	TokensAfter   int          `json:"tokens_after"`
	Shrunk        []ShrunkItem `json:"shrunk,omitempty"`
	Summary       *SummaryInfo `json:"summary,omitempty"`
	PinsRestored  []Pin        `json:"pins_restored,omitempty"`
	PinsSkipped   int          `json:"pins_skipped,omitempty"` // pins that did not fit MaxPinTokens
	DroppedOldest int          `json:"dropped_oldest,omitempty"`
	OverBudget    bool         `json:"over_budget,omitempty"`
}

// ShrunkItem records one shrunk tool result.
type ShrunkItem struct {
	Index        int    `json:"index"`
	ToolCallID   string `json:"tool_call_id,omitempty"`
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after"`
}

// SummaryInfo records what a summary replaced (its provenance).
type SummaryInfo struct {
	FromIndex   int      `json:"from_index"` // first summarised message, in the input's numbering
	ToIndex     int      `json:"to_index"`   // last summarised message
	Messages    int      `json:"messages"`
	ToolCallIDs []string `json:"tool_call_ids,omitempty"`
	Tokens      int      `json:"tokens"`
	By          string   `json:"by"` // "model" or "extractive"
}

// Pin is a fact to keep, with where it was first seen.
type Pin struct {
	Value  string `json:"value"`
	Source string `json:"source"` // "task", "tool:<call id>", "message <i>"
	// Explicit pins were marked by the task or a tool; pattern pins were
	// recognised by DefaultPinPatterns-like rules. Explicit ones win when
	// the pin allowance is short.
	Explicit bool `json:"explicit"`
}

// TierReport is what the tiered context builder (contextlayer.Builder) did
// with one request's material: a decision per offered item and the
// accounting identity Used + Dropped == Offered. The runtime journals it
// under "tiers" of the context record of a model_request payload.
type TierReport struct {
	Window      int            `json:"window"`
	Reserve     int            `json:"reserve"`
	Usable      int            `json:"usable"`
	Offered     int            `json:"offered"`
	Used        int            `json:"used"`
	Dropped     int            `json:"dropped"`
	Utilization float64        `json:"utilization"`
	ByTier      []TierTokens   `json:"by_tier"`
	Items       []TierDecision `json:"items"`
	// Weakest is the index, among the admitted items in window order, of
	// the slot the U-shaped position curve weighs least (-1: none admitted).
	Weakest   int    `json:"weakest"`
	WeakestID string `json:"weakest_id,omitempty"`
}

// TierTokens is the tokens one tier was offered and used.
type TierTokens struct {
	Tier    string `json:"tier"`
	Offered int    `json:"offered"`
	Used    int    `json:"used"`
}

// TierDecision is the builder's decision on one item.
type TierDecision struct {
	ID         string   `json:"id"`
	Tier       string   `json:"tier"`
	Action     string   `json:"action"` // kept, truncated, dropped
	Offered    int      `json:"offered"`
	Tokens     int      `json:"tokens"`
	Reason     string   `json:"reason"`
	Provenance []string `json:"provenance,omitempty"`
}
