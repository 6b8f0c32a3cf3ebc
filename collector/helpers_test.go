package collector_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/sqlite"
)

// backend opens stores of one kind. setup runs once per top-level subtest
// (or benchmark) and returns an opener; every call of the opener opens the
// same data (restart semantics).
type backend struct {
	name  string
	setup func(t testing.TB) backendEnv
}

type backendEnv struct {
	open func(t testing.TB) store.Store
	// serverPID is the pid of a separate database server process (the
	// ClickHouse), 0 when the store runs in-process or it is unknown.
	serverPID int
	// exec runs a statement on the database server, "{db}" replaced by
	// the test's database; nil for in-process stores.
	exec func(t testing.TB, q string)
}

func backends() []backend {
	return []backend{
		{name: "sqlite", setup: func(t testing.TB) backendEnv {
			path := filepath.Join(t.TempDir(), "traces.db")
			return backendEnv{open: func(t testing.TB) store.Store {
				t.Helper()
				st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Logger: testLogger(t)})
				if err != nil {
					t.Fatalf("open sqlite store: %v", err)
				}
				return st
			}}
		}},
		{name: "clickhouse", setup: func(t testing.TB) backendEnv {
			srv := chtest.Start(t) // skips locally without ClickHouse, fails in CI
			db := srv.NewDatabase(t)
			dsn := srv.DSN(db)
			env := backendEnv{open: func(t testing.TB) store.Store {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: dsn})
				if err != nil {
					t.Fatalf("open clickhouse store: %v", err)
				}
				return st
			}}
			env.serverPID = srv.PID()
			env.exec = func(t testing.TB, q string) { srv.Exec(t, strings.ReplaceAll(q, "{db}", db)) }
			return env
		}},
	}
}

// testLogger logs warnings and errors into the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(&testWriter{t: t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu sync.Mutex
	t  testing.TB
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startServer runs the in-process pipeline on free loopback ports.
func startServer(t testing.TB, w store.Writer, mod func(*collector.ServerConfig)) *collector.Server {
	t.Helper()
	cfg := collector.ServerConfig{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: testLogger(t)}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := collector.NewServer(cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shut down server: %v", err)
		}
	})
	return srv
}

// sdkSender is an OpenTelemetry SDK pipeline exporting over OTLP, with a
// recorder keeping exactly what the SDK exported.
type sdkSender struct {
	tp  *sdktrace.TracerProvider
	rec *tracetest.SpanRecorder
}

func newGRPCSender(t *testing.T, addr string, opts ...sdktrace.TracerProviderOption) *sdkSender {
	t.Helper()
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	return newSender(t, exp, opts...)
}

func newHTTPSender(t *testing.T, addr string, opts ...sdktrace.TracerProviderOption) *sdkSender {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	return newSender(t, exp, opts...)
}

// newSender builds the SDK pipeline; opts come after the defaults (a
// schemaless research-agent resource), so they can replace them.
func newSender(t *testing.T, exp sdktrace.SpanExporter, opts ...sdktrace.TracerProviderOption) *sdkSender {
	t.Helper()
	res := resource.NewSchemaless(
		attribute.String("service.name", "research-agent"),
		attribute.String("service.version", "1.4.0"),
		attribute.String("deployment.environment.name", "test"),
	)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(rec),
		// One batch per flush: the exporter sends it as one request.
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour), sdktrace.WithMaxExportBatchSize(4096)),
	}, opts...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
	})
	return &sdkSender{tp: tp, rec: rec}
}

// flush exports everything ended so far and returns the export's error.
func (s *sdkSender) flush(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.tp.ForceFlush(ctx)
}

