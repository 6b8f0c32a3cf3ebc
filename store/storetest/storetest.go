package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
)

// Harness describes one backend to the suite.
type Harness struct {
	// Open returns a new, EMPTY store (fresh file / fresh database). The suite
	// closes it.
	Open func(t *testing.T) store.Store
	// Reopen, if set, opens the same data as an earlier Open after that store
	// was closed (restart semantics: everything acknowledged must be there
	// exactly once).
	Reopen func(t *testing.T) store.Store
	// Eventually: how long reads may lag writes (0 = read-your-writes).
	Eventually time.Duration
	Skip       Capabilities // opt-outs; the zero value runs the whole battery
}

// Capabilities lists features a backend may opt out of. Each field set to
// true skips the subtests that need that feature; the zero value runs the
// whole battery. An opt-out is a documented limitation of the backend, not a
// way to hide a failing test.
type Capabilities struct {
	// ConcurrentWriters skips the test that writes from several goroutines at
	// once.
	ConcurrentWriters bool
	// ContextCancellation skips the checks that a cancelled context makes
	// every call fail.
	ContextCancellation bool
	// TextSearch skips the TraceQuery.Text filter tests.
	TextSearch bool
}

// RunAll runs the whole conformance battery against the backend h describes.
func RunAll(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	s := &suite{h: h}
	for _, tc := range s.tests() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skipf("backend opted out (Harness.Skip)")
			}
			tc.run(t)
		})
	}
}

type suite struct {
	h Harness
}

type testCase struct {
	name string
	skip bool
	run  func(t *testing.T)
}

func (s *suite) tests() []testCase {
	return []testCase{
		{name: "RoundTripKeepsEveryField", run: s.testRoundTrip},
	}
}

// open opens a fresh store and registers its Close.
func (s *suite) open(t *testing.T) store.Store {
	t.Helper()
	st := s.h.Open(t)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

func (s *suite) testRoundTrip(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	spans := loadFixture(t, "agent_traces.json")
	if err := st.WriteSpans(ctx, spans); err != nil {
		t.Fatalf("WriteSpans: %v", err)
	}
}
