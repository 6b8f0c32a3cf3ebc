package collector_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/internal/testtier"
)

// protoTally counts what one protocol's senders offered and got back,
// attempt by attempt (seen on the wire: a gRPC interceptor, an HTTP
// round tripper).
type protoTally struct {
	offered, acked atomic.Int64 // spans
	ok, refused    atomic.Int64 // attempts
	// refusedBare: refusals without a retry delay (gRPC RetryInfo, HTTP
	// Retry-After); other: any other failure (timeouts included).
	refusedBare, other atomic.Int64
	mu                 sync.Mutex
	others             map[string]int
	reasons            map[string]int
}

func (p *protoTally) otherf(format string, args ...any) {
	p.other.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.others == nil {
		p.others = map[string]int{}
	}
	p.others[fmt.Sprintf(format, args...)]++
}

// reason counts a refusal by what the server said, in a few words.
func (p *protoTally) reason(m string) {
	for _, k := range []string{"store is behind", "would not finish", "the request was not read", "-byte request", "memory", "spool", "backlog", "queue"} {
		if strings.Contains(m, k) {
			m = k
			break
		}
	}
	if len(m) > 60 {
		m = m[:60]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reasons == nil {
		p.reasons = map[string]int{}
	}
	p.reasons[m]++
}

func (p *protoTally) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("offered %d spans, acknowledged %d (%.0f%%); attempts: ok %d, refused %d (%d without a retry delay), other %d %v %v",
		p.offered.Load(), p.acked.Load(), 100*p.ackedShare(), p.ok.Load(), p.refused.Load(), p.refusedBare.Load(), p.other.Load(), p.others, p.reasons)
}

func (p *protoTally) refusedShare() float64 {
	n := p.ok.Load() + p.refused.Load() + p.other.Load()
	if n == 0 {
		return 0
	}
	return float64(p.refused.Load()) / float64(n)
}

func (p *protoTally) ackedShare() float64 {
	if p.offered.Load() == 0 {
		return 0
	}
	return float64(p.acked.Load()) / float64(p.offered.Load())
}

// countingTransport records each OTLP/HTTP answer.
type countingTransport struct{ t *protoTally }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	switch {
	case err != nil:
		c.t.otherf("%v", err)
	case resp.StatusCode == http.StatusOK:
		c.t.ok.Add(1)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		c.t.refused.Add(1)
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		var sp spb.Status
		_ = proto.Unmarshal(b, &sp)
		c.t.reason(sp.GetMessage())
		if resp.Header.Get("Retry-After") == "" {
			c.t.refusedBare.Add(1)
		}
	default:
		c.t.otherf("HTTP %d", resp.StatusCode)
	}
	return resp, err
}

// countingInterceptor records each OTLP/gRPC answer.
func countingInterceptor(t *protoTally) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		st, _ := status.FromError(err)
		switch st.Code() {
		case codes.OK:
			t.ok.Add(1)
		case codes.ResourceExhausted, codes.Unavailable:
			t.refused.Add(1)
			t.reason(st.Message())
			hasInfo := false
			for _, d := range st.Details() {
				if _, ok := d.(*errdetails.RetryInfo); ok {
					hasInfo = true
				}
			}
			if !hasInfo {
				t.refusedBare.Add(1)
			}
		default:
			t.otherf("%s", st.Code())
		}
		return err
	}
}

// spanBatch is n spans of one trace, unique by (sender, seq), shaped like
// an agent's (a few attributes of a model call).
func spanBatch(sender, seq uint32, n int, res *resource.Resource) []sdktrace.ReadOnlySpan {
	var tid trace.TraceID
	binary.BigEndian.PutUint32(tid[0:], 0x36fa1a00)
	binary.BigEndian.PutUint32(tid[8:], sender)
	binary.BigEndian.PutUint32(tid[12:], seq)
	start := time.Now().Add(-time.Minute)
	stubs := make(tracetest.SpanStubs, n)
	for i := range stubs {
		var sid trace.SpanID
		binary.BigEndian.PutUint32(sid[4:], uint32(i+1))
		stubs[i] = tracetest.SpanStub{
			Name:        "chat model-a",
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
			SpanKind:    trace.SpanKindClient,
			StartTime:   start.Add(time.Duration(i) * time.Millisecond),
			EndTime:     start.Add(time.Duration(i)*time.Millisecond + 500*time.Microsecond),
			Attributes: []attribute.KeyValue{
				attribute.String("gen_ai.operation.name", "chat"),
				attribute.String("gen_ai.request.model", "model-a"),
				attribute.Int("gen_ai.usage.input_tokens", 1200+i),
				attribute.Int("gen_ai.usage.output_tokens", 80),
				attribute.String("gen_ai.prompt", strings.Repeat("the quick brown fox ", 8)),
			},
			Resource:             res,
			InstrumentationScope: instrumentation.Scope{Name: "fairness"},
		}
	}
	return stubs.Snapshots()
}

