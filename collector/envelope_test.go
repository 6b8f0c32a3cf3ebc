package collector_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
)

const (
	envScopeSchema    = "https://opentelemetry.io/schemas/1.37.0"
	envResourceSchema = "https://opentelemetry.io/schemas/1.26.0"
)

// TestSDKEnvelopeReadsBackFromBothStores sends, with the real OpenTelemetry
// SDK over both OTLP transports, spans whose tracer has scope attributes
// and a schema URL, under a resource with a schema URL, with a remote
// parent, links to a remote and a local span, and more attributes, events
// and links than the SDK's limits keep. Each store must give back the
// flags, the dropped counts, the scope attributes and both schema URLs the
// SDK sent, and every other field as before.
func TestSDKEnvelopeReadsBackFromBothStores(t *testing.T) {
	testtier.Slow(t) // ClickHouse
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.setup(t).open(t)
			defer st.Shutdown(context.Background())
			srv := startServer(t, st, nil)
			opts := []sdktrace.TracerProviderOption{
				sdktrace.WithResource(resource.NewWithAttributes(envResourceSchema,
					attribute.String("service.name", "gateway"), attribute.String("service.version", "2.0.1"))),
				sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
					AttributeValueLengthLimit:   -1,
					AttributeCountLimit:         3,
					EventCountLimit:             2,
					LinkCountLimit:              2,
					AttributePerEventCountLimit: 1,
					AttributePerLinkCountLimit:  1,
				}),
			}
			for i, tc := range []struct {
				transport string
				sender    *sdkSender
			}{
				{"grpc", newGRPCSender(t, srv.GRPCAddr(), opts...)},
				{"http", newHTTPSender(t, srv.HTTPAddr(), opts...)},
			} {
				t.Run(tc.transport, func(t *testing.T) {
					traceID, ids := emitEnvelopeTrace(tc.sender.tp, byte(i+1))
					if err := tc.sender.flush(t); err != nil {
						t.Fatalf("SDK export over %s: %v", tc.transport, err)
					}
					got, err := st.GetTrace(store.WithDefaultProject(context.Background()), traceID.String())
					if err != nil {
						t.Fatalf("GetTrace: %v", err)
					}
					got = normalise(got)
					byName := map[string]store.Span{}
					for _, sp := range got {
						byName[sp.Name] = sp
					}
					root, child := byName["invoke_agent gateway"], byName["chat gpt-4o"]

					// What a reader must see, written out from the OTLP spec.
					scopeAttrs := store.Attributes{"team": "search", "replica": int64(2)}
					for _, sp := range []store.Span{root, child} {
						if !reflect.DeepEqual(sp.ScopeAttributes, scopeAttrs) || sp.ScopeSchemaURL != envScopeSchema ||
							sp.ResourceSchemaURL != envResourceSchema || sp.ScopeName != "github.com/acme/gateway" || sp.ScopeVersion != "1.2.0" {
							t.Errorf("span %q: scope %q %q attributes %v schema %q, resource schema %q", sp.Name,
								sp.ScopeName, sp.ScopeVersion, sp.ScopeAttributes, sp.ScopeSchemaURL, sp.ResourceSchemaURL)
						}
					}
					if root.ParentSpanID != ids.remoteParent {
						t.Errorf("root parent %q, want the remote parent %s", root.ParentSpanID, ids.remoteParent)
					}
					if remote, known := root.RemoteParent(); root.Flags != 0x301 || !remote || !known {
						t.Errorf("root flags %#x (%s), want 0x301 (sampled, remote)", root.Flags, store.DescribeFlags(root.Flags))
					}
					if remote, known := child.RemoteParent(); child.Flags != 0x101 || remote || !known {
						t.Errorf("child flags %#x (%s), want 0x101 (sampled, local)", child.Flags, store.DescribeFlags(child.Flags))
					}
					if d := [3]uint32{root.DroppedAttributesCount, root.DroppedEventsCount, root.DroppedLinksCount}; d != [3]uint32{2, 1, 1} {
						t.Errorf("root dropped attributes, events, links = %v, want [2 1 1]", d)
					}
					if len(root.Events) != 2 || root.Events[0].Name != "retry" || root.Events[0].DroppedAttributesCount != 1 {
						t.Errorf("root events %+v, want 2 kept, the first with 1 attribute dropped", root.Events)
					}
					wantLinks := []store.Link{
						{TraceID: ids.linkedTrace, SpanID: ids.remoteLinked, Flags: 0x301, Attributes: store.Attributes{"link.reason": "retry-of"}, DroppedAttributesCount: 1},
						{TraceID: traceID.String(), SpanID: ids.localLinked, Flags: 0x101},
					}
					if !reflect.DeepEqual(root.Links, wantLinks) {
						t.Errorf("root links\n got %+v\nwant %+v", root.Links, wantLinks)
					}

					// And every field equals what the SDK recorded.
					want := tc.sender.expectedSpans(t, traceID, map[string]store.Span{
						"invoke_agent gateway": {Operation: "invoke_agent", AgentName: "gateway"},
						"chat gpt-4o":          {Operation: "chat", RequestModel: "gpt-4o"},
						"warmup":               {},
					})
					if !reflect.DeepEqual(got, want) {
						t.Errorf("read back differs from what the SDK sent:\n got %#v\nwant %#v", got, want)
					}
				})
			}
		})
	}
}

