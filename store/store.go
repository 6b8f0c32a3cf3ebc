package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by GetTrace for a trace id the store does not hold.
var ErrNotFound = errors.New("trace not found")

// Writer stores spans.
//
// WriteSpans is idempotent on (TraceID, SpanID): writing a span that is
// already stored (a retried OTLP batch) leaves exactly one copy, and readers
// never see it twice. It returns nil only after every span in the batch is
// durably persisted; on error the caller must assume none of the batch was
// stored and may retry the whole batch. Spans must have valid ids (the
// collector rejects invalid ones before they get here); a backend returns an
// error for an invalid id rather than storing it.
type Writer interface {
	WriteSpans(ctx context.Context, spans []Span) error
}

// Reader reads traces back.
type Reader interface {
	// GetTrace returns every span of a trace, ordered by StartTime then
	// SpanID, or ErrNotFound.
	GetTrace(ctx context.Context, traceID string) ([]Span, error)
	// ListTraces returns one page of trace summaries matching q.
	ListTraces(ctx context.Context, q TraceQuery) (TracePage, error)
}

// Store is a complete backend.
type Store interface {
	Writer
	Reader
	Close() error
}

// TraceQuery filters, sorts and paginates trace summaries. The zero value
// lists the most recent traces first, DefaultPageSize at a time.
type TraceQuery struct {
	// Start/End bound the trace's start time: Start <= start < End. Zero means
	// unbounded.
	Start, End time.Time
	// Service, Agent and Model match exactly: a trace matches when any of its
	// spans has that service name, agent name, or request/response model.
	Service string
	Agent   string
	Model   string
	// Status is "", "ok" (no error spans) or "error" (at least one).
	Status string
	// MinDuration keeps traces whose wall time is at least this long.
	MinDuration time.Duration
	// Text matches, case-insensitively, as a substring of any span name.
	Text string
	// SortBy is one of SortStart (default), SortDuration, SortSpans,
	// SortErrors, SortTokens; Ascending flips the default descending order.
	SortBy    string
	Ascending bool
	// Limit is the page size (DefaultPageSize when 0, at most MaxPageSize).
	// PageToken is the NextPageToken of the previous page, "" for the first.
	Limit     int
	PageToken string
}

// Sort keys for TraceQuery.SortBy.
const (
	SortStart    = "start"
	SortDuration = "duration"
	SortSpans    = "spans"
	SortErrors   = "errors"
	SortTokens   = "tokens"
)

// Page sizes.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// TracePage is one page of results. NextPageToken is "" on the last page.
type TracePage struct {
	Traces        []TraceSummary `json:"traces"`
	NextPageToken string         `json:"next_page_token,omitempty"`
}

// TraceSummary describes one trace without its spans.
//
// Token sums cover model-call spans only (operation chat, text_completion,
// generate_content or embeddings) so an agent span that repeats its
// children's usage is not counted twice; the scorer's rollup applies the full
// structural rule and prices the usage.
type TraceSummary struct {
	TraceID     string        `json:"trace_id"`
	RootName    string        `json:"root_name"`    // name of the span without a parent ("" if none arrived yet)
	ServiceName string        `json:"service_name"` // the root's service, else the first span's
	AgentNames  []string      `json:"agent_names,omitempty"`
	Models      []string      `json:"models,omitempty"`
	Start       time.Time     `json:"start"`
	End         time.Time     `json:"end"`
	Duration    time.Duration `json:"duration_ns"`
	SpanCount   int64         `json:"span_count"`
	ErrorCount  int64         `json:"error_count"`
	ModelCalls  int64         `json:"model_calls"`
	ToolCalls   int64         `json:"tool_calls"`

	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	ReasoningTokens     int64 `json:"reasoning_tokens"`
}

// OpExecuteTool is the gen_ai.operation.name of a tool call; summaries count
// these spans as ToolCalls.
const OpExecuteTool = "execute_tool"

// IsModelCallOperation reports whether a gen_ai.operation.name denotes a call
// to a model provider (the spans whose usage is billed).
func IsModelCallOperation(op string) bool {
	switch op {
	case "chat", "text_completion", "generate_content", "embeddings":
		return true
	}
	return false
}
