package clickhouse_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestProjectIsolation runs the conformance-style project checks (list,
// summaries, get by id, the same id in two projects, guessed ids and
// prefixes, search, sessions) against a real ClickHouse.
func TestProjectIsolation(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtestStart(t)
	storetest.RunProjects(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			s, _ := openFresh(t, srv)
			return s
		},
	})
}

// TestSameBatchInTwoProjectsIsStoredForEach: insert deduplication names a
// batch by its spans' ids and times; the project is part of that name, so
// beta sending exactly alpha's batch is not dropped as alpha's retry, and
// the sorting key (which ends with the project) keeps both copies through
// merges.
func TestSameBatchInTwoProjectsIsStoredForEach(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtestStart(t)
	s, db := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())
	spans := storetest.GenerateTraces(3, 4, 21)
	for _, project := range []string{"alpha", "beta", "alpha"} {
		b := slices.Clone(spans)
		for i := range b {
			b[i].Project = project
		}
		if err := s.WriteSpans(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := execSQL(srv, "OPTIMIZE TABLE "+db+".spans FINAL"); err != nil {
		t.Fatal(err)
	}
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".spans"); n != 2*uint64(len(spans)) {
		t.Errorf("%d span rows after merging, want %d (each project's copy once)", n, 2*len(spans))
	}
	for _, project := range []string{"alpha", "beta"} {
		pctx := store.WithProject(ctx, project)
		got, err := s.GetTrace(pctx, spans[0].TraceID)
		if err != nil || len(got) != 4 {
			t.Errorf("%s reads %d spans, %v; want 4", project, len(got), err)
		}
		page, err := s.ListTraces(pctx, store.TraceQuery{})
		if err != nil || len(page.Traces) != 3 {
			t.Errorf("%s lists %d traces, %v; want 3", project, len(page.Traces), err)
		}
	}
	if page, err := s.ListTraces(ctx, store.TraceQuery{}); err != nil || len(page.Traces) != 0 {
		t.Errorf("the default project lists %d traces, %v; want 0", len(page.Traces), err)
	}
}