type envelopeIDs struct {
	remoteParent, linkedTrace, remoteLinked, localLinked string
}

// emitEnvelopeTrace records a trace continuing a remote parent: a root
// "invoke_agent gateway" (over the attribute, event and link limits) with a
// child "chat gpt-4o", and a "warmup" span the root links to locally.
func emitEnvelopeTrace(tp trace.TracerProvider, salt byte) (trace.TraceID, envelopeIDs) {
	tracer := tp.Tracer("github.com/acme/gateway",
		trace.WithInstrumentationVersion("1.2.0"),
		trace.WithInstrumentationAttributes(attribute.String("team", "search"), attribute.Int("replica", 2)),
		trace.WithSchemaURL(envScopeSchema))
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0xe7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, salt},
		SpanID:     trace.SpanID{0xa1, 0, 0, 0, 0, 0, 0, salt},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	linked := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0xe8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, salt},
		SpanID:     trace.SpanID{0xb2, 0, 0, 0, 0, 0, 0, salt},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	start := time.Date(2026, 4, 2, 10, 0, 0, 0, time.UTC).Add(time.Duration(salt) * time.Minute)
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), parent)

	_, warm := tracer.Start(ctx, "warmup", trace.WithTimestamp(start))
	warm.End(trace.WithTimestamp(start.Add(5 * time.Millisecond)))

	ctx, root := tracer.Start(ctx, "invoke_agent gateway",
		trace.WithTimestamp(start.Add(10*time.Millisecond)),
		// The SDK keeps the newest links and events within its limits: the
		// first of each is dropped.
		trace.WithLinks(
			trace.Link{SpanContext: warm.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("dropped", "yes")}},
			trace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("link.reason", "retry-of"), attribute.Int("link.attempt", 2)}},
			trace.Link{SpanContext: warm.SpanContext()},
		),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", "gateway"),
			attribute.String("a3", "kept"),
			attribute.String("a4", "dropped"),
			attribute.String("a5", "dropped"),
		))
	root.AddEvent("queued", trace.WithTimestamp(start.Add(15*time.Millisecond)))
	root.AddEvent("retry", trace.WithTimestamp(start.Add(20*time.Millisecond)),
		trace.WithAttributes(attribute.Int("attempt", 1), attribute.String("cause", "dropped")))
	root.AddEvent("first token", trace.WithTimestamp(start.Add(30*time.Millisecond)))

	_, chat := tracer.Start(ctx, "chat gpt-4o", trace.WithTimestamp(start.Add(12*time.Millisecond)),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", "gpt-4o")))
	chat.End(trace.WithTimestamp(start.Add(35 * time.Millisecond)))
	root.End(trace.WithTimestamp(start.Add(50 * time.Millisecond)))

	return parent.TraceID(), envelopeIDs{
		remoteParent: parent.SpanID().String(),
		linkedTrace:  linked.TraceID().String(),
		remoteLinked: linked.SpanID().String(),
		localLinked:  warm.SpanContext().SpanID().String(),
	}
}
