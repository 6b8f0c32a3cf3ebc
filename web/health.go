package web

import (
	"encoding/json"
	"net/http"
)

// healthz answers whether the server can take data now: 200 when healthy,
// 503 otherwise, with the pipeline's report as JSON. Without a health
// source it says only that the UI is up.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.deps.Health == nil {
		w.Write([]byte("ok\n"))
		return
	}
	rep := s.deps.Health(r.Context())
	s.writeHealth(w, r, rep, rep.Healthy)
}

// readyz is what a load balancer polls: 503 while draining, when the
// spool is nearly full or its disk is, or when the store is down without a
// spool, so it moves senders away before refusals begin; the body's
// reason says which.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.deps.Health == nil {
		w.Write([]byte("ready\n"))
		return
	}
	rep := s.deps.Health(r.Context())
	s.writeHealth(w, r, rep, rep.Ready)
}

func (s *Server) writeHealth(w http.ResponseWriter, r *http.Request, rep HealthReport, ok bool) {
	var body any = rep.Detail
	// The detail names the store and its errors: only for callers that
	// may read the rest of the server.
	if rep.Detail == nil || !s.authorized(r) {
		body = struct {
			Status string `json:"status"`
			Ready  bool   `json:"ready"`
			Reason string `json:"reason,omitempty"`
		}{rep.Status, rep.Ready, rep.Reason}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(body)
}
