package store

import "time"

// Status codes, as OTLP defines them.
const (
	StatusUnset = "unset"
	StatusOK    = "ok"
	StatusError = "error"
)

// Span is one stored span. Identifiers are lower-case hex (32 characters for
// trace ids, 16 for span ids); ParentSpanID is empty for a root.
//
// The typed GenAI fields are derived from Attributes by the collector's
// mapping; Attributes still holds every attribute as it was sent (including
// the ones promoted), so a reader can always see the original.
type Span struct {
	TraceID      string    `json:"trace_id"`
	SpanID       string    `json:"span_id"`
	ParentSpanID string    `json:"parent_span_id,omitempty"`
	TraceState   string    `json:"trace_state,omitempty"`
	Name         string    `json:"name"`
	Kind         string    `json:"kind"` // internal, server, client, producer, consumer, unspecified
	StartTime    time.Time `json:"start_time"`
	EndTime      time.Time `json:"end_time"`

	StatusCode    string `json:"status_code"` // StatusUnset, StatusOK or StatusError
	StatusMessage string `json:"status_message,omitempty"`

	ServiceName  string `json:"service_name"`
	ScopeName    string `json:"scope_name,omitempty"`
	ScopeVersion string `json:"scope_version,omitempty"`

	// GenAI fields.
	Operation      string `json:"operation,omitempty"` // gen_ai.operation.name, normalised (chat, execute_tool, ...)
	Provider       string `json:"provider,omitempty"`  // gen_ai.provider.name (or deprecated gen_ai.system)
	RequestModel   string `json:"request_model,omitempty"`
	ResponseModel  string `json:"response_model,omitempty"`
	AgentName      string `json:"agent_name,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	ToolName       string `json:"tool_name,omitempty"`
	ToolCallID     string `json:"tool_call_id,omitempty"`

	// Usage. HasUsage is true when the sender reported any token count, so a
	// reported zero is distinguishable from no report.
	HasUsage            bool  `json:"has_usage,omitempty"`
	InputTokens         int64 `json:"input_tokens,omitempty"` // includes cached input, as the GenAI convention defines
	OutputTokens        int64 `json:"output_tokens,omitempty"`
	CacheReadTokens     int64 `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
	ReasoningTokens     int64 `json:"reasoning_tokens,omitempty"`
	// CostUSD is an explicit cost set by the sender (e.g. OpenInference's
	// llm.cost.total); nil when the sender set none.
	CostUSD *float64 `json:"cost_usd,omitempty"`

	RetrievedDocs []string `json:"retrieved_docs,omitempty"` // gen_ai.retrieval.documents ids
	CitedDocs     []string `json:"cited_docs,omitempty"`     // loomwork.citations

	Attributes         Attributes `json:"attributes,omitempty"`
	ResourceAttributes Attributes `json:"resource_attributes,omitempty"`
	Events             []Event    `json:"events,omitempty"`
	Links              []Link     `json:"links,omitempty"`
}

// Duration is EndTime - StartTime.
func (s *Span) Duration() time.Duration { return s.EndTime.Sub(s.StartTime) }

// IsError reports whether the span's status is error.
func (s *Span) IsError() bool { return s.StatusCode == StatusError }

// Event is a span event.
type Event struct {
	Time       time.Time  `json:"time"`
	Name       string     `json:"name"`
	Attributes Attributes `json:"attributes,omitempty"`
}

// Link is a span link.
type Link struct {
	TraceID    string     `json:"trace_id"`
	SpanID     string     `json:"span_id"`
	TraceState string     `json:"trace_state,omitempty"`
	Attributes Attributes `json:"attributes,omitempty"`
}
