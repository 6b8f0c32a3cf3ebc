package spool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppend measures acknowledged (fsynced) appends: ~500 KB records
// (a 1,000-span OTLP request, encoded) and ~50 KB ones, from 1, 4 and 16
// concurrent appenders, with and without preallocated segments. Nothing
// is consumed, so MaxBytes is out of the way.
//
//	flock /work/bench.lock go test ./collector/spool -run '^$' -bench Append -benchtime 3s
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{500 << 10, 50 << 10} {
		for _, prealloc := range []bool{false, true} {
			for _, appenders := range []int{1, 4, 16} {
				name := fmt.Sprintf("size=%dKB/prealloc=%v/appenders=%d", size>>10, prealloc, appenders)
				b.Run(name, func(b *testing.B) { benchAppend(b, size, appenders, prealloc) })
			}
		}
	}
}

func benchAppend(b *testing.B, size, appenders int, prealloc bool) {
	w, err := Open(context.Background(), Options{Dir: b.TempDir(), MaxBytes: 1 << 40, Preallocate: prealloc,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = byte(i * 7)
	}
	b.SetBytes(int64(size))
	var next atomic.Int64
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range appenders {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := w.Append(context.Background(), rec); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	st := w.Stats()
	b.ReportMetric(float64(b.N)/el.Seconds(), "records/s")
	b.ReportMetric(float64(st.SyncCount)/float64(b.N), "fsyncs/record")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/record")
}

// BenchmarkReadCommit is the feeder's side: reading back records already
// on disk (page cache) in 16 MiB batches and committing each batch.
//
//	flock /work/bench.lock go test ./collector/spool -run '^$' -bench ReadCommit -benchtime 2000x
func BenchmarkReadCommit(b *testing.B) {
	for _, size := range []int{500 << 10, 50 << 10} {
		b.Run(fmt.Sprintf("size=%dKB", size>>10), func(b *testing.B) {
			w, err := Open(context.Background(), Options{Dir: b.TempDir(), MaxBytes: 1 << 40,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			rec := make([]byte, size)
			var wg sync.WaitGroup
			var next atomic.Int64
			for range 16 {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if err := w.Append(context.Background(), rec); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.SetBytes(int64(size))
			cpu0 := cpuTime()
			b.ResetTimer()
			n := 0
			for n < b.N {
				recs, err := w.Read(context.Background(), 16<<20)
				if err != nil {
					b.Fatal(err)
				}
				n += len(recs)
				if err := w.Commit(recs[len(recs)-1].End); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/record")
		})
	}
}
