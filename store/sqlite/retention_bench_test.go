package sqlite

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// envInt reads a positive integer from the environment, else def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// shifted moves spans (one GenerateTraces batch) so that the first starts
// at at, keeping their offsets.
func shifted(spans []store.Span, at time.Time) []store.Span {
	d := at.Sub(spans[0].StartTime)
	for i := range spans {
		sp := &spans[i]
		sp.StartTime, sp.EndTime = sp.StartTime.Add(d), sp.EndTime.Add(d)
		for j := range sp.Events {
			sp.Events[j].Time = sp.Events[j].Time.Add(d)
		}
	}
	return spans
}

// ingestLoad offers store.WriteSpans a steady load, as serve's senders do:
// every interval a request of per spans (new traces, stamped now), each
// in its own goroutine whatever became of the last, with a sender's 10 s
// timeout. A request is accepted when WriteSpans returned nil within it.
type ingestLoad struct {
	mu                sync.Mutex
	lat               []time.Duration // of every request answered, accepted or not
	offered, accepted atomic.Int64    // spans
	timedOut          atomic.Int64    // requests
	stop              chan struct{}
	wg                sync.WaitGroup
}

func startIngest(s store.Store, per int, interval time.Duration) *ingestLoad {
	l := &ingestLoad{stop: make(chan struct{})}
	ctx := store.WithDefaultProject(context.Background())
	l.wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for seq := int64(0); ; seq++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			spans := shifted(storetest.GenerateTraces(per/10, 10, 1_000_000+seq), time.Now().Add(-time.Second))
			l.wg.Go(func() {
				l.offered.Add(int64(len(spans)))
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				began := time.Now()
				err := s.WriteSpans(wctx, spans)
				took := time.Since(began)
				l.mu.Lock()
				l.lat = append(l.lat, took)
				l.mu.Unlock()
				switch {
				case err == nil && took <= 10*time.Second:
					l.accepted.Add(int64(len(spans)))
				default:
					l.timedOut.Add(1)
				}
			})
		}
	})
	return l
}

// finish stops the load, waits for the requests in flight, and returns
// the latency percentiles.
func (l *ingestLoad) finish() (p50, p99, mx time.Duration, n int) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.lat)
	n = len(l.lat)
	if n == 0 {
		return 0, 0, 0, 0
	}
	return l.lat[n/2], l.lat[min(n-1, n*99/100)], l.lat[n-1], n
}

// BenchmarkRetentionUnderIngest runs a retention pass over a store of old
// traces — LOOMWORK_RETENTION_SPANS (default 1,000,000) spans in 10-span
// agent traces, all past their retention — while ingest goes on at the
// usual rate of 400 spans/s (ten 40-span WriteSpans requests a second,
// each with a 10 s timeout), and reports the ingest requests' latency
// (p50, p99, max) during the pass and the spans accepted of those
// offered. The pass is given LOOMWORK_RETENTION_LIMIT seconds (default
// 600); one still running then is stopped, and the traces it deleted are
// reported. Run once:
//
//	go test ./store/sqlite -run '^$' -bench RetentionUnderIngest -benchtime 1x -timeout 60m
func BenchmarkRetentionUnderIngest(b *testing.B) {
	nSpans := envInt("LOOMWORK_RETENTION_SPANS", 1_000_000)
	limit := time.Duration(envInt("LOOMWORK_RETENTION_LIMIT", 600)) * time.Second
	for range b.N {
		path := filepath.Join(b.TempDir(), "traces.db")
		s, err := Open(context.Background(), Config{Path: path, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		ctx := store.WithDefaultProject(context.Background())
		seeded := time.Now()
		old := time.Now().Add(-30 * 24 * time.Hour)
		const batch = 5000
		for i := 0; i < nSpans; i += batch {
			spans := shifted(storetest.GenerateTraces(batch/10, 10, int64(i)), old.Add(time.Duration(i)*time.Millisecond))
			if err := s.WriteSpans(ctx, spans); err != nil {
				b.Fatal(err)
			}
		}
		var size int64
		if st, err := os.Stat(path); err == nil {
			size = st.Size()
		}
		b.Logf("seeded %d spans (%d traces, %d MB) in %s", nSpans, nSpans/10, size>>20, time.Since(seeded).Round(time.Second))

		job := &RetentionJob{Store: s, Policies: func() []RetentionPolicy {
			return []RetentionPolicy{{Project: "", Retention: 24 * time.Hour}}
		}}
		// The same load alone first: what ingest costs without a pass.
		idle := startIngest(s, 40, 100*time.Millisecond)
		time.Sleep(10 * time.Second)
		i50, i99, imx, in := idle.finish()
		b.Logf("ingest alone (10 s): %d requests, p50 %s, p99 %s, max %s; %d of %d offered spans accepted",
			in, i50.Round(time.Millisecond), i99.Round(time.Millisecond), imx.Round(time.Millisecond), idle.accepted.Load(), idle.offered.Load())

		load := startIngest(s, 40, 100*time.Millisecond)
		time.Sleep(2 * time.Second) // the load settles before the pass
		pctx, cancel := context.WithTimeout(context.Background(), limit)
		cpu0, began := cpuTime(), time.Now()
		res, err := job.RunOnce(pctx)
		took, cpu := time.Since(began), cpuTime()-cpu0
		cancel()
		time.Sleep(2 * time.Second)
		p50, p99, mx, n := load.finish()
		done := "done"
		if err != nil {
			done = fmt.Sprintf("stopped after %s (%v)", limit, err)
		}
		var left int64
		_ = s.reader.QueryRowContext(ctx, `SELECT count(*) FROM traces WHERE start_ns < ?`, time.Now().Add(-24*time.Hour).UnixNano()).Scan(&left)
		b.Logf("retention pass %s in %s (process CPU %s): %d traces, %d spans, %d payload blocks deleted, %d pages freed, %d expired traces left; %d chunks, the write lock held at most %s at once (%s)",
			done, took.Round(time.Millisecond), cpu.Round(time.Millisecond), res.Traces, res.Spans, res.Blocks, res.PagesFreed, left, res.Chunks, res.LongestHold.Round(time.Millisecond), res.LongestHoldStep)
		b.Logf("ingest during the pass: %d requests, p50 %s, p99 %s, max %s; %d of %d offered spans accepted (%.1f%%), %d requests failed or over 10 s",
			n, p50.Round(time.Millisecond), p99.Round(time.Millisecond), mx.Round(time.Millisecond),
			load.accepted.Load(), load.offered.Load(), 100*float64(load.accepted.Load())/float64(max64(load.offered.Load(), 1)), load.timedOut.Load())
		b.ReportMetric(took.Seconds(), "pass-s")
		b.ReportMetric(float64(res.Traces)/took.Seconds(), "traces-deleted/s")
		b.ReportMetric(float64(p50.Microseconds())/1000, "ingest-p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "ingest-p99-ms")
		b.ReportMetric(float64(mx.Microseconds())/1000, "ingest-max-ms")
		b.ReportMetric(100*float64(load.accepted.Load())/float64(max64(load.offered.Load(), 1)), "accepted-%")
		if err := s.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
