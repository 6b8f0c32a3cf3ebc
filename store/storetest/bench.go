package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
)

// BenchBatchSize is the batch size BenchmarkWrite writes: what OTel SDK batch
// span processors send by default.
const BenchBatchSize = 512

// BenchmarkWrite measures WriteSpans on s: each b.N iteration writes one
// 512-span batch of fresh 10-span agent traces (GenerateTraces), so no
// batch is an idempotent no-op. It reports spans/s; ns/op is per batch.
// Span generation is excluded from the timing.
func BenchmarkWrite(b *testing.B, s store.Store) {
	b.Helper()
	ctx := context.Background()
	const spansPerTrace = 10
	// Pre-generate a pool of batches with distinct ids; past the pool, batches
	// are regenerated with new seeds outside the timer.
	const pool = 16
	batches := make([][]store.Span, 0, pool)
	for i := 0; i < pool; i++ {
		batches = append(batches, GenerateTraces(BenchBatchSize/spansPerTrace+1, spansPerTrace, int64(i+1))[:BenchBatchSize])
	}
	b.ReportAllocs()
	b.ResetTimer()
	var elapsed time.Duration
	var written int
	for i := 0; i < b.N; i++ {
		var batch []store.Span
		if i < pool {
			batch = batches[i]
		} else {
			b.StopTimer()
			batch = GenerateTraces(BenchBatchSize/spansPerTrace+1, spansPerTrace, int64(i+1))[:BenchBatchSize]
			b.StartTimer()
		}
		t0 := time.Now()
		if err := s.WriteSpans(ctx, batch); err != nil {
			b.Fatalf("WriteSpans batch %d: %v", i, err)
		}
		elapsed += time.Since(t0)
		written += len(batch)
	}
	b.StopTimer()
	if elapsed > 0 {
		b.ReportMetric(float64(written)/elapsed.Seconds(), "spans/s")
	}
}
