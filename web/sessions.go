package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// searchError is the parse error of the request's search expression (q=),
// "" when it has none or it parses. The list page shows it under the
// search box; the JSON API answers 400 with it (through ParseTraceQuery).
func searchError(r *http.Request) string {
	q := r.URL.Query()["q"]
	if len(q) != 1 || strings.TrimSpace(q[0]) == "" {
		return ""
	}
	if _, err := store.ParseSearch(q[0]); err != nil {
		return "q: " + err.Error()
	}
	return ""
}

// searchPlaceholder is the search box's example expression.
var searchPlaceholder = semconv.AttrRequestModel + "=gpt-4o " + semconv.AttrUsageInputTokens + `>1000 name:"execute_tool web_search" evidence:doc-42`

// registerSessions mounts the sessions pages and API.
func (s *Server) registerSessions() {
	s.mux.HandleFunc("GET /sessions", s.sessionList)
	s.mux.HandleFunc("GET /sessions/{id}", s.sessionPage)
	s.mux.HandleFunc("GET /api/v1/sessions", s.apiSessionList)
	s.mux.HandleFunc("GET /api/v1/sessions/{id}", s.apiSession)
}

// errNoSessions answers for a store without the session capability.
var errNoSessions = errors.New("this trace store cannot list sessions")

// SessionListView is the sessions list page.
type SessionListView struct {
	Query    url.Values
	Sessions []store.SessionSummary
	NextPage string
}

func (s *Server) listSessions(r *http.Request) (SessionListView, error) {
	sl, ok := s.deps.Traces.(store.SessionLister)
	if !ok {
		return SessionListView{}, errNoSessions
	}
	q, err := store.ParseSessionQuery(r.URL.Query())
	if err != nil {
		return SessionListView{}, badRequest{err.Error()}
	}
	page, err := sl.ListSessions(r.Context(), q)
	if err != nil {
		if errors.Is(err, store.ErrBadPageToken) {
			return SessionListView{}, badRequest{"page_token: " + err.Error()}
		}
		return SessionListView{}, err
	}
	return SessionListView{Query: r.URL.Query(), Sessions: page.Sessions, NextPage: page.NextPageToken}, nil
}

func (s *Server) sessionList(w http.ResponseWriter, r *http.Request) {
	v, err := s.listSessions(r)
	if err != nil {
		s.failSessions(w, r, err)
		return
	}
	render(w, r, SessionListPage(v))
}

func (s *Server) apiSessionList(w http.ResponseWriter, r *http.Request) {
	v, err := s.listSessions(r)
	if err != nil {
		s.failSessions(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, store.SessionPage{Sessions: v.Sessions, NextPageToken: v.NextPage})
}

// readSession is the session the request's {id} names, its turns as
// ListTraces summarises them and its totals their sums (store.ReadSession).
func (s *Server) readSession(r *http.Request) (store.Session, error) {
	return store.ReadSession(r.Context(), s.deps.Traces, r.PathValue("id"))
}

// SessionView is a session with its turns priced as the trace list prices
// them (ListRowOf) and the session's cost their sum, in turn order.
type SessionView struct {
	store.Session
	Rows         []ListRow
	CostUSD      *float64 // nil when any turn's cost is unknown
	KnownCostUSD float64
}

func (s *Server) sessionView(ctx context.Context, sess store.Session) (SessionView, error) {
	v := SessionView{Session: sess}
	known, all := 0.0, true
	for _, t := range sess.Traces {
		row, err := ListRowOf(ctx, s.deps.Traces, t, s.deps.Prices)
		if err != nil {
			return SessionView{}, err
		}
		v.Rows = append(v.Rows, row)
		if row.CostUSD != nil {
			known += *row.CostUSD
		} else {
			known += row.KnownCostUSD
			all = false
		}
	}
	v.KnownCostUSD = known
	if all {
		v.CostUSD = &known
	}
	return v, nil
}

func (s *Server) sessionPage(w http.ResponseWriter, r *http.Request) {
	sess, err := s.readSession(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v, err := s.sessionView(r.Context(), sess)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, SessionPage(v))
}

func (s *Server) apiSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.readSession(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// failSessions is fail, with 501 for a store that cannot list sessions.
func (s *Server) failSessions(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errNoSessions) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			writeJSON(w, http.StatusNotImplemented, map[string]string{"error": err.Error()})
			return
		}
		w.WriteHeader(http.StatusNotImplemented)
		render(w, r, ErrorPage(http.StatusNotImplemented, err.Error()))
		return
	}
	s.fail(w, r, err)
}

// sessionURL is the page of session id.
func sessionURL(id string) string { return "/sessions/" + url.PathEscape(id) }

// sessionTracesURL lists a session's traces on the trace list.
func sessionTracesURL(id string) string { return "/traces?session=" + url.QueryEscape(id) }

// sessionCostUnknown names the turns whose cost is unknown.
func sessionCostUnknown(v SessionView) string {
	var out []string
	for i, r := range v.Rows {
		if r.CostUSD == nil {
			out = append(out, fmt.Sprintf("turn %d: %s", i+1, r.CostUnknown))
		}
	}
	return strings.Join(out, "; ")
}

// sessionCostTitle says what the session's cost is, and why it is unknown
// when it is.
func sessionCostTitle(v SessionView) string {
	if v.CostUSD != nil {
		return "the sum of the turns' costs, each priced as the trace list prices it"
	}
	return "cost unknown: " + sessionCostUnknown(v) + "; priced part " + fmtCost(&v.KnownCostUSD)
}

// turnGap is the time since the previous turn started, "" for the first.
func turnGap(turns []store.TraceSummary, i int) string {
	if i == 0 {
		return ""
	}
	return "+" + fmtDur(turns[i].Start.Sub(turns[i-1].Start))
}
