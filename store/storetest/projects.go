package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// RunProjects checks project isolation (issue 21): spans are stored under
// their Span.Project, and every Reader method (and ListSessions, when the
// backend has it) reads only the project in its context
// (store.WithProject). It writes four traces: one in project "alpha", one
// in "beta", one in "beta" with the SAME trace id as alpha's (different
// spans), and one in the default project; then reads through each project
// and checks that nothing of another project is seen, by list, by id, by
// guessed id or prefix, by search, by session, and that the same trace id
// in two projects keeps two separate traces.
func RunProjects(t *testing.T, h Harness) {
	t.Helper()
	ctx := store.WithDefaultProject(context.Background())
	s := h.Open(t)
	defer s.Shutdown(ctx)

	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	alpha := GenerateConversation("conv-alpha", 1, 6, 101, base, time.Minute)
	beta := GenerateConversation("conv-beta", 1, 5, 202, base.Add(time.Minute), time.Minute)
	shared := GenerateConversation("conv-beta-2", 1, 4, 303, base.Add(2*time.Minute), time.Minute)
	def := GenerateConversation("conv-default", 1, 3, 404, base.Add(3*time.Minute), time.Minute)
	alphaID, betaID, defID := alpha[0].TraceID, beta[0].TraceID, def[0].TraceID
	for i := range alpha {
		alpha[i].Project = "alpha"
	}
	for i := range beta {
		beta[i].Project = "beta"
	}
	for i := range shared {
		// Beta reuses alpha's trace id (a distributed trace crossing two
		// teams, or a hostile sender that learnt the id).
		shared[i].Project, shared[i].TraceID = "beta", alphaID
		for j := range shared[i].Links {
			shared[i].Links[j].TraceID = alphaID
		}
	}
	for _, batch := range [][]store.Span{alpha, beta, shared, def, alpha, shared} { // rewrites: idempotent per project
		if err := s.WriteSpans(ctx, slices.Clone(batch)); err != nil {
			t.Fatalf("WriteSpans: %v", err)
		}
	}

	ctxA := store.WithProject(ctx, "alpha")
	ctxB := store.WithProject(ctx, "beta")
	ctxNone := store.WithProject(ctx, "gamma") // a project with no traces

	listIDs := func(ctx context.Context, q store.TraceQuery) []string {
		t.Helper()
		var ids []string
		waitFor(t, h.Eventually, func() error {
			page, err := s.ListTraces(ctx, q)
			if err != nil {
				return err
			}
			ids = ids[:0]
			for _, tr := range page.Traces {
				ids = append(ids, tr.TraceID)
			}
			slices.Sort(ids)
			return nil
		})
		return ids
	}
	want := func(name string, got []string, want ...string) {
		t.Helper()
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: got traces %v, want %v", name, got, want)
		}
	}
	twoBeta := []string{alphaID, betaID}

	t.Run("list", func(t *testing.T) {
		want("alpha lists", listIDs(ctxA, store.TraceQuery{}), alphaID)
		want("beta lists", listIDs(ctxB, store.TraceQuery{}), twoBeta...)
		want("default lists", listIDs(ctx, store.TraceQuery{}), defID)
		want("an unknown project lists", listIDs(ctxNone, store.TraceQuery{}))
		// Filters do not widen the scope.
		want("alpha by beta's service", listIDs(ctxA, store.TraceQuery{Service: beta[0].ServiceName}), filterIDs(alpha, func(sp store.Span) bool { return sp.ServiceName == beta[0].ServiceName })...)
		want("alpha by text", listIDs(ctxA, store.TraceQuery{Text: beta[0].Name}), filterIDs(alpha, func(sp store.Span) bool { return sp.Name == beta[0].Name })...)
	})
	t.Run("summary counts only the project's spans", func(t *testing.T) {
		for _, c := range []struct {
			ctx   context.Context
			spans int64
		}{{ctxA, int64(len(alpha))}, {ctxB, int64(len(shared))}} {
			page, err := s.ListTraces(c.ctx, store.TraceQuery{})
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range page.Traces {
				if tr.TraceID == alphaID && tr.SpanCount != c.spans {
					t.Errorf("%s: trace %s has %d spans, want %d", store.ProjectOf(c.ctx), alphaID, tr.SpanCount, c.spans)
				}
			}
		}
	})
	t.Run("get by id", func(t *testing.T) {
		got, err := s.GetTrace(ctxA, alphaID)
		if err != nil {
			t.Fatalf("alpha gets its trace: %v", err)
		}
		checkOnly(t, "alpha's trace read by alpha", got, alpha)
		got, err = s.GetTrace(ctxB, alphaID)
		if err != nil {
			t.Fatalf("beta gets its trace with the shared id: %v", err)
		}
		checkOnly(t, "the shared id read by beta", got, shared)
		for _, c := range []struct {
			name string
			ctx  context.Context
			id   string
		}{
			{"alpha gets beta's trace", ctxA, betaID},
			{"alpha gets the default project's trace", ctxA, defID},
			{"the default project gets alpha's trace", ctx, alphaID},
			{"the default project gets beta's trace", ctx, betaID},
			{"beta gets the default project's trace", ctxB, defID},
			{"an unknown project gets alpha's trace", ctxNone, alphaID},
		} {
			if _, err := s.GetTrace(c.ctx, c.id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: err = %v, want ErrNotFound", c.name, err)
			}
		}
	})
	t.Run("resolve a guessed id or prefix", func(t *testing.T) {
		for _, c := range []struct {
			name string
			ctx  context.Context
			id   string
		}{
			{"alpha resolves beta's id", ctxA, betaID},
			{"alpha resolves beta's prefix", ctxA, betaID[:store.MinTraceIDPrefix]},
			{"alpha resolves the default project's prefix", ctxA, defID[:12]},
			{"the default project resolves alpha's prefix", ctx, alphaID[:store.MinTraceIDPrefix]},
			{"an unknown project resolves alpha's id", ctxNone, alphaID},
		} {
			if _, err := s.ResolveTraceID(c.ctx, c.id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: err = %v, want ErrNotFound", c.name, err)
			}
		}
		// The shared id resolves in both projects, never ambiguously.
		for _, c := range []context.Context{ctxA, ctxB} {
			if got, err := s.ResolveTraceID(c, alphaID[:store.MinTraceIDPrefix]); err != nil || got != alphaID {
				t.Errorf("%s resolves its own prefix: %q, %v", store.ProjectOf(c), got, err)
			}
		}
	})
	t.Run("search", func(t *testing.T) {
		q, err := store.ParseSearch(semconv.AttrConversationID + "=conv-beta")
		if err != nil {
			t.Fatal(err)
		}
		want("alpha searches beta's session", listIDs(ctxA, store.TraceQuery{Search: q}))
		want("beta searches its session", listIDs(ctxB, store.TraceQuery{Search: q}), betaID)
		want("alpha filters by beta's session", listIDs(ctxA, store.TraceQuery{Session: "conv-beta"}))
		want("alpha filters by beta's model", listIDs(ctxA, store.TraceQuery{Model: "no-such"}))
	})
	t.Run("sessions", func(t *testing.T) {
		sl, ok := s.(store.SessionLister)
		if !ok {
			t.Skip("backend lists no sessions")
		}
		sessions := func(ctx context.Context) []string {
			var out []string
			waitFor(t, h.Eventually, func() error {
				p, err := sl.ListSessions(ctx, store.SessionQuery{})
				if err != nil {
					return err
				}
				out = out[:0]
				for _, ss := range p.Sessions {
					out = append(out, ss.SessionID)
				}
				slices.Sort(out)
				return nil
			})
			return out
		}
		want("alpha's sessions", sessions(ctxA), "conv-alpha")
		want("beta's sessions", sessions(ctxB), "conv-beta", "conv-beta-2")
		want("default sessions", sessions(ctx), "conv-default")
	})
}

func filterIDs(spans []store.Span, keep func(store.Span) bool) []string {
	var ids []string
	for _, sp := range spans {
		if keep(sp) && !slices.Contains(ids, sp.TraceID) {
			ids = append(ids, sp.TraceID)
		}
	}
	return ids
}

// checkOnly fails unless got holds exactly the span ids of want.
func checkOnly(t *testing.T, name string, got, want []store.Span) {
	t.Helper()
	ids := func(spans []store.Span) []string {
		var out []string
		for _, sp := range spans {
			out = append(out, sp.SpanID)
		}
		slices.Sort(out)
		return out
	}
	if g, w := ids(got), ids(want); !slices.Equal(g, w) {
		t.Errorf("%s: got spans %v, want %v", name, g, w)
	}
	for _, sp := range got {
		if sp.Project != want[0].Project {
			t.Errorf("%s: span %s has project %q, want %q", name, sp.SpanID, sp.Project, want[0].Project)
		}
	}
}

// waitFor retries fn until it succeeds or within has passed.
func waitFor(t *testing.T, within time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
