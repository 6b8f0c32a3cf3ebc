package genai

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/store"
)

// nestMap sets key on m to maps nested depth deep.
func nestMap(m pcommon.Map, key string, depth int) {
	inner := m.PutEmptyMap(key)
	for range depth - 1 {
		inner = inner.PutEmptyMap("k")
	}
	inner.PutStr("leaf", "x")
}

// deepRequest is two resources of two scopes of two spans each; place
// puts a 2,000-level nested value where the test wants it (or nowhere).
func deepRequest(place func(td ptrace.Traces)) []byte {
	td := ptrace.NewTraces()
	start := pcommon.NewTimestampFromTime(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	n := byte(0)
	for r := range 2 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", []string{"a", "b"}[r])
		for range 2 {
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("scope")
			for range 2 {
				n++
				sp := ss.Spans().AppendEmpty()
				sp.SetTraceID([16]byte{1, 15: n})
				sp.SetSpanID([8]byte{2, 7: n})
				sp.SetName("span")
				sp.SetStartTimestamp(start)
				sp.SetEndTimestamp(start + 1000)
				sp.Attributes().PutStr("gen_ai.operation.name", "chat")
				ev := sp.Events().AppendEmpty()
				ev.SetName("event")
				ev.Attributes().PutInt("n", 1)
				l := sp.Links().AppendEmpty()
				l.SetTraceID([16]byte{3, 15: n})
				l.SetSpanID([8]byte{4, 7: n})
			}
		}
	}
	if place != nil {
		place(td)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// TestDecodeProtoRejectsTooDeepSpansAlone: a value nested 2,000 levels
// deep (issue 36: it failed the whole request, as pdata refuses it) makes
// the decoder reject the spans it belongs to — the span, for its own,
// its events' or links' attributes; every span of the scope or resource
// for theirs — with store.CheckStorable's words, and map every other span
// exactly as it maps the same request without the deep value.
func TestDecodeProtoRejectsTooDeepSpansAlone(t *testing.T) {
	base, _, err := DecodeProto(deepRequest(nil), Options{})
	if err != nil || len(base) != 8 {
		t.Fatalf("the request without a deep value: %d spans, %v", len(base), err)
	}
	span := func(td ptrace.Traces, r, s, i int) ptrace.Span {
		return td.ResourceSpans().At(r).ScopeSpans().At(s).Spans().At(i)
	}
	for _, tc := range []struct {
		name   string
		place  func(td ptrace.Traces)
		reason string
		bad    []int // indexes of the rejected spans in base
	}{
		{"span attribute", func(td ptrace.Traces) { nestMap(span(td, 0, 1, 0).Attributes(), "deep", 2000) }, `attribute "deep"`, []int{2}},
		{"event attribute", func(td ptrace.Traces) { nestMap(span(td, 1, 0, 1).Events().At(0).Attributes(), "deep", 2000) }, `event 0 attribute "deep"`, []int{5}},
		{"link attribute", func(td ptrace.Traces) { nestMap(span(td, 1, 1, 1).Links().At(0).Attributes(), "deep", 2000) }, `link 0 attribute "deep"`, []int{7}},
		{"scope attribute", func(td ptrace.Traces) {
			nestMap(td.ResourceSpans().At(1).ScopeSpans().At(0).Scope().Attributes(), "deep", 2000)
		}, `scope attribute "deep"`, []int{4, 5}},
		{"resource attribute", func(td ptrace.Traces) { nestMap(td.ResourceSpans().At(0).Resource().Attributes(), "deep", 2000) }, `resource attribute "deep"`, []int{0, 1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := deepRequest(tc.place)
			if err := ptraceotlp.NewExportRequest().UnmarshalProto(b); err == nil {
				t.Fatal("pdata took the deep request; the test is not testing the divergence")
			}
			spans, rejected, err := DecodeProto(b, Options{})
			if err != nil {
				t.Fatalf("the request with a deep value failed whole: %v", err)
			}
			if len(rejected) != len(tc.bad) || len(spans)+len(rejected) != 8 {
				t.Fatalf("%d mapped, %d rejected (%v); want %d rejected", len(spans), len(rejected), rejected, len(tc.bad))
			}
			var want []store.Span
			bad := map[int]bool{}
			for _, i := range tc.bad {
				bad[i] = true
			}
			for i, sp := range base {
				if bad[i] {
					continue
				}
				want = append(want, sp)
			}
			for j, r := range rejected {
				wantReason := store.TooDeep(strings.TrimSuffix(tc.reason, ` "deep"`), "deep").Error()
				if r.Reason != wantReason || r.SpanID != base[tc.bad[j]].SpanID {
					t.Errorf("rejection %d: %+v; want span %s, %q", j, r, base[tc.bad[j]].SpanID, wantReason)
				}
			}
			if !reflect.DeepEqual(spans, want) {
				t.Errorf("the spans beside the deep value map differently from the request without it:\n got %+v\nwant %+v", spans, want)
			}
		})
	}

	// 32 levels of maps are storable and mapped; 33 are rejected by the
	// store's rule, with the same words.
	for depth, ok := range map[int]bool{store.MaxAttributeDepth: true, store.MaxAttributeDepth + 1: false} {
		b := deepRequest(func(td ptrace.Traces) { nestMap(span(td, 0, 0, 0).Attributes(), "deep", depth) })
		spans, rejected, err := DecodeProto(b, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var checkErr error
		for i := range spans {
			if err := store.CheckStorable(&spans[i]); err != nil {
				checkErr = err
			}
		}
		for _, r := range rejected {
			checkErr = errors.New(r.Reason)
		}
		if (checkErr == nil) != ok || (!ok && !strings.Contains(checkErr.Error(), store.ErrTooDeep.Error())) {
			t.Errorf("a value %d maps deep: %v; want storable %v", depth, checkErr, ok)
		}
	}
}
