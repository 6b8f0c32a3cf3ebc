package clickhouse_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// The collector prepares each OTLP request on its own goroutine and writes
// every request waiting at that moment with one WritePrepared. Requests
// that split a trace between them must still give that trace one summary,
// everything must arrive in one insert per table, and a request the store
// rejects must fail in PrepareSpans, naming the span, without touching the
// others.
func TestWritePreparedStoresSeveralRequestsInOneInsertAndRejectsBadOnesAlone(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, db := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())

	spans := storetest.GenerateTraces(30, 10, 21)
	// Cut at 95 and 205: traces 9 and 20 are split between requests.
	parts := [][]store.Span{spans[:95], spans[95:205], spans[205:]}
	bad := storetest.GenerateTraces(2, 10, 22)
	bad[13].SpanID = "xyz"
	if _, err := s.PrepareSpans(bad); err == nil || !strings.Contains(err.Error(), "span 13") {
		t.Fatalf("PrepareSpans of a request with an invalid span id: err = %v, want one naming span 13", err)
	}
	var prepared []*clickhouse.PreparedSpans
	for i, p := range parts {
		ps, err := s.PrepareSpans(p)
		if err != nil {
			t.Fatalf("PrepareSpans(request %d): %v", i, err)
		}
		prepared = append(prepared, ps)
	}
	if err := s.WritePrepared(ctx, prepared...); err != nil {
		t.Fatalf("WritePrepared: %v", err)
	}

	if n := queryCount(t, srv, "SELECT count() FROM system.parts WHERE active AND database = '"+db+"' AND table = 'spans'"); n != 1 {
		t.Errorf("spans has %d parts after one WritePrepared of three requests, want 1 (one insert)", n)
	}
	page, err := s.ListTraces(ctx, store.TraceQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != 30 {
		t.Fatalf("ListTraces: %d traces, want 30", len(page.Traces))
	}
	for _, ts := range page.Traces {
		if ts.SpanCount != 10 {
			t.Errorf("trace %s: %d spans in its summary, want 10", ts.TraceID, ts.SpanCount)
		}
	}
	for _, id := range []string{spans[90].TraceID, spans[200].TraceID} {
		got, err := s.GetTrace(ctx, id)
		if err != nil || len(got) != 10 {
			t.Errorf("GetTrace(%s) of a trace split between requests: %d spans, %v; want 10", id, len(got), err)
		}
	}
}
