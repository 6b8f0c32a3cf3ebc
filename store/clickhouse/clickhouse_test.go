package clickhouse_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestConformance runs the shared trace-store suite against a real
// ClickHouse 26.7, one fresh database per subtest, the subtests at once.
func TestConformance(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	var mu sync.Mutex
	lastDB := map[string]string{} // top-level subtest → database of its last Open
	key := func(t *testing.T) string {
		name := t.Name()
		if i := strings.Index(name, "/"); i >= 0 {
			if j := strings.Index(name[i+1:], "/"); j >= 0 {
				return name[:i+1+j]
			}
		}
		return name
	}
	storetest.RunAll(t, storetest.Harness{
		Parallel: true, // lastDB is keyed by top-level subtest
		Open: func(t *testing.T) store.Store {
			db := srv.NewDatabase(t)
			mu.Lock()
			lastDB[key(t)] = db
			mu.Unlock()
			return open(t, srv.DSN(db))
		},
		Reopen: func(t *testing.T) store.Store {
			mu.Lock()
			db := lastDB[key(t)]
			mu.Unlock()
			if db == "" {
				t.Fatal("Reopen before Open")
			}
			return open(t, srv.DSN(db))
		},
		New: func(t *testing.T) store.Store {
			s, err := clickhouse.New(clickhouse.Config{DSN: srv.DSN(srv.NewDatabase(t))})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}

func open(t testing.TB, dsn string) *clickhouse.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), time.Minute)
	defer cancel()
	s, err := clickhouse.Open(ctx, clickhouse.Config{DSN: dsn})
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	return s
}

func openFresh(t testing.TB, srv *chtest.Server) (*clickhouse.Store, string) {
	t.Helper()
	db := srv.NewDatabase(t)
	s := open(t, srv.DSN(db))
	t.Cleanup(func() { s.Shutdown(store.WithDefaultProject(context.Background())) })
	return s, db
}

func TestOpenCreatesTheDatabaseAndAppliesEachMigrationOnce(t *testing.T) {
	testtier.Slow(t)
	testtier.NoRace(t, "TestConformance") // single-goroutine: migrations and writes in sequence
	t.Parallel()                          // a database of its own on the shared server
	srv := chtest.Start(t)
	base := srv.NewDatabase(t)
	// A database that does not exist yet: Open creates it.
	db := base + "_new"
	t.Cleanup(func() { dropDatabase(t, srv, db) })
	for i := 0; i < 3; i++ {
		s := open(t, srv.DSN(db))
		s.Shutdown(store.WithDefaultProject(context.Background()))
	}
	got := queryStrings(t, srv, "SELECT concat(toString(version), ' ', file) FROM "+db+".schema_migrations ORDER BY version")
	want := []string{"1 0001_spans.sql", "2 0002_trace_summaries.sql", "3 0003_trace_index.sql", "4 0004_otlp_envelope.sql", "5 0005_compact_attributes.sql", "6 0006_projects.sql", "7 0007_experiments.sql", "8 0008_trace_derived.sql", "9 0009_traces.sql", "11 0011_span_text_codecs.sql", "12 0012_trace_attrs.sql", "13 0013_client_attr_keys.sql"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("schema_migrations = %q, want %q (each applied once)", got, want)
	}
}

func TestRetriedBatchIsStoredOnceAndCountedOnce(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, db := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())
	spans := storetest.GenerateTraces(20, 10, 7)
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	// The exact retry an OTLP sender makes: the same block again. Insert
	// deduplication drops it, so it does not even take disk space.
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".spans"); n != 200 {
		t.Errorf("after an identical retry the spans table holds %d rows, want 200 (block deduplicated)", n)
	}
	// A retry that is not byte-identical (here: half the batch, in another
	// order, as a collector coalescing requests would send it) is stored
	// again, and readers must still see each span once.
	var half []store.Span
	for i := len(spans) - 1; i >= 0; i -= 2 {
		half = append(half, spans[i])
	}
	if err := s.WriteSpans(ctx, half); err != nil {
		t.Fatal(err)
	}
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".spans"); n != 300 {
		t.Fatalf("spans table holds %d rows, want 300 (the reordered half is a new block)", n)
	}
	page, err := s.ListTraces(ctx, store.TraceQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 20 {
		t.Fatalf("ListTraces returned %d traces, want 20", len(page.Traces))
	}
	byTrace := map[string][]store.Span{}
	for _, sp := range spans {
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
	}
	for _, ts := range page.Traces {
		var in, out, calls int64
		for _, sp := range byTrace[ts.TraceID] {
			if semconv.IsModelCallOperation(sp.Operation) {
				in += sp.InputTokens
				out += sp.OutputTokens
				calls++
			}
		}
		if ts.SpanCount != 10 || ts.InputTokens != in || ts.OutputTokens != out || ts.ModelCalls != calls {
			t.Errorf("trace %s: spans %d, input %d, output %d, model calls %d; want 10, %d, %d, %d",
				ts.TraceID, ts.SpanCount, ts.InputTokens, ts.OutputTokens, ts.ModelCalls, in, out, calls)
		}
		got, err := s.GetTrace(ctx, ts.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 10 {
			t.Errorf("GetTrace(%s) returned %d spans, want 10", ts.TraceID, len(got))
		}
	}
	// The same holds once merges have run.
	if err := execSQL(srv, "OPTIMIZE TABLE "+db+".spans FINAL"); err != nil {
		t.Fatal(err)
	}
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".spans"); n != 200 {
		t.Errorf("after merging, the spans table holds %d rows, want 200", n)
	}
}

