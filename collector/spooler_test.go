package collector_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
)

// openClickHouse opens a store on a fresh database of the shared test
// server.
func openClickHouse(t *testing.T) (*clickhouse.Store, *chtest.Server, string) {
	t.Helper()
	srv := chtest.Start(t)
	db := srv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: srv.DSN(db)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Shutdown(context.Background()) })
	return st, srv, db
}

// flaky is the real ClickHouse store with injected write failures: while
// down is set, WriteBatches and WriteSpooled fail without writing. Everything else is the
// store's own (the spool capability included).
type flaky struct {
	*clickhouse.Store
	down atomic.Bool
	// maxRecs > 0 fails every WriteSpooled of more records: a store
	// error that depends on the batch, not on the store being down.
	maxRecs atomic.Int64
	writes  atomic.Int64 // WriteBatches and WriteSpooled calls that reached the store
	spans   atomic.Int64 // spans they carried
}

func (f *flaky) WriteBatches(ctx context.Context, bs []store.PreparedBatch) error {
	if f.down.Load() {
		return fmt.Errorf("injected: %w", store.ErrUnavailable)
	}
	n := 0
	for _, b := range bs {
		n += b.Len()
	}
	err := f.Store.WriteBatches(ctx, bs)
	if err == nil {
		f.writes.Add(1)
		f.spans.Add(int64(n))
	}
	return err
}

func (f *flaky) WriteSpooled(ctx context.Context, recs [][]byte) (int, error) {
	if f.down.Load() {
		return 0, fmt.Errorf("injected: %w", store.ErrUnavailable)
	}
	if m := f.maxRecs.Load(); m > 0 && int64(len(recs)) > m {
		return 0, fmt.Errorf("injected: %d records are more than this store takes at once (%d)", len(recs), m)
	}
	n, err := f.Store.WriteSpooled(ctx, recs)
	if err == nil {
		f.writes.Add(1)
		f.spans.Add(int64(n))
	}
	return n, err
}

// uniqueBatch is an agent-shaped request whose trace ids no other call
// returns.
func uniqueBatch(seed uint64, traces int) (ptrace.Traces, []string) {
	td := agenttrace.NewGenerator(seed, runStart).Batch(traces, 10)
	ids := map[string]bool{}
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range spans.Len() {
		ids[spans.At(i).TraceID().String()] = true
	}
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	return td, out
}

func exportGRPC(t *testing.T, srv *collector.Server, td ptrace.Traces) (ptraceotlp.ExportResponse, error) {
	t.Helper()
	return ptraceotlp.NewGRPCClient(dialGRPC(t, srv.GRPCAddr())).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td))
}

func countSpans(t *testing.T, srv *chtest.Server, db string) (rows, unique uint64) {
	t.Helper()
	return srv.QueryUint(t, "SELECT count() FROM "+db+".spans"), srv.QueryUint(t, "SELECT uniqExact(trace_id, span_id) FROM "+db+".spans")
}

