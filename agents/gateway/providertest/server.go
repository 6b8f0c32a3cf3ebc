// Package providertest runs local stand-ins for the hosted model providers
// on 127.0.0.1, for tests: an OpenAI Chat Completions server and an
// Anthropic Messages server that check credentials and request shape, enforce
// the providers' tool-call ordering rules with the providers' own 400 error
// bodies, and otherwise answer with replies a test queues, built in the
// providers' real response shapes (usage blocks, SSE streams, error bodies
// with retry-after headers).
//
// No hosted provider can be reached from the test machines, so these fakes
// are the only way the clients' wire handling is exercised; the shapes and
// messages are copied from provider documentation and from real error
// reports (see docs/gateway.md for the sources).
package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Reply is one scripted answer.
type Reply struct {
	Status int // default 200
	Header http.Header
	Body   string
	// Stream sends Body as text/event-stream.
	Stream bool
	// Hang, when set, makes the server hold the request until the client
	// gives up (for timeout tests).
	Hang bool
}

// Request is one request the server received.
type Request struct {
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map (for assertions on wire shape).
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Server is a fake provider endpoint.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	replies  []Reply
	requests []Request

	// check validates a request like the provider does; a non-nil reply is
	// the provider's error answer and consumes no queued reply.
	check func(h http.Header, body []byte) *Reply
	hang  chan struct{}
}

func newServer(t testing.TB, path string, check func(http.Header, []byte) *Reply) *Server {
	s := &Server{check: check, hang: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+path, s.handle)
	s.Server = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(s.hang)
		s.Server.Close()
	})
	return s
}

// Enqueue appends replies, answered in order.
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, r...)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count is the number of requests received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()

	reply := s.check(r.Header, body)
	if reply == nil {
		s.mu.Lock()
		if len(s.replies) > 0 {
			rp := s.replies[0]
			s.replies = s.replies[1:]
			reply = &rp
		}
		s.mu.Unlock()
	}
	if reply == nil {
		reply = &Reply{Status: http.StatusInternalServerError, Body: `{"providertest":"no reply queued"}`}
	}
	if reply.Hang {
		select {
		case <-r.Context().Done():
		case <-s.hang:
		}
		return
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Stream {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
	} else if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, reply.Body)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("providertest: marshal: %v", err)) // only fixed Go values reach here
	}
	return string(b)
}
