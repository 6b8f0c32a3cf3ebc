package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file holds the windowed read of one trace: the capability a reader
// offers so that a view of a huge trace (a million spans) reads what the
// user looks at, never the whole trace.

// WindowReader is an optional capability of a Reader (callers check it
// with a type assertion on this interface and fall back to GetTrace when
// it is missing). It reads one trace by the window a user looks at: its
// summary as ingest keeps it, a page of the children of one span with
// light fields, a page of full spans, one span, the light structure of
// every span (what a rollup's tree needs, never attributes or payloads),
// and a small per-trace cache of what a view derived from that structure.
//
// Every method is scoped to the project of ctx (ProjectOf), as GetTrace
// is; a trace id must be TraceIDLen lower-case hex digits (an error
// wrapping ErrBadTraceID otherwise); a trace the project does not hold is
// ErrNotFound. Pages are in canonical order (start time, then span id, as
// GetTrace orders spans) and carry a keyset token: a span that arrives
// between two calls is listed on a later page if it sorts after the
// token, and no span is listed twice. A malformed token is an error
// wrapping ErrBadPageToken.
type WindowReader interface {
	// TraceSize returns how many distinct spans the trace has stored,
	// cheaply (no span read where the store keeps the count): what a
	// reader decides between reading a trace whole and by window on.
	TraceSize(ctx context.Context, traceID string) (int64, error)
	// TraceHead returns what Summarize returns for the trace's stored
	// spans, its billed calls included, from what the store keeps per
	// trace: no span is read where ingest keeps the summary.
	TraceHead(ctx context.Context, traceID string) (TraceSummary, error)
	// SpanNodes returns one page of the light spans q selects, each with
	// its number of children.
	SpanNodes(ctx context.Context, traceID string, q NodeQuery) (NodePage, error)
	// SpanPage returns one page of the trace's spans in full (as GetTrace
	// returns them), in canonical order: pageToken is "" for the first
	// page, then the previous page's NextPageToken; limit is the page
	// size (DefaultSpanPage when 0, at most MaxSpanPage).
	SpanPage(ctx context.Context, traceID, pageToken string, limit int) (SpanPage, error)
	// GetSpan returns one span in full, or an error wrapping ErrNotFound
	// when the trace or the span is not stored.
	GetSpan(ctx context.Context, traceID, spanID string) (Span, error)
	// TraceBones returns the structure of every span of the trace, each
	// span id once, in no particular order: what a tree, its critical
	// path and the billing rule's aggregates need, read from typed
	// columns only.
	TraceBones(ctx context.Context, traceID string) ([]Bone, error)
	// LoadDerived returns what SaveDerived last saved for the trace under
	// kind, and the span count it was saved for; ok is false when nothing
	// is saved. A caller recomputes when the trace's span count
	// (TraceHead) has changed since.
	LoadDerived(ctx context.Context, traceID, kind string) (data []byte, spans int64, ok bool, err error)
	// SaveDerived keeps data (at most MaxDerivedBytes) for the trace under
	// kind, computed from spans spans, replacing what was saved. A store
	// that cannot write (opened read-only) returns an error wrapping
	// ErrReadOnly; callers then recompute next time.
	SaveDerived(ctx context.Context, traceID, kind string, spans int64, data []byte) error
}

// ErrReadOnly is wrapped by SaveDerived's error on a store opened
// read-only.
var ErrReadOnly = errors.New("store is read-only")

// MaxDerivedBytes bounds what SaveDerived keeps for one trace and kind.
const MaxDerivedBytes = 64 << 20

// Span page sizes (SpanPage, SpanNodes).
const (
	DefaultSpanPage = 500
	MaxSpanPage     = 5000
)

// NodeQuery selects light spans of one trace. Exactly one of Parent, IDs
// and Text is set.
type NodeQuery struct {
	// Parent selects the children of this span (those naming it as
	// their parent), a page at a time.
	Parent string
	// IDs selects these spans (at most MaxSpanPage), in one page; ids
	// the trace does not hold are left out.
	IDs []string
	// Text selects the spans whose name, operation, tool, request or
	// response model, service, span id or status message contains Text,
	// case-insensitively (ASCII case folding), a page at a time: the
	// fields a waterfall's search matches on.
	Text string
	// PageToken is the previous page's NextPageToken ("" for the first);
	// Limit the page size (DefaultSpanPage when 0, at most MaxSpanPage).
	PageToken string
	Limit     int
}

// Check validates q: one selector, a sane limit, ids and token well formed.
// It returns the page size to use.
func (q NodeQuery) Check() (int, error) {
	n := 0
	if q.Parent != "" {
		n++
		if !IsSpanID(q.Parent) {
			return 0, fmt.Errorf("span nodes: parent %s is not a span id (16 lower-case hex digits)", quoteInput(q.Parent))
		}
	}
	if q.IDs != nil {
		n++
		if len(q.IDs) > MaxSpanPage {
			return 0, fmt.Errorf("span nodes: %d span ids, at most %d", len(q.IDs), MaxSpanPage)
		}
		for _, id := range q.IDs {
			if !IsSpanID(id) {
				return 0, fmt.Errorf("span nodes: %s is not a span id (16 lower-case hex digits)", quoteInput(id))
			}
		}
	}
	if q.Text != "" {
		n++
	}
	if n != 1 {
		return 0, errors.New("span nodes: set exactly one of parent, ids and text")
	}
	if _, _, err := DecodeSpanToken(q.PageToken); err != nil {
		return 0, err
	}
	return PageLimit(q.Limit)
}

