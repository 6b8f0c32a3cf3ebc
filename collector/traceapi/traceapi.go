// Package traceapi serves stored traces as JSON over HTTP: the small API
// `loom-eval serve` exposes next to the web UI, and the query-parameter
// parsing `loom-eval traces list` shares with it.
//
//	GET /api/v1/traces            list trace summaries (filters as query parameters)
//	GET /api/v1/traces/{trace_id} every span of one trace
//	GET /healthz                  200 "ok"
//
// {trace_id} is a full id or a prefix of at least 8 hex digits (either
// case) that one stored trace starts with; the response names the trace by
// its full id. A malformed id is a 400, a prefix several traces share a 409
// (the error lists some of them), an unknown one a 404.
package traceapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
)

// Paths.
const (
	TracesPath = "/api/v1/traces"
	HealthPath = "/healthz"
)

// TraceResponse is the body of GET /api/v1/traces/{trace_id}.
type TraceResponse struct {
	TraceID string       `json:"trace_id"`
	Spans   []store.Span `json:"spans"`
}

// Register mounts the API on mux. now is the clock relative filters
// (since=1h) are measured from; nil means time.Now.
func Register(mux *http.ServeMux, r store.Reader, log *slog.Logger, now func() time.Time) {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	h := &handler{r: r, log: log, now: now}
	mux.HandleFunc("GET "+TracesPath, h.list)
	mux.HandleFunc("GET "+TracesPath+"/{id}", h.get)
	mux.HandleFunc("GET "+HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
}

type handler struct {
	r   store.Reader
	log *slog.Logger
	now func() time.Time
}

func (h *handler) list(w http.ResponseWriter, req *http.Request) {
	q, err := ParseQuery(req.URL.Query(), h.now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	page, err := h.r.ListTraces(req.Context(), q)
	if err != nil {
		// Stores reject a page token that does not belong to the query; the
		// rest are operational failures.
		if errors.Is(err, store.ErrBadPageToken) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("page_token: %w", err))
			return
		}
		h.log.Error("list traces", "error", err)
		writeError(w, http.StatusInternalServerError, fmt.Errorf("list traces: %w", err))
		return
	}
	if page.Traces == nil {
		page.Traces = []store.TraceSummary{}
	}
	writeJSON(w, http.StatusOK, page)
}

// TraceIDPattern matches a trace id as the store keeps it.
var TraceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func (h *handler) get(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	var err error
	if !TraceIDPattern.MatchString(id) {
		id, err = h.r.ResolveTraceID(req.Context(), id)
	}
	var spans []store.Span
	if err == nil {
		spans, err = h.r.GetTrace(req.Context(), id)
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, TraceResponse{TraceID: id, Spans: spans})
	case errors.Is(err, store.ErrBadTraceID):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, store.ErrAmbiguousTraceID):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	default:
		h.log.Error("get trace", "trace_id", req.PathValue("id"), "error", err)
		writeError(w, http.StatusInternalServerError, err)
	}
}

// Query parameters ParseQuery understands.
var params = map[string]string{
	"start":        "RFC 3339 time: traces starting at or after it",
	"end":          "RFC 3339 time: traces starting before it",
	"since":        "duration (e.g. 1h): traces starting within it, up to now",
	"service":      "service name",
	"agent":        "agent name",
	"model":        "request or response model",
	"status":       "ok or error",
	"min_duration": "duration: traces at least this long",
	"text":         "substring of a span name (case-insensitive)",
	"sort":         "start, duration, spans, errors or tokens",
	"asc":          "true for ascending order",
	"limit":        fmt.Sprintf("page size, 1 to %d", store.MaxPageSize),
	"page_token":   "next_page_token of the previous page",
}

// ParamNames lists the query parameters in order, for help texts.
func ParamNames() []string {
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// ParseQuery turns query parameters into a TraceQuery, with an error that
// names the parameter for anything it cannot use. now anchors since=.
func ParseQuery(v url.Values, now time.Time) (store.TraceQuery, error) {
	var (
		q    store.TraceQuery
		errs []error
	)
	for k, vals := range v {
		if _, ok := params[k]; !ok {
			errs = append(errs, fmt.Errorf("unknown query parameter %q (known: %s)", k, strings.Join(ParamNames(), ", ")))
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
	switch s := strings.ToLower(get("status")); s {
	case "", store.StatusOK, store.StatusError:
		q.Status = s
	default:
		errs = append(errs, fmt.Errorf("status: %q is not ok or error", s))
	}
	q.MinDuration = parseDur("min_duration")
	switch s := strings.ToLower(get("sort")); s {
	case "", store.SortStart, store.SortDuration, store.SortSpans, store.SortErrors, store.SortTokens:
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
		if err != nil || n < 1 || n > store.MaxPageSize {
			errs = append(errs, fmt.Errorf("limit: %q is not a number from 1 to %d", s, store.MaxPageSize))
		}
		q.Limit = n
	}
	q.PageToken = get("page_token")
	if err := errors.Join(errs...); err != nil {
		return store.TraceQuery{}, err
	}
	return q, nil
}

// Values is the inverse of ParseQuery for the fields that are set, so a
// client (the CLI, a UI link) can build the same query.
func Values(q store.TraceQuery) url.Values {
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

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, errorBody{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