// expectedSpans converts what the SDK exported for one trace into the
// store.Span a backend must return, field by field, independently of the
// collector's mapping code; typed GenAI fields come from want.
func (s *sdkSender) expectedSpans(t *testing.T, traceID trace.TraceID, want map[string]store.Span) []store.Span {
	t.Helper()
	var out []store.Span
	for _, ro := range s.rec.Ended() {
		sc := ro.SpanContext()
		if sc.TraceID() != traceID {
			continue
		}
		typed, ok := want[ro.Name()]
		if !ok {
			t.Fatalf("no expectation for span %q", ro.Name())
		}
		sp := typed
		sp.TraceID = sc.TraceID().String()
		sp.SpanID = sc.SpanID().String()
		if p := ro.Parent(); p.SpanID().IsValid() {
			sp.ParentSpanID = p.SpanID().String()
		}
		sp.TraceState = sc.TraceState().String()
		sp.Name = ro.Name()
		sp.Kind = kindName(ro.SpanKind())
		sp.StartTime = ro.StartTime().UTC()
		sp.EndTime = ro.EndTime().UTC()
		switch ro.Status().Code {
		case otelcodes.Ok:
			sp.StatusCode = store.StatusOK
		case otelcodes.Error:
			sp.StatusCode = store.StatusError
			sp.StatusMessage = ro.Status().Description
		default:
			sp.StatusCode = store.StatusUnset
		}
		// OTLP's span flags: the W3C trace flags, and whether the parent is
		// remote, which the SDK always states (HAS_IS_REMOTE).
		sp.Flags = otlpFlags(sc.TraceFlags(), ro.Parent().IsRemote())
		sp.DroppedAttributesCount = uint32(ro.DroppedAttributes())
		sp.DroppedEventsCount = uint32(ro.DroppedEvents())
		sp.DroppedLinksCount = uint32(ro.DroppedLinks())
		scope := ro.InstrumentationScope()
		sp.ScopeName = scope.Name
		sp.ScopeVersion = scope.Version
		sp.ScopeAttributes = kvAttrs(scope.Attributes.ToSlice())
		sp.ScopeSchemaURL = scope.SchemaURL
		sp.ResourceSchemaURL = ro.Resource().SchemaURL()
		sp.ResourceAttributes = kvAttrs(ro.Resource().Attributes())
		if v, ok := sp.ResourceAttributes["service.name"].(string); ok {
			sp.ServiceName = v
		}
		sp.Attributes = kvAttrs(ro.Attributes())
		for _, e := range ro.Events() {
			sp.Events = append(sp.Events, store.Event{Time: e.Time.UTC(), Name: e.Name, Attributes: kvAttrs(e.Attributes),
				DroppedAttributesCount: uint32(e.DroppedAttributeCount)})
		}
		for _, l := range ro.Links() {
			sp.Links = append(sp.Links, store.Link{
				TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String(),
				TraceState: l.SpanContext.TraceState().String(), Attributes: kvAttrs(l.Attributes),
				Flags:                  otlpFlags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()),
				DroppedAttributesCount: uint32(l.DroppedAttributeCount),
			})
		}
		out = append(out, sp)
	}
	sortSpans(out)
	return out
}

// otlpFlags is OTLP's SpanFlags for W3C trace flags tf and a known remote
// bit (trace.proto: bits 0-7 the trace flags, 0x100 "is_remote is known",
// 0x200 "is remote").
func otlpFlags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | 0x100
	if remote {
		f |= 0x200
	}
	return f
}

func sortSpans(spans []store.Span) {
	sort.Slice(spans, func(i, j int) bool {
		if !spans[i].StartTime.Equal(spans[j].StartTime) {
			return spans[i].StartTime.Before(spans[j].StartTime)
		}
		return spans[i].SpanID < spans[j].SpanID
	})
}

func kindName(k trace.SpanKind) string {
	switch k {
	case trace.SpanKindInternal:
		return "internal"
	case trace.SpanKindServer:
		return "server"
	case trace.SpanKindClient:
		return "client"
	case trace.SpanKindProducer:
		return "producer"
	case trace.SpanKindConsumer:
		return "consumer"
	}
	return "unspecified"
}

// kvAttrs converts SDK attributes to the stored form.
func kvAttrs(kvs []attribute.KeyValue) store.Attributes {
	if len(kvs) == 0 {
		return nil
	}
	out := make(store.Attributes, len(kvs))
	for _, kv := range kvs {
		v := kv.Value
		switch v.Type() {
		case attribute.BOOL:
			out[string(kv.Key)] = v.AsBool()
		case attribute.INT64:
			out[string(kv.Key)] = v.AsInt64()
		case attribute.FLOAT64:
			out[string(kv.Key)] = v.AsFloat64()
		case attribute.STRING:
			out[string(kv.Key)] = v.AsString()
		case attribute.BOOLSLICE:
			out[string(kv.Key)] = toAny(v.AsBoolSlice())
		case attribute.INT64SLICE:
			out[string(kv.Key)] = toAny(v.AsInt64Slice())
		case attribute.FLOAT64SLICE:
			out[string(kv.Key)] = toAny(v.AsFloat64Slice())
		case attribute.STRINGSLICE:
			out[string(kv.Key)] = toAny(v.AsStringSlice())
		default:
			panic("unexpected attribute type " + v.Type().String())
		}
	}
	return out
}

func toAny[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// normalise makes read-back spans comparable: times in UTC.
func normalise(spans []store.Span) []store.Span {
	for i := range spans {
		spans[i].StartTime = spans[i].StartTime.UTC()
		spans[i].EndTime = spans[i].EndTime.UTC()
		for j := range spans[i].Events {
			spans[i].Events[j].Time = spans[i].Events[j].Time.UTC()
		}
	}
	return spans
}
