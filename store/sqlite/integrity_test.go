package sqlite

import (
	"context"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// EachStoredSpan passes every stored span once, whichever layout holds it:
// small traces in compact blocks (one block shared by several traces), a
// trace moved to span rows when it reached bigTraceSpans, and spans sent
// twice (stored once). The reliability suite counts acknowledged spans
// with it; it read the spans table alone, which compact traces leave
// empty, and found none of them.
func TestEachStoredSpanPassesEverySpanOnceInBothLayouts(t *testing.T) {
	ctx := store.WithDefaultProject(context.Background())
	s, _ := openTemp(t)
	small := storetest.GenerateTraces(40, 10, 7)
	big := make([]store.Span, bigTraceSpans+10)
	for i := range big {
		big[i] = small[0]
		big[i].TraceID = "dddddddddddddddddddddddddddddd01"
		big[i].SpanID = fmt.Sprintf("%016x", i+1)
		big[i].ParentSpanID = ""
		if i > 0 {
			big[i].ParentSpanID = big[0].SpanID
		}
	}
	batches := [][]store.Span{small[:200], small[150:], big[:bigTraceSpans/2], big[bigTraceSpans/2:], small[:50]}
	for i, b := range batches {
		if err := s.WriteSpans(ctx, b); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	var rows, blocks int
	if err := s.reader.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM trace_blocks)`).Scan(&rows, &blocks); err != nil {
		t.Fatal(err)
	}
	if rows != len(big) || blocks == 0 {
		t.Fatalf("%d span rows and %d trace blocks: the test wants the big trace in span rows (%d) and the rest in blocks", rows, blocks, len(big))
	}
	want := map[string]int{}
	for _, sp := range append(append([]store.Span{}, small...), big...) {
		want[sp.TraceID+"/"+sp.SpanID] = 1
	}
	got := map[string]int{}
	if err := s.EachStoredSpan(ctx, func(tid [16]byte, sid [8]byte) {
		got[hex.EncodeToString(tid[:])+"/"+hex.EncodeToString(sid[:])]++
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d distinct spans passed, want %d", len(got), len(want))
	}
	for k, n := range got {
		if n != 1 || want[k] != 1 {
			t.Errorf("span %s passed %d times (stored: %v)", k, n, want[k] == 1)
		}
	}
}
