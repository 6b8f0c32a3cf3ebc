package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// decodeRequest decodes one composed request with pdata, the Collector's
// own decoder: an independent reader of what protowire.go writes.
func decodeRequest(t *testing.T, b []byte) ptrace.Traces {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		t.Fatalf("request does not decode: %v", err)
	}
	return req.Traces()
}

func eachSpan(td ptrace.Traces, f func(res pcommon.Resource, scope pcommon.InstrumentationScope, sp ptrace.Span)) {
	rs := td.ResourceSpans()
	for i := range rs.Len() {
		ss := rs.At(i).ScopeSpans()
		for j := range ss.Len() {
			spans := ss.At(j).Spans()
			for k := range spans.Len() {
				f(rs.At(i).Resource(), ss.At(j).Scope(), spans.At(k))
			}
		}
	}
}

var testLoad = func() func(t *testing.T) *agentLoad {
	var l *agentLoad
	return func(t *testing.T) *agentLoad {
		t.Helper()
		if l == nil {
			var err error
			if l, err = makeAgentLoad(7, 30_000, 500); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
}()

// Every request decodes as OTLP, carries the spans it says it does, never
// repeats a span (trace id, span id) of another request, keeps every
// trace's tree intact after the ids are renewed (each parent and link
// names a span of its own trace), and dates its spans just before now.
func TestAgentRequestsAreValidOTLPWithFreshSpansAndIntactTrees(t *testing.T) {
	l := testLoad(t)
	now := time.Unix(1_800_000_000, 0)
	seen := map[[24]byte]bool{}
	var buf []byte
	var scratch []placement
	for k := range uint64(40) {
		var n int
		buf, n, scratch = l.request(buf, k, now, scratch)
		td := decodeRequest(t, buf)
		if td.SpanCount() != n || n < l.requestSpans {
			t.Fatalf("request %d: %d spans decoded, %d counted, want ≥ %d", k, td.SpanCount(), n, l.requestSpans)
		}
		if td.ResourceSpans().Len() != 1 {
			t.Fatalf("request %d: %d resources, want one (one process)", k, td.ResourceSpans().Len())
		}
		ids := map[pcommon.TraceID]map[pcommon.SpanID]bool{}
		eachSpan(td, func(_ pcommon.Resource, _ pcommon.InstrumentationScope, sp ptrace.Span) {
			if ids[sp.TraceID()] == nil {
				ids[sp.TraceID()] = map[pcommon.SpanID]bool{}
			}
			ids[sp.TraceID()][sp.SpanID()] = true
			var key [24]byte
			tid, sid := sp.TraceID(), sp.SpanID()
			copy(key[:16], tid[:])
			copy(key[16:], sid[:])
			if seen[key] || tid.IsEmpty() || sid.IsEmpty() {
				t.Fatalf("request %d: span %x/%x repeated or empty", k, tid, sid)
			}
			seen[key] = true
			start, end := sp.StartTimestamp().AsTime(), sp.EndTimestamp().AsTime()
			if end.Before(start) || end.After(now) || start.Before(now.Add(-10*time.Minute)) {
				t.Fatalf("request %d: span %q from %s to %s, want within the minutes before %s", k, sp.Name(), start, end, now)
			}
		})
		eachSpan(td, func(_ pcommon.Resource, _ pcommon.InstrumentationScope, sp ptrace.Span) {
			if p := sp.ParentSpanID(); !p.IsEmpty() && !ids[sp.TraceID()][p] {
				t.Fatalf("request %d: span %q has parent %x, not in its trace", k, sp.Name(), p)
			}
			for i := range sp.Links().Len() {
				ln := sp.Links().At(i)
				if ln.TraceID() != sp.TraceID() || !ids[sp.TraceID()][ln.SpanID()] {
					t.Fatalf("request %d: span %q links to %x/%x, not a span of its trace", k, sp.Name(), ln.TraceID(), ln.SpanID())
				}
			}
		})
	}
}

// The load is the seed's: the same seed gives the same pool and requests
// whatever the number of workers that generated it; another seed differs.
func TestAgentLoadIsSeeded(t *testing.T) {
	digest := func(l *agentLoad) [32]byte {
		h := sha256.New()
		for _, p := range l.pool {
			for _, tr := range p {
				for _, part := range tr.parts {
					h.Write(part.data)
				}
			}
		}
		now := time.Unix(1_800_000_000, 0)
		for k := range uint64(5) {
			b, _, _ := l.request(nil, k, now, nil)
			h.Write(b)
		}
		return [32]byte(h.Sum(nil))
	}
	a, err := makeAgentLoad(11, 5_000, 200)
	if err != nil {
		t.Fatal(err)
	}
	prev := runtime.GOMAXPROCS(1)
	b, err := makeAgentLoad(11, 5_000, 200)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	if digest(a) != digest(b) {
		t.Fatal("seed 11 gave two different loads (with GOMAXPROCS 1 and default)")
	}
	c, err := makeAgentLoad(12, 5_000, 200)
	if err != nil {
		t.Fatal(err)
	}
	if digest(a) == digest(c) {
		t.Fatal("seeds 11 and 12 gave the same load")
	}
}

// The load varies the way agent traffic does, which is what makes bytes
// on disk and decode costs realistic: messages of varied length that
// compress like prose (not a repeated template), valid JSON where JSON is
// due, all three instrumentation styles, a long tail of rare keys, failed
// spans with exception events, and traces from one span to dozens.
func TestAgentLoadVariesLikeAgentTraffic(t *testing.T) {
	l := testLoad(t)
	now := time.Unix(1_800_000_000, 0)
	keys := map[string]int{}
	var msgLens []int
	var text strings.Builder
	spans, withExc, services := 0, 0, map[string]bool{}
	var buf []byte
	for k := range uint64(60) {
		buf, _, _ = l.request(buf, k, now, nil)
		eachSpan(decodeRequest(t, buf), func(res pcommon.Resource, _ pcommon.InstrumentationScope, sp ptrace.Span) {
			spans++
			if v, ok := res.Attributes().Get("service.name"); ok {
				services[v.Str()] = true
			}
			sp.Attributes().Range(func(key string, v pcommon.Value) bool {
				keys[key]++
				switch key {
				case "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "llm.invocation_parameters", "tool.parameters":
					if !json.Valid([]byte(v.Str())) {
						t.Fatalf("span %q: %s is not JSON: %.200s", sp.Name(), key, v.Str())
					}
					if key == "gen_ai.input.messages" {
						msgLens = append(msgLens, len(v.Str()))
					}
				case "gen_ai.prompt.1.content", "llm.output_messages.0.message.content":
					if text.Len() < 4<<20 {
						text.WriteString(v.Str())
					}
				}
				return true
			})
			for i := range sp.Events().Len() {
				if sp.Events().At(i).Name() == "exception" {
					withExc++
				}
			}
		})
	}
	for _, k := range []string{"gen_ai.input.messages", "gen_ai.prompt.1.content", "llm.input_messages.1.message.content", "gen_ai.tool.call.arguments", "db.query.text", "url.full"} {
		if keys[k] == 0 {
			t.Errorf("no span carries %s", k)
		}
	}
	rare := 0
	for _, n := range keys {
		if n*1000 < spans {
			rare++
		}
	}
	if len(keys) < 300 || rare < 150 {
		t.Errorf("%d distinct keys over %d spans, %d of them on fewer than 0.1%% of spans: want a long tail (≥ 300, ≥ 150)", len(keys), spans, rare)
	}
	if len(services) < 8 {
		t.Errorf("%d services, want most of the 12", len(services))
	}
	if withExc == 0 || withExc*5 > spans {
		t.Errorf("%d of %d spans have exception events: want some, not most", withExc, spans)
	}
	q := quantiles(msgLens)
	if q[0.1]*8 > q[0.9] {
		t.Errorf("gen_ai.input.messages lengths 10th %d, 90th %d: want a spread of 8× or more", q[0.1], q[0.9])
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write([]byte(text.String()))
	w.Close()
	if ratio := float64(text.Len()) / float64(z.Len()); ratio < 2 || ratio > 5 {
		t.Errorf("message text compresses %.1f× with gzip; English prose compresses 2.5–4×, a repeated template far more", ratio)
	}
	in := l.info()
	t.Logf("keys %d rare %d spans %d exc %d services %d msg q %v gzip text %d", len(keys), rare, spans, withExc, len(services), q, text.Len())
	if in.TraceSpansP50 < 2 || in.TraceSpansMax < 40 {
		t.Errorf("spans per trace: median %d, max %d; want small traces and some of dozens of spans", in.TraceSpansP50, in.TraceSpansMax)
	}
}

func quantiles(xs []int) map[float64]int {
	s := append([]int(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	out := map[float64]int{}
	for _, q := range []float64{0.1, 0.5, 0.9} {
		out[q] = s[int(math.Min(float64(len(s)-1), q*float64(len(s))))]
	}
	return out
}
