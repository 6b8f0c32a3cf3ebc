package retrieval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxRequestBytes bounds a search request body.
const maxRequestBytes = 1 << 20

// SearchRequest is the JSON body of POST /v1/search.
type SearchRequest struct {
	Query         string   `json:"query"`
	Mode          string   `json:"mode,omitempty"`
	K             int      `json:"k,omitempty"`
	ExcludeIssues []int    `json:"exclude_issues,omitempty"`
	RRFK          float64  `json:"rrf_k,omitempty"`
	DenseWeight   *float64 `json:"dense_weight,omitempty"`
}

// SearchResponse is the JSON answer of POST /v1/search.
type SearchResponse struct {
	Mode     Mode     `json:"mode"`
	Hits     []Hit    `json:"hits"`
	Excluded []string `json:"excluded,omitempty"`
	TookMS   float64  `json:"took_ms"`
}

// ErrorResponse is the JSON body of every non-2xx answer.
type ErrorResponse struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// Handler serves POST /v1/search for agents.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/search", s.handleSearch)
	return mux
}

func writeError(w http.ResponseWriter, status int, typ, format string, args ...any) {
	var e ErrorResponse
	e.Error.Message = fmt.Sprintf(format, args...)
	e.Error.Type = typ
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}

func (s *Service) handleSearch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST for /v1/search (got %s)", r.Method)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "invalid_request", "Content-Type must be application/json (got %q)", ct)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request", "request body exceeds %d bytes", maxRequestBytes)
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request", "read request body: %v", err)
		return
	}
	req, err := DecodeSearchRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "%v", err)
		return
	}
	q := Query{Text: req.Query, Mode: Mode(req.Mode), K: req.K, ExcludeIssues: req.ExcludeIssues, RRFK: req.RRFK, DenseWeight: req.DenseWeight}
	if err := q.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "%v", err)
		return
	}
	res, err := s.Search(r.Context(), q)
	switch {
	case errors.Is(err, ErrNotStarted):
		writeError(w, http.StatusServiceUnavailable, "unavailable", "%v", err)
		return
	case errors.Is(err, ErrNoReranker):
		writeError(w, http.StatusBadRequest, "invalid_request", "%v", err)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "internal", "%v", err)
		return
	}
	out := SearchResponse{Mode: res.Mode, Hits: res.Hits, Excluded: res.Excluded, TookMS: float64(res.Took) / float64(time.Millisecond)}
	if out.Hits == nil {
		out.Hits = []Hit{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// DecodeSearchRequest parses a /v1/search body strictly: unknown fields,
// wrong types and trailing data are errors that name the problem.
func DecodeSearchRequest(body []byte) (SearchRequest, error) {
	var req SearchRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, errors.New("request body is empty; send a JSON object with at least \"query\"")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return req, fmt.Errorf("field %q: want %s, got JSON %s", te.Field, te.Type, te.Value)
		case errors.As(err, &se):
			return req, fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, err)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return req, errors.New("invalid JSON: the body ends before the object does")
		default:
			return req, fmt.Errorf("invalid request: %v", err)
		}
	}
	if dec.More() {
		return req, errors.New("invalid request: trailing data after the JSON object")
	}
	return req, nil
}
