package reliability

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Span keys. Every span the suite sends has a key, sender<<32 | seq (seq
// from 1): its span id is the key (big-endian) and its trace id is the
// run's nonce followed by key>>4, so 16 consecutive spans of a sender
// share a trace. Reading a store back gives the keys, nothing else.

func newNonce() [8]byte {
	var n [8]byte
	_, _ = rand.Read(n[:])
	return n
}

func traceIDOf(nonce [8]byte, key uint64) trace.TraceID {
	var id trace.TraceID
	copy(id[:8], nonce[:])
	binary.BigEndian.PutUint64(id[8:], key>>4)
	return id
}

func spanIDOf(key uint64) trace.SpanID {
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], key)
	return id
}

// keyOf decodes a stored (trace id, span id) into the suite's key; ok is
// false for a span of another run.
func keyOf(tid, sid []byte, nonce [8]byte) (uint64, bool) {
	if len(tid) != 16 || len(sid) != 8 || [8]byte(tid[:8]) != nonce {
		return 0, false
	}
	k := binary.BigEndian.Uint64(sid)
	if k>>4 != binary.BigEndian.Uint64(tid[8:]) {
		return 0, false
	}
	return k, true
}

func keyOfHex(tid, sid string, nonce [8]byte) (uint64, bool) {
	t, err1 := hex.DecodeString(tid)
	s, err2 := hex.DecodeString(sid)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return keyOf(t, s, nonce)
}

var (
	spanResource = resource.NewSchemaless(attribute.String("service.name", "reliability"))
	spanScope    = instrumentation.Scope{Name: "loomwork/reliability", Version: "1"}
)

// buildSpans returns the spans with keys first … first+n-1: GenAI-shaped
// (a chat span with model and token counts), payload bytes of extra
// attribute when payload > 0.
func buildSpans(nonce [8]byte, first uint64, n, payload int, now time.Time) []sdktrace.ReadOnlySpan {
	pad := ""
	if payload > 0 {
		pad = strings.Repeat("x", payload)
	}
	out := make([]sdktrace.ReadOnlySpan, n)
	for i := range n {
		k := first + uint64(i)
		tid := traceIDOf(nonce, k)
		attrs := []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", "model-a"),
			attribute.Int64("gen_ai.usage.input_tokens", int64(k%1000)),
			attribute.Int64("gen_ai.usage.output_tokens", int64(k%97)),
		}
		if pad != "" {
			attrs = append(attrs, attribute.String("reliability.payload", pad))
		}
		stub := tracetest.SpanStub{
			Name:                 "chat model-a",
			SpanContext:          trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: spanIDOf(k), TraceFlags: trace.FlagsSampled}),
			SpanKind:             trace.SpanKindClient,
			StartTime:            now.Add(-time.Duration(n-i) * time.Millisecond),
			EndTime:              now.Add(-time.Duration(n-i)*time.Millisecond + 500*time.Microsecond),
			Attributes:           attrs,
			Resource:             spanResource,
			InstrumentationScope: spanScope,
		}
		if k&15 != 0 { // the trace's first span is its root
			stub.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: spanIDOf(k &^ 15), TraceFlags: trace.FlagsSampled})
		}
		out[i] = stub.Snapshot()
	}
	return out
}

// exporterSetup is how a user configured the official OTLP/gRPC exporter.
type exporterSetup struct {
	Name string
	// Options beyond the endpoint; nil keeps the SDK's defaults (10 s
	// export timeout covering the retries, retries 5 s … 30 s apart).
	Options []otlptracegrpc.Option
	// DialOptions go into the one WithDialOption the suite sets (a second
	// WithDialOption would replace the first, the suite's interceptor).
	DialOptions []grpc.DialOption
}

var (
	exporterDefault = exporterSetup{Name: "SDK defaults (timeout 10 s; retry 5–30 s, 1 min)"}
	// exporterPatient is what a careful user sets to ride out a restart
	// of the collector: an export may take 60 s, retries 0.5–2 s apart,
	// and gRPC reconnects within a second instead of backing off for up
	// to two minutes.
	exporterPatient = exporterSetup{Name: "patient (timeout 60 s; retry 0.5–2 s, 60 s; reconnect ≤ 1 s)", Options: []otlptracegrpc.Option{
		otlptracegrpc.WithTimeout(60 * time.Second),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: 60 * time.Second}),
	}, DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}, MinConnectTimeout: 2 * time.Second,
	})}}
)

