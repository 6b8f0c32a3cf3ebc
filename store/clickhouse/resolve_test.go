package clickhouse_test

import (
	"context"
	"errors"
	"testing"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestResolveTraceIDUsesTheTraceIndexPrimaryKey resolves prefixes with
// force_primary_key set, which makes ClickHouse refuse a query that would
// read a table without narrowing it by its primary key: a prefix must be
// looked up in trace_index's ordering key, not by scanning every trace.
func TestResolveTraceIDUsesTheTraceIndexPrimaryKey(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	s, _ := openFresh(t, chtestStart(t))
	spans := storetest.GenerateTraces(40, 3, 11)
	ctx := store.WithDefaultProject(context.Background())
	// Two batches: trace_index then holds parts to merge, as in production.
	if err := s.WriteSpans(ctx, spans[:60]); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSpans(ctx, spans[60:]); err != nil {
		t.Fatal(err)
	}
	strict := ch.Context(ctx, ch.WithSettings(ch.Settings{"force_primary_key": 1}))
	want := spans[0].TraceID
	got, err := s.ResolveTraceID(strict, want[:10])
	if err != nil || got != want {
		t.Fatalf("ResolveTraceID(%s) with force_primary_key = %q, %v; want %s", want[:10], got, err, want)
	}
	if _, err := s.ResolveTraceID(strict, "0123456789abcdef"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ResolveTraceID(unknown prefix) with force_primary_key: %v; want ErrNotFound", err)
	}
}