func TestWriteRejectsABatchWithOneBadSpanAndNamesIt(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, db := openFresh(t, srv)
	spans := storetest.GenerateTraces(2, 10, 3)
	spans[13].SpanID = "00000000000000000"
	err := s.WriteSpans(store.WithDefaultProject(context.Background()), spans)
	if err == nil {
		t.Fatal("batch with an invalid span id was accepted")
	}
	if !strings.Contains(err.Error(), "span 13") || !strings.Contains(err.Error(), "span_id") {
		t.Errorf("error %q does not name span 13 and its span_id", err)
	}
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".spans"); n != 0 {
		t.Errorf("%d spans of the rejected batch were stored", n)
	}
	spans[13].SpanID = "0123456789abcdef"
	spans[4].StartTime = time.Time{}
	if err := s.WriteSpans(store.WithDefaultProject(context.Background()), spans); err == nil || !strings.Contains(err.Error(), "start_time") {
		t.Errorf("zero start time: %v; want an error naming start_time", err)
	}
}

func TestFourConcurrentWritersStoreEverySpanOnce(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, db := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			// 500 traces each, in 2 batches of 2,500 spans; every writer
			// also re-sends its first batch.
			all := storetest.GenerateTraces(500, 10, int64(100+w))
			for i := 0; i < len(all); i += 2500 {
				if err := s.WriteSpans(ctx, all[i:i+2500]); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
			if err := s.WriteSpans(ctx, all[:2500]); err != nil {
				errs <- fmt.Errorf("writer %d retry: %w", w, err)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := queryCount(t, srv, "SELECT count() FROM (SELECT DISTINCT trace_id, span_id FROM "+db+".spans)"); n != 20000 {
		t.Errorf("%d distinct spans stored, want 20000", n)
	}
	total, pages := int64(0), 0
	q := store.TraceQuery{Limit: store.MaxPageSize}
	for {
		page, err := s.ListTraces(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range page.Traces {
			total += ts.SpanCount
		}
		pages++
		if page.NextPageToken == "" {
			break
		}
		q.PageToken = page.NextPageToken
	}
	if total != 20000 || pages != 2 {
		t.Errorf("summaries count %d spans over %d pages, want 20000 over 2", total, pages)
	}
}

func TestShutDownStoreRefusesCalls(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, _ := openFresh(t, srv)
	if err := s.Shutdown(store.WithDefaultProject(context.Background())); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(store.WithDefaultProject(context.Background())); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	ctx := store.WithDefaultProject(context.Background())
	if err := s.WriteSpans(ctx, storetest.GenerateTraces(1, 2, 1)); err == nil {
		t.Error("WriteSpans on a shut-down store succeeded")
	}
	if _, err := s.GetTrace(ctx, strings.Repeat("ab", 16)); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetTrace on a shut-down store: %v", err)
	}
	if _, err := s.ListTraces(ctx, store.TraceQuery{}); err == nil {
		t.Error("ListTraces on a shut-down store succeeded")
	}
}

func TestNewDoesNotConnectAndAFailedStartReleasesTheConnection(t *testing.T) {
	if _, err := clickhouse.New(clickhouse.Config{Database: "1bad"}); err == nil || !strings.Contains(err.Error(), "dsn") || !strings.Contains(err.Error(), "database") {
		t.Errorf("New with a bad config: %v; want errors naming dsn and database", err)
	}
	// Nothing listens on port 1: New succeeds (no I/O), Start fails.
	s, err := clickhouse.New(clickhouse.Config{DSN: "clickhouse://127.0.0.1:1/loomwork?dial_timeout=2s"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := store.WithDefaultProject(context.Background())
	if _, err := s.ListTraces(ctx, store.TraceQuery{}); err == nil {
		t.Error("ListTraces before Start succeeded")
	}
	if err := s.Start(ctx); err == nil || !strings.Contains(err.Error(), "connect to clickhouse") {
		t.Fatalf("Start with no server: %v", err)
	}
	if err := s.WriteSpans(ctx, storetest.GenerateTraces(1, 2, 1)); err == nil {
		t.Error("WriteSpans after a failed Start succeeded")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after a failed Start: %v", err)
	}
}

func TestStartWaitsForAServerThatHangsUpUntilItAnswersOrTheContextEnds(t *testing.T) {
	testtier.Slow(t) // a real ClickHouse
	srv := chtest.Start(t)
	db := srv.NewDatabase(t)
	u, err := url.Parse(srv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	ctx := store.WithDefaultProject(context.Background())
	withHost := func(host string) string { v := *u; v.Host = host; return v.String() }

	// One attempt (the default): the hang-up is the error.
	addr, _ := chtest.HangUpFirst(t, 3, u.Host)
	s, err := clickhouse.New(clickhouse.Config{DSN: withHost(addr)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err == nil || !strings.Contains(err.Error(), "connect to clickhouse") {
		t.Fatalf("Start with ConnectWait 0 through a front that hangs up: %v; want a connect error", err)
	}

	// With a wait: Start rides out the hang-ups and the store works.
	addr, accepted := chtest.HangUpFirst(t, 3, u.Host)
	s, err = clickhouse.New(clickhouse.Config{DSN: withHost(addr), ConnectWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start with ConnectWait through a front that hangs up 3 times: %v", err)
	}
	waited := s
	t.Cleanup(func() { waited.Shutdown(context.Background()) })
	if got := accepted.Load(); got < 4 {
		t.Errorf("the front saw %d connections; want the 3 hung up and at least one more", got)
	}
	if err := s.WriteSpans(ctx, storetest.GenerateTraces(1, 2, 1)); err != nil {
		t.Errorf("WriteSpans after a waited Start: %v", err)
	}

	// The wait ends with the caller's context. (The other way out, a
	// server that answers with an exception, is not tested against the
	// shared server: a failed login makes the libchdb server reset every
	// later connection, which would break the tests that share it.)
	addr, _ = chtest.HangUpFirst(t, 1<<30, u.Host)
	s, err = clickhouse.New(clickhouse.Config{DSN: withHost(addr), ConnectWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Start(short); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start against a front that always hangs up, with a 2 s context: %v; want the context's deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Start took %s after its context's 2 s deadline", d)
	}
}

// TestConnectInBackgroundStartsDuringAnOutageAndConnectsWhenItEnds: with
// ConnectInBackground, Start returns while the server cannot be reached
// (down, then hung); reads, writes and Ping fail with store.ErrUnavailable
// naming the server, Prepare works (a spool can take data), and once the
// server answers the store connects, migrates and works. Shutdown while it
// is still connecting returns at once.
func TestConnectInBackgroundStartsDuringAnOutageAndConnectsWhenItEnds(t *testing.T) {
	testtier.Slow(t) // a real ClickHouse
	srv := chtest.Start(t)
	db := srv.NewDatabase(t)
	ctx := store.WithDefaultProject(context.Background())
	for _, mode := range []string{"down", "hung"} {
		t.Run(mode, func(t *testing.T) {
			outage := srv.NewOutage(t)
			if mode == "down" {
				outage.Down()
			} else {
				outage.Hang()
			}
			s, err := clickhouse.New(clickhouse.Config{DSN: outage.DSN(srv, db), ConnectInBackground: true})
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			if err := s.Start(ctx); err != nil {
				t.Fatalf("Start during the outage: %v; want it to start and keep connecting", err)
			}
			if d := time.Since(began); d > 5*time.Second {
				t.Errorf("Start took %s during the outage", d)
			}
			t.Cleanup(func() { s.Shutdown(context.Background()) })
			for what, err := range map[string]error{
				"Ping":       s.Ping(ctx),
				"WriteSpans": s.WriteSpans(ctx, storetest.GenerateTraces(1, 2, 1)),
				"ListTraces": func() error { _, err := s.ListTraces(ctx, store.TraceQuery{}); return err }(),
			} {
				if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), outage.Addr()) {
					t.Errorf("%s during the outage: %v; want store.ErrUnavailable naming %s", what, err, outage.Addr())
				}
			}
			if _, err := s.Prepare(storetest.GenerateTraces(1, 2, 1)); err != nil {
				t.Errorf("Prepare during the outage: %v; it needs no server", err)
			}
			outage.Up()
			deadline := time.Now().Add(30 * time.Second)
			for s.Ping(ctx) != nil {
				if time.Now().After(deadline) {
					t.Fatalf("not connected 30 s after the server came back: %v", s.Ping(ctx))
				}
				time.Sleep(100 * time.Millisecond)
			}
			spans := storetest.GenerateTraces(2, 3, 1)
			if err := s.WriteSpans(ctx, spans); err != nil {
				t.Fatalf("WriteSpans once connected: %v", err)
			}
			if got, err := s.GetTrace(ctx, spans[0].TraceID); err != nil || len(got) != 3 {
				t.Errorf("GetTrace once connected: %d spans, %v", len(got), err)
			}
		})
	}

	// Shutdown of a store still connecting ends the connecting.
	outage := srv.NewOutage(t)
	outage.Down()
	s, err := clickhouse.New(clickhouse.Config{DSN: outage.DSN(srv, db), ConnectInBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown while connecting: %v", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("Shutdown while connecting took %s", d)
	}
	if err := s.Ping(ctx); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping after Shutdown: %v; want the store's closed error", err)
	}
}
