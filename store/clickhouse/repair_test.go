package clickhouse_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// A write whose trace_index insert fails stores spans (and summaries, which
// the lists read) that ResolveTraceID, which reads the index, cannot find.
// If nobody retries the write, the store writes the held index rows before
// its next write; if the process goes away holding them, the next Start
// finds the traces and indexes them. The index table is made to fail for
// real: renamed away and back.
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
	if got, want := listed(s), idsOf(a); !slices.Equal(got, want) {
		t.Fatalf("listed %v before any repair, want %v (the summaries were written before the index failed)", got, want)
	}
	if _, err := s.ResolveTraceID(ctx, a[0].TraceID[:12]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ResolveTraceID of a trace without its index row: %v, want ErrNotFound", err)
	}
	if err := s.WriteSpans(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, want := listed(s), idsOf(spans[:24]); !slices.Equal(got, want) {
		t.Fatalf("after the next write: listed %v, want %v", got, want)
	}
	if id, err := s.ResolveTraceID(ctx, a[0].TraceID[:12]); err != nil || id != a[0].TraceID {
		t.Fatalf("ResolveTraceID after the next write: %q, %v; want %s (the held index rows written)", id, err, a[0].TraceID)
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

// The same for the summaries the lists read: a write whose insert into the
// traces table fails leaves the traces unlisted; the next write writes
// their summaries too, and a Start after a process that went away holding
// them summarises the traces that have none from their spans.
func TestTraceSummariesOfAFailedWriteAreRepaired(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtestStart(t)
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
	defer cancel()
	db := srv.NewDatabase(t)
	dsn := srv.DSN(db)
	s := open(t, dsn)
	spans := storetest.GenerateTraces(9, 4, 6)
	shift := time.Now().Add(-time.Hour).Sub(spans[0].StartTime)
	for i := range spans {
		spans[i].StartTime = spans[i].StartTime.Add(shift)
		spans[i].EndTime = spans[i].EndTime.Add(shift)
	}
	a, b, c := spans[:12], spans[12:24], spans[24:]
	summaries := func(st store.Reader) map[string]store.TraceSummary {
		t.Helper()
		page, err := st.ListTraces(ctx, store.TraceQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.TraceSummary{}
		for _, tr := range page.Traces {
			out[tr.TraceID] = tr
		}
		return out
	}
	check := func(st store.Reader, written []store.Span, when string) {
		t.Helper()
		got := summaries(st)
		byTrace := map[string][]store.Span{}
		for _, sp := range written {
			byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
		}
		if len(got) != len(byTrace) {
			t.Fatalf("%s: listed %d traces, want %d", when, len(got), len(byTrace))
		}
		for id, ss := range byTrace {
			want := store.Summarize(ss)
			want.Calls = nil
			if g := got[id]; !reflect.DeepEqual(g, want) {
				t.Fatalf("%s: trace %s listed as\n%+v\nwant\n%+v", when, id, g, want)
			}
		}
	}
	away := func() {
		t.Helper()
		if err := execSQL(srv, "RENAME TABLE "+db+".traces TO "+db+".traces_away"); err != nil {
			t.Fatal(err)
		}
	}
	back := func() {
		t.Helper()
		if err := execSQL(srv, "RENAME TABLE "+db+".traces_away TO "+db+".traces"); err != nil {
			t.Fatal(err)
		}
	}
	away()
	if err := s.WriteSpans(ctx, a); err == nil || !strings.Contains(err.Error(), "trace summaries") {
		t.Fatalf("WriteSpans with the traces table gone: %v, want an error naming the trace summaries", err)
	}
	back()
	if got := summaries(s); len(got) != 0 {
		t.Fatalf("listed %d traces before any repair, want none", len(got))
	}
	if err := s.WriteSpans(ctx, b); err != nil {
		t.Fatal(err)
	}
	check(s, spans[:24], "after the next write")

	away()
	if err := s.WriteSpans(ctx, c); err == nil {
		t.Fatal("WriteSpans with the traces table gone succeeded")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	back()
	s2 := open(t, dsn)
	defer s2.Shutdown(store.WithDefaultProject(context.Background()))
	check(s2, spans, "after a restart")
}
