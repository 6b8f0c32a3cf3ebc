package sqlite

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestBatchWithRepeatsAndStoredSpansStoresEachSpanOnce writes a batch that
// repeats spans within itself and overlaps spans stored by an earlier
// batch, in numbers that exercise every multi-row insert size: every span
// must be stored once and counted once in its trace's summary.
func TestBatchWithRepeatsAndStoredSpansStoresEachSpanOnce(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())

	// 3 traces of 97 spans (97 = 64 + 16 + 4 + 4 + 4 + 1 + ...: full and
	// remainder chunks), 30 traces of 5.
	spans := append(storetest.GenerateTraces(3, 97, 7), storetest.GenerateTraces(30, 5, 8)...)
	want := map[string]int64{}
	for _, sp := range spans {
		want[sp.TraceID]++
	}
	// First batch: every third span.
	var first []store.Span
	for i := 0; i < len(spans); i += 3 {
		first = append(first, spans[i])
	}
	if err := s.WriteSpans(ctx, first); err != nil {
		t.Fatalf("write first batch: %v", err)
	}
	// Second batch: everything, with the first 40 spans twice more.
	second := append(append(append([]store.Span{}, spans...), spans[:40]...), spans[:40]...)
	if err := s.WriteSpans(ctx, second); err != nil {
		t.Fatalf("write second batch: %v", err)
	}
	for id, n := range want {
		tr, err := s.GetTrace(ctx, id)
		if err != nil {
			t.Fatalf("GetTrace %s: %v", id, err)
		}
		if int64(len(tr)) != n {
			t.Errorf("trace %s: %d spans stored, want %d", id, len(tr), n)
		}
	}
	page, err := s.ListTraces(ctx, store.TraceQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != len(want) {
		t.Fatalf("ListTraces: %d traces, want %d", len(page.Traces), len(want))
	}
	for _, sm := range page.Traces {
		if sm.SpanCount != want[sm.TraceID] {
			t.Errorf("summary of trace %s: span_count %d, want %d", sm.TraceID, sm.SpanCount, want[sm.TraceID])
		}
	}
}

// Two stores (as two processes) writing one trace in turns: each one's
// cached summary builder goes stale when the other writes, and the summary
// must still be Summarize of every stored span.
func TestSummaryStaysRightWithTwoWritersOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.db")
	a, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	b, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown(context.Background())
	spans := storetest.GenerateTraces(1, 60, 3)
	// Children first: the summary changes shape as parents arrive.
	slices.Reverse(spans)
	for i, at := 0, 0; at < len(spans); i++ {
		w := a
		if i%2 == 1 {
			w = b
		}
		n := min(7, len(spans)-at)
		if err := w.WriteSpans(context.Background(), spans[at:at+n]); err != nil {
			t.Fatal(err)
		}
		at += n
		want := store.Summarize(spans[:at])
		for _, r := range []*Store{a, b} {
			page, err := r.ListTraces(context.Background(), store.TraceQuery{})
			if err != nil {
				t.Fatal(err)
			}
			got := page.Traces[0]
			if got.ModelCalls != want.ModelCalls || got.InputTokens != want.InputTokens || got.SpanCount != want.SpanCount ||
				got.Fragments != want.Fragments || !reflect.DeepEqual(got.Groups, want.Groups) || got.RootName != want.RootName {
				t.Fatalf("after %d spans: summary %+v, want %+v", at, got, want)
			}
		}
	}
}

