package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/loomwork/loomwork/store"
)

// Starter is the method a backend's store has besides store.Store: Start
// opens or connects (the backend's New does no I/O). Harness.New returns
// stores that have it.
type Starter interface {
	Start(ctx context.Context) error
}

// testLifecycle checks New / Start / Shutdown: Shutdown is nil before Start
// and when repeated, a second Start is an error, and every method fails
// with an error, not a panic, before Start and after Shutdown.
func (s *suite) testLifecycle(t *testing.T) {
	ctx := store.WithDefaultProject(context.Background())
	spans := GenerateTraces(2, 3, 41)
	traceID := spans[0].TraceID

	newStore := func() (store.Store, Starter) {
		t.Helper()
		st := s.track(t, s.h.New(t))
		starter, ok := st.(Starter)
		if !ok {
			t.Fatalf("%T from Harness.New has no Start(ctx) error method", st)
		}
		return st, starter
	}

	// Never started.
	st, _ := newStore()
	checkUnusable(t, "before Start", st, spans, traceID)
	if err := st.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown before Start: %v, want nil", err)
	}
	if err := st.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown before Start: %v, want nil", err)
	}

	// Started, used, shut down.
	st, starter := newStore()
	if err := starter.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := starter.Start(ctx); err == nil {
		t.Error("second Start: nil error, want one")
	}
	m := newRefModel()
	write(t, st, m, spans, 0)
	s.checkTraces(t, st, m)
	if err := st.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := st.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v, want nil", err)
	}
	checkUnusable(t, "after Shutdown", st, spans, traceID)
	if err := noPanic(t, "Start after Shutdown", func() error { return starter.Start(ctx) }); err == nil {
		t.Error("Start after Shutdown: nil error, want one")
	}
}

// checkUnusable calls every method of st and wants each to return an
// error: the store is not started or already shut down.
func checkUnusable(t *testing.T, when string, st store.Store, spans []store.Span, traceID string) {
	t.Helper()
	ctx := store.WithDefaultProject(context.Background())
	calls := []struct {
		name string
		call func() error
	}{
		{"WriteSpans", func() error { return st.WriteSpans(ctx, spans) }},
		{"GetTrace", func() error { _, err := st.GetTrace(ctx, traceID); return err }},
		{"ListTraces", func() error { _, err := st.ListTraces(ctx, store.TraceQuery{}); return err }},
		{"ResolveTraceID", func() error { _, err := st.ResolveTraceID(ctx, traceID[:store.MinTraceIDPrefix]); return err }},
	}
	if pw, ok := st.(store.PreparingWriter); ok {
		calls = append(calls, struct {
			name string
			call func() error
		}{"Prepare", func() error { _, err := pw.Prepare(spans); return err }})
	}
	for _, c := range calls {
		err := noPanic(t, c.name+" "+when, c.call)
		switch {
		case err == nil:
			t.Errorf("%s %s: nil error, want one", c.name, when)
		case errors.Is(err, store.ErrNotFound):
			t.Errorf("%s %s: %v; a store that is not running must not say the trace is missing", c.name, when, err)
		}
	}
}

// noPanic runs f and turns a panic into a test failure (and an error).
func noPanic(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}
