package sqlite

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

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
				got.Fragments != want.Fragments || len(got.Calls) != len(want.Calls) || got.RootName != want.RootName {
				t.Fatalf("after %d spans: summary %+v, want %+v", at, got, want)
			}
		}
	}
}
