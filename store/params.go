package store

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrBadQuery is wrapped by ParseTraceQuery's errors: the parameters, not
// the store, are at fault.
var ErrBadQuery = errors.New("bad trace query")

// badQuery carries the parameter errors as they read, matching ErrBadQuery.
type badQuery struct{ err error }

func (e badQuery) Error() string   { return e.err.Error() }
func (e badQuery) Unwrap() []error { return []error{ErrBadQuery, e.err} }

// traceIDPattern matches a full trace id as stores keep it.
var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// IsFullTraceID reports whether id is a full trace id as stored (32
// lower-case hex digits), which needs no ResolveTraceID.
func IsFullTraceID(id string) bool { return traceIDPattern.MatchString(id) }

// QueryParams are the query parameters ParseTraceQuery understands, with
// their help: the JSON API (/api/v1/traces), the UI's list and
// `loom-eval traces list` (as --flags) all accept exactly these.
var QueryParams = map[string]string{
	"start":        "RFC 3339 time: traces starting at or after it",
	"end":          "RFC 3339 time: traces starting before it",
	"since":        "duration (e.g. 1h): traces starting within it, up to now",
	"service":      "service name",
	"agent":        "agent name",
	"model":        "request or response model",
	"status":       "ok or error",
	"min_duration": "duration: traces at least this long",
	"text":         "substring of a span name (case-insensitive)",
	"q":            "search: space-separated clauses that must all hold: KEY, KEY=V, KEY!=V, KEY>N (>= < <=), name:SPAN_NAME, retrieved:ID, cited:ID, evidence:ID (docs/search.md)",
	"session":      "session id: traces of one conversation (gen_ai.conversation.id or session.id)",
	"sort":         "start, duration, spans, errors or tokens",
	"asc":          "true for ascending order",
	"limit":        fmt.Sprintf("page size, 1 to %d", MaxPageSize),
	"page_token":   "next_page_token of the previous page",
}

// QueryParamNames lists the query parameters in order, for help texts.
func QueryParamNames() []string {
	names := make([]string, 0, len(QueryParams))
	for k := range QueryParams {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// ParseTraceQuery turns query parameters into a TraceQuery, with an error
// that wraps ErrBadQuery and names the parameter for anything it cannot
// use. now anchors since=.
func ParseTraceQuery(v url.Values, now time.Time) (TraceQuery, error) {
	var (
		q    TraceQuery
		errs []error
	)
	for k, vals := range v {
		if _, ok := QueryParams[k]; !ok {
			errs = append(errs, fmt.Errorf("unknown query parameter %q (known: %s)", k, strings.Join(QueryParamNames(), ", ")))
			continue
		}
		if len(vals) > 1 {
			errs = append(errs, fmt.Errorf("%s: given %d times, want once", k, len(vals)))
		}
	}
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	parseTime := func(k string) time.Time {
		s := get(k)
		if s == "" {
			return time.Time{}
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not an RFC 3339 time (e.g. 2026-03-01T12:00:00Z)", k, s))
		}
		return t
	}
	parseDur := func(k string) time.Duration {
		s := get(k)
		if s == "" {
			return 0
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a non-negative duration (e.g. 1h30m, 250ms)", k, s))
		}
		return d
	}
	q.Start = parseTime("start")
	q.End = parseTime("end")
	if since := parseDur("since"); since > 0 {
		if !q.Start.IsZero() {
			errs = append(errs, errors.New("since: give either since or start, not both"))
		}
		q.Start = now.Add(-since)
	}
	if !q.Start.IsZero() && !q.End.IsZero() && !q.End.After(q.Start) {
		errs = append(errs, fmt.Errorf("end: %s is not after start %s", q.End.Format(time.RFC3339Nano), q.Start.Format(time.RFC3339Nano)))
	}
	q.Service, q.Agent, q.Model, q.Text = get("service"), get("agent"), get("model"), get("text")
	q.Session = get("session")
	if expr := v.Get("q"); strings.TrimSpace(expr) != "" {
		clauses, err := ParseSearch(expr)
		if err != nil {
			errs = append(errs, fmt.Errorf("q: %w", err))
		}
		q.Search = clauses
	}
	switch s := strings.ToLower(get("status")); s {
	case "", StatusOK, StatusError:
		q.Status = s
	default:
		errs = append(errs, fmt.Errorf("status: %q is not ok or error", s))
	}
	q.MinDuration = parseDur("min_duration")
	switch s := strings.ToLower(get("sort")); s {
	case "", SortStart, SortDuration, SortSpans, SortErrors, SortTokens:
		q.SortBy = s
	default:
		errs = append(errs, fmt.Errorf("sort: %q is not one of start, duration, spans, errors, tokens", s))
	}
	if s := get("asc"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("asc: %q is not true or false", s))
		}
		q.Ascending = b
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			errs = append(errs, fmt.Errorf("limit: %q is not a number from 1 to %d", s, MaxPageSize))
		}
		q.Limit = n
	}
	q.PageToken = get("page_token")
	if err := errors.Join(errs...); err != nil {
		return TraceQuery{}, badQuery{err}
	}
	return q, nil
}

// TraceQueryValues is the inverse of ParseTraceQuery for the fields that
// are set, so a client (the CLI, a UI link) can build the same query.
func TraceQueryValues(q TraceQuery) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Start.IsZero() {
		v.Set("start", q.Start.Format(time.RFC3339Nano))
	}
	if !q.End.IsZero() {
		v.Set("end", q.End.Format(time.RFC3339Nano))
	}
	set("service", q.Service)
	set("agent", q.Agent)
	set("model", q.Model)
	set("status", q.Status)
	if q.MinDuration > 0 {
		v.Set("min_duration", q.MinDuration.String())
	}
	set("text", q.Text)
	set("q", FormatSearch(q.Search))
	set("session", q.Session)
	set("sort", q.SortBy)
	if q.Ascending {
		v.Set("asc", "true")
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	set("page_token", q.PageToken)
	return v
}
