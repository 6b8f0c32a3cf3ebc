package clickhouse_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// One write of more traces than a query's text can name (ClickHouse's
// max_query_size is 256 KiB, ~7,000 quoted trace ids) keeps every trace's
// summary, the first time and again when a store with a cold cache adds a
// span to each: the summary look-ups go in chunks. The spool feeder writes
// such batches after an outage (issue 36's hung-ClickHouse row: 1,309
// records of many traces failed "Max query size exceeded" on every retry,
// and the spool never drained).
func TestSummariesOfOneWriteOfManyTraces(t *testing.T) {
	testtier.Slow(t)
	testtier.NoRace(t, "TestFourConcurrentWritersStoreEverySpanOnce") // single-goroutine: one large write, then one per trace from a cold cache
	t.Parallel()                                                      // a database of its own on the shared server
	srv := chtest.Start(t)
	db := srv.NewDatabase(t)
	ctx := store.WithDefaultProject(context.Background())
	const traces = 9000
	first := storetest.GenerateTraces(traces, 1, 36)
	s := open(t, srv.DSN(db))
	if err := s.WriteSpans(ctx, first); err != nil {
		t.Fatalf("write %d traces at once: %v", traces, err)
	}
	s.Shutdown(ctx)
	summaries := func() uint64 { return srv.QueryUint(t, "SELECT count() FROM "+db+".traces FINAL") }
	if got := summaries(); got != traces {
		t.Fatalf("%d trace summaries after one write of %d traces, want %d", got, traces, traces)
	}

	// A second span in each trace, from a store whose cache is cold: every
	// trace is known, so every state is re-read from the stored spans.
	second := make([]store.Span, len(first))
	for i, sp := range first {
		sp.SpanID = fmt.Sprintf("%016x", 1<<60+i)
		sp.ParentSpanID = first[i].SpanID
		second[i] = sp
	}
	s = open(t, srv.DSN(db))
	defer s.Shutdown(ctx)
	if err := s.WriteSpans(ctx, second); err != nil {
		t.Fatalf("write a second span to each of %d traces at once: %v", traces, err)
	}
	if got := summaries(); got != traces {
		t.Errorf("%d trace summaries after the second write, want %d", got, traces)
	}
	if n := srv.QueryUint(t, "SELECT countIf(span_count != 2) FROM "+db+".traces FINAL"); n != 0 {
		t.Errorf("%d trace summaries do not count both spans", n)
	}
}
