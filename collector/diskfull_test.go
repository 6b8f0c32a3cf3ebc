package collector_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
)

// TestFullSpoolDiskHealsOnceTheStoreReturns is issue 36's first fault on
// a real full file system: the spool's disk (a 4 MiB tmpfs, far below
// --spool-max-mib) fills while ClickHouse is down, and requests are
// refused retryably. Once ClickHouse is back the feeder stores what the
// spool holds, and requests must be acknowledged again — they used not to
// be, ever: the feeder stored the data but could not write its checkpoint,
// so the segment filling the disk was never freed. Every acknowledged span
// is stored exactly once.
func TestFullSpoolDiskHealsOnceTheStoreReturns(t *testing.T) {
	testtier.Slow(t)
	disk := testtier.Tmpfs(t, 4<<20)
	st, chs, db := openClickHouse(t)
	w := &flaky{Store: st}
	w.down.Store(true)
	srv := startServer(t, w, func(c *collector.ServerConfig) {
		c.Exporter.SpoolDir = filepath.Join(disk, "spool")
		c.Exporter.SpoolMaxMiB = 1024
		c.Exporter.RetryAfter = 100 * time.Millisecond
	})
	var acked []string // trace ids, 10 spans each
	seed := uint64(3600)
	send := func() error {
		seed++
		td, ids := uniqueBatch(seed, 10)
		_, err := exportGRPC(t, srv, td)
		if err == nil {
			acked = append(acked, ids...)
		}
		return err
	}
	var refused error
	for range 2000 {
		if refused = send(); refused != nil {
			break
		}
	}
	if status.Code(refused) != codes.ResourceExhausted {
		t.Fatalf("after %d acknowledged traces on a 4 MiB spool disk: %v, want RESOURCE_EXHAUSTED", len(acked), refused)
	}
	t.Logf("spool disk full after %d traces: %v", len(acked), refused)
	h := srv.Health(context.Background())
	if h.Ready || h.Status != "unavailable" || !strings.Contains(h.Reason, "disk") || h.Spool == nil || !h.Spool.DiskFull {
		t.Errorf("health with the spool's disk full: ready=%v status=%q reason=%q spool=%+v; want not ready, naming the disk", h.Ready, h.Status, h.Reason, h.Spool)
	}

	w.down.Store(false)
	began := time.Now()
	waitFor(t, "a request to be acknowledged again after the store returned", 60*time.Second, func() bool {
		return send() == nil
	})
	t.Logf("acknowledged again %s after the store returned", time.Since(began).Round(time.Millisecond))
	for range 20 {
		if err := send(); err != nil {
			t.Fatalf("after the recovery: %v", err)
		}
	}
	waitFor(t, "ready again", 30*time.Second, func() bool { return srv.Health(context.Background()).Ready })
	want := uint64(len(acked) * 10)
	waitFor(t, "every acknowledged span in ClickHouse", time.Minute, func() bool {
		_, u := countSpans(t, chs, db)
		return u >= want
	})
	_, u := countSpans(t, chs, db)
	if u != want {
		t.Errorf("ClickHouse holds %d distinct spans, want the %d acknowledged", u, want)
	}
	for _, id := range acked[:min(len(acked), 50)] {
		spans, err := st.GetTrace(store.WithDefaultProject(context.Background()), id)
		if err != nil || len(spans) != 10 {
			t.Fatalf("acknowledged trace %s: %d spans, %v; want 10 exactly once", id, len(spans), err)
		}
	}
}
