package clickhouse_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// BenchmarkWriteSpans measures WriteSpans into ClickHouse with realistic
// 10-span agent traces (storetest.GenerateTraces: ~14 gen_ai attributes per
// span, shared resources, events on errors). Every batch holds fresh ids, so
// nothing is deduplicated; generation is outside the timer. spans/s counts
// the spans acknowledged per second of wall time spent in WriteSpans.
//
//	go test ./store/clickhouse -run '^$' -bench BenchmarkWriteSpans -benchtime 20x
func BenchmarkWriteSpans(b *testing.B) {
	for _, bc := range []struct {
		batch, writers int
		dedupWindow    int // non_replicated_deduplication_window; -1 keeps the schema's
	}{
		{512, 1, -1},
		{10000, 1, -1},
		{50000, 1, -1},
		{50000, 2, -1},
		{50000, 1, 0},
	} {
		name := fmt.Sprintf("batch=%d/writers=%d", bc.batch, bc.writers)
		if bc.dedupWindow >= 0 {
			name += fmt.Sprintf("/dedup_window=%d", bc.dedupWindow)
		}
		b.Run(name, func(b *testing.B) {
			srv := chtestStart(b)
			s, db := openFresh(b, srv)
			if bc.dedupWindow >= 0 {
				if err := execSQL(srv, fmt.Sprintf("ALTER TABLE %s.spans MODIFY SETTING non_replicated_deduplication_window = %d", db, bc.dedupWindow)); err != nil {
					b.Fatal(err)
				}
			}
			for _, q := range strings.Split(os.Getenv("BENCH_ALTER"), ";") {
				if q = strings.TrimSpace(q); q != "" {
					if err := execSQL(srv, strings.ReplaceAll(q, "{db}", db)); err != nil {
						b.Fatal(err)
					}
				}
			}
			ctx := store.WithDefaultProject(context.Background())
			seed := int64(1)
			next := func() []store.Span {
				seed++
				return storetest.GenerateTraces(bc.batch/10, 10, seed)
			}
			var elapsed, clientCPU, serverCPU time.Duration
			written := 0
			serverPid := serverPID(srv)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				batches := make([][]store.Span, bc.writers)
				for w := range batches {
					batches[w] = next()
				}
				b.StartTimer()
				c0, s0 := processCPU(0), processCPU(serverPid)
				t0 := time.Now()
				var wg sync.WaitGroup
				errs := make([]error, bc.writers)
				for w := range batches {
					wg.Add(1)
					go func(w int) {
						defer wg.Done()
						errs[w] = s.WriteSpans(ctx, batches[w])
					}(w)
				}
				wg.Wait()
				elapsed += time.Since(t0)
				clientCPU += processCPU(0) - c0
				serverCPU += processCPU(serverPid) - s0
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				for _, bt := range batches {
					written += len(bt)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(written)/elapsed.Seconds(), "spans/s")
			b.ReportMetric(float64(clientCPU.Microseconds())/float64(written), "client-cpu-µs/span")
			if serverPid > 0 {
				b.ReportMetric(float64(serverCPU.Microseconds())/float64(written), "server-cpu-µs/span")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkSharedSuiteWrite runs the suite's common write benchmark
// (512-span batches), comparable across backends.
func BenchmarkSharedSuiteWrite(b *testing.B) {
	srv := chtestStart(b)
	s, _ := openFresh(b, srv)
	storetest.BenchmarkWrite(b, s)
}

// readFixture loads traces spans (10 per trace) once per benchmark.
func readFixture(b *testing.B, traces int) (*storeAndDB, []string) {
	srv := chtestStart(b)
	s, db := openFresh(b, srv)
	ctx := store.WithDefaultProject(context.Background())
	var ids []string
	for i := 0; i < traces; i += 5000 {
		spans := storetest.GenerateTraces(min(5000, traces-i), 10, int64(1000+i))
		if err := s.WriteSpans(ctx, spans); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < len(spans); j += 10 {
			ids = append(ids, spans[j].TraceID)
		}
	}
	return &storeAndDB{s: s, db: db, srv: srv}, ids
}

// BenchmarkGetTrace reads one 10-span trace out of 100k traces (1M spans)
// through the store, and, to price read-time deduplication, the same
// lookup as raw SQL with and without LIMIT 1 BY span_id.
func BenchmarkGetTrace(b *testing.B) {
	f, ids := readFixture(b, 100000)
	ctx := store.WithDefaultProject(context.Background())
	b.Run("store", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			spans, err := f.s.GetTrace(ctx, ids[(i*7919)%len(ids)])
			if err != nil || len(spans) != 10 {
				b.Fatalf("GetTrace: %d spans, %v", len(spans), err)
			}
		}
	})
	conn, err := rawConn(f.srv)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for _, v := range []struct{ name, tail string }{
		{"sql_without_dedup", ""},
		{"sql_limit_1_by", " LIMIT 1 BY span_id"},
	} {
		b.Run(v.name, func(b *testing.B) {
			q := "SELECT span_id, name, start, attributes, resource_attributes FROM " + f.db + ".spans WHERE trace_id = ? ORDER BY start, span_id" + v.tail
			for i := 0; i < b.N; i++ {
				rows, err := conn.Query(ctx, q, ids[(i*7919)%len(ids)])
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for rows.Next() {
					n++
				}
				rows.Close()
				if n != 10 {
					b.Fatalf("%d rows", n)
				}
			}
		})
	}
}

// BenchmarkListTraces lists one page of 100k traces (1M spans): the newest
// unfiltered, in a one-minute window (by start and by duration), filtered
// on status or service and sorted by a span aggregate.
func BenchmarkListTraces(b *testing.B) {
	f, _ := readFixture(b, 100000)
	ctx := store.WithDefaultProject(context.Background())
	for _, bc := range []struct {
		name string
		q    store.TraceQuery
	}{
		{"all", store.TraceQuery{}},
		// The fixture's traces start from 09:00 over about five minutes.
		{"minute_window", store.TraceQuery{Start: time.Date(2026, 3, 1, 9, 2, 0, 0, time.UTC), End: time.Date(2026, 3, 1, 9, 3, 0, 0, time.UTC)}},
		{"minute_window_sorted_by_duration", store.TraceQuery{Start: time.Date(2026, 3, 1, 9, 2, 0, 0, time.UTC), End: time.Date(2026, 3, 1, 9, 3, 0, 0, time.UTC), SortBy: store.SortDuration}},
		{"errors_sorted_by_errors", store.TraceQuery{Status: store.StatusError, SortBy: store.SortErrors}},
		{"service_sorted_by_tokens", store.TraceQuery{Service: "agent-worker", SortBy: store.SortTokens}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := f.s.ListTraces(ctx, bc.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// serverPID is the ClickHouse process to charge server CPU to (see
// chtest.Server.PID); 0 when unknown (remote server).
func serverPID(srv *chtest.Server) int { return srv.PID() }

// processCPU is the user+system CPU time of pid (0: this process).
func processCPU(pid int) time.Duration {
	if pid == 0 {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): utime and
	// stime are fields 14 and 15 of the line, in clock ticks (100 Hz).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkSearch100k measures search (TraceQuery.Search, Session) and
// ListSessions over 100,000 10-span agent traces (1M spans): one page each,
// see storetest.SearchBenchCases.
func BenchmarkSearch100k(b *testing.B) {
	srv := chtestStart(b)
	s, _ := openFresh(b, srv)
	p := storetest.LoadSearchBench(b, s, 100_000)
	storetest.BenchmarkSearch(b, s, p)
}
