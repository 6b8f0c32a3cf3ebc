package web

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/sqlite"
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
	// The whole-read path, as these numbers always measured it; the
	// windowed one is BenchmarkBigTrace's.
	srv, err := New(Config{WindowSpans: 1 << 30}, Deps{Traces: st})
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

// bigAgentTrace calls emit with the spans of one agent-like trace of n
// spans, batch spans at a time (an exporter's batches, never the whole
// trace in memory): an orchestrator root, 50 sub-agents, and under each
// alternating chat calls (model, usage, a short prompt and answer as
// attributes) and tool calls (name, call id, arguments).
func bigAgentTrace(n, batch int, emit func([]store.Span) error) error {
	tid := "d1d2d3d4d5d6d7d8d9dadbdcdddedf01"
	t0 := epoch
	root := store.Span{TraceID: tid, SpanID: hexID("1", 0, 16), Name: "invoke_agent orchestrator", Kind: "internal", StartTime: t0,
		EndTime: t0.Add(time.Hour), StatusCode: store.StatusOK, ServiceName: "agent", Operation: "invoke_agent", AgentName: "orchestrator"}
	buf := []store.Span{root}
	flush := func(force bool) error {
		if len(buf) >= batch || (force && len(buf) > 0) {
			err := emit(buf)
			buf = buf[:0]
			return err
		}
		return nil
	}
	per := (n - 51) / 50
	id := 0
	for a := range 50 {
		aStart := t0.Add(time.Duration(a) * 70 * time.Second)
		sub := store.Span{TraceID: tid, SpanID: hexID("2", a, 16), ParentSpanID: root.SpanID, Name: fmt.Sprintf("invoke_agent worker-%d", a),
			Kind: "internal", StartTime: aStart, EndTime: aStart.Add(70 * time.Second), StatusCode: store.StatusOK, ServiceName: "agent",
			Operation: "invoke_agent", AgentName: fmt.Sprintf("worker-%d", a)}
		buf = append(buf, sub)
		step := 70 * time.Second / time.Duration(per+1)
		for k := range per {
			id++
			s := store.Span{TraceID: tid, SpanID: hexID("3", id, 16), ParentSpanID: sub.SpanID, Kind: "client", StatusCode: store.StatusOK,
				ServiceName: "agent", StartTime: aStart.Add(time.Duration(k) * step), EndTime: aStart.Add(time.Duration(k+1) * step)}
			if k%2 == 0 {
				s.Name, s.Operation, s.RequestModel, s.ResponseModel = "chat gpt-4o-mini", "chat", "gpt-4o-mini", "gpt-4o-mini-2024-07-18"
				s.HasUsage, s.InputTokens, s.OutputTokens, s.CacheReadTokens = true, 800+int64(k%97), 120+int64(k%13), 512
				s.Attributes = store.Attributes{
					"gen_ai.input.messages":  fmt.Sprintf(`[{"role":"user","parts":[{"type":"text","content":"step %d: read the next file and summarise what changed"}]}]`, k),
					"gen_ai.output.messages": fmt.Sprintf(`[{"role":"assistant","parts":[{"type":"tool_call","name":"read_file","id":"call_%d","arguments":{"path":"src/mod%d.go"}}]}]`, id, k%200),
				}
			} else {
				s.Name, s.Operation, s.ToolName, s.ToolCallID = "execute_tool read_file", "execute_tool", "read_file", fmt.Sprintf("call_%d", id-1)
				s.Attributes = store.Attributes{"gen_ai.tool.call.arguments": fmt.Sprintf(`{"path":"src/mod%d.go"}`, k%200)}
			}
			buf = append(buf, s)
			if err := flush(false); err != nil {
				return err
			}
		}
	}
	return flush(true)
}

