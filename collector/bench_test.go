package collector_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/agenttrace"
)

var (
	benchSenders      = flag.Int("ingest.senders", 4, "BenchmarkIngest: concurrent OTLP/gRPC senders")
	benchRequestSpans = flag.Int("ingest.request-spans", 512, "BenchmarkIngest: spans per OTLP request")
	benchWriters      = flag.Int("ingest.writers", 1, "BenchmarkIngest: exporter store writers")
	benchSpool        = flag.Bool("ingest.spool", false, "BenchmarkIngest: spool for ClickHouse (as serve does by default); the time counts until the spool is empty")
	benchRequests     = flag.String("ingest.requests", "", "BenchmarkIngest: a directory of recorded OTLP/protobuf ExportTraceServiceRequest bodies (*.pb), each sent once in name order, instead of the agenttrace templates; b.N must not exceed their number (-benchtime Nx)")
)

// recordedRequests reads the *.pb request bodies of dir in name order and
// counts their spans. The agent load of scripts/throughput (varied message
// text, ids and attribute sets) is recorded this way, so a profile of the
// serve pipeline sees the bytes serve sees there; each body is sent once,
// since its ids are fixed and a second copy would be deduplicated. The
// bodies are mapped, not read: a gigabyte of them on the Go heap would
// make the server's garbage collector run less often than serve's.
func recordedRequests(tb testing.TB, dir string) (bodies [][]byte, spans []int) {
	tb.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.pb"))
	if err != nil || len(names) == 0 {
		tb.Fatalf("-ingest.requests %s: no *.pb request bodies (%v)", dir, err)
	}
	slices.Sort(names)
	for _, name := range names {
		b := mapFile(tb, name)
		n := 0
		// Counted without decoding: a decoder's garbage would be in the
		// profile of what is measured.
		for _, rs := range protoFields(tb, b, 1) {
			for _, ss := range protoFields(tb, rs, 2) {
				n += len(protoFields(tb, ss, 2))
			}
		}
		bodies, spans = append(bodies, b), append(spans, n)
	}
	return bodies, spans
}

// protoFields returns the length-delimited fields num of the protobuf
// message b.
func protoFields(tb testing.TB, b []byte, num protowire.Number) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			tb.Fatalf("recorded request: %v", protowire.ParseError(k))
		}
		b = b[k:]
		k = protowire.ConsumeFieldValue(n, typ, b)
		if k < 0 {
			tb.Fatalf("recorded request: %v", protowire.ParseError(k))
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			out = append(out, v)
		}
		b = b[k:]
	}
	return out
}

