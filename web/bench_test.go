package web

import (
	"context"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// benchTracePage measures the server time to open a big trace stored in
// st: read it from the store, roll it up (critical path, cost), build the
// waterfall index and render the first page. "cold" empties the trace
// cache before every open (a trace opened for the first time); "warm"
// re-opens it (paging, selecting spans); "expand" fetches the first page
// of one sub-agent's rows (~2% of the trace) from the cached trace, what a
// click on a collapsed subtree costs.
func benchTracePage(b *testing.B, st TraceReader, spans []store.Span) {
	srv, err := New(Config{}, Deps{Traces: st})
	if err != nil {
		b.Fatal(err)
	}
	get := func(b *testing.B, path string) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			b.Fatalf("%s: status %d", path, rec.Code)
		}
		b.SetBytes(int64(rec.Body.Len()))
	}
	page := "/traces/" + spans[0].TraceID
	b.Run("cold", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			srv.cache.clear()
			get(b, page)
		}
		reportCPU(b, cpu)
	})
	b.Run("warm", func(b *testing.B) {
		get(b, page)
		cpu := cpuTime()
		for b.Loop() {
			get(b, page)
		}
		reportCPU(b, cpu)
	})
	b.Run("expand", func(b *testing.B) {
		rows := page + "/rows?parent=" + spans[1].SpanID
		get(b, rows)
		cpu := cpuTime()
		for b.Loop() {
			get(b, rows)
		}
		reportCPU(b, cpu)
	})
}

// cpuTime is the CPU time (user + system, all threads, the garbage
// collector's included) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ms/op, the process's CPU time per operation since
// start: on a shared machine wall time moves with the load, CPU time much
// less. (A ClickHouse server's own CPU is not in it.)
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/1e6/float64(b.N), "cpu-ms/op")
}

// BenchmarkTracePage50kSpans opens a 50,000-span trace (bigTraceSpans: a
// root, 50 sub-agents, ~1,000 chat/tool spans each) on the embedded store.
func BenchmarkTracePage50kSpans(b *testing.B) {
	st := openStore(b)
	spans := bigTraceSpans(50_000)
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		b.Fatal(err)
	}
	benchTracePage(b, st, spans)
}

// BenchmarkTracePage100kSpans opens a 100,000-span trace (a root, 50
// sub-agents, ~2,000 chat/tool spans each) on both stores: the embedded
// SQLite store and ClickHouse (LOOMWORK_CLICKHOUSE_DSN, or a private
// server when libchdb is cached; see chtest).
func BenchmarkTracePage100kSpans(b *testing.B) {
	spans := bigTraceSpans(100_000)
	b.Run("sqlite", func(b *testing.B) {
		st := openStore(b)
		if err := st.WriteSpans(context.Background(), spans); err != nil {
			b.Fatal(err)
		}
		benchTracePage(b, st, spans)
	})
	b.Run("clickhouse", func(b *testing.B) {
		srv := chtest.Start(b)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: srv.DSN(srv.NewDatabase(b))})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Shutdown(context.Background()) })
		for lo := 0; lo < len(spans); lo += 50_000 {
			if err := st.WriteSpans(ctx, spans[lo:min(lo+50_000, len(spans))]); err != nil {
				b.Fatal(err)
			}
		}
		benchTracePage(b, st, spans)
	})
}

// BenchmarkTraceList100kTraces measures the server time of the trace list
// page (GET /traces: one page of 50 summaries from the store, each priced
// from its billed calls, rendered) over a store of 100,000 10-span agent
// traces (1M spans), on both stores: the default newest-first page, a
// later page (by its token), the page sorted by tokens, and the JSON API.
func BenchmarkTraceList100kTraces(b *testing.B) {
	const traces = 100_000
	run := func(b *testing.B, st store.Store) {
		storetest.LoadSearchBench(b, st, traces)
		srv, err := New(Config{}, Deps{Traces: st})
		if err != nil {
			b.Fatal(err)
		}
		get := func(b *testing.B, path string) string {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != 200 {
				b.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body.String())
			}
			return rec.Body.String()
		}
		first, err := st.ListTraces(store.WithDefaultProject(context.Background()), store.TraceQuery{})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct{ name, path string }{
			{"page", "/traces"},
			{"next_page", "/traces?page_token=" + first.NextPageToken},
			{"sort_tokens", "/traces?sort=tokens"},
			{"api", "/api/v1/traces"},
		} {
			b.Run(c.name, func(b *testing.B) {
				get(b, c.path)
				cpu := cpuTime()
				for b.Loop() {
					get(b, c.path)
				}
				reportCPU(b, cpu)
			})
		}
	}
	b.Run("sqlite", func(b *testing.B) { run(b, openStore(b)) })
	b.Run("clickhouse", func(b *testing.B) {
		srv := chtest.Start(b)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: srv.DSN(srv.NewDatabase(b))})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Shutdown(context.Background()) })
		run(b, st)
	})
}