// resetPeakRSS resets the kernel's peak resident set size of this process
// (VmHWM) to the current one, after returning freed memory to the system.
func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSSMB is this process's VmHWM in MiB (0 when unreadable).
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkBigTrace ingests one agent-like trace of 100,000 and one of
// 1,000,000 spans (bigAgentTrace, 5,000-span batches) into each store (the
// embedded SQLite store; ClickHouse at LOOMWORK_CLICKHOUSE_DSN, skipped
// without one) and measures the server time of what a user does with it:
//
//   - open_unkept: the first page of a trace nothing was kept for (the
//     rollup derived from the summary ingest kept and the tree analysed
//     from the spans' bones, then kept by the store; run with
//     -benchtime=1x, later ops forget what was kept but ClickHouse's kept
//     head): what a reader pays when it opens a huge trace before serve's
//     keeper got to it;
//   - open_asked: the same first open with serve's keeper running: the
//     request hands the analysis to the keeper and answers within
//     Config.AnalysisWait (1 s) — the trace, or "being analysed" with a
//     refresh for a trace whose analysis takes longer;
//   - keep: the same derivation done behind ingest by serve's keeper
//     (Keeper.Pass once the trace is quiet), after forgetting what
//     open_unkept kept: background work, no reader waits on it;
//   - page: the page after a restart (the store opened again, a new web
//     server: what the store kept only), which is the first open of a
//     huge trace the keeper has kept;
//   - page_warm: the page again (web cache);
//   - expand: one sub-agent's first page of children (/rows);
//   - panel: one span's panel (/spans/{id}?fragment=1);
//   - rollup: /api/v1/traces/{id}/rollup after a restart;
//   - api_page: the API's first page of 1,000 spans (rollup included)
//     after a restart.
//
// Each reports ms/op (wall), cpu-ms/op (this process, GC included),
// B/op and allocs/op, and peak-rss-MB: this process's peak resident set
// from just before the step (VmHWM reset; the store's own memory for
// SQLite, the client side only for ClickHouse). Sub-benchmarks are named
// STORE/SIZE (sqlite/100k, clickhouse/1M), so scripts can pick one.
func BenchmarkBigTrace(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		size := fmt.Sprintf("%dk", n/1000)
		if n >= 1_000_000 {
			size = fmt.Sprintf("%dM", n/1_000_000)
		}
		b.Run("sqlite/"+size, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "traces.db")
			benchBigTrace(b, n, func() (store.Store, error) {
				return sqlite.Open(context.Background(), sqlite.Config{Path: path})
			})
		})
		b.Run("clickhouse/"+size, func(b *testing.B) {
			srv := chtest.Start(b)
			dsn := srv.DSN(srv.NewDatabase(b))
			benchBigTrace(b, n, func() (store.Store, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				return clickhouse.Open(ctx, clickhouse.Config{DSN: dsn})
			})
		})
	}
}

