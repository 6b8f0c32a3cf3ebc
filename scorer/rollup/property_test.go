package rollup

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/store"
)

// randomTrace builds a trace of n spans under one root. Children start and
// end at random points; with skew, some stick out of their parent or lie
// wholly outside it, as async work and skewed clocks produce.
func randomTrace(rng *rand.Rand, n int, skew bool) []store.Span {
	spans := make([]store.Span, 0, n)
	spans = append(spans, store.Span{TraceID: "t", SpanID: "s0", Name: "root", StartTime: t0, EndTime: t0.Add(time.Second)})
	for i := 1; i < n; i++ {
		p := spans[rng.IntN(len(spans))]
		d := p.EndTime.Sub(p.StartTime)
		a := time.Duration(rng.Int64N(int64(d) + 1))
		b := time.Duration(rng.Int64N(int64(d) + 1))
		if a > b {
			a, b = b, a
		}
		st, en := p.StartTime.Add(a), p.StartTime.Add(b)
		if skew && rng.IntN(4) == 0 {
			shift := time.Duration(rng.Int64N(int64(d)+1)) - d/2
			st, en = st.Add(shift), en.Add(shift)
		}
		s := store.Span{TraceID: "t", SpanID: fmt.Sprintf("s%d", i), ParentSpanID: p.SpanID, Name: "x", StartTime: st, EndTime: en}
		if rng.IntN(3) == 0 {
			s.Operation, s.RequestModel, s.HasUsage, s.InputTokens, s.OutputTokens = "chat", "gpt-4o-mini", true, 100, 10
		}
		spans = append(spans, s)
	}
	rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	return spans
}

// For any single-root trace the critical path tiles the root exactly: its
// length is the root's wall time and the per-span self times add up to it.
// The duration is the whole extent of the spans, skewed children included,
// and AfterRootMS the part after the root's end.
func TestCriticalPathAlwaysEqualsRootWallTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for iter := 0; iter < 300; iter++ {
		spans := randomTrace(rng, 1+rng.IntN(60), iter%2 == 1)
		r := Compute(spans, pricing.Default())
		first, last := spans[0].StartTime, spans[0].EndTime
		var rootEnd time.Time
		for _, s := range spans {
			if s.StartTime.Before(first) {
				first = s.StartTime
			}
			if s.EndTime.After(last) {
				last = s.EndTime
			}
			if s.ParentSpanID == "" {
				rootEnd = s.EndTime
			}
		}
		if r.CriticalPathMS != 1000 || r.DurationMS != ms(last.Sub(first)) || r.AfterRootMS != ms(max(0, last.Sub(rootEnd))) {
			t.Fatalf("iteration %d: critical_path_ms=%v duration_ms=%v after_root_ms=%v, want 1000, %v, %v",
				iter, r.CriticalPathMS, r.DurationMS, r.AfterRootMS, ms(last.Sub(first)), ms(max(0, last.Sub(rootEnd))))
		}
		var sum time.Duration
		for _, e := range r.CriticalPath {
			if e.SelfMS <= 0 {
				t.Fatalf("iteration %d: span %s has non-positive self time %v", iter, e.SpanID, e.SelfMS)
			}
			sum += time.Duration(e.SelfMS * float64(time.Millisecond))
		}
		if d := sum - time.Second; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("iteration %d: self times sum to %v, want 1s", iter, sum)
		}
		var calls int
		for _, s := range spans {
			if s.HasUsage {
				calls++
			}
		}
		// Every usage span here is a leaf or an aggregate; leaves are billed once.
		if r.ModelCalls+len(r.AggregateSpans) != calls {
			t.Fatalf("iteration %d: %d billed + %d aggregates != %d usage spans", iter, r.ModelCalls, len(r.AggregateSpans), calls)
		}
	}
}

func deepChain(n int) []store.Span {
	spans := make([]store.Span, n)
	for i := range spans {
		spans[i] = store.Span{TraceID: "t", SpanID: fmt.Sprintf("s%d", i), Name: "x",
			StartTime: t0.Add(time.Duration(i) * time.Microsecond), EndTime: t0.Add(time.Second - time.Duration(i)*time.Microsecond)}
		if i > 0 {
			spans[i].ParentSpanID = spans[i-1].SpanID
		}
	}
	spans[0].StartTime, spans[0].EndTime = t0, t0.Add(time.Second)
	return spans
}

func TestDeepChainDoesNotRecurse(t *testing.T) {
	r := Compute(deepChain(50_000), nil)
	if r.CriticalPathMS != 1000 || len(r.CriticalPath) != 50_000 {
		t.Fatalf("critical_path_ms=%v entries=%d", r.CriticalPathMS, len(r.CriticalPath))
	}
}

// A rollup does not depend on the order its spans arrive in, byte for byte:
// floating-point sums of costs are taken in canonical order (the store's
// GetTrace order), so a file and the store print the same cost.
func TestRollupIgnoresArrivalOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	prices := pricing.Default()
	for iter := 0; iter < 200; iter++ {
		spans := randomTrace(rng, 2+rng.IntN(60), iter%2 == 1)
		for i := range spans {
			if rng.IntN(3) == 0 {
				c := rng.Float64() / 1000
				spans[i].CostUSD = &c
			}
		}
		want, err := json.Marshal(Compute(spans, prices))
		if err != nil {
			t.Fatal(err)
		}
		rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		got, _ := json.Marshal(Compute(spans, prices))
		if string(got) != string(want) {
			t.Fatalf("iteration %d: rollup depends on span order:\n%s\n%s", iter, got, want)
		}
	}
}