// TestScopeDataIsStoredOncePerDistinctScope writes spans whose OTLP scope
// data repeats across batches (one shared map per scope, as the collector
// maps them, and an equal map that is another value), and spans without
// any: each distinct scope is one scopes row, spans without scope data
// refer to none, and every span reads back its own scope data.
func TestScopeDataIsStoredOncePerDistinctScope(t *testing.T) {
	testtier.Slow(t)
	testtier.NoRace(t, "TestConformance") // single-goroutine: writes, then counts rows
	t.Parallel()                          // a file of its own
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "traces.db")
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	// Generated spans: the first service's have scope attributes and both
	// schema URLs, the others the URLs only: two distinct scopes.
	spans := storetest.GenerateTraces(30, 5, 8)
	bare := storetest.GenerateTraces(2, 3, 9)
	for i := range bare {
		bare[i].ScopeAttributes, bare[i].ScopeSchemaURL, bare[i].ResourceSchemaURL = nil, "", ""
	}
	// An equal map that is another value, in a later batch.
	copied := storetest.GenerateTraces(30, 5, 10)
	for i := range copied {
		if copied[i].ScopeAttributes != nil {
			copied[i].ScopeAttributes = store.Attributes{"capture_content": false, "team": "agents"}
		}
	}
	for _, batch := range [][]store.Span{spans[:70], spans[70:], bare, copied} {
		if err := s.WriteSpans(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	var rows int
	if err := s.reader.QueryRow(`SELECT count(*) FROM scopes`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Errorf("scopes rows %d, want 2", rows)
	}
	scoped := 0
	for _, want := range append(append(spans, bare...), copied...) {
		got, err := s.GetTrace(ctx, want.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range got {
			if g.SpanID != want.SpanID {
				continue
			}
			if !reflect.DeepEqual(g.ScopeAttributes, want.ScopeAttributes) || g.ScopeSchemaURL != want.ScopeSchemaURL || g.ResourceSchemaURL != want.ResourceSchemaURL {
				t.Errorf("span %s: scope %v %q %q, want %v %q %q", want.SpanID, g.ScopeAttributes, g.ScopeSchemaURL, g.ResourceSchemaURL, want.ScopeAttributes, want.ScopeSchemaURL, want.ResourceSchemaURL)
			}
			if g.ScopeAttributes != nil {
				scoped++
			}
		}
	}
	if scoped == 0 {
		t.Fatal("no span had scope attributes; the test proves nothing")
	}
	// Each span's map is its own: changing one changes no other.
	var scopedTrace string
	for _, sp := range spans {
		if sp.ScopeAttributes != nil {
			scopedTrace = sp.TraceID
			break
		}
	}
	tr, err := s.GetTrace(ctx, scopedTrace)
	if err != nil {
		t.Fatal(err)
	}
	tr[0].ScopeAttributes["changed"] = true
	if _, ok := tr[1].ScopeAttributes["changed"]; ok {
		t.Error("spans of one trace share a scope attribute map")
	}
}

// The builder cache keeps the most recently written traces within its
// bound, and a trace bigger than the bound alone.
func TestBuilderCacheBound(t *testing.T) {
	testtier.Slow(t)
	// The cache's bound over 128k spans, one goroutine; the writes that
	// share the cache are race-checked by the conformance suite's.
	testtier.NoRace(t, "TestConformance")
	t.Parallel() // its own cache; CPU generating 128k spans under -race
	c := newBuilderCache()
	mk := func(n int) *store.SummaryBuilder {
		b := store.NewSummaryBuilder()
		b.Add(storetest.GenerateTraces(1, n, int64(n)))
		return b
	}
	c.put(1, mk(100), nil)
	c.put(2, mk(builderCacheSpans-150), nil)
	c.put(3, mk(100), nil) // evicts 1, the least recently written
	if b, _ := c.take(1); b != nil || c.spans != builderCacheSpans-50 {
		t.Fatalf("after filling: trace 1 still cached or %d spans held", c.spans)
	}
	big := mk(builderCacheSpans + 10)
	c.put(4, big, nil)
	if b, _ := c.take(4); b != big || c.lru.Len() != 0 || c.spans != 0 {
		t.Fatalf("a trace bigger than the bound: cached %v, %d others, %d spans", c.byTrace, c.lru.Len(), c.spans)
	}
}