// mapFile maps a file read-only until the benchmark ends.
func mapFile(tb testing.TB, name string) []byte {
	tb.Helper()
	f, err := os.Open(name)
	if err != nil {
		tb.Fatalf("recorded request: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		tb.Fatalf("recorded request %s: empty or unreadable (%v)", name, err)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		tb.Fatalf("map recorded request %s: %v", name, err)
	}
	tb.Cleanup(func() { _ = syscall.Munmap(b) })
	return b
}

// requestTemplate is one marshaled OTLP request and where its trace ids
// sit, so a sender can make a fresh request (new trace ids, same shape)
// by patching bytes instead of generating and marshaling spans: the
// benchmark's client then costs little CPU next to the server it measures.
type requestTemplate struct {
	body    []byte
	offsets []int // start of every trace id occurrence
	spans   int
}

func makeTemplates(tb testing.TB, n, spansPerRequest int) []requestTemplate {
	tb.Helper()
	const spansPerTrace = 10
	traces := (n*spansPerRequest)/spansPerTrace + 1
	all := agenttrace.NewGenerator(42, time.Now().Add(-time.Hour)).Batch(traces, spansPerTrace)
	src := all.ResourceSpans().At(0)
	spans := src.ScopeSpans().At(0).Spans()
	out := make([]requestTemplate, n)
	for i := range n {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		src.Resource().CopyTo(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		src.ScopeSpans().At(0).Scope().CopyTo(ss.Scope())
		ids := map[pcommon.TraceID]bool{}
		for k := i * spansPerRequest; k < (i+1)*spansPerRequest; k++ {
			sp := spans.At(k)
			sp.CopyTo(ss.Spans().AppendEmpty())
			ids[sp.TraceID()] = true
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			tb.Fatal(err)
		}
		t := requestTemplate{body: body, spans: spansPerRequest}
		for id := range ids {
			for off := 0; ; {
				j := bytes.Index(body[off:], id[:])
				if j < 0 {
					break
				}
				t.offsets = append(t.offsets, off+j)
				off += j + len(id)
			}
		}
		if len(t.offsets) != spansPerRequest {
			tb.Fatalf("found %d trace ids in template, want %d", len(t.offsets), spansPerRequest)
		}
		out[i] = t
	}
	return out
}

// instance returns a copy of the template whose trace ids are made unique
// for request k.
func (t requestTemplate) instance(k uint64) []byte {
	b := make([]byte, len(t.body))
	copy(b, t.body)
	mix := (k + 1) * 0x9e3779b97f4a7c15
	for _, off := range t.offsets {
		v := binary.BigEndian.Uint64(b[off+8:]) ^ mix
		binary.BigEndian.PutUint64(b[off+8:], v)
	}
	return b
}

// BenchmarkIngest measures end-to-end ingest: OTLP/gRPC senders → the
// serve pipeline (Loomwork front, memory limiter, exporter) → the store, on
// agent-shaped 10-span traces with GenAI attributes, in requests of
// -ingest.request-spans spans from -ingest.senders concurrent senders. One
// benchmark op is one request. It reports spans/s, the peak RSS of this
// process (and of the ClickHouse process), and CPU seconds per million
// spans. Run one backend per process for a clean peak RSS, e.g.
//
//	go test ./collector -run '^$' -bench 'BenchmarkIngest/sqlite' -benchtime 400x
func BenchmarkIngest(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			env := be.setup(b)
			st := env.open(b)
			defer st.Shutdown(context.Background())
			// BENCH_ALTER="sql; sql" changes the fresh ClickHouse schema
			// before the load ("{db}" is the benchmark's database), to price
			// schema variants on the same pipeline.
			if alter := os.Getenv("BENCH_ALTER"); alter != "" && env.exec != nil {
				for _, q := range strings.Split(alter, ";") {
					if q = strings.TrimSpace(q); q != "" {
						env.exec(b, q)
					}
				}
			}
			// The GC target serve runs with (GOGC, when set, wins as there).
			if os.Getenv("GOGC") == "" {
				defer debug.SetGCPercent(debug.SetGCPercent(collector.DefaultGCPercent))
			}
			// And its soft memory limit, below the memory limiter's.
			if os.Getenv("GOMEMLIMIT") == "" {
				defer debug.SetMemoryLimit(debug.SetMemoryLimit(collector.GCMemoryLimit(collector.DefaultMemoryLimitMiB())))
			}
			writers := *benchWriters
			spooled := *benchSpool && be.name == "clickhouse"
			spoolDir := b.TempDir()
			srv := startServer(b, st, func(c *collector.ServerConfig) {
				c.HTTPAddr = collector.AddrOff
				c.Exporter.Writers = writers
				if spooled {
					c.Exporter.SpoolDir = spoolDir
				}
			})
			// One request's body and span count: a template with fresh
			// trace ids, or the next recorded request.
			var request func(k int64) ([]byte, int)
			if *benchRequests != "" {
				bodies, counts := recordedRequests(b, *benchRequests)
				// The warm-up takes the last four; the timed requests the others.
				const warm = 4
				if b.N > len(bodies)-warm {
					b.Fatalf("-ingest.requests %s holds %d requests: -benchtime %dx needs %d", *benchRequests, len(bodies), b.N, b.N+warm)
				}
				request = func(k int64) ([]byte, int) {
					if k < 0 {
						k = int64(len(bodies)) + k
					}
					return bodies[k], counts[k]
				}
			} else {
				templates := makeTemplates(b, 16, *benchRequestSpans)
				request = func(k int64) ([]byte, int) {
					if k < 0 {
						return templates[-k-1].instance(1<<40 + uint64(-k-1)), *benchRequestSpans
					}
					return templates[k%int64(len(templates))].instance(uint64(k)), *benchRequestSpans
				}
			}
			conns := make([]*grpc.ClientConn, *benchSenders)
			for i := range conns {
				conns[i] = dialGRPC(b, srv.GRPCAddr())
			}
			// Warm up: connections, store caches, the first ClickHouse parts.
			for i := range 4 {
				body, _ := request(-int64(i) - 1)
				if err := invokeRaw(conns[0], body); err != nil {
					b.Fatalf("warm-up request: %v", err)
				}
			}

			var (
				next   atomic.Int64
				failed atomic.Int64
				sent   atomic.Int64
				wg     sync.WaitGroup
				errMu  sync.Mutex
				first  error
			)
			cpu0, child0 := selfCPU(), procCPU(env.serverPID)
			b.ResetTimer()
			began := time.Now()
			for _, conn := range conns {
				wg.Go(func() {
					for {
						k := next.Add(1) - 1
						if k >= int64(b.N) {
							return
						}
						body, n := request(k)
						sent.Add(int64(n))
						if err := invokeRaw(conn, body); err != nil {
							failed.Add(1)
							errMu.Lock()
							if first == nil {
								first = err
							}
							errMu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			acked := time.Since(began)
			// Stored, not only acknowledged: wait for the feeder. Health
			// pings the store, and a ping every few milliseconds through a
			// drain of a minute was 4% of the CPU measured: every 50 ms.
			for spooled && srv.Health(context.Background()).Spool.Pending > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			elapsed := time.Since(began)
			b.StopTimer()
			if first != nil {
				b.Fatalf("%d of %d requests failed; first: %v", failed.Load(), b.N, first)
			}
			spans := float64(sent.Load())
			b.ReportMetric(spans/elapsed.Seconds(), "spans/s")
			if spooled {
				b.ReportMetric(spans/acked.Seconds(), "acked-spans/s")
			}
			b.ReportMetric(float64(peakRSS(os.Getpid()))/(1<<20), "peak-RSS-MB")
			b.ReportMetric((selfCPU()-cpu0).Seconds()/spans*1e6, "cpu-s/Mspans")
			if env.serverPID != 0 {
				b.ReportMetric((procCPU(env.serverPID)-child0).Seconds()/spans*1e6, "db-cpu-s/Mspans")
				b.ReportMetric(float64(peakRSS(env.serverPID))/(1<<20), "db-peak-RSS-MB")
			}
			b.ReportMetric(0, "ns/op") // one op is one request; spans/s is the figure
		})
	}
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU reads another process's user+system CPU time from /proc.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may contain spaces).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+stt) * time.Second / ticks
}

// peakRSS reads a process's peak resident set size (VmHWM) in bytes.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