// TestOverloadRefusalsAreFairAcrossProtocols is issue 36's third fault:
// under 3.1× overload the refusals fell on gRPC only — gRPC senders got
// 18% of their spans acknowledged, HTTP senders 75%, and HTTP was never
// answered 429. The official OTel exporters, otlptracegrpc and
// otlptracehttp, 48 senders each (one exporter per sender, as a fleet of
// services), export 1,024-span batches back to back at once, several
// times what serve stores, on the embedded store and on ClickHouse behind
// the spool. Each protocol must be refused with a retry delay (429 with
// Retry-After, RESOURCE_EXHAUSTED with RetryInfo), the refused shares of
// their attempts must be within a factor of 1.5 of each other, and so
// must the shares of their spans acknowledged.
func TestOverloadRefusalsAreFairAcrossProtocols(t *testing.T) {
	testtier.Slow(t)
	testtier.NoRace(t, "TestAdmissionRefusesAFloodRetryablyAndStoresWhatItAcknowledged")
	t.Run("sqlite", func(t *testing.T) {
		st := openSQLite(t)
		overloadFairly(t, startServer(t, st, func(c *collector.ServerConfig) { c.MemoryLimitMiB = 2048 }))
	})
	t.Run("clickhouse-spool", func(t *testing.T) {
		st, _, _ := openClickHouse(t)
		overloadFairly(t, startServer(t, st, func(c *collector.ServerConfig) {
			c.MemoryLimitMiB = 2048
			c.Exporter.SpoolDir = t.TempDir()
		}))
	})
}

func overloadFairly(t *testing.T, srv *collector.Server) {
	res := resource.NewSchemaless(attribute.String("service.name", "fairness"))
	var grpcT, httpT protoTally
	ctx := context.Background()
	// One exporter per sender, as in a fleet of services: each gRPC
	// exporter has its connection, each HTTP exporter its client.
	exporters := func(p int) sdktrace.SpanExporter {
		var exp sdktrace.SpanExporter
		var err error
		if p == 0 {
			exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(srv.GRPCAddr()), otlptracegrpc.WithInsecure(),
				otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
				otlptracegrpc.WithDialOption(grpc.WithUnaryInterceptor(countingInterceptor(&grpcT))))
		} else {
			exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(srv.HTTPAddr()), otlptracehttp.WithInsecure(),
				otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
				otlptracehttp.WithHTTPClient(&http.Client{Transport: countingTransport{&httpT}}))
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { exp.Shutdown(ctx) })
		return exp
	}
	const spans = 1024
	// Closed loop, as the SDK's batch processor exports: each sender
	// exports back to back, and after a refusal waits the retry delay the
	// server gave (1 s) before the next export, as the exporters' retry
	// does. 48 senders per protocol are several times what serve stores.
	const senders, run = 48, 10 * time.Second
	var wg sync.WaitGroup
	end := time.Now().Add(run)
	for s := range senders {
		for p := range 2 {
			exp := exporters(p)
			tally := []*protoTally{&grpcT, &httpT}[p]
			sender := uint32(2*s + p)
			wg.Go(func() {
				for seq := uint32(0); time.Now().Before(end); seq++ {
					tally.offered.Add(spans)
					ectx, cancel := context.WithTimeout(ctx, 10*time.Second) // the exporters' default timeout
					err := exp.ExportSpans(ectx, spanBatch(sender, seq, spans, res))
					cancel()
					if err == nil {
						tally.acked.Add(spans)
						continue
					}
					time.Sleep(time.Second)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("gRPC: %s", &grpcT)
	t.Logf("HTTP: %s", &httpT)
	for name, p := range map[string]*protoTally{"gRPC": &grpcT, "HTTP": &httpT} {
		if p.refused.Load() == 0 {
			t.Errorf("%s senders were never refused under 3× overload: %s", name, p)
		}
		if p.refusedBare.Load() > 0 {
			t.Errorf("%s: %d refusals without a retry delay", name, p.refusedBare.Load())
		}
	}
	// The shares, when each protocol had enough acknowledged to compare:
	// on this shared machine a run now and then sees the store path crawl
	// (a handful acknowledged in all, the rest refused or timed out on
	// both sides), and a ratio of handfuls says nothing about fairness.
	if grpcT.ok.Load() < 10 || httpT.ok.Load() < 10 {
		t.Logf("too few acknowledged requests to compare the shares (gRPC %d, HTTP %d)", grpcT.ok.Load(), httpT.ok.Load())
		return
	}
	g, h := grpcT.refusedShare(), httpT.refusedShare()
	if g/h > 1.5 || h/g > 1.5 {
		t.Errorf("refused shares of the attempts: gRPC %.0f%%, HTTP %.0f%%; want within a factor of 1.5 of each other", 100*g, 100*h)
	}
	g, h = grpcT.ackedShare(), httpT.ackedShare()
	if g/h > 1.5 || h/g > 1.5 {
		t.Errorf("acknowledged shares: gRPC %.0f%%, HTTP %.0f%%; want within a factor of 1.5 of each other", 100*g, 100*h)
	}
}
