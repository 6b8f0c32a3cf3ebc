package store

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A session is the traces (turns) of one conversation: every trace with a
// span whose ConversationID is the session id (the collector maps
// gen_ai.conversation.id and OpenInference session.id to it). A trace with
// spans of several conversations is a turn of each.

// SessionLister is an optional capability of a Reader: listing sessions.
// Find it with a type assertion (both backends implement it; the
// conformance suite checks it). A session's figures are sums of its turns'
// TraceSummary figures as ListTraces returns them (SumTurns), so a session
// never disagrees with its traces.
type SessionLister interface {
	ListSessions(ctx context.Context, q SessionQuery) (SessionPage, error)
}

// SessionQuery pages through sessions, the most recently active first
// (LastStart descending, then session id descending).
type SessionQuery struct {
	// Limit is the page size (DefaultPageSize when 0, at most
	// MaxPageSize). PageToken is the previous page's NextPageToken.
	Limit     int
	PageToken string
}

// SessionPage is one page of sessions. NextPageToken is "" on the last.
type SessionPage struct {
	Sessions      []SessionSummary `json:"sessions"`
	NextPageToken string           `json:"next_page_token,omitempty"`
}

// SessionSummary describes a session: its turns' count and start times and
// the sums of their summaries' figures.
type SessionSummary struct {
	SessionID    string    `json:"session_id"`
	Turns        int64     `json:"turns"`
	FirstStart   time.Time `json:"first_start"`
	LastStart    time.Time `json:"last_start"`
	SpanCount    int64     `json:"span_count"`
	ErrorCount   int64     `json:"error_count"`
	ModelCalls   int64     `json:"model_calls"`
	ToolCalls    int64     `json:"tool_calls"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
}

// SumTurns is the one rule for a session's figures: its turns' count,
// earliest and latest start, and the sums of their summaries' span, error
// model call, tool call and token counts.
func SumTurns(id string, turns []TraceSummary) SessionSummary {
	s := SessionSummary{SessionID: id}
	for i, t := range turns {
		if i == 0 || t.Start.Before(s.FirstStart) {
			s.FirstStart = t.Start
		}
		if i == 0 || t.Start.After(s.LastStart) {
			s.LastStart = t.Start
		}
		s.Turns++
		s.SpanCount += t.SpanCount
		s.ErrorCount += t.ErrorCount
		s.ModelCalls += t.ModelCalls
		s.ToolCalls += t.ToolCalls
		s.InputTokens += t.InputTokens
		s.OutputTokens += t.OutputTokens
	}
	return s
}

// Session is one session with its turns in time order.
type Session struct {
	SessionSummary
	// Traces are the session's turns, by start time (then trace id), as
	// ListTraces summarises them.
	Traces []TraceSummary `json:"traces"`
	// Truncated is set when the session has more than MaxSessionTurns
	// turns: Traces and the figures cover the first MaxSessionTurns.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxSessionTurns is the most turns ReadSession returns.
const MaxSessionTurns = 10 * MaxPageSize

// ReadSession reads a session's turns from r (ListTraces filtered by
// Session, oldest first) and sums them. A session with no turns is
// ErrNotFound.
func ReadSession(ctx context.Context, r Reader, id string) (Session, error) {
	if id == "" {
		return Session{}, fmt.Errorf("read session: %w: empty session id", ErrBadQuery)
	}
	q := TraceQuery{Session: id, SortBy: SortStart, Ascending: true, Limit: MaxPageSize}
	var s Session
	for {
		page, err := r.ListTraces(ctx, q)
		if err != nil {
			return Session{}, fmt.Errorf("read session %s: %w", quoteInput(id), err)
		}
		s.Traces = append(s.Traces, page.Traces...)
		if page.NextPageToken == "" {
			break
		}
		if len(s.Traces) >= MaxSessionTurns {
			s.Traces, s.Truncated = s.Traces[:MaxSessionTurns], true
			break
		}
		q.PageToken = page.NextPageToken
	}
	if len(s.Traces) == 0 {
		return Session{}, fmt.Errorf("read session %s: %w", quoteInput(id), ErrSessionNotFound)
	}
	s.SessionSummary = SumTurns(id, s.Traces)
	return s, nil
}

// ErrSessionNotFound is wrapped by ReadSession's error for a session with no
// stored turns; errors.Is also matches it to ErrNotFound.
var ErrSessionNotFound error = sessionNotFound{}

type sessionNotFound struct{}

func (sessionNotFound) Error() string {
	return "session not found (no trace has a span with that conversation or session id)"
}
func (sessionNotFound) Is(target error) bool { return target == ErrNotFound }

// PlannedSessionQuery is a validated SessionQuery: its page size, and the
// position its token points past (nil for the first page).
type PlannedSessionQuery struct {
	Limit int
	After *SessionPosition
}

// SessionPosition is where a page of sessions ended.
type SessionPosition struct {
	LastStartNS int64
	SessionID   string
}

// sessionTokenVersion starts every session page token, so a trace page
// token (which starts with version 1) is refused.
const sessionTokenVersion = 0x53

// Plan validates q.
func (q SessionQuery) Plan() (PlannedSessionQuery, error) {
	var p PlannedSessionQuery
	switch {
	case q.Limit < 0:
		return p, fmt.Errorf("limit %d is negative", q.Limit)
	case q.Limit == 0:
		p.Limit = DefaultPageSize
	default:
		p.Limit = min(q.Limit, MaxPageSize)
	}
	if q.PageToken == "" {
		return p, nil
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(q.PageToken)
	if err != nil || len(b) < 9 || b[0] != sessionTokenVersion || len(q.PageToken) > 4096 {
		return p, fmt.Errorf("%w: not a session page token", ErrBadPageToken)
	}
	p.After = &SessionPosition{LastStartNS: int64(binary.BigEndian.Uint64(b[1:9])), SessionID: string(b[9:])}
	return p, nil
}

// NextPageToken is the token for the page after one that ended at last.
func (p PlannedSessionQuery) NextPageToken(last SessionPosition) string {
	b := make([]byte, 0, 9+len(last.SessionID))
	b = append(b, sessionTokenVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(last.LastStartNS))
	b = append(b, last.SessionID...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// SessionQueryParams are the query parameters ParseSessionQuery reads (the
// JSON API /api/v1/sessions, the sessions page, `loom-eval sessions list`).
var SessionQueryParams = map[string]string{
	"limit":      fmt.Sprintf("page size, 1 to %d", MaxPageSize),
	"page_token": "next_page_token of the previous page",
}

// ParseSessionQuery reads a SessionQuery from query parameters, with an
// error wrapping ErrBadQuery that names the parameter.
func ParseSessionQuery(v url.Values) (SessionQuery, error) {
	var q SessionQuery
	var errs []error
	for k, vals := range v {
		if _, ok := SessionQueryParams[k]; !ok {
			errs = append(errs, fmt.Errorf("unknown query parameter %q (known: limit, page_token)", k))
		} else if len(vals) > 1 {
			errs = append(errs, fmt.Errorf("%s: given %d times, want once", k, len(vals)))
		}
	}
	if s := strings.TrimSpace(v.Get("limit")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			errs = append(errs, fmt.Errorf("limit: %q is not a number from 1 to %d", s, MaxPageSize))
		}
		q.Limit = n
	}
	q.PageToken = strings.TrimSpace(v.Get("page_token"))
	if err := errors.Join(errs...); err != nil {
		return SessionQuery{}, badQuery{err}
	}
	return q, nil
}
