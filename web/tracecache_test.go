package web

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// countingReader counts the store reads of each trace.
type countingReader struct {
	TraceReader
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingReader) GetTrace(ctx context.Context, id string) ([]store.Span, error) {
	c.mu.Lock()
	c.reads[id]++
	c.mu.Unlock()
	return c.TraceReader.GetTrace(ctx, id)
}

func (c *countingReader) readsOf(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[id]
}

// withTraceID returns a copy of spans moved to trace id.
func withTraceID(spans []store.Span, id string) []store.Span {
	out := append([]store.Span(nil), spans...)
	for i := range out {
		out[i].TraceID = id
	}
	return out
}

// checkAccounting fails unless the cache's accounted bytes are the sum of
// its entries' estimates and within the budget.
func checkAccounting(t *testing.T, c *traceCache, step string) int64 {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := int64(0)
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*cacheEntry)
		if e.trace.bytes != traceBytes(e.trace.spans) {
			t.Errorf("%s: %s accounted %d bytes, its spans estimate %d", step, e.id, e.trace.bytes, traceBytes(e.trace.spans))
		}
		sum += e.trace.bytes
	}
	if sum != c.used || len(c.byID) != c.lru.Len() {
		t.Errorf("%s: accounted %d bytes for %d entries (%d ids), the entries hold %d", step, c.used, c.lru.Len(), len(c.byID), sum)
	}
	if c.used > c.budget {
		t.Errorf("%s: %d bytes cached, over the budget of %d", step, c.used, c.budget)
	}
	return c.used
}

