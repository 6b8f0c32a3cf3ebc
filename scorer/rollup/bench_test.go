package rollup

import (
	"math/rand/v2"
	"testing"

	"github.com/loomwork/loomwork/scorer/pricing"
)

// BenchmarkRollup100kSpans rolls up one 100,000-span trace (random tree,
// a third of the spans model calls, a quarter skewed).
func BenchmarkRollup100kSpans(b *testing.B) {
	spans := randomTrace(rand.New(rand.NewPCG(1, 2)), 100_000, true)
	prices := pricing.Default()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := Compute(spans, prices)
		if r.SpanCount != 100_000 {
			b.Fatal(r.SpanCount)
		}
	}
}

// BenchmarkRollup100kSpansDeepChain: 100,000 spans nested one inside the
// next — the worst case for a recursive walk.
func BenchmarkRollup100kSpansDeepChain(b *testing.B) {
	spans := deepChain(100_000)
	prices := pricing.Default()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := Compute(spans, prices)
		if r.CriticalPathMS != 1000 {
			b.Fatal(r.CriticalPathMS)
		}
	}
}
