package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchStore runs fn on a fresh store and reports, besides fn's own
// metrics, the process CPU time per span (robust against other load on the
// machine) and the file's bytes per span after Shutdown checkpoints the WAL.
func benchStore(b *testing.B, cfg Config, fn func(*testing.B, store.Store)) {
	path := filepath.Join(b.TempDir(), "traces.db")
	cfg.Path = path
	s, err := Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	fn(b, s)
	cpu := cpuTime() - cpu0
	if err := s.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if st, err := os.Stat(path + suffix); err == nil {
			size += st.Size()
		}
	}
	spans := float64(b.N * storetest.BenchBatchSize)
	b.ReportMetric(float64(cpu.Microseconds())/spans, "cpu-µs/span")
	b.ReportMetric(float64(size)/spans, "B/span")
}

// BenchmarkWriteSpans measures ingest into a fresh file: 512-span batches of
// 10-span agent traces with ~14 gen_ai attributes per span (what OTel SDKs
// send), one transaction per batch, with the default synchronous=FULL and,
// for comparison, NORMAL.
func BenchmarkWriteSpans(b *testing.B) {
	for _, sync := range []string{SyncFull, SyncNormal} {
		b.Run("sync="+sync, func(b *testing.B) {
			benchStore(b, Config{Synchronous: sync}, storetest.BenchmarkWrite)
		})
	}
}

// BenchmarkWriteSpansParallel is BenchmarkWriteSpans with 4 concurrent
// writers: encoding and compression run outside the write lock, so they
// overlap with another batch's SQLite transaction.
func BenchmarkWriteSpansParallel(b *testing.B) {
	benchStore(b, Config{}, func(b *testing.B, s store.Store) { storetest.BenchmarkWriteParallel(b, s, 4) })
}

