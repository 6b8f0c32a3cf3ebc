package storetest

import (
	"context"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
)

// BenchBatchSize is the batch size the write benchmarks use: what OTel SDK
// batch span processors send by default.
const BenchBatchSize = 512

const benchPool = 32

// benchBatches holds benchPool distinct batches of fresh 10-span agent
// traces; batch i of a run is pool[i%benchPool] with its trace ids changed
// for round i/benchPool, so no batch is an idempotent no-op and generating
// them costs (almost) nothing inside the timed loop.
type benchBatches struct {
	pool [][]store.Span
}

func newBenchBatches() *benchBatches {
	bb := &benchBatches{}
	for i := 0; i < benchPool; i++ {
		bb.pool = append(bb.pool, GenerateTraces(BenchBatchSize/10+1, 10, int64(i+1))[:BenchBatchSize])
	}
	return bb
}

func (bb *benchBatches) batch(i int) []store.Span {
	src := bb.pool[i%benchPool]
	round := uint32(i / benchPool)
	if round == 0 {
		return src
	}
	out := make([]store.Span, len(src))
	copy(out, src)
	for k := range out {
		id, _ := hex.DecodeString(out[k].TraceID)
		id[12] ^= byte(round >> 24)
		id[13] ^= byte(round >> 16)
		id[14] ^= byte(round >> 8)
		id[15] ^= byte(round)
		out[k].TraceID = hex.EncodeToString(id)
	}
	return out
}

// BenchmarkWrite measures WriteSpans on s from one goroutine: each b.N
// iteration writes one 512-span batch of 10-span agent traces with ~14
// gen_ai attributes per span (GenerateTraces). It reports spans/s; ns/op is
// per batch.
func BenchmarkWrite(b *testing.B, s store.Store) {
	b.Helper()
	ctx := store.WithDefaultProject(context.Background())
	bb := newBenchBatches()
	b.ReportAllocs()
	b.ResetTimer()
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		batch := bb.batch(i)
		b.StartTimer()
		t0 := time.Now()
		if err := s.WriteSpans(ctx, batch); err != nil {
			b.Fatalf("WriteSpans batch %d: %v", i, err)
		}
		elapsed += time.Since(t0)
	}
	b.StopTimer()
	if elapsed > 0 {
		b.ReportMetric(float64(b.N*BenchBatchSize)/elapsed.Seconds(), "spans/s")
	}
}

// BenchmarkWriteParallel is BenchmarkWrite with writers goroutines calling
// WriteSpans at once (as the collector's exporter does under load); the
// b.N batches are shared among them.
func BenchmarkWriteParallel(b *testing.B, s store.Store, writers int) {
	b.Helper()
	ctx := store.WithDefaultProject(context.Background())
	bb := newBenchBatches()
	batches := make([][]store.Span, b.N)
	for i := range batches {
		batches[i] = bb.batch(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	t0 := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batches) {
					return
				}
				if err := s.WriteSpans(ctx, batches[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatalf("WriteSpans: %v", err)
	}
	b.ReportMetric(float64(b.N*BenchBatchSize)/elapsed.Seconds(), "spans/s")
}
