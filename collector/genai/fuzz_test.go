package genai

import (
	"os"
	"reflect"
	"regexp"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/store"
)

// fuzzLimit is small so that fuzzed inputs exercise truncation.
const fuzzLimit = 64

func fuzzSeeds(f testing.TB) (jsonDocs, protos [][]byte) {
	f.Helper()
	doc, err := os.ReadFile("testdata/agent_trace.json")
	if err != nil {
		f.Fatal(err)
	}
	jsonDocs = append(jsonDocs, doc,
		[]byte(`{}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"","spanId":""}]}]}]}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"00000000000000000000000000000000","spanId":"0000000000000001","attributes":[{"key":"gen_ai.retrieval.documents","value":{"stringValue":"[{\"id\":1},{\"id\":\"x\"}]"}}]}]}]}]}`),
		[]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000001","attributes":[{"key":"m","value":{"kvlistValue":{"values":[{"key":"k","value":{"doubleValue":"NaN"}}]}}},{"key":"b","value":{"bytesValue":"AAEC"}}]}]}]}]}`),
		// The OTLP envelope: flags, dropped counts, scope attributes, schema URLs.
		[]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}],"droppedAttributesCount":2},"schemaUrl":"https://opentelemetry.io/schemas/1.26.0","scopeSpans":[{"scope":{"name":"s","attributes":[{"key":"team","value":{"stringValue":"search"}}],"droppedAttributesCount":1},"schemaUrl":"https://opentelemetry.io/schemas/1.37.0","spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000001","parentSpanId":"0000000000000002","flags":769,"droppedAttributesCount":3,"droppedEventsCount":4,"droppedLinksCount":5,"events":[{"name":"e","droppedAttributesCount":6}],"links":[{"traceId":"5b8efff798038103d269b633813fc60d","spanId":"0000000000000003","flags":256,"droppedAttributesCount":7}]}]}]}]}`),
	)
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalJSON(doc); err != nil {
		f.Fatal(err)
	}
	pb, err := req.MarshalProto()
	if err != nil {
		f.Fatal(err)
	}
	protos = append(protos, pb, []byte{}, []byte{0x0a, 0x02, 0x12, 0x00})
	return jsonDocs, protos
}

func FuzzMapOTLPJSON(f *testing.F) {
	docs, _ := fuzzSeeds(f)
	for _, d := range docs {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalJSON(b); err != nil {
			return
		}
		checkMapping(t, req.Traces())
	})
}

func FuzzMapOTLPProto(f *testing.F) {
	_, protos := fuzzSeeds(f)
	for _, p := range protos {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			return
		}
		checkMapping(t, req.Traces())
	})
}

var (
	traceIDRe = regexp.MustCompile(`^[0-9a-f]{32}$`)
	spanIDRe  = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// checkMapping asserts the invariants every mapping must keep.
func checkMapping(t *testing.T, td ptrace.Traces) {
	t.Helper()
	spans, rej := MapTraces(td, Options{MaxAttrBytes: fuzzLimit})
	if len(spans)+len(rej) != td.SpanCount() {
		t.Fatalf("%d spans + %d rejections != %d in the request", len(spans), len(rej), td.SpanCount())
	}
	for _, r := range rej {
		if r.Reason == "" {
			t.Fatalf("rejection without a reason: %+v", r)
		}
	}
	maxString := fuzzLimit + len(TruncationMarker(1<<40))
	for _, s := range spans {
		if !traceIDRe.MatchString(s.TraceID) || s.TraceID == "00000000000000000000000000000000" {
			t.Fatalf("invalid trace id %q was not rejected", s.TraceID)
		}
		if !spanIDRe.MatchString(s.SpanID) || s.SpanID == "0000000000000000" {
			t.Fatalf("invalid span id %q was not rejected", s.SpanID)
		}
		if s.ParentSpanID != "" && (!spanIDRe.MatchString(s.ParentSpanID) || s.ParentSpanID == s.SpanID) {
			t.Fatalf("bad parent span id %q", s.ParentSpanID)
		}
		if s.InputTokens < 0 || s.OutputTokens < 0 || s.CacheReadTokens < 0 || s.CacheCreationTokens < 0 || s.ReasoningTokens < 0 {
			t.Fatalf("negative token count in %+v", s)
		}
		maps := []store.Attributes{s.Attributes, s.ResourceAttributes, s.ScopeAttributes}
		for _, e := range s.Events {
			maps = append(maps, e.Attributes)
		}
		for _, l := range s.Links {
			maps = append(maps, l.Attributes)
		}
		for _, m := range maps {
			checkRoundTrip(t, m)
			for k, v := range m {
				if str, ok := v.(string); ok && len(str) > maxString {
					t.Fatalf("attribute %q is %d bytes, over the limit", k, len(str))
				}
			}
		}
	}
	checkEnvelope(t, td, spans)
}

// checkEnvelope asserts that every mapped span carries its OTLP flags,
// dropped counts and schema URLs as sent. Mapped spans are the request's
// spans in order, less the rejected ones.
func checkEnvelope(t *testing.T, td ptrace.Traces, spans []store.Span) {
	t.Helper()
	n := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				in := ss.Spans().At(k)
				if !acceptedByReference(in) {
					continue
				}
				if n >= len(spans) {
					t.Fatalf("span %d of the request was accepted but not mapped", n)
				}
				out := spans[n]
				n++
				type envelope struct {
					Flags, DA, DE, DL, ScopeDA, ResDA uint32
					ScopeURL, ResURL                  string
				}
				want := envelope{in.Flags(), in.DroppedAttributesCount(), in.DroppedEventsCount(), in.DroppedLinksCount(),
					ss.Scope().DroppedAttributesCount(), rs.Resource().DroppedAttributesCount(),
					validUTF8(ss.SchemaUrl()), validUTF8(rs.SchemaUrl())}
				got := envelope{out.Flags, out.DroppedAttributesCount, out.DroppedEventsCount, out.DroppedLinksCount,
					out.ScopeDroppedAttributesCount, out.ResourceDroppedAttributesCount, out.ScopeSchemaURL, out.ResourceSchemaURL}
				if got != want {
					t.Fatalf("span %s: envelope %+v, sent %+v", out.SpanID, got, want)
				}
				if (ss.Scope().Attributes().Len() == 0) != (out.ScopeAttributes == nil) {
					t.Fatalf("span %s: %d scope attributes sent, mapped %v", out.SpanID, ss.Scope().Attributes().Len(), out.ScopeAttributes)
				}
				for e := range out.Events {
					if got, want := out.Events[e].DroppedAttributesCount, in.Events().At(e).DroppedAttributesCount(); got != want {
						t.Fatalf("span %s event %d: dropped %d, sent %d", out.SpanID, e, got, want)
					}
				}
				for l := range out.Links {
					sent := in.Links().At(l)
					if out.Links[l].Flags != sent.Flags() || out.Links[l].DroppedAttributesCount != sent.DroppedAttributesCount() {
						t.Fatalf("span %s link %d: flags %#x dropped %d, sent %#x and %d", out.SpanID, l,
							out.Links[l].Flags, out.Links[l].DroppedAttributesCount, sent.Flags(), sent.DroppedAttributesCount())
					}
				}
			}
		}
	}
	if n != len(spans) {
		t.Fatalf("%d spans mapped, %d accepted in the request", len(spans), n)
	}
}

// acceptedByReference reports whether the pdata mapping (refMapTraces) maps s
// rather than rejecting it.
func acceptedByReference(s ptrace.Span) bool {
	td := ptrace.NewTraces()
	s.CopyTo(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
	spans, _ := refMapTraces(td, refOptions{MaxAttrBytes: fuzzLimit})
	return len(spans) == 1
}

// checkRoundTrip asserts that a store would give back exactly what was mapped.
func checkRoundTrip(t *testing.T, m store.Attributes) {
	t.Helper()
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatalf("mapped attributes do not encode: %v", err)
	}
	var back store.Attributes
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatalf("encoded attributes do not decode: %v\n%s", err, b)
	}
	if len(m) == 0 && len(back) == 0 {
		return
	}
	if !reflect.DeepEqual(m, back) {
		t.Fatalf("attributes changed in a JSON round trip:\n got %#v\nwant %#v", back, m)
	}
}
