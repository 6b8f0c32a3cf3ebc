package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// AuditSource is the policy audit log as the UI sees it. cmd wires it to
// agents/policy (the strict reader and the chain check), so /audit and
// `loom-eval audit verify` say the same; the UI never parses the log or
// checks its chain itself.
type AuditSource interface {
	ReadAudit(ctx context.Context) (AuditView, error)
}

// AuditView is the /audit page: the log's entries and whether its chain
// verifies.
type AuditView struct {
	File string `json:"file"`
	// Missing: no log has been written at File yet.
	Missing bool `json:"missing"`
	// Verified: every line reads as an entry and the hash chain holds.
	// Problem says otherwise where (the line and what), as audit verify.
	Verified bool       `json:"verified"`
	Problem  string     `json:"problem,omitempty"`
	Entries  []AuditRow `json:"entries"`
	// Shown is how many entries the page shows (the newest), of Total.
	Shown int `json:"shown"`
	Total int `json:"total"`
	// Configured is false when the server has no audit log.
	Configured bool `json:"configured"`
}

// AuditRow is one entry. Data is the entry's data as logged; Decision,
// Tool and Reason summarise a policy decision (empty for other actions).
type AuditRow struct {
	Seq      int64           `json:"seq"`
	Time     time.Time       `json:"time"`
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	Data     json.RawMessage `json:"data"`
	Hash     string          `json:"hash"`
	Decision string          `json:"decision,omitempty"`
	Tool     string          `json:"tool,omitempty"`
	Reason   string          `json:"reason,omitempty"`
}

// MaxAuditShown bounds the entries one page shows (the newest).
const MaxAuditShown = 500

func (s *Server) registerAudit() {
	s.mux.HandleFunc("GET /audit", s.auditPage)
	s.mux.HandleFunc("GET /api/v1/audit", s.apiAudit)
}

var errNoAudit = errors.New("this server shows no audit log (start loom-eval serve with --audit FILE)")

// readAudit reads the log, newest first, filtered by the query's actor,
// action and text (a substring of the entry's data).
func (s *Server) readAudit(r *http.Request) (AuditView, error) {
	if s.deps.Audit == nil {
		return AuditView{}, nil
	}
	v, err := s.deps.Audit.ReadAudit(r.Context())
	if err != nil {
		return v, err
	}
	v.Configured = true
	q := r.URL.Query()
	actor, action, text := q.Get("actor"), q.Get("action"), q.Get("q")
	v.Total = len(v.Entries)
	var out []AuditRow
	for i := len(v.Entries) - 1; i >= 0 && len(out) < MaxAuditShown; i-- {
		e := v.Entries[i]
		if (actor != "" && e.Actor != actor) || (action != "" && e.Action != action) || (text != "" && !strings.Contains(string(e.Data), text)) {
			continue
		}
		out = append(out, e)
	}
	if out == nil {
		out = []AuditRow{}
	}
	v.Entries, v.Shown = out, len(out)
	return v, nil
}

func (s *Server) auditPage(w http.ResponseWriter, r *http.Request) {
	v, err := s.readAudit(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	render(w, r, AuditPage(v, r.URL.Query()))
}

func (s *Server) apiAudit(w http.ResponseWriter, r *http.Request) {
	v, err := s.readAudit(r)
	if err == nil && !v.Configured {
		err = fmt.Errorf("%w: %w", errNotFound, errNoAudit)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