// waitStoredOnce waits up to a minute for n distinct spans in the store,
// then checks they are n rows: each stored once.
func waitStoredOnce(t *testing.T, chs *chtest.Server, db string, n uint64) {
	t.Helper()
	waitFor(t, "the spooled spans to be stored", time.Minute, func() bool {
		_, u := countSpans(t, chs, db)
		return u == n
	})
	if rows, _ := countSpans(t, chs, db); rows != n {
		t.Errorf("%d rows for %d spans", rows, n)
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With a spool, a request is acknowledged once the spool has it, and the
// feeder gets it into ClickHouse; requests sent close together reach the
// store in fewer, larger inserts than there were requests.
func TestSpoolAcknowledgesAndFeedsTheStoreInLargeInserts(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // its own store (database), server and directories
	st, chs, db := openClickHouse(t)
	w := &flaky{Store: st}
	dir := t.TempDir()
	srv := startServer(t, w, func(c *collector.ServerConfig) { c.Exporter.SpoolDir = dir })
	var wg sync.WaitGroup
	const requests = 40
	for i := range requests {
		wg.Go(func() {
			td, _ := uniqueBatch(uint64(100+i), 10)
			if _, err := exportGRPC(t, srv, td); err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	waitFor(t, "400 spooled traces' spans in ClickHouse", time.Minute, func() bool {
		_, u := countSpans(t, chs, db)
		return u == requests*100
	})
	if rows, u := countSpans(t, chs, db); rows != u {
		t.Errorf("%d rows for %d spans: a spooled span was stored twice", rows, u)
	}
	if n := w.writes.Load(); n >= requests {
		t.Errorf("%d inserts for %d requests: the feeder did not coalesce", n, requests)
	}
	h := srv.Health(context.Background())
	if h.Spool == nil || h.Status != "ok" || !h.Ready || !h.Store.Reachable {
		t.Fatalf("health after the feed: %+v", h)
	}
	waitFor(t, "the spool to be empty", 10*time.Second, func() bool { return srv.Health(context.Background()).Spool.Pending == 0 })
}

// A store outage is absorbed: requests keep being acknowledged, /healthz
// says degraded, and when the store is back every acknowledged span is
// stored exactly once.
func TestSpoolRidesOutAStoreOutage(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // its own store (database), server and directories
	st, chs, db := openClickHouse(t)
	w := &flaky{Store: st}
	w.down.Store(true)
	srv := startServer(t, w, func(c *collector.ServerConfig) { c.Exporter.SpoolDir = t.TempDir() })
	for i := range 10 {
		td, _ := uniqueBatch(uint64(200+i), 5)
		if _, err := exportGRPC(t, srv, td); err != nil {
			t.Fatalf("request %d during the outage: %v (the spool should take it)", i, err)
		}
	}
	waitFor(t, "the feeder to report the failure", 10*time.Second, func() bool {
		h := srv.Health(context.Background())
		return h.Status == "degraded" && h.Spool.LastError != ""
	})
	h := srv.Health(context.Background())
	if !h.Ready || h.Spool.Pending != 10 || !strings.Contains(h.Spool.LastError, "injected") {
		t.Errorf("health during the outage: %+v, spool %+v; want ready, 10 pending, the store's error", h, *h.Spool)
	}
	if rows, _ := countSpans(t, chs, db); rows != 0 {
		t.Fatalf("%d rows stored while the store was down", rows)
	}
	w.down.Store(false)
	waitStoredOnce(t, chs, db, 500)
	waitFor(t, "health back to ok", 10*time.Second, func() bool { return srv.Health(context.Background()).Status == "ok" })
}

// A batch the store refuses every time as a whole (issue 36: spans of
// more traces than one ClickHouse query could name) does not wedge the
// spool: after a few failed attempts the feeder stores it in halves,
// down to single records, and every acknowledged span is stored once.
func TestSpoolSplitsABatchTheStoreRefusesWhole(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // its own store (database), server and directories
	st, chs, db := openClickHouse(t)
	w := &flaky{Store: st}
	w.down.Store(true)
	w.maxRecs.Store(3)
	srv := startServer(t, w, func(c *collector.ServerConfig) { c.Exporter.SpoolDir = t.TempDir() })
	for i := range 16 {
		td, _ := uniqueBatch(uint64(300+i), 5)
		if _, err := exportGRPC(t, srv, td); err != nil {
			t.Fatalf("request %d during the outage: %v (the spool should take it)", i, err)
		}
	}
	w.down.Store(false)
	waitStoredOnce(t, chs, db, 800)
	waitFor(t, "the spool to be empty", 10*time.Second, func() bool { return srv.Health(context.Background()).Spool.Pending == 0 })
}

// A full spool refuses with the retryable statuses OTLP defines, and takes
// data again once the store drained it.
func TestFullSpoolAnswersResourceExhaustedAnd429(t *testing.T) {
	testtier.NoRace(t, "TestRestartKeepsEveryAcknowledgedSpanExactlyOnce")
	testtier.Slow(t)
	t.Parallel() // its own store (database), server and directories
	st, chs, db := openClickHouse(t)
	w := &flaky{Store: st}
	w.down.Store(true)
	srv := startServer(t, w, func(c *collector.ServerConfig) {
		c.Exporter.SpoolDir = t.TempDir()
		c.Exporter.SpoolMaxMiB = 64
		c.Exporter.RetryAfter = 2 * time.Second
	})
	acked := 0
	var err error
	for i := range 400 {
		td, _ := uniqueBatch(uint64(1000+i), 50) // ~270 KB a request
		if _, err = exportGRPC(t, srv, td); err != nil {
			break
		}
		acked++
	}
	st2, _ := status.FromError(err)
	if st2.Code() != codes.ResourceExhausted || retryDelay(st2) != 2*time.Second || !strings.Contains(st2.Message(), "spool") {
		t.Fatalf("after %d acknowledged requests: %v; want RESOURCE_EXHAUSTED with a 2s RetryInfo naming the spool", acked, err)
	}
	if h := srv.Health(context.Background()); h.Ready || h.Status != "unavailable" {
		t.Errorf("health with a full spool: status %q ready %v; want unavailable, not ready", h.Status, h.Ready)
	}
	td, _ := uniqueBatch(9999, 50)
	pb, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	resp, _ := postOTLP(t, srv, "application/x-protobuf", pb, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("HTTP with a full spool: %d Retry-After %q; want 429, 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	w.down.Store(false)
	want := uint64(acked * 500)
	waitFor(t, "the acknowledged spans to be stored", 2*time.Minute, func() bool {
		_, u := countSpans(t, chs, db)
		return u == want
	})
	if _, err := exportGRPC(t, srv, td); err != nil {
		t.Errorf("a request refused while the spool was full, retried after the drain: %v", err)
	}
}

// What the spool acknowledged survives a stop before the store had it: the
// next server on the same directory stores it.
func TestSpooledSpansAreStoredAfterARestart(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // its own store (database), server and directories
	st, chs, db := openClickHouse(t)
	w := &flaky{Store: st}
	w.down.Store(true)
	dir := t.TempDir()
	cfg := collector.ServerConfig{GRPCAddr: "127.0.0.1:0", HTTPAddr: collector.AddrOff, Logger: testLogger(t)}
	cfg.Exporter.SpoolDir = dir
	srv, err := collector.NewServer(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		td, _ := uniqueBatch(uint64(300+i), 4)
		if _, err := exportGRPC(t, srv, td); err != nil {
			t.Fatal(err)
		}
	}
	// The store is still down: shutdown cannot drain, and gives up when
	// its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_ = srv.Shutdown(ctx)
	cancel()
	if rows, _ := countSpans(t, chs, db); rows != 0 {
		t.Fatalf("%d rows stored while the store was down", rows)
	}
	w.down.Store(false)
	startServer(t, w, func(c *collector.ServerConfig) { c.Exporter.SpoolDir = dir })
	waitFor(t, "the spool to be replayed into the store", time.Minute, func() bool {
		_, u := countSpans(t, chs, db)
		return u == 240
	})
}

// A span ClickHouse can never store (a start time of 2^64-1 ns) is refused
// alone through partial_success; the request's other spans are stored. It
// used to fail the whole request with a retryable 503, for ever.
func TestUnstorableSpanIsRejectedAloneWithPartialSuccess(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // its own store (database), server and directories
	for _, spooled := range []bool{false, true} {
		t.Run(fmt.Sprintf("spool=%v", spooled), func(t *testing.T) {
			st, chs, db := openClickHouse(t)
			srv := startServer(t, st, func(c *collector.ServerConfig) {
				if spooled {
					c.Exporter.SpoolDir = t.TempDir()
				}
			})
			td := agenttrace.NewGenerator(5, runStart).Batch(1, 4)
			spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
			spans.At(2).SetStartTimestamp(pcommon.Timestamp(math.MaxUint64))
			bad := spans.At(2).SpanID().String()
			resp, err := exportGRPC(t, srv, td)
			if err != nil {
				t.Fatalf("export: %v; want OK with partial_success", err)
			}
			ps := resp.PartialSuccess()
			if ps.RejectedSpans() != 1 || !strings.Contains(ps.ErrorMessage(), bad) || !strings.Contains(ps.ErrorMessage(), "start_time") {
				t.Fatalf("partial_success = %d %q; want 1 naming span %s and start_time", ps.RejectedSpans(), ps.ErrorMessage(), bad)
			}
			waitFor(t, "the 3 storable spans", time.Minute, func() bool {
				_, u := countSpans(t, chs, db)
				return u == 3
			})
		})
	}
}
