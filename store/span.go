package store

import (
	"fmt"
	"strings"
	"time"
)

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
	// Project is the project the span was stored under: the project of
	// the key that sent it, "" (the default project) without keys. The
	// collector sets it from the authenticated key, never from the span.
	Project string `json:"project,omitempty"`
	// Retention is how long the span's project keeps its traces (0: for
	// ever), set by the collector from the project's policy next to
	// Project. A backend that stamps an expiry on each row when it is
	// written (ClickHouse's TTL) reads it; the others ignore it. It is not
	// stored and reads back as 0.
	Retention    time.Duration `json:"-"`
	TraceID      string        `json:"trace_id"`
	SpanID       string        `json:"span_id"`
	ParentSpanID string        `json:"parent_span_id,omitempty"`
	TraceState   string        `json:"trace_state,omitempty"`
	Name         string        `json:"name"`
	Kind         string        `json:"kind"` // internal, server, client, producer, consumer, unspecified
	StartTime    time.Time     `json:"start_time"`
	EndTime      time.Time     `json:"end_time"`

	StatusCode    string `json:"status_code"` // StatusUnset, StatusOK or StatusError
	StatusMessage string `json:"status_message,omitempty"`

	// Flags is OTLP's Span.flags: the W3C trace flags in bits 0-7 (FlagSampled)
	// and whether the parent is remote (FlagHasIsRemote, FlagIsRemote).
	// 0 when the sender set none.
	Flags uint32 `json:"flags,omitempty"`
	// The SDK's counts of what it dropped from this span (its attribute,
	// event and link limits): a non-zero count means the span is incomplete.
	DroppedAttributesCount uint32 `json:"dropped_attributes_count,omitempty"`
	DroppedEventsCount     uint32 `json:"dropped_events_count,omitempty"`
	DroppedLinksCount      uint32 `json:"dropped_links_count,omitempty"`

	ServiceName  string `json:"service_name"`
	ScopeName    string `json:"scope_name,omitempty"`
	ScopeVersion string `json:"scope_version,omitempty"`
	// The rest of the instrumentation scope and of the resource, as sent
	// (shared by every span of one OTLP ScopeSpans).
	ScopeAttributes                Attributes `json:"scope_attributes,omitempty"`
	ScopeDroppedAttributesCount    uint32     `json:"scope_dropped_attributes_count,omitempty"`
	ScopeSchemaURL                 string     `json:"scope_schema_url,omitempty"`
	ResourceSchemaURL              string     `json:"resource_schema_url,omitempty"`
	ResourceDroppedAttributesCount uint32     `json:"resource_dropped_attributes_count,omitempty"`

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

// RemoteParent reports whether the sender said the span's parent is in
// another process (remote) and whether it said anything (known).
func (s *Span) RemoteParent() (remote, known bool) { return flagsRemote(s.Flags) }

// Event is a span event.
type Event struct {
	Time                   time.Time  `json:"time"`
	Name                   string     `json:"name"`
	Attributes             Attributes `json:"attributes,omitempty"`
	DroppedAttributesCount uint32     `json:"dropped_attributes_count,omitempty"`
}

// Link is a span link.
type Link struct {
	TraceID    string     `json:"trace_id"`
	SpanID     string     `json:"span_id"`
	TraceState string     `json:"trace_state,omitempty"`
	Attributes Attributes `json:"attributes,omitempty"`
	// Flags is OTLP's Link.flags, laid out as Span.Flags; the remote bits
	// say whether the linked span is in another process.
	Flags                  uint32 `json:"flags,omitempty"`
	DroppedAttributesCount uint32 `json:"dropped_attributes_count,omitempty"`
}

// Remote reports whether the sender said the linked span is in another
// process (remote) and whether it said anything (known).
func (l *Link) Remote() (remote, known bool) { return flagsRemote(l.Flags) }

// Bits of Span.Flags and Link.Flags, as OTLP defines them (SpanFlags in
// trace.proto): bits 0-7 are the W3C trace flags, bit 8 says whether bit 9
// is set at all, bit 9 says the parent (of a span) or the linked span (of
// a link) is remote.
const (
	FlagSampled     uint32 = 0x01
	FlagTraceFlags  uint32 = 0xff
	FlagHasIsRemote uint32 = 0x100
	FlagIsRemote    uint32 = 0x200
)

func flagsRemote(f uint32) (remote, known bool) {
	return f&FlagIsRemote != 0, f&FlagHasIsRemote != 0
}

// DescribeFlags spells out span or link flags for a reader: "sampled",
// "remote" or "local" when the sender said, and any other bits in hex, e.g.
// "sampled, remote". It returns "" for 0 (no flags sent).
func DescribeFlags(f uint32) string {
	if f == 0 {
		return ""
	}
	var parts []string
	if f&FlagSampled != 0 {
		parts = append(parts, "sampled")
	} else {
		parts = append(parts, "not sampled")
	}
	if remote, known := flagsRemote(f); known {
		if remote {
			parts = append(parts, "remote")
		} else {
			parts = append(parts, "local")
		}
	} else if remote {
		// IS_REMOTE without HAS_IS_REMOTE is not meaningful; show the bit.
		parts = append(parts, "is-remote bit without has-is-remote")
	}
	if rest := f &^ (FlagSampled | FlagHasIsRemote | FlagIsRemote); rest != 0 {
		parts = append(parts, fmt.Sprintf("other bits 0x%x", rest))
	}
	return strings.Join(parts, ", ")
}
