package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNotFound is wrapped by the error of GetTrace for a trace id the store
// does not hold, and of ResolveTraceID when no stored trace id matches.
var ErrNotFound = errors.New("trace not found")

// ErrBadTraceID is wrapped by the error for a malformed trace id: one that
// is not hex or has the wrong length (GetTrace wants exactly TraceIDLen
// lower-case hex digits, ResolveTraceID MinTraceIDPrefix to TraceIDLen hex
// digits of either case). The error names the input. It is the caller's
// mistake (an HTTP 400, a usage error), never an operational failure.
var ErrBadTraceID = errors.New("invalid trace id")

// ErrAmbiguousTraceID is wrapped by ResolveTraceID's error for a prefix
// that more than one stored trace id starts with. The error names the
// prefix and lists up to AmbiguousCandidates of the matching ids.
var ErrAmbiguousTraceID = errors.New("ambiguous trace id prefix")

// ErrUnavailable is wrapped by a store's errors when its server cannot be
// reached or did not answer in time (refused, reset, a timeout, not
// connected yet): an operational outage, which a later retry may get past
// — an HTTP 503 with Retry-After, a retryable OTLP status — unlike a query
// the server refused. The error names the server.
var ErrUnavailable = errors.New("store unavailable")

// Trace id lengths, in hex digits.
const (
	// TraceIDLen is the length of a full trace id (16 bytes).
	TraceIDLen = 32
	// MinTraceIDPrefix is the shortest prefix ResolveTraceID accepts: the
	// trace lists show ids this long.
	MinTraceIDPrefix = 8
	// AmbiguousCandidates is how many matching ids an ErrAmbiguousTraceID
	// error lists at most.
	AmbiguousCandidates = 5
)

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
	// ResolveTraceID returns the full id (TraceIDLen lower-case hex digits)
	// of the one listed trace whose id is, or starts with, idOrPrefix:
	// MinTraceIDPrefix to TraceIDLen hex digits, upper or lower case. Its
	// error wraps ErrBadTraceID for any other input (checked before the
	// store is asked), ErrNotFound when no trace id matches, and
	// ErrAmbiguousTraceID, listing some of the matches, when several do.
	// It reads the index ListTraces lists from, so a trace whose spans
	// are being written may resolve a moment after GetTrace finds it;
	// callers holding a full lower-case id need not resolve it.
	ResolveTraceID(ctx context.Context, idOrPrefix string) (string, error)
}

