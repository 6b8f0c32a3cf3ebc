package clickhouse_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// A write whose trace_index insert fails stores spans that GetTrace finds
// and ListTraces does not list. If nobody retries the write, the store
// writes the held index rows before its next write; if the process goes
// away holding them, the next Start finds the traces and indexes them.
// The index table is made to fail for real: renamed away and back.
func TestTraceIndexRowsOfAFailedWriteAreRepaired(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtestStart(t)
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
	defer cancel()
	db := srv.NewDatabase(t)
	dsn := srv.DSN(db)
	s := open(t, dsn)

	// Nine traces of four spans, moved to the last hour so that Start's
	// default repair window covers them.
	spans := storetest.GenerateTraces(9, 4, 5)
	shift := time.Now().Add(-time.Hour).Sub(spans[0].StartTime)
	for i := range spans {
		spans[i].StartTime = spans[i].StartTime.Add(shift)
		spans[i].EndTime = spans[i].EndTime.Add(shift)
	}
	a, b, c := spans[:12], spans[12:24], spans[24:]
	idsOf := func(ss []store.Span) []string {
		var ids []string
		for _, sp := range ss {
			if !slices.Contains(ids, sp.TraceID) {
				ids = append(ids, sp.TraceID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	listed := func(st store.Reader) []string {
		t.Helper()
		page, err := st.ListTraces(ctx, store.TraceQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tr := range page.Traces {
			ids = append(ids, tr.TraceID)
		}
		slices.Sort(ids)
		return ids
	}
	away := func() {
		t.Helper()
		if err := execSQL(srv, "RENAME TABLE "+db+".trace_index TO "+db+".trace_index_away"); err != nil {
			t.Fatal(err)
		}
	}
	back := func() {
		t.Helper()
		if err := execSQL(srv, "RENAME TABLE "+db+".trace_index_away TO "+db+".trace_index"); err != nil {
			t.Fatal(err)
		}
	}

	// 1. Held in memory, written before the next write.
	away()
	err := s.WriteSpans(ctx, a)
	if err == nil || !strings.Contains(err.Error(), "trace index") {
		t.Fatalf("WriteSpans with the index table gone: %v, want an error naming the trace index", err)
	}
	if got, err := s.GetTrace(ctx, a[0].TraceID); err != nil || len(got) != 4 {
		t.Fatalf("GetTrace of a trace whose index insert failed: %d spans (%v), want 4: the spans insert came first", len(got), err)
	}
	back()
	if got := listed(s); len(got) != 0 {
		t.Fatalf("listed %v before any repair, want none (the write failed between its inserts)", got)
	}
	if err := s.WriteSpans(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, want := listed(s), idsOf(spans[:24]); !slices.Equal(got, want) {
		t.Fatalf("after the next write: listed %v, want %v (the held rows of the failed write and the new ones)", got, want)
	}

	// 2. Gone with the rows held: the next Start repairs.
	away()
	if err := s.WriteSpans(ctx, c); err == nil {
		t.Fatal("WriteSpans with the index table gone succeeded")
	}
	if err := s.Shutdown(ctx); err != nil { // its flush fails too: the table is still away
		t.Fatal(err)
	}
	back()
	s2 := open(t, dsn)
	defer s2.Shutdown(store.WithDefaultProject(context.Background()))
	if got, want := listed(s2), idsOf(spans); !slices.Equal(got, want) {
		t.Fatalf("after a restart: listed %v, want %v", got, want)
	}
	if n, err := s2.RepairTraceIndex(ctx, time.Now().Add(-2*time.Hour)); err != nil || n != 0 {
		t.Errorf("RepairTraceIndex on a repaired store: %d traces (%v), want 0", n, err)
	}
}