// BenchmarkListTraces measures one 50-trace page over a store of 20,000
// traces (100,000 spans): the default newest-first order (index), a sort key
// without an index (scan and sort), and exact-match plus text filters.
func BenchmarkListTraces(b *testing.B) {
	path := filepath.Join(b.TempDir(), "traces.db")
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: path, Synchronous: SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	spans := storetest.GenerateTraces(20000, 5, 1)
	for i := 0; i < len(spans); i += 5000 {
		if err := s.WriteSpans(ctx, spans[i:min(i+5000, len(spans))]); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		q    store.TraceQuery
	}{
		{"newest", store.TraceQuery{}},
		{"slowest", store.TraceQuery{SortBy: store.SortDuration}},
		{"agent+errors", store.TraceQuery{Agent: "coding-agent", Status: store.StatusError}},
		{"text", store.TraceQuery{Text: "FETCH_URL"}},
		{"model+tokens", store.TraceQuery{Model: "gpt-4o", SortBy: store.SortTokens}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				p, err := s.ListTraces(ctx, c.q)
				if err != nil || len(p.Traces) == 0 {
					b.Fatalf("ListTraces: %d traces, %v", len(p.Traces), err)
				}
			}
		})
	}
	b.Run("get-trace", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := s.GetTrace(ctx, spans[(i*5)%len(spans)].TraceID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGetTrace measures reading one whole trace back: a 50,000-span
// agent trace (the size the web UI's waterfall is built for, ~14 gen_ai
// attributes per span, shared resource attributes), the same shape without
// attributes, events or resources ("bare", like the web UI's benchmark
// trace, so mostly the typed columns), and a 10-span trace, in a store that
// also holds 2,000 other 10-span traces. The bare trace is written in one
// batch (so one payload block), everything else in 512-span batches as OTel
// SDKs send them (the big trace's payloads spread over ~100 blocks).
// Reported per GetTrace call; spans/s is spans read per second of wall
// time.
func BenchmarkGetTrace(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "traces.db"), Synchronous: SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	small := storetest.GenerateTraces(2000, 10, 7)
	big := storetest.GenerateTraces(1, 50_000, 8)
	bare := storetest.GenerateTraces(1, 50_000, 9)
	for i := range bare {
		sp := &bare[i]
		sp.Attributes, sp.ResourceAttributes, sp.Events, sp.Links, sp.RetrievedDocs, sp.CitedDocs = nil, nil, nil, nil, nil, nil
		sp.ScopeAttributes, sp.ScopeSchemaURL, sp.ResourceSchemaURL, sp.Flags = nil, "", "", 0
	}
	if err := s.WriteSpans(ctx, bare); err != nil {
		b.Fatal(err)
	}
	for _, spans := range [][]store.Span{small, big} {
		for i := 0; i < len(spans); i += storetest.BenchBatchSize {
			if err := s.WriteSpans(ctx, spans[i:min(i+storetest.BenchBatchSize, len(spans))]); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name    string
		traceID string
		n       int
	}{
		{"spans=50000", big[0].TraceID, len(big)},
		{"spans=10", small[len(small)/2].TraceID, 10},
		{"spans=50000,bare", bare[0].TraceID, len(bare)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := s.GetTrace(ctx, c.traceID)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != c.n {
					b.Fatalf("GetTrace returned %d spans, want %d", len(got), c.n)
				}
			}
			b.ReportMetric(float64(b.N*c.n)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}

// BenchmarkWriteOneBigTrace measures a 100,000-span trace arriving in
// 512-span batches (a long agent run exported as it goes): every batch
// recomputes the trace's summary from its stored spans' typed columns, so
// the cost per span grows with the trace. Reported per span of the whole
// trace.
func BenchmarkWriteOneBigTrace(b *testing.B) {
	const n = 100_000
	spans := storetest.GenerateTraces(1, n, 7)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, err := Open(context.Background(), Config{Path: filepath.Join(b.TempDir(), "traces.db")})
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := cpuTime()
		b.StartTimer()
		for at := 0; at < n; at += storetest.BenchBatchSize {
			if err := s.WriteSpans(context.Background(), spans[at:min(at+storetest.BenchBatchSize, n)]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/n, "cpu-µs/span")
		s.Shutdown(context.Background())
		b.StartTimer()
	}
}

// BenchmarkSearch100k measures search (TraceQuery.Search, Session) and
// ListSessions over 100,000 10-span agent traces (1M spans): one page each,
// see storetest.SearchBenchCases.
func BenchmarkSearch100k(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(b.TempDir(), "traces.db"), Synchronous: SyncNormal})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	p := storetest.LoadSearchBench(b, s, 100_000)
	storetest.BenchmarkSearch(b, s, p)
}

// BenchmarkFileSize writes storetest.GenerateTraces(5000, 10, 1) in
// 512-span batches to a fresh file and reports its bytes per span after
// Shutdown checkpoints the WAL, and (dbstat) each table's and index's
// share, the largest first: the measure of issue 36's bytes per span.
func BenchmarkFileSize(b *testing.B) {
	spans := storetest.GenerateTraces(5000, 10, 1)
	for b.Loop() {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "traces.db")
		s, err := Open(context.Background(), Config{Path: path, Synchronous: SyncNormal})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for i := 0; i < len(spans); i += storetest.BenchBatchSize {
			if err := s.WriteSpans(context.Background(), spans[i:min(i+storetest.BenchBatchSize, len(spans))]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if err := s.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		n := float64(len(spans))
		b.ReportMetric(float64(st.Size())/n, "B/span")
		db, err := sql.Open("sqlite", path)
		if err != nil {
			b.Fatal(err)
		}
		rows, err := db.Query(`SELECT name, sum(pgsize) FROM dbstat GROUP BY name HAVING sum(pgsize) > 4096 ORDER BY 2 DESC`)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var name string
			var size int64
			if err := rows.Scan(&name, &size); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(size)/n, "B/span:"+name)
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		rows.Close()
		db.Close()
		b.StartTimer()
	}
}
