package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// heldBones is the real store with its TraceBones held until released: an
// analysis that takes as long as the test says, as a million spans' does.
type heldBones struct {
	store.Store
	store.WindowReader
	release chan struct{}
	calls   atomic.Int32
}

func (h *heldBones) TraceBones(ctx context.Context, id string) ([]store.Bone, error) {
	h.calls.Add(1)
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.WindowReader.TraceBones(ctx, id)
}

// heldServer stores a huge trace (bigTraceSpans(1_600)) in a fresh
// SQLite store and returns its spans, the store, and a UI on it whose
// analyses wait for held.release, with a started Keeper (stopped at the
// test's end unless the test stops it).
func heldServer(t *testing.T, wait time.Duration) ([]store.Span, *sqlite.Store, *heldBones, *Server, *Keeper) {
	t.Helper()
	st := openStore(t)
	spans := bigTraceSpans(1_600)
	if err := st.WriteSpans(store.WithDefaultProject(context.Background()), spans); err != nil {
		t.Fatal(err)
	}
	held := &heldBones{Store: st, WindowReader: st, release: make(chan struct{})}
	srv, err := New(Config{WindowSpans: 1_000, AnalysisWait: wait}, Deps{Traces: held})
	if err != nil {
		t.Fatal(err)
	}
	k, err := srv.NewKeeper(KeeperConfig{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return spans, st, held, srv, k
}

// The first open of a huge trace nothing has analysed answers within
// AnalysisWait while a Keeper runs, whatever the analysis takes: the page
// says the trace is being analysed and reloads itself (Refresh), the API
// answers 503 with Retry-After, every request joins the one analysis the
// Keeper runs, and once it is done the page opens the trace. It used to
// derive the trace inside the request: past StoreTimeout (a loaded
// machine, a million spans) the request answered 503 and dropped the
// work, so no retry ever opened the trace.
func TestFirstOpenOfAHugeTraceAnswersWhileTheKeeperAnalysesIt(t *testing.T) {
	spans, _, held, srv, _ := heldServer(t, 50*time.Millisecond)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	id := spans[0].TraceID
	n := len(spans)

	for i := range 3 {
		resp, body := fetch(t, ts, "/traces/"+id)
		if resp.StatusCode != 200 || resp.Header.Get("Refresh") == "" || !strings.Contains(body, "being analysed") ||
			!strings.Contains(body, fmt.Sprintf("<b>%s</b><span>spans</span>", fmtInt(int64(n)))) {
			t.Fatalf("open %d during the analysis: %d, Refresh %q; want 200 with a Refresh header, naming %d spans:\n%.600s",
				i+1, resp.StatusCode, resp.Header.Get("Refresh"), n, body)
		}
	}
	resp, body := fetch(t, ts, "/api/v1/traces/"+id+"/rollup")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"analysing": true`) {
		t.Errorf("the API during the analysis: %d, Retry-After %q, %s; want 503 with Retry-After and analysing: true",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if c := held.calls.Load(); c != 1 {
		t.Errorf("four requests started %d analyses, want the Keeper's one", c)
	}

	close(held.release)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, body = fetch(t, ts, "/traces/"+id)
		if !strings.Contains(body, "being analysed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the trace never opened after its analysis was released")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Refresh") != "" || !strings.Contains(body, "invoke_agent orchestrator") {
		t.Errorf("the page after the analysis: %d, Refresh %q; want 200, no Refresh, the root span's row:\n%.600s",
			resp.StatusCode, resp.Header.Get("Refresh"), body)
	}
	if c := held.calls.Load(); c != 1 {
		t.Errorf("the trace was analysed %d times, want once", c)
	}
}

// A huge trace that grew after its analysis was kept opens at once with
// the older analysis and a note naming both span counts while the Keeper
// analyses it again; the Keeper's new analysis then replaces it.
func TestAGrownHugeTraceOpensWithItsOlderAnalysisAndANote(t *testing.T) {
	ctx := store.WithDefaultProject(context.Background())
	spans, st, held, srv, _ := heldServer(t, 50*time.Millisecond)
	id := spans[0].TraceID
	// Kept for 1,551 spans (a pass of an earlier keeper), then 10 more.
	if _, err := srv.keptWindow(ctx, st, id, int64(len(spans))); err != nil {
		t.Fatal(err)
	}
	more := make([]store.Span, 10)
	for i := range more {
		more[i] = spans[1]
		more[i].SpanID = hexID("9", i, 16)
	}
	if err := st.WriteSpans(ctx, more); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	note := fmt.Sprintf("this analysis is of the trace&#39;s first %s spans; it now has %s", fmtInt(int64(len(spans))), fmtInt(int64(len(spans)+10)))
	resp, body := fetch(t, ts, "/traces/"+id)
	if resp.StatusCode != 200 || !strings.Contains(body, "invoke_agent orchestrator") || !strings.Contains(body, note) {
		t.Fatalf("the grown trace during its new analysis: %d; want 200, the older analysis's rows and the note %q:\n%.3000s", resp.StatusCode, note, body)
	}
	close(held.release)
	deadline := time.Now().Add(time.Minute)
	for strings.Contains(body, note) {
		if time.Now().After(deadline) {
			t.Fatal("the note stayed after the new analysis was released")
		}
		time.Sleep(20 * time.Millisecond)
		_, body = fetch(t, ts, "/traces/"+id)
	}
	if !strings.Contains(body, fmt.Sprintf("<b>%s</b><span>spans</span>", fmtInt(int64(len(spans)+10)))) {
		t.Errorf("the page after the new analysis does not name %d spans", len(spans)+10)
	}
}

// A reader waiting for an analysis when the Keeper stops (the server
// shutting down) is answered 503 with Retry-After, not left hanging.
func TestAReaderWaitingWhenTheKeeperStopsIsToldToRetry(t *testing.T) {
	ctx := store.WithDefaultProject(context.Background())
	spans, _, held, srv, k := heldServer(t, time.Hour)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Get(ts.URL + "/api/v1/traces/" + spans[0].TraceID + "/rollup")
		if err != nil {
			got <- nil
			return
		}
		resp.Body.Close()
		got <- resp
	}()
	for held.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := k.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-got:
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("a reader waiting when the keeper stopped got %v, want 503 with Retry-After", resp)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a reader waiting when the keeper stopped was left hanging")
	}
}
