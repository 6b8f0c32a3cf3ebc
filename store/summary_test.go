package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
)

var sumT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func sumSpan(id, parent, name string, fromMS, toMS int) Span {
	return Span{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: id, ParentSpanID: parent, Name: name,
		StartTime: sumT0.Add(time.Duration(fromMS) * time.Millisecond), EndTime: sumT0.Add(time.Duration(toMS) * time.Millisecond),
		StatusCode: StatusUnset, ServiceName: "svc"}
}

func withUsage(s Span, op string, in, out int64) Span {
	s.Operation, s.HasUsage, s.InputTokens, s.OutputTokens = op, true, in, out
	return s
}

// The shapes the trace list used to get wrong, computed by hand.
func TestSummarizeShapes(t *testing.T) {
	t.Run("an LLM span nested in an LLM span is one call", func(t *testing.T) {
		// LangChain's OpenInference LLM span around the OpenAI
		// instrumentor's: both report the same 1000/100.
		spans := []Span{
			sumSpan("a", "", "chain", 0, 1000),
			withUsage(sumSpan("b", "a", "ChatOpenAI", 10, 900), semconv.OpChat, 1000, 100),
			withUsage(sumSpan("c", "b", "openai.chat", 20, 880), semconv.OpChat, 1000, 100),
		}
		s := Summarize(spans)
		if s.ModelCalls != 1 || s.InputTokens != 1000 || s.OutputTokens != 100 || len(s.Calls) != 1 || s.Calls[0].SpanID != "c" {
			t.Fatalf("calls=%d tokens=%d/%d calls=%+v; want 1 call (c), 1000/100", s.ModelCalls, s.InputTokens, s.OutputTokens, s.Calls)
		}
	})
	t.Run("usage without a model-call operation is a call", func(t *testing.T) {
		spans := []Span{
			sumSpan("a", "", "agent", 0, 100),
			withUsage(sumSpan("b", "a", "llm step", 10, 90), "", 100, 20),
		}
		s := Summarize(spans)
		if s.ModelCalls != 1 || s.InputTokens != 100 || s.OutputTokens != 20 {
			t.Fatalf("calls=%d tokens=%d/%d; want 1, 100/20", s.ModelCalls, s.InputTokens, s.OutputTokens)
		}
	})
	t.Run("a model-call span whose child reports the usage is not counted twice", func(t *testing.T) {
		spans := []Span{
			{TraceID: "t", SpanID: "a", Name: "chat", Operation: semconv.OpChat, StartTime: sumT0, EndTime: sumT0.Add(time.Second)},
			withUsage(sumSpan("b", "a", "http", 10, 90), "", 300, 30),
		}
		s := Summarize(spans)
		if s.ModelCalls != 1 || s.InputTokens != 300 || s.Calls[0].SpanID != "b" {
			t.Fatalf("calls=%d input=%d calls=%+v; want only b", s.ModelCalls, s.InputTokens, s.Calls)
		}
	})
	t.Run("a child outliving its parent", func(t *testing.T) {
		spans := []Span{
			sumSpan("r", "", "handle", 0, 500),
			sumSpan("w", "r", "send telemetry", 100, 700),
		}
		s := Summarize(spans)
		if s.Duration != 700*time.Millisecond || s.AfterRoot != 200*time.Millisecond || s.Fragments != 1 {
			t.Fatalf("duration=%v after_root=%v fragments=%d; want 700ms, 200ms, 1", s.Duration, s.AfterRoot, s.Fragments)
		}
	})
	t.Run("several fragments: no async part, fragments counted", func(t *testing.T) {
		spans := []Span{
			sumSpan("r1", "", "first", 0, 50),
			sumSpan("r2", "", "second", 60, 100),
			sumSpan("o", "gone", "orphan", 20, 30),
		}
		s := Summarize(spans)
		if s.Fragments != 3 || s.AfterRoot != 0 || s.RootName != "first" || s.Duration != 100*time.Millisecond {
			t.Fatalf("fragments=%d after_root=%v root=%q duration=%v", s.Fragments, s.AfterRoot, s.RootName, s.Duration)
		}
	})
	t.Run("anthropic's raw convention counts cache tokens as input", func(t *testing.T) {
		c := withUsage(sumSpan("b", "", "chat", 0, 10), semconv.OpChat, 20, 50)
		c.CacheReadTokens, c.CacheCreationTokens = 1000, 200
		s := Summarize([]Span{c})
		if s.InputTokens != 1220 || s.CacheReadTokens != 1000 || s.CacheCreationTokens != 200 {
			t.Fatalf("input=%d cache=%d/%d; want 1220, 1000/200", s.InputTokens, s.CacheReadTokens, s.CacheCreationTokens)
		}
	})
	t.Run("a failed call and a duplicate copy", func(t *testing.T) {
		f := sumSpan("b", "a", "chat", 10, 20)
		f.Operation, f.StatusCode = semconv.OpChat, StatusError
		spans := []Span{sumSpan("a", "", "agent", 0, 100), f, f}
		s := Summarize(spans)
		if s.SpanCount != 2 || s.ModelCalls != 1 || s.FailedModelCalls != 1 || s.ErrorCount != 1 {
			t.Fatalf("spans=%d calls=%d failed=%d errors=%d; want 2, 1, 1, 1", s.SpanCount, s.ModelCalls, s.FailedModelCalls, s.ErrorCount)
		}
	})
}