// TestTraceCacheIsBoundedByBytesAndEvictsTheLeastRecentlyUsed: a cache
// with a small budget holds three small traces; a repeat read is a hit
// (no store read); when a big trace arrives the least recently used small
// ones go until it fits; the accounted bytes never exceed the budget; and
// a trace bigger than the whole budget is served every time but never
// kept.
func TestTraceCacheIsBoundedByBytesAndEvictsTheLeastRecentlyUsed(t *testing.T) {
	testtier.Slow(t)
	st := openStore(t)
	small := make([]string, 3)
	var all []store.Span
	for i := range small {
		small[i] = fmt.Sprintf("5%031x", i+1)
		all = append(all, withTraceID(hostileTrace(), small[i])...)
	}
	big, huge := "b1"+fmt.Sprintf("%030x", 0), "c1"+fmt.Sprintf("%030x", 0)
	all = append(all, withTraceID(bigTraceSpans(1_000), big)...)
	all = append(all, withTraceID(bigTraceSpans(2_000), huge)...)
	if err := st.WriteSpans(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	size := func(id string) int64 {
		spans, err := st.GetTrace(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return traceBytes(spans)
	}
	s, b, h := size(small[0]), size(big), size(huge)
	for _, id := range small[1:] {
		if size(id) != s {
			t.Fatalf("small traces differ in size: %d, %d", size(id), s)
		}
	}
	// Room for the big trace and one and a half small ones.
	budget := b + s + s/2
	if 3*s > budget || h <= budget {
		t.Fatalf("sizes do not make the case: small %d, big %d, huge %d, budget %d", s, b, h, budget)
	}
	reader := &countingReader{TraceReader: st, reads: map[string]int{}}
	srv, err := New(Config{TraceCacheBytes: budget, Now: func() time.Time { return epoch }}, Deps{Traces: reader})
	if err != nil {
		t.Fatal(err)
	}
	load := func(id string) cachedTrace {
		t.Helper()
		c, err := srv.loadTrace(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, srv.cache, "after "+id[:2])
		return c
	}
	cached := func(id string) bool {
		_, ok := srv.cache.get(id)
		return ok
	}

	for _, id := range small {
		load(id)
	}
	if used, n := srv.cache.stats(); used != 3*s || n != 3 {
		t.Fatalf("three small traces: %d bytes in %d entries, want %d in 3", used, n, 3*s)
	}
	// A repeat read, through the handler, is a hit; so is one through
	// loadTrace. It also makes small[0] the most recently used.
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/traces/"+small[0], nil))
	if rec.Code != 200 {
		t.Fatalf("GET = %d: %s", rec.Code, rec.Body)
	}
	load(small[0])
	if n := reader.readsOf(small[0]); n != 1 {
		t.Errorf("a cached trace read three times cost %d store reads, want 1", n)
	}

	// The big trace evicts the least recently used small traces (1, then
	// 2) until it fits, and keeps small[0].
	load(big)
	if cached(small[1]) || cached(small[2]) || !cached(small[0]) || !cached(big) {
		t.Errorf("after the big trace: cached %v, want only %s and the big trace", []bool{cached(small[0]), cached(small[1]), cached(small[2]), cached(big)}, small[0][:2])
	}
	if used, n := srv.cache.stats(); used != s+b || n != 2 {
		t.Errorf("after the big trace: %d bytes in %d entries, want %d in 2", used, n, s+b)
	}
	load(small[1]) // evicted: read again, which evicts small[0] (now the oldest)
	if n := reader.readsOf(small[1]); n != 2 {
		t.Errorf("an evicted trace was read %d times, want 2", n)
	}

	// Bigger than the whole budget: served whole, never kept, and what was
	// cached stays.
	before, beforeN := srv.cache.stats()
	for i := 1; i <= 2; i++ {
		c := load(huge)
		if len(c.spans) != len(withTraceID(bigTraceSpans(2_000), huge)) || c.rollup.SpanCount != len(c.spans) {
			t.Fatalf("huge trace served with %d spans (rollup %d)", len(c.spans), c.rollup.SpanCount)
		}
		if n := reader.readsOf(huge); n != i {
			t.Errorf("uncacheable trace read %d times after %d loads", n, i)
		}
	}
	if after, afterN := srv.cache.stats(); cached(huge) || after != before || afterN != beforeN {
		t.Errorf("a trace over the budget changed the cache: %d bytes in %d entries, was %d in %d", after, afterN, before, beforeN)
	}
}

func TestTraceCacheReplacesAnEntryAndDropsOneThatOutgrewTheBudget(t *testing.T) {
	c := newTraceCache(100)
	c.put("a", cachedTrace{bytes: 40})
	c.put("b", cachedTrace{bytes: 40})
	c.put("a", cachedTrace{bytes: 50}) // a grew: replaced, not added
	if used, n := c.stats(); used != 90 || n != 2 {
		t.Fatalf("after replacing a: %d bytes in %d entries, want 90 in 2", used, n)
	}
	if c.put("a", cachedTrace{bytes: 101}) {
		t.Fatal("a trace over the budget was kept")
	}
	if _, ok := c.get("a"); ok {
		t.Error("the outgrown trace's old copy is still served")
	}
	if used, n := c.stats(); used != 40 || n != 1 {
		t.Errorf("after a outgrew the budget: %d bytes in %d entries, want 40 in 1", used, n)
	}
	c.clear()
	if used, n := c.stats(); used != 0 || n != 0 {
		t.Errorf("after clear: %d bytes in %d entries", used, n)
	}
}

func TestTraceCacheBudgetIsValidatedAndDefaulted(t *testing.T) {
	if err := (Config{TraceCacheBytes: -1}).Validate(); err == nil {
		t.Error("a negative trace cache budget is accepted")
	}
	srv, err := New(Config{}, Deps{Traces: openStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	if srv.cache.budget != DefaultTraceCacheBytes || DefaultTraceCacheBytes != 256<<20 {
		t.Errorf("default budget %d, want 256 MiB", srv.cache.budget)
	}
}

// TestTraceBytesEstimateTracksTheHeap measures what loaded traces really
// take on the heap (read back from SQLite, rolled up and indexed, as
// loadTrace keeps them) and checks the estimate the cache accounts with
// stays near it, for big traces and for many small ones.
func TestTraceBytesEstimateTracksTheHeap(t *testing.T) {
	testtier.Slow(t) // measures the heap: never parallel
	// The heap is measured in a process of its own: in the package's
	// process, what earlier tests left (servers, a browser's connections,
	// finalizers) is freed at unpredictable points between the two
	// readings and skews the difference either way.
	if os.Getenv("LOOMWORK_HEAP_TEST_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTraceBytesEstimateTracksTheHeap$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "LOOMWORK_HEAP_TEST_CHILD=1")
		out, err := cmd.CombinedOutput()
		t.Logf("measured in a child process:\n%s", out)
		if err != nil {
			t.Fatalf("the measuring process failed: %v", err)
		}
		return
	}
	for _, c := range []struct {
		name  string
		spans []store.Span
	}{
		{"one 2,000-span trace", bigTraceSpans(2_000)},
		{"one 2,000-span generated trace", storetest.GenerateTraces(1, 2_000, 7)},
		{"100 traces of 3 spans", storetest.GenerateTraces(100, 3, 8)},
		{"100 traces of 20 spans", storetest.GenerateTraces(100, 20, 9)},
	} {
		st := openStore(t)
		if err := st.WriteSpans(context.Background(), c.spans); err != nil {
			t.Fatal(err)
		}
		var ids []string
		seen := map[string]bool{}
		for _, s := range c.spans {
			if !seen[s.TraceID] {
				seen[s.TraceID] = true
				ids = append(ids, s.TraceID)
			}
		}
		prices := pricing.Default()
		keep := make([]cachedTrace, 0, len(ids))
		var m0, m1 runtime.MemStats
		// Twice: objects with finalizers (earlier tests' connections and
		// servers) are freed only by the cycle after the one that found
		// them, and freeing them between m0 and m1 once made the heap
		// difference negative.
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for _, id := range ids {
			spans, err := st.GetTrace(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			r := rollup.Compute(spans, prices)
			keep = append(keep, cachedTrace{spans: spans, rollup: r, index: newTraceIndex(spans, &r), labels: modelLabels(spans)})
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		heap := float64(m1.HeapAlloc) - float64(m0.HeapAlloc)
		est := 0.0
		for i := range keep {
			est += float64(traceBytes(keep[i].spans))
		}
		runtime.KeepAlive(keep)
		ratio := est / heap
		t.Logf("%s: heap %.0f bytes, estimate %.0f (%.2f×)", c.name, heap, est, ratio)
		if math.IsNaN(ratio) || ratio < 0.6 || ratio > 1.6 {
			t.Errorf("%s: the estimate is %.2f× the measured heap (%.0f vs %.0f bytes); recalibrate traceBytes", c.name, ratio, est, heap)
		}
	}
}

// TestProjectServersShareOneTraceCacheButNeverATrace: every project's
// Server keeps its traces in the one cache (one memory budget however many
// projects are opened), under keys of its own: a trace one project loaded
// is read from the store again for another, which gets its own answer.
func TestProjectServersShareOneTraceCacheButNeverATrace(t *testing.T) {
	st := openStore(t)
	id := fmt.Sprintf("7%031x", 1)
	for _, p := range []string{"alpha", "beta"} {
		spans := withTraceID(hostileTrace(), id)
		for i := range spans {
			spans[i].Project = p
			spans[i].Name = p + "-" + spans[i].Name
		}
		if err := st.WriteSpans(context.Background(), spans); err != nil {
			t.Fatal(err)
		}
	}
	reader := &countingReader{TraceReader: st, reads: map[string]int{}}
	srv, err := New(Config{Now: func() time.Time { return epoch }}, Deps{Traces: reader})
	if err != nil {
		t.Fatal(err)
	}
	alpha, err := srv.projectServer("alpha")
	if err != nil {
		t.Fatal(err)
	}
	beta, err := srv.projectServer("beta")
	if err != nil {
		t.Fatal(err)
	}
	if alpha.cache != srv.cache || beta.cache != srv.cache {
		t.Fatal("a project's Server has a trace cache of its own: memory grows with every project opened")
	}
	load := func(ps *Server, project string) cachedTrace {
		t.Helper()
		c, err := ps.loadTrace(store.WithProject(context.Background(), project), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range c.spans {
			if !strings.HasPrefix(sp.Name, project+"-") {
				t.Fatalf("project %s was served span %q", project, sp.Name)
			}
		}
		return c
	}
	load(alpha, "alpha")
	load(alpha, "alpha")
	load(beta, "beta")
	if n := reader.readsOf(id); n != 2 {
		t.Errorf("two projects reading one trace id, one of them twice: %d store reads, want 2 (one per project)", n)
	}
	if _, n := srv.cache.stats(); n != 2 {
		t.Errorf("the shared cache holds %d entries, want 2 (one per project)", n)
	}
}