// TestRetentionTTLDeletesExpiredProjectRows: rows carry their expiry
// (expire_at, from the span's project retention), and the tables' TTL
// deletes them in the next merge. Project "short" is written with spans
// that ended long enough ago to have expired; "short"'s recent trace,
// project "forever" (no retention) with equally old spans, and the default
// project stay. OPTIMIZE … FINAL forces the TTL merge (ClickHouse may drop
// rows already expired when they are inserted).
func TestRetentionTTLDeletesExpiredProjectRows(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtestStart(t)
	s, db := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())
	now := time.Now().UTC()
	old := now.Add(-10 * 24 * time.Hour)
	gen := func(conv string, seed int64, at time.Time, project string, retention time.Duration) []store.Span {
		spans := storetest.GenerateConversation(conv, 1, 5, seed, at, time.Minute)
		for i := range spans {
			spans[i].Project, spans[i].Retention = project, retention
		}
		return spans
	}
	week := 7 * 24 * time.Hour
	expired := gen("c-expired", 11, old, "short", week)
	recent := gen("c-recent", 12, now.Add(-time.Hour), "short", week)
	forever := gen("c-forever", 13, old, "forever", 0)
	def := gen("c-default", 14, old, "", 0)
	// forever reuses expired's trace id: only the project's rows go.
	for i := range forever {
		forever[i].TraceID = expired[0].TraceID
	}
	for _, b := range [][]store.Span{expired, recent, forever, def} {
		if err := s.WriteSpans(ctx, slices.Clone(b)); err != nil {
			t.Fatal(err)
		}
	}
	short := store.WithProject(ctx, "short")
	// ClickHouse may already drop rows expired at insert; the merge
	// below removes whatever is left. The stamped expiries:
	if got := queryStrings(t, srv, "SELECT DISTINCT toString(expire_at) FROM "+db+".spans WHERE project = 'forever'"); !slices.Equal(got, []string{"2106-01-01 00:00:00"}) {
		t.Errorf("forever's rows expire at %v", got)
	}
	end := recent[0].EndTime
	for _, sp := range recent {
		if sp.EndTime.After(end) {
			end = sp.EndTime
		}
	}
	want := end.Add(week).Truncate(24 * time.Hour).Add(24 * time.Hour).Format(time.DateTime)
	for _, table := range []string{"spans", "trace_index"} {
		if got := queryStrings(t, srv, "SELECT DISTINCT toString(expire_at, 'UTC') FROM "+db+"."+table+" WHERE project = 'short'"); !slices.Equal(got, []string{want}) {
			t.Errorf("short's recent %s rows expire at %v, want %s", table, got, want)
		}
	}
	for _, table := range []string{"spans", "trace_index"} {
		if err := execSQL(srv, "OPTIMIZE TABLE "+db+"."+table+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".spans WHERE project = 'short' AND trace_id = '"+expired[0].TraceID+"'"); n != 0 {
		t.Errorf("%d span rows of the expired trace left", n)
	}
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".trace_index WHERE project = 'short' AND trace_id = '"+expired[0].TraceID+"'"); n != 0 {
		t.Errorf("%d trace_index rows of the expired trace left", n)
	}
	if _, err := s.GetTrace(short, expired[0].TraceID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTrace of the expired trace: %v", err)
	}
	page, err := s.ListTraces(short, store.TraceQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 1 || page.Traces[0].TraceID != recent[0].TraceID {
		t.Errorf("short lists %+v, want only its recent trace", page.Traces)
	}
	for _, c := range []struct {
		ctx   context.Context
		id    string
		spans int
	}{
		{short, recent[0].TraceID, len(recent)},
		{store.WithProject(ctx, "forever"), forever[0].TraceID, len(forever)},
		{ctx, def[0].TraceID, len(def)},
	} {
		got, err := s.GetTrace(c.ctx, c.id)
		if err != nil || len(got) != c.spans {
			t.Errorf("project %q trace %s: %d spans, %v; want %d", store.ProjectOf(c.ctx), c.id, len(got), err, c.spans)
		}
		page, err := s.ListTraces(c.ctx, store.TraceQuery{})
		if err != nil || len(page.Traces) != 1 {
			t.Errorf("project %q lists %d traces, %v; want 1", store.ProjectOf(c.ctx), len(page.Traces), err)
		}
	}
}

// TestReadWithoutProjectFailsClosed: a read whose context names no project
// is an error wrapping store.ErrNoProject — never the default project's
// traces — on every read path; the same reads with the default project
// asked for explicitly find them.
func TestReadWithoutProjectFailsClosed(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtestStart(t)
	s, _ := openFresh(t, srv)
	def := store.WithDefaultProject(context.Background())
	spans := storetest.GenerateConversation("c-default", 1, 4, 31, time.Now().Add(-time.Hour), time.Minute)
	if err := s.WriteSpans(def, spans); err != nil {
		t.Fatal(err)
	}
	id := spans[0].TraceID
	none := context.Background()
	reads := map[string]func(context.Context) (int, error){
		"GetTrace": func(ctx context.Context) (int, error) {
			got, err := s.GetTrace(ctx, id)
			return len(got), err
		},
		"ResolveTraceID": func(ctx context.Context) (int, error) {
			got, err := s.ResolveTraceID(ctx, id[:8])
			return len(got), err
		},
		"ListTraces": func(ctx context.Context) (int, error) {
			p, err := s.ListTraces(ctx, store.TraceQuery{})
			return len(p.Traces), err
		},
		"ListTraces by tokens": func(ctx context.Context) (int, error) {
			p, err := s.ListTraces(ctx, store.TraceQuery{SortBy: store.SortTokens})
			return len(p.Traces), err
		},
		"ListSessions": func(ctx context.Context) (int, error) {
			p, err := s.ListSessions(ctx, store.SessionQuery{})
			return len(p.Sessions), err
		},
	}
	for name, read := range reads {
		if n, err := read(none); !errors.Is(err, store.ErrNoProject) || n != 0 {
			t.Errorf("%s with no project: %d results, %v; want an error wrapping store.ErrNoProject", name, n, err)
		}
		if n, err := read(def); err != nil || n == 0 {
			t.Errorf("%s with the default project asked for: %d results, %v; want the trace", name, n, err)
		}
	}
}
