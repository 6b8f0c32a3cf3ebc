package clickhouse_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestMigrationToTraceIndexListsWhatAFreshStoreLists writes the same spans
// (traces split across batches, some spans sent twice in different batches)
// into a database at schema version 2, which then migrates to the latest
// version, and into a fresh database through WriteSpans. Every list query
// must return the same summaries from both, and the version 2 view and
// table must be gone.
func TestMigrationToTraceIndexListsWhatAFreshStoreLists(t *testing.T) {
	srv := chtestStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	spans := storetest.GenerateTraces(60, 7, 11)
	batches := [][]store.Span{spans[:150], spans[150:300], spans[300:], spans[140:160], spans[:5]}

	oldDB := srv.NewDatabase(t)
	old, err := clickhouse.OpenAtVersion(ctx, clickhouse.Config{DSN: srv.DSN(oldDB)}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range batches {
		if err := old.InsertSpansOnly(ctx, b); err != nil {
			t.Fatalf("version 2 insert %d: %v", i, err)
		}
	}
	old.Shutdown(context.Background())
	migrated := open(t, srv.DSN(oldDB)) // applies version 3

	fresh := open(t, srv.DSN(srv.NewDatabase(t)))
	for i, b := range batches {
		if err := fresh.WriteSpans(ctx, b); err != nil {
			t.Fatalf("fresh write %d: %v", i, err)
		}
	}

	mid := spans[30*7].StartTime // the root of trace 30: traces start 20–100 ms apart
	queries := []store.TraceQuery{
		{Limit: 1000},
		{Limit: 1000, SortBy: store.SortTokens},
		{Limit: 1000, SortBy: store.SortDuration, Ascending: true},
		{Limit: 1000, Start: mid},
		{Limit: 1000, End: mid, Status: store.StatusOK},
		{Limit: 1000, Status: store.StatusError, SortBy: store.SortErrors},
		{Limit: 1000, Model: spans[1].RequestModel},
	}
	for _, q := range queries {
		want, err := fresh.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("fresh ListTraces(%+v): %v", q, err)
		}
		got, err := migrated.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("migrated ListTraces(%+v): %v", q, err)
		}
		if len(want.Traces) == 0 {
			t.Errorf("ListTraces(%+v) is empty; the query proves nothing", q)
		}
		if !reflect.DeepEqual(want.Traces, got.Traces) {
			t.Errorf("ListTraces(%+v): migrated store differs from a fresh one\nfresh:    %+v\nmigrated: %+v", q, want.Traces, got.Traces)
		}
	}
	if n := len(queryStrings(t, srv, "SELECT name FROM system.tables WHERE database = '"+oldDB+"' AND name LIKE 'trace_summaries%'")); n != 0 {
		t.Errorf("%d version 2 summary tables or views remain after the migration", n)
	}
}