// loadConfig is one run of SDK senders.
type loadConfig struct {
	Senders        int
	SpansPerExport int           // the SDK's batch size (its default is 512)
	Interval       time.Duration // pause between a sender's exports (0: back to back)
	PayloadBytes   int           // extra attribute bytes per span
	Exporter       exporterSetup
}

// exportRecord is one ExportSpans call: keys first … first+n-1.
type exportRecord struct {
	first uint64
	n     int
	acked bool
}

// load runs SDK exporters, each sending its own spans, until stop; it
// records what each ExportSpans carried and whether it returned nil.
type load struct {
	cfg    loadConfig
	nonce  [8]byte
	quit   chan struct{}
	wg     sync.WaitGroup
	start  time.Time
	end    time.Time
	mu     sync.Mutex
	recs   []exportRecord
	finals codeCount // ExportSpans errors, by status
	tries  codeCount // every gRPC attempt's outcome (the exporter's retries included)
}

// codeCount counts outcomes by name.
type codeCount struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *codeCount) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
}

func (c *codeCount) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *codeCount) total(except ...string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.m {
		skip := false
		for _, e := range except {
			skip = skip || k == e
		}
		if !skip {
			n += v
		}
	}
	return n
}

// String lists the counts, largest first: "OK 1,234; ResourceExhausted+RetryInfo 56".
func (c *codeCount) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	type kv struct {
		k string
		v int
	}
	var l []kv
	for k, v := range c.m {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || l[i].v == l[j].v && l[i].k < l[j].k })
	var parts []string
	for _, e := range l {
		parts = append(parts, e.k+" "+commas(int64(e.v)))
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, "; ")
}

// attemptName names a gRPC outcome; a refusal carrying RetryInfo says so.
func attemptName(err error) string {
	if err == nil {
		return "OK"
	}
	st, ok := status.FromError(err)
	if !ok {
		return "other"
	}
	name := st.Code().String()
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			name += "+RetryInfo"
		}
	}
	return name
}

// finalName names what ExportSpans returned to the application.
func finalName(err error) string {
	if err == nil {
		return "OK"
	}
	if strings.Contains(err.Error(), "partial success") {
		return "partial success"
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "context deadline exceeded") {
		return "deadline exceeded"
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if se.GRPCStatus().Code() == codes.DeadlineExceeded {
			return "deadline exceeded"
		}
		return se.GRPCStatus().Code().String()
	}
	return "other"
}

// startLoad starts cfg.Senders exporters against the OTLP/gRPC address.
func startLoad(addr string, cfg loadConfig) (*load, error) {
	l := &load{cfg: cfg, nonce: newNonce(), quit: make(chan struct{}), start: time.Now()}
	interceptor := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		l.tries.add(attemptName(err))
		return err
	}
	exps := make([]sdktrace.SpanExporter, cfg.Senders)
	for i := range exps {
		opts := append([]otlptracegrpc.Option{
			otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(),
			otlptracegrpc.WithDialOption(append([]grpc.DialOption{grpc.WithChainUnaryInterceptor(interceptor)}, cfg.Exporter.DialOptions...)...),
		}, cfg.Exporter.Options...)
		exp, err := otlptracegrpc.New(context.Background(), opts...)
		if err != nil {
			return nil, fmt.Errorf("new exporter: %w", err)
		}
		exps[i] = exp
	}
	for i, exp := range exps {
		sender := uint64(i + 1)
		l.wg.Go(func() {
			defer exp.Shutdown(context.Background())
			seq := uint64(1)
			for {
				select {
				case <-l.quit:
					return
				default:
				}
				first := sender<<32 | seq
				spans := buildSpans(l.nonce, first, cfg.SpansPerExport, cfg.PayloadBytes, time.Now())
				seq += uint64(cfg.SpansPerExport)
				err := exp.ExportSpans(context.Background(), spans)
				l.finals.add(finalName(err))
				l.mu.Lock()
				l.recs = append(l.recs, exportRecord{first: first, n: cfg.SpansPerExport, acked: err == nil})
				l.mu.Unlock()
				if cfg.Interval > 0 {
					select {
					case <-l.quit:
						return
					case <-time.After(cfg.Interval):
					}
				}
			}
		})
	}
	return l, nil
}

// stop ends the load: no sender starts another export; the exports in
// flight finish (each within its exporter's timeout).
func (l *load) stop() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	l.wg.Wait()
	l.end = time.Now()
}

// ackedSince counts the spans acknowledged so far.
func (l *load) ackedSpans() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, r := range l.recs {
		if r.acked {
			n += int64(r.n)
		}
	}
	return n
}
