package clickhouse_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// moved shifts a GenerateTraces batch to start at at and stamps project
// retention on it (the collector's job).
func moved(spans []store.Span, at time.Time, retention time.Duration) []store.Span {
	d := at.Sub(spans[0].StartTime)
	for i := range spans {
		sp := &spans[i]
		sp.StartTime, sp.EndTime, sp.Retention = sp.StartTime.Add(d), sp.EndTime.Add(d), retention
		for j := range sp.Events {
			sp.Events[j].Time = sp.Events[j].Time.Add(d)
		}
	}
	return spans
}

// BenchmarkTTLUnderIngest is the ClickHouse side of retention never
// blocking ingest: LOOMWORK_RETENTION_SPANS (default 1,000,000) spans of a
// project with a day's retention, written as if 30 days old with the
// tables' TTL merges stopped, then, while WriteSpans takes 400 spans/s
// (ten 40-span requests a second, 10 s timeout), TTL merges are started
// and OPTIMIZE … FINAL forces them over both tables; it reports the ingest
// requests' latency before and during, and how long the expired rows took
// to go. Run once:
//
//	go test ./store/clickhouse -run '^$' -bench TTLUnderIngest -benchtime 1x -timeout 30m
func BenchmarkTTLUnderIngest(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("LOOMWORK_RETENTION_SPANS"))
	if n <= 0 {
		n = 1_000_000
	}
	for range b.N {
		srv := chtestStart(b)
		s, db := openFresh(b, srv)
		ctx := store.WithDefaultProject(context.Background())
		for _, t := range []string{"spans", "trace_index"} {
			if err := execSQL(srv, fmt.Sprintf("SYSTEM STOP TTL MERGES %s.%s", db, t)); err != nil {
				b.Fatal(err)
			}
		}
		old := time.Now().Add(-30 * 24 * time.Hour)
		seeded := time.Now()
		for i := 0; i < n; i += 10000 {
			if err := s.WriteSpans(ctx, moved(storetest.GenerateTraces(1000, 10, int64(i)), old.Add(time.Duration(i)*time.Millisecond), 24*time.Hour)); err != nil {
				b.Fatal(err)
			}
		}
		expired := func() uint64 {
			return queryCount(b, srv, fmt.Sprintf("SELECT count() FROM %s.spans WHERE expire_at < now()", db))
		}
		b.Logf("seeded %d spans in %s; %d rows expired", n, time.Since(seeded).Round(time.Second), expired())
		// Let the seed's own merges finish: they are not what is measured.
		settle := time.Now()
		for time.Since(settle) < 3*time.Minute && queryCount(b, srv, fmt.Sprintf("SELECT count() FROM system.merges WHERE database = '%s'", db)) > 0 {
			time.Sleep(time.Second)
		}
		time.Sleep(5 * time.Second)

		idle := ingestAt(s, 400)
		time.Sleep(10 * time.Second)
		i50, i99, imx, in, iacc, ioff := idle.finish()
		b.Logf("ingest alone (10 s): %d requests, p50 %s, p99 %s, max %s; %d of %d spans accepted", in, i50, i99, imx, iacc, ioff)

		load := ingestAt(s, 400)
		time.Sleep(2 * time.Second)
		began := time.Now()
		var optimize time.Duration
		for _, t := range []string{"spans", "trace_index"} {
			if err := execSQL(srv, fmt.Sprintf("SYSTEM START TTL MERGES %s.%s", db, t)); err != nil {
				b.Fatal(err)
			}
			o := time.Now()
			if err := execSQL(srv, fmt.Sprintf("OPTIMIZE TABLE %s.%s FINAL", db, t)); err != nil {
				b.Fatal(err)
			}
			optimize += time.Since(o)
		}
		deadline := time.Now().Add(10 * time.Minute)
		left := expired()
		for left > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			left = expired()
		}
		gone := time.Since(began)
		time.Sleep(2 * time.Second)
		p50, p99, mx, reqs, acc, off := load.finish()
		b.Logf("TTL: expired rows gone in %s (OPTIMIZE FINAL of both tables %s), %d left", gone.Round(time.Millisecond), optimize.Round(time.Millisecond), left)
		b.Logf("ingest during: %d requests, p50 %s, p99 %s, max %s; %d of %d spans accepted", reqs, p50, p99, mx, acc, off)
		b.ReportMetric(gone.Seconds(), "ttl-s")
		b.ReportMetric(float64(p50.Microseconds())/1000, "ingest-p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, "ingest-p99-ms")
		b.ReportMetric(float64(mx.Microseconds())/1000, "ingest-max-ms")
		b.ReportMetric(100*float64(acc)/float64(max(off, 1)), "accepted-%")
	}
}

// steadyIngest is WriteSpans offered spans/s in 40-span requests, each in
// its own goroutine with a sender's 10 s timeout.
type steadyIngest struct {
	mu       sync.Mutex
	lat      []time.Duration
	acc, off atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

func ingestAt(s *clickhouse.Store, spansPerSec int) *steadyIngest {
	l := &steadyIngest{stop: make(chan struct{})}
	ctx := store.WithDefaultProject(context.Background())
	interval := time.Second * 40 / time.Duration(spansPerSec)
	l.wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for seq := int64(0); ; seq++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			spans := moved(storetest.GenerateTraces(4, 10, 1_000_000_000+seq), time.Now().Add(-time.Second), 24*time.Hour)
			l.wg.Go(func() {
				l.off.Add(int64(len(spans)))
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				began := time.Now()
				err := s.WriteSpans(wctx, spans)
				took := time.Since(began)
				l.mu.Lock()
				l.lat = append(l.lat, took)
				l.mu.Unlock()
				if err == nil && took <= 10*time.Second {
					l.acc.Add(int64(len(spans)))
				}
			})
		}
	})
	return l
}

func (l *steadyIngest) finish() (p50, p99, mx time.Duration, n int, acc, off int64) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	slices.Sort(l.lat)
	n = len(l.lat)
	if n > 0 {
		p50, p99, mx = l.lat[n/2], l.lat[min(n-1, n*99/100)], l.lat[n-1]
	}
	return p50.Round(time.Millisecond), p99.Round(time.Millisecond), mx.Round(time.Millisecond), n, l.acc.Load(), l.off.Load()
}
