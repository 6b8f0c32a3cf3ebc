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