// randomSummaryTrace is a random tree with usage on random spans at any
// depth (aggregates over aggregates), async children and orphans.
func randomSummaryTrace(rng *rand.Rand, n int) []Span {
	spans := []Span{sumSpan("s0", "", "root", 0, 1000)}
	for i := 1; i < n; i++ {
		p := spans[rng.IntN(len(spans))]
		parent := p.SpanID
		if rng.IntN(15) == 0 {
			parent = "missing"
		}
		from := rng.IntN(1000)
		s := sumSpan(fmt.Sprintf("s%d", i), parent, fmt.Sprintf("op%d", rng.IntN(4)), from, from+rng.IntN(600))
		switch rng.IntN(4) {
		case 0:
			s = withUsage(s, semconv.OpChat, int64(rng.IntN(5000)), int64(rng.IntN(500)))
			s.CacheReadTokens = int64(rng.IntN(3000))
		case 1:
			s.Operation = semconv.OpChat
		case 2:
			s.Operation = semconv.OpExecuteTool
		}
		if rng.IntN(10) == 0 {
			c := rng.Float64()
			s.CostUSD = &c
		}
		if rng.IntN(8) == 0 {
			s.StatusCode = StatusError
		}
		// A few models, so the calls fall into several groups (and the
		// groups lose calls when a descendant carrying usage arrives).
		if s.Operation == semconv.OpChat {
			s.RequestModel = []string{"m-a", "m-b", ""}[rng.IntN(3)]
			s.ResponseModel = []string{"", "m-a-2025", "m-b-2025"}[rng.IntN(3)]
		}
		spans = append(spans, s)
	}
	return spans
}

// Arrival order never changes a summary, byte for byte.
func TestSummarizeIgnoresArrivalOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for iter := 0; iter < 300; iter++ {
		spans := randomSummaryTrace(rng, 1+rng.IntN(80))
		want := Summarize(spans)
		rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		if got := Summarize(spans); !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: summary depends on span order:\n%+v\n%+v", iter, got, want)
		}
	}
}