// PageLimit checks a span page size: DefaultSpanPage for 0, an error for a
// negative size or one above MaxSpanPage.
func PageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultSpanPage, nil
	case limit < 0 || limit > MaxSpanPage:
		return 0, fmt.Errorf("limit %d: want 1 to %d spans", limit, MaxSpanPage)
	}
	return limit, nil
}

// IsSpanID reports whether id is a stored span id: 16 lower-case hex
// digits.
func IsSpanID(id string) bool {
	if len(id) != 16 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// FoldText lower-cases ASCII letters only, the case folding NodeQuery.Text
// matches with (both stores fold the same way).
func FoldText(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// SpanNode is a span's light fields, what a waterfall row shows, and its
// number of children.
type SpanNode struct {
	SpanID        string    `json:"span_id"`
	ParentSpanID  string    `json:"parent_span_id,omitempty"`
	Name          string    `json:"name"`
	Kind          string    `json:"kind"`
	ServiceName   string    `json:"service_name"`
	StartTime     time.Time `json:"start_time"`
	EndTime       time.Time `json:"end_time"`
	StatusCode    string    `json:"status_code"`
	StatusMessage string    `json:"status_message,omitempty"`
	Operation     string    `json:"operation,omitempty"`
	RequestModel  string    `json:"request_model,omitempty"`
	ResponseModel string    `json:"response_model,omitempty"`
	ToolName      string    `json:"tool_name,omitempty"`
	HasUsage      bool      `json:"has_usage,omitempty"`
	InputTokens   int64     `json:"input_tokens,omitempty"`
	OutputTokens  int64     `json:"output_tokens,omitempty"`
	// Children counts the spans naming this one as their parent (itself
	// excluded, when it names itself).
	Children int64 `json:"children"`
}

// NodeOf is a span's light fields (Children left 0).
func NodeOf(s *Span) SpanNode {
	return SpanNode{SpanID: s.SpanID, ParentSpanID: s.ParentSpanID, Name: s.Name, Kind: s.Kind, ServiceName: s.ServiceName,
		StartTime: s.StartTime, EndTime: s.EndTime, StatusCode: s.StatusCode, StatusMessage: s.StatusMessage,
		Operation: s.Operation, RequestModel: s.RequestModel, ResponseModel: s.ResponseModel, ToolName: s.ToolName,
		HasUsage: s.HasUsage, InputTokens: s.InputTokens, OutputTokens: s.OutputTokens}
}

// MatchesText is NodeQuery.Text's rule for one span's fields; folded is
// FoldText of the text.
func (n *SpanNode) MatchesText(folded string) bool {
	for _, f := range []string{n.Name, n.Operation, n.ToolName, n.RequestModel, n.ResponseModel, n.ServiceName, n.SpanID, n.StatusMessage} {
		if strings.Contains(FoldText(f), folded) {
			return true
		}
	}
	return false
}

// NodePage is one page of SpanNodes; NextPageToken is "" on the last.
type NodePage struct {
	Nodes         []SpanNode `json:"nodes"`
	NextPageToken string     `json:"next_page_token,omitempty"`
}

// SpanPage is one page of full spans; NextPageToken is "" on the last.
type SpanPage struct {
	Spans         []Span `json:"spans"`
	NextPageToken string `json:"next_page_token,omitempty"`
}

// Bone is what the tree of a trace needs of a span: ids, name, times,
// flags (OTLP's, for a parent flagged remote) and whether it carries usage
// or an explicit cost (Span.CarriesUsage, for the billing rule's
// aggregates). Flags are set at least for the spans whose parent is not
// among the trace's spans: the only ones a rollup reads them of.
type Bone struct {
	SpanID       string
	ParentSpanID string
	Name         string
	StartTime    time.Time
	EndTime      time.Time
	Flags        uint32
	Carries      bool
}

// BoneOf is a span's bone.
func BoneOf(s *Span) Bone {
	return Bone{SpanID: s.SpanID, ParentSpanID: s.ParentSpanID, Name: s.Name, StartTime: s.StartTime, EndTime: s.EndTime,
		Flags: s.Flags, Carries: s.CarriesUsage()}
}

// RemoteParent reports whether the sender flagged the span's parent as
// another process's (see Span.RemoteParent).
func (b *Bone) RemoteParent() (remote, known bool) { return flagsRemote(b.Flags) }

// spanTokenPrefix tags span page tokens, so a trace list token is refused.
const spanTokenPrefix = "s1:"

// EncodeSpanToken is the keyset token after the span (startNS, spanID) in
// canonical order.
func EncodeSpanToken(startNS int64, spanID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(spanTokenPrefix + strconv.FormatInt(startNS, 10) + ":" + spanID))
}

// DecodeSpanToken reads a token of EncodeSpanToken; ok is false for "" (the
// first page). The error wraps ErrBadPageToken.
func DecodeSpanToken(tok string) (startNS int64, spanID string, err error) {
	if tok == "" {
		return 0, "", nil
	}
	bad := fmt.Errorf("%w: span page token %s is not one this store issued", ErrBadPageToken, quoteInput(tok))
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, "", bad
	}
	s, ok := strings.CutPrefix(string(raw), spanTokenPrefix)
	if !ok {
		return 0, "", bad
	}
	ns, id, ok := strings.Cut(s, ":")
	if !ok || !IsSpanID(id) {
		return 0, "", bad
	}
	startNS, err = strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return 0, "", bad
	}
	return startNS, id, nil
}

// CheckTraceID checks a full trace id as the window reads take it; the
// error wraps ErrBadTraceID.
func CheckTraceID(what, traceID string) error {
	if !IsFullTraceID(traceID) {
		return fmt.Errorf("%s: %w %s: want %d lower-case hex digits", what, ErrBadTraceID, quoteInput(traceID), TraceIDLen)
	}
	return nil
}