// benchBigTrace writes the trace through a store open gives and measures
// each step; a restart step opens the store again (outside the timing)
// and serves from a new web server, as after a process restart.
func benchBigTrace(b *testing.B, n int, open func() (store.Store, error)) {
	ctx := store.WithDefaultProject(context.Background())
	st, err := open()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Shutdown(ctx) })
	start := time.Now()
	var first store.Span
	err = bigAgentTrace(n, 5_000, func(spans []store.Span) error {
		if first.SpanID == "" {
			first = spans[0]
		}
		return st.WriteSpans(ctx, spans)
	})
	if err != nil {
		b.Fatal(err)
	}
	ingest := time.Since(start)
	id := first.TraceID
	serve := func(st store.Store) *Server {
		srv, err := New(Config{}, Deps{Traces: st})
		if err != nil {
			b.Fatal(err)
		}
		return srv
	}
	// restarted is a new web server on the store opened again.
	restarted := func(b *testing.B) (*Server, func()) {
		b.StopTimer()
		defer b.StartTimer()
		st2, err := open()
		if err != nil {
			b.Fatal(err)
		}
		return serve(st2), func() {
			b.StopTimer()
			st2.Shutdown(ctx)
			b.StartTimer()
		}
	}
	get := func(b *testing.B, srv *Server, path string) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			b.Fatalf("%s: status %d: %.300s", path, rec.Code, rec.Body.String())
		}
	}
	page := "/traces/" + id
	sub := hexID("2", 7, 16)
	step := hexID("3", n/2, 16)
	type op struct {
		name, path string
		restart    bool // a fresh server (empty web cache) per op
	}
	ops := []op{
		{"open_unkept", page, true},
		{"open_asked", page, true},
		{"keep", "", true},
		{"page", page, true},
		{"page_warm", page, false},
		{"expand", page + "/rows?parent=" + sub, false},
		{"panel", page + "/spans/" + step + "?fragment=1", false},
		{"rollup", "/api/v1/traces/" + id + "/rollup", true},
		{"api_page", "/api/v1/traces/" + id + "?limit=1000", true},
	}
	warm := serve(st)
	forget := func(b *testing.B) {
		if w, ok := st.(store.WindowReader); ok {
			for _, kind := range []string{rollup.AnalysisKind, warm.windowKind()} {
				if err := w.SaveDerived(ctx, id, kind, -1, []byte("{}")); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			if o.name == "page_warm" || o.name == "expand" || o.name == "panel" {
				get(b, warm, page) // the page was opened
			}
			resetPeakRSS()
			b.ReportAllocs()
			// Wall and CPU time of the requests alone (a restart's store
			// open and shutdown are outside both).
			var wall, cpu time.Duration
			ops := 0
			for b.Loop() {
				if (o.name == "open_unkept" && ops > 0) || o.name == "open_asked" || o.name == "keep" {
					// Forget what the last op kept, so this one derives
					// again (run with -benchtime=1x for the very first
					// open_unkept, which on ClickHouse also derives the
					// trace's head).
					b.StopTimer()
					forget(b)
					b.StartTimer()
				}
				srv, done := warm, func() {}
				if o.restart {
					srv, done = restarted(b)
				}
				if o.name == "open_asked" {
					// serve's case: a keeper runs, the request hands the
					// analysis to it and answers within AnalysisWait.
					b.StopTimer()
					k, err := srv.NewKeeper(KeeperConfig{Interval: time.Hour})
					if err != nil {
						b.Fatal(err)
					}
					if err := k.Start(ctx); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					c0, t0 := cpuTime(), time.Now()
					get(b, srv, o.path)
					wall, cpu = wall+time.Since(t0), cpu+cpuTime()-c0
					b.StopTimer()
					sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
					if err := k.Shutdown(sctx); err != nil {
						b.Fatal(err)
					}
					cancel()
					b.StartTimer()
					done()
					ops++
					continue
				}
				if o.name == "keep" {
					b.StopTimer()
					k, err := srv.NewKeeper(KeeperConfig{Lookback: 100 * 365 * 24 * time.Hour})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := k.Pass(ctx); err != nil { // first sight
						b.Fatal(err)
					}
					b.StartTimer()
					c0, t0 := cpuTime(), time.Now()
					if n, err := k.Pass(ctx); err != nil || n != 1 {
						b.Fatalf("keeper pass kept %d traces (%v), want 1", n, err)
					}
					wall, cpu = wall+time.Since(t0), cpu+cpuTime()-c0
					done()
					ops++
					continue
				}
				c0, t0 := cpuTime(), time.Now()
				get(b, srv, o.path)
				wall, cpu = wall+time.Since(t0), cpu+cpuTime()-c0
				done()
				ops++
			}
			b.ReportMetric(float64(wall.Microseconds())/1e3/float64(ops), "ms/op")
			b.ReportMetric(float64(cpu)/1e6/float64(ops), "cpu-ms/op")
			b.ReportMetric(peakRSSMB(), "peak-rss-MB")
			b.ReportMetric(ingest.Seconds(), "ingest-s")
		})
	}
}