// The billing rule against a naive reading of it: a span carrying usage is
// billed unless some span below it carries usage (walking every span's
// ancestors); a model-call span is billed unless a span below it carries
// usage.
func TestRolesAgreeWithAncestorWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 1))
	for iter := 0; iter < 300; iter++ {
		spans := randomSummaryTrace(rng, 1+rng.IntN(80))
		byID := map[string]int{}
		for i := range spans {
			byID[spans[i].SpanID] = i
		}
		hasUsageBelow := make([]bool, len(spans))
		for i := range spans {
			if !spans[i].CarriesUsage() {
				continue
			}
			seen := map[int]bool{}
			for p, ok := byID[spans[i].ParentSpanID]; ok && !seen[p]; p, ok = byID[spans[p].ParentSpanID] {
				seen[p] = true
				hasUsageBelow[p] = true
			}
		}
		var wantCalls, wantIn int64
		for i := range spans {
			s := &spans[i]
			if hasUsageBelow[i] || !(s.CarriesUsage() || semconv.IsModelCallOperation(s.Operation)) {
				continue
			}
			wantCalls++
			if s.HasUsage {
				u, _ := SplitUsage(s.InputTokens, s.CacheReadTokens, s.CacheCreationTokens, s.OutputTokens)
				wantIn += u.Input()
			}
		}
		got := Summarize(spans)
		if got.ModelCalls != wantCalls || got.InputTokens != wantIn {
			t.Fatalf("iteration %d: calls=%d input=%d, want %d, %d", iter, got.ModelCalls, got.InputTokens, wantCalls, wantIn)
		}
	}
}

// The incremental builder, fed a trace in random batches in random order
// (children before parents, orphans adopted late, now and then a parent
// cycle), returns after every batch exactly what the whole-tree rule
// returns for the spans so far; and its call deltas account for every
// change of the billed set.
func TestSummaryBuilderMatchesTheWholeTreeRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	for iter := 0; iter < 400; iter++ {
		spans := randomSummaryTrace(rng, 1+rng.IntN(120))
		if iter%10 == 9 && len(spans) > 3 {
			// A cycle: the root names a later span as its parent.
			spans[0].ParentSpanID = spans[1+rng.IntN(len(spans)-1)].SpanID
		}
		rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		b := NewSummaryBuilder()
		billed := map[string]bool{}
		for at := 0; at < len(spans); {
			n := 1 + rng.IntN(20)
			batch := spans[at:min(at+n, len(spans))]
			at += len(batch)
			added, removed := b.Add(batch)
			for _, c := range removed {
				if !billed[c.SpanID] {
					t.Fatalf("iteration %d: removed call %s was not billed", iter, c.SpanID)
				}
				delete(billed, c.SpanID)
			}
			for _, c := range added {
				if billed[c.SpanID] {
					t.Fatalf("iteration %d: added call %s twice", iter, c.SpanID)
				}
				billed[c.SpanID] = true
			}
			got, want := b.Summary(), summarizeTree(spans[:at])
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("iteration %d after %d spans: builder\n%+v\nwhole tree\n%+v", iter, at, got, want)
			}
			if len(billed) != len(want.Calls) {
				t.Fatalf("iteration %d after %d spans: deltas give %d calls, want %d", iter, at, len(billed), len(want.Calls))
			}
			for _, c := range want.Calls {
				if !billed[c.SpanID] {
					t.Fatalf("iteration %d: call %s billed but never added", iter, c.SpanID)
				}
			}
		}
	}
}

// Summarize (the builder over canonical order) equals the whole-tree rule,
// repeated span ids included.
func TestSummarizeMatchesTheWholeTreeRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 23))
	for iter := 0; iter < 300; iter++ {
		spans := randomSummaryTrace(rng, 1+rng.IntN(80))
		if iter%3 == 0 {
			dup := spans[rng.IntN(len(spans))]
			dup.Name = "retried copy"
			spans = append(spans, dup)
		}
		if got, want := Summarize(spans), summarizeTree(spans); !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d:\n%+v\n%+v", iter, got, want)
		}
	}
}

func BenchmarkSummarize100k(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	spans := randomSummaryTrace(rng, 100_000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Summarize(spans)
	}
}
