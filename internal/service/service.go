// Package service owns the lifecycle pieces Loomwork's long-running
// commands share, so the CLI only wires them: a cleanup stack (what a
// component acquired, released in reverse order), an HTTP server run in
// the background until it is shut down, and a writer safe for goroutines
// that print to one stream. It holds the CLI's concurrency, where the
// suite's race-detector pass checks it (docs/testing.md).
package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
)

// Stack holds what a component acquired, to be released last acquired
// first. The zero value is ready; it is safe for concurrent use.
type Stack struct {
	mu    sync.Mutex
	steps []step
}

type step struct {
	what    string // "shut down store": names the part in an error
	release func(context.Context) error
}

// Push adds the release of a part just acquired.
func (s *Stack) Push(what string, release func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, step{what: what, release: release})
}

// Unwind releases every part pushed, the last pushed first, and joins
// their errors, each prefixed with what failed to release. A second
// Unwind releases only what was pushed since.
func (s *Stack) Unwind(ctx context.Context) error {
	s.mu.Lock()
	steps := s.steps
	s.steps = nil
	s.mu.Unlock()
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		if err := steps[i].release(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", steps[i].what, err))
		}
	}
	return errors.Join(errs...)
}

// HTTP is an http.Server serving a listener in the background.
type HTTP struct {
	srv  *http.Server
	done chan struct{}
	err  error // Serve's error other than http.ErrServerClosed; read after done
}

// ServeHTTP serves srv on ln in the background until Shutdown. onStop,
// if not nil, is called (from the serving goroutine) when Serve fails
// on its own, not through Shutdown.
func ServeHTTP(srv *http.Server, ln net.Listener, onStop func(error)) *HTTP {
	h := &HTTP{srv: srv, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.err = err
			if onStop != nil {
				onStop(err)
			}
		}
	}()
	return h
}

// Done is closed once the server has stopped serving.
func (h *HTTP) Done() <-chan struct{} { return h.done }

// Err is why the server stopped on its own: nil until Done is closed,
// and nil after a Shutdown.
func (h *HTTP) Err() error {
	select {
	case <-h.done:
		return h.err
	default:
		return nil
	}
}

// Shutdown stops accepting, waits for requests in flight until ctx ends,
// then drops the connections left; it returns once Serve has returned.
// The error is ctx's when the drain timed out.
func (h *HTTP) Shutdown(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	if err != nil {
		h.srv.Close() // the drain timed out: drop the connections left
	}
	<-h.done
	return err
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Serialized returns a writer whose writes to w never interleave, for
// goroutines (a server's log, worker processes' output) sharing one
// stream; nil stays nil, and a serialised writer is returned as is.
func Serialized(w io.Writer) io.Writer {
	if w == nil {
		return nil
	}
	if _, ok := w.(*lockedWriter); ok {
		return w
	}
	return &lockedWriter{w: w}
}
