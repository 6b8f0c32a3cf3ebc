package web

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
)

// The keeper derives a huge trace's kept window once it is quiet (its
// span count unchanged over a pass), again for a new count after it grew,
// never while it grows and never for a small trace; the page then opens
// from what was kept. Both stores.
func TestKeeperKeepsQuietHugeTracesBehindIngest(t *testing.T) {
	windowStores(t, func(t *testing.T, st store.Store) {
		ctx := store.WithDefaultProject(context.Background())
		spans := bigTraceSpans(1_600) // 1,551 spans
		small := bigTraceSpans(400)
		for i := range small {
			small[i].TraceID = "cccccccccccccccccccccccccccccc03"
		}
		if err := st.WriteSpans(ctx, append(append([]store.Span{}, spans...), small...)); err != nil {
			t.Fatal(err)
		}
		srv, err := New(Config{WindowSpans: 1_000, Now: func() time.Time { return epoch.Add(2 * time.Hour) }}, Deps{Traces: st})
		if err != nil {
			t.Fatal(err)
		}
		w, _ := srv.windowOf()
		id := spans[0].TraceID
		kept := func() int64 {
			t.Helper()
			_, n, ok, err := w.LoadDerived(ctx, id, srv.windowKind())
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return 0
			}
			return n
		}
		k, err := srv.NewKeeper(KeeperConfig{})
		if err != nil {
			t.Fatal(err)
		}
		pass := func(want int, what string) {
			t.Helper()
			n, err := k.Pass(ctx)
			if err != nil || n != want {
				t.Fatalf("%s: pass kept %d traces (%v), want %d", what, n, err, want)
			}
		}
		pass(0, "first sight of the trace")
		if n := kept(); n != 0 {
			t.Fatalf("kept for %d spans before the trace was quiet", n)
		}
		pass(1, "the trace is quiet")
		total := int64(len(spans))
		if n := kept(); n != total {
			t.Fatalf("kept for %d spans, want %d", n, total)
		}
		if _, n, ok, _ := w.LoadDerived(ctx, small[0].TraceID, srv.windowKind()); ok {
			t.Errorf("a 400-span trace (under WindowSpans) was kept for %d spans", n)
		}
		pass(0, "nothing new")

		// The trace grows: nothing while it does, then the new count.
		more := make([]store.Span, 10)
		for i := range more {
			more[i] = spans[1]
			more[i].SpanID = hexID("9", i, 16)
		}
		if err := st.WriteSpans(ctx, more); err != nil {
			t.Fatal(err)
		}
		pass(0, "the trace grew")
		if n := kept(); n != total {
			t.Fatalf("kept for %d spans while growing, want the %d of before", n, total)
		}
		pass(1, "quiet again")
		if n := kept(); n != total+10 {
			t.Fatalf("kept for %d spans, want %d", n, total+10)
		}

		// The page of the kept trace: what was kept, the span count of now.
		ts := httptest.NewServer(srv)
		defer ts.Close()
		if code, body := get(t, ts, "/traces/"+id); code != 200 || !strings.Contains(body, fmt.Sprintf("<b>%d</b><span>spans</span>", total+10)) {
			t.Errorf("page of the kept trace: %d (want 200 naming %d spans)", code, total+10)
		}

		// Start runs the passes itself and Shutdown stops them.
		k2, err := srv.NewKeeper(KeeperConfig{Interval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteSpans(ctx, []store.Span{func() store.Span { s := spans[1]; s.SpanID = hexID("a", 0, 16); return s }()}); err != nil {
			t.Fatal(err)
		}
		if err := k2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for kept() != total+11 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := k2.Shutdown(sctx); err != nil {
			t.Fatal(err)
		}
		if n := kept(); n != total+11 {
			t.Errorf("the started keeper kept %d spans' window, want %d", n, total+11)
		}
	})
}

func TestKeeperConfigValidate(t *testing.T) {
	for _, c := range []KeeperConfig{{Interval: -1}, {Lookback: -1}, {PerPass: -1}, {PerPass: store.MaxPageSize + 1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := (KeeperConfig{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
}