// Store is a complete backend, started (a backend's New builds one without
// I/O, its Start opens or connects; the backends' Open and storeurl.Open
// return started stores).
//
// Shutdown stops the store: it waits, within ctx, for what is in flight and
// releases every connection. It is nil on a store never started, and safe
// to call more than once. Every other method then fails with an error.
type Store interface {
	Writer
	Reader
	Shutdown(ctx context.Context) error
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
	// Search holds the clauses of a search expression (ParseSearch; the
	// q= parameter): attributes, exact span names, evidence ids. A trace
	// matches when every clause holds (see TraceMatchesSearch).
	Search []SearchClause
	// Session matches traces with a span whose ConversationID
	// (gen_ai.conversation.id, OpenInference session.id) is this, exactly.
	Session string
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

// TraceSummary describes one trace without its spans. Summarize is the one
// rule that derives it; every backend's ListTraces returns exactly what
// Summarize returns for the trace's stored spans.
//
// Token sums cover billed calls only (Roles: a span whose descendants carry
// usage repeats their usage and is not counted again), each call's input
// with its cache reads and writes.
type TraceSummary struct {
	TraceID     string   `json:"trace_id"`
	RootName    string   `json:"root_name"`    // name of the span without a parent ("" if none arrived yet)
	ServiceName string   `json:"service_name"` // the root's service, else the first span's
	AgentNames  []string `json:"agent_names,omitempty"`
	Models      []string `json:"models,omitempty"`
	// ModelLabels are the loomwork.model.label values of the spans
	// ("scripted" when a scripted model answered).
	ModelLabels []string  `json:"model_labels,omitempty"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	// Duration is End − Start: from the earliest span's start to the
	// latest span's end, work that outlived its parent included.
	Duration time.Duration `json:"duration_ns"`
	// AfterRoot is how long spans kept running after the root span ended
	// (async work); 0 when nothing outlived the root, no root arrived, or
	// the trace has several fragments.
	AfterRoot time.Duration `json:"after_root_ns"`
	// Fragments counts the tops of the span tree: 1 for a whole trace;
	// more when several roots or spans whose parent never arrived.
	Fragments        int64 `json:"fragments"`
	SpanCount        int64 `json:"span_count"`
	ErrorCount       int64 `json:"error_count"`
	ModelCalls       int64 `json:"model_calls"`
	FailedModelCalls int64 `json:"failed_model_calls"`
	ToolCalls        int64 `json:"tool_calls"`

	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	ReasoningTokens     int64 `json:"reasoning_tokens"`

	// Groups are the billed calls summed per (request model, response
	// model), sorted: what a price table prices to give the trace's cost
	// (scorer/rollup.PriceGroups), and what a list row carries.
	Groups []CallGroup `json:"call_groups,omitempty"`

	// Calls are the billed calls, in canonical order (start, span id).
	// Summarize sets them (the trace page lists every call); ListTraces
	// leaves them nil, so a list row's size does not grow with its trace
	// (a CallReader reads them for one trace).
	Calls []Call `json:"calls,omitempty"`
}

// ParseTraceIDPrefix checks idOrPrefix as ResolveTraceID takes it
// (MinTraceIDPrefix to TraceIDLen hex digits, either case; not the
// all-zero id) and returns it lower-cased. The error wraps ErrBadTraceID and
// names the input.
func ParseTraceIDPrefix(idOrPrefix string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w %s: %s; want %d to %d hex digits", ErrBadTraceID, quoteInput(idOrPrefix), why, MinTraceIDPrefix, TraceIDLen)
	}
	if idOrPrefix == "" {
		return "", bad("empty")
	}
	for i := 0; i < len(idOrPrefix); i++ {
		if c := idOrPrefix[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", bad(fmt.Sprintf("not hex (%q at offset %d)", c, i))
		}
	}
	switch n := len(idOrPrefix); {
	case n < MinTraceIDPrefix:
		return "", bad(fmt.Sprintf("only %d hex digits", n))
	case n > TraceIDLen:
		return "", bad(fmt.Sprintf("%d hex digits", n))
	}
	p := strings.ToLower(idOrPrefix)
	if p == strings.Repeat("0", TraceIDLen) {
		return "", fmt.Errorf("%w %s: the all-zero id is invalid", ErrBadTraceID, quoteInput(idOrPrefix))
	}
	return p, nil
}

// quoteInput quotes a caller's input for an error message, clipped so a
// huge input does not make a huge message.
func quoteInput(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q… (%d bytes)", s[:max], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// TraceIDOf is what readers of a user-given id (the UI, the JSON API,
// `traces get`) call: a full id, in either case, is the id itself in lower
// case, with no lookup (GetTrace then says whether the trace exists; on a
// store whose trace index trails its spans the lookup could miss a trace
// GetTrace finds), and anything else goes to r.ResolveTraceID.
func TraceIDOf(ctx context.Context, r Reader, idOrPrefix string) (string, error) {
	if full := strings.ToLower(idOrPrefix); IsFullTraceID(full) {
		return full, nil
	}
	return r.ResolveTraceID(ctx, idOrPrefix)
}

// ResolveTraceIDWith implements Reader.ResolveTraceID for a backend, so
// every backend accepts, rejects and reports the same way. It checks
// idOrPrefix with ParseTraceIDPrefix, then calls match with the smallest
// and largest full ids starting with the prefix: match returns, in
// ascending order, up to limit stored trace ids x with lo <= x <= hi (all
// TraceIDLen lower-case hex digits; comparing them as strings orders them
// as their bytes, so a backend can scan an index on either).
func ResolveTraceIDWith(ctx context.Context, idOrPrefix string, match func(ctx context.Context, lo, hi string, limit int) ([]string, error)) (string, error) {
	prefix, err := ParseTraceIDPrefix(idOrPrefix)
	if err != nil {
		return "", fmt.Errorf("resolve trace id: %w", err)
	}
	pad := TraceIDLen - len(prefix)
	lo := prefix + strings.Repeat("0", pad)
	hi := prefix + strings.Repeat("f", pad)
	ids, err := match(ctx, lo, hi, AmbiguousCandidates+1)
	if err != nil {
		return "", fmt.Errorf("resolve trace id %s: %w", quoteInput(idOrPrefix), err)
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("resolve trace id %s: %w", quoteInput(idOrPrefix), ErrNotFound)
	case 1:
		return ids[0], nil
	}
	more := ""
	if len(ids) > AmbiguousCandidates {
		ids, more = ids[:AmbiguousCandidates], " and more"
	}
	return "", fmt.Errorf("resolve trace id %s: %w: matches traces %s%s; give more digits", quoteInput(idOrPrefix), ErrAmbiguousTraceID, strings.Join(ids, ", "), more)
}
