package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

func TestProjectIsolation(t *testing.T) {
	storetest.RunProjects(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			s, _ := openTemp(t)
			return s
		},
	})
}

// fileBytes is the store's size on disk: the database and its WAL.
func fileBytes(t *testing.T, path string) int64 {
	t.Helper()
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

// TestRetentionDeletesWholeExpiredTracesOfTheProjectAndReclaimsSpace drives
// the retention job with an injected clock: project "short" keeps 7 days,
// "forever" has no period. Old and new traces of both are written; at
// day 8 exactly short's old traces go, whole (GetTrace, list, resolve and
// sessions no longer find them; none of their spans, tags, calls, search
// terms or payload blocks remain), the others stay byte for byte, the file
// shrinks, and writing afterwards still works.
func TestRetentionDeletesWholeExpiredTracesOfTheProjectAndReclaimsSpace(t *testing.T) {
	// Serial writes and reads (40, 22, 21 and 41 s under -race in make
	// test): the race detector finds nothing here TestConformance does not.
	testtier.NoRace(t, "TestConformance")
	testtier.Slow(t)
	t.Parallel() // a file of its own; CPU in SQLite (writes, the delete, VACUUM)
	ctx := context.Background()
	// make test stores half as many traces of each kind as the long tier
	// (100 expired and 10 of each kept kind, against 200 and 20): the same
	// proportions, so the same share of the file is reclaimed.
	nOld, nKept := testtier.Pick(100, 200), testtier.Pick(10, 20)
	s, path := openTemp(t)
	day0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gen := func(project string, n int, seed int64, start time.Time) []store.Span {
		spans := storetest.GenerateTraces(n, 40, seed)
		// Shift the traces to start at start, keeping their shape.
		first := spans[0].StartTime
		for i := range spans {
			spans[i].Project = project
			d := spans[i].StartTime.Sub(first)
			dur := spans[i].EndTime.Sub(spans[i].StartTime)
			spans[i].StartTime = start.Add(d)
			spans[i].EndTime = spans[i].StartTime.Add(dur)
		}
		return spans
	}
	oldShort := gen("short", nOld, 1, day0)
	newShort := gen("short", nKept, 2, day0.Add(6*24*time.Hour))
	oldForever := gen("forever", nKept, 3, day0)
	oldDefault := gen("", nKept, 4, day0)
	for _, b := range [][]store.Span{oldShort, newShort, oldForever, oldDefault} {
		for i := 0; i < len(b); i += 500 {
			if err := s.WriteSpans(ctx, b[i:min(i+500, len(b))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.writer.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	before := fileBytes(t, path)

	now := day0.Add(8 * 24 * time.Hour)
	job := &RetentionJob{Store: s, Now: func() time.Time { return now },
		Policies: func() []RetentionPolicy {
			return []RetentionPolicy{{Project: "short", Retention: 7 * 24 * time.Hour}, {Project: "forever"}}
		}}
	res, err := job.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Traces != int64(nOld) || res.Spans != int64(len(oldShort)) {
		t.Errorf("deleted %d traces, %d spans; want %d, %d", res.Traces, res.Spans, nOld, len(oldShort))
	}
	after := fileBytes(t, path)
	t.Logf("store %d → %d bytes; %d pages freed, %d payload blocks", before, after, res.PagesFreed, res.Blocks)
	if res.PagesFreed <= 0 || after >= before*3/4 {
		t.Errorf("space not reclaimed: %d → %d bytes (%d pages freed)", before, after, res.PagesFreed)
	}

	short := store.WithProject(ctx, "short")
	for _, id := range traceIDs(oldShort) {
		if _, err := s.GetTrace(short, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired trace %s: GetTrace err = %v, want ErrNotFound", id, err)
		}
		if _, err := s.ResolveTraceID(short, id[:10]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired trace %s: ResolveTraceID err = %v, want ErrNotFound", id, err)
		}
	}
	for _, c := range []struct {
		ctx   context.Context
		spans []store.Span
	}{{short, newShort}, {store.WithProject(ctx, "forever"), oldForever}, {ctx, oldDefault}} {
		page, err := s.ListTraces(c.ctx, store.TraceQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tr := range page.Traces {
			got = append(got, tr.TraceID)
		}
		slices.Sort(got)
		if want := traceIDs(c.spans); !slices.Equal(got, want) {
			t.Errorf("project %q lists %d traces, want %d", store.ProjectOf(c.ctx), len(got), len(want))
		}
		for _, id := range traceIDs(c.spans) {
			sp, err := s.GetTrace(c.ctx, id)
			if err != nil || len(sp) != 40 {
				t.Fatalf("kept trace %s of %q: %d spans, %v", id, store.ProjectOf(c.ctx), len(sp), err)
			}
		}
	}
	// Nothing of the deleted traces is left behind.
	for _, q := range []string{
		`SELECT count(*) FROM spans WHERE trace_seq NOT IN (SELECT seq FROM traces)`,
		`SELECT count(*) FROM trace_blocks WHERE trace_seq NOT IN (SELECT seq FROM traces)`,
		`SELECT count(*) FROM span_blocks WHERE id NOT IN (SELECT block_id FROM trace_blocks)`,
		`SELECT count(*) FROM trace_calls WHERE trace_seq NOT IN (SELECT seq FROM traces)`,
		`SELECT count(*) FROM search_terms WHERE seq NOT IN (SELECT seq FROM traces)`,
		`SELECT count(*) FROM payload_blocks WHERE id NOT IN (SELECT payload_block FROM spans)`,
	} {
		var n int
		if err := s.reader.QueryRowContext(ctx, q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s = %d, %v; want 0", q, n, err)
		}
	}
	// A second pass at the same time deletes nothing; writing still works,
	// including a trace written again after it expired (a new trace now).
	if res, err := job.RunOnce(ctx); err != nil || res.Traces != 0 {
		t.Errorf("second pass: %+v, %v", res, err)
	}
	again := gen("short", 1, 9, now)
	if err := s.WriteSpans(ctx, again); err != nil {
		t.Fatal(err)
	}
	if sp, err := s.GetTrace(short, again[0].TraceID); err != nil || len(sp) != 40 {
		t.Fatalf("write after retention: %d spans, %v", len(sp), err)
	}
}

func TestRetentionConvertsAnOldFileWithOneFullVacuum(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "traces.db")
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	// Make the file look like one created before auto-vacuum.
	if _, err := s.writer.ExecContext(ctx, `PRAGMA auto_vacuum = NONE`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.ExecContext(ctx, `VACUUM`); err != nil {
		t.Fatal(err)
	}
	spans := storetest.GenerateTraces(30, 20, 7)
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	res, err := s.DeleteTracesBefore(ctx, "", spans[0].StartTime.Add(1000*time.Hour))
	if err != nil || res.Traces != 30 || !res.VacuumedFull {
		t.Fatalf("first deletion: %+v, %v; want 30 traces and a full vacuum", res, err)
	}
	var mode int
	if err := s.writer.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil || mode != 2 {
		t.Fatalf("auto_vacuum = %d, %v; want 2 (incremental)", mode, err)
	}
}

func traceIDs(spans []store.Span) []string {
	var ids []string
	for _, sp := range spans {
		if !slices.Contains(ids, sp.TraceID) {
			ids = append(ids, sp.TraceID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestRetentionDuringIngestKeepsEveryNewSpanAndLeavesNothingBehind: a pass
// over expired traces runs in many short transactions while a writer keeps
// writing new traces (and, now and then, a late span of an expired trace,
// which the pass may or may not catch): every new trace is whole after the
// pass, no expired trace is left, and no row of a deleted trace remains in
// any table. The pass held the write lock in chunks, never for its whole
// length.
func TestRetentionDuringIngestKeepsEveryNewSpanAndLeavesNothingBehind(t *testing.T) {
	testtier.Slow(t)
	ctx := store.WithDefaultProject(context.Background())
	s, _ := openTemp(t)
	now := time.Now()
	batches := testtier.Pick(2, 6) // of 300 traces: a few seconds here, ten times that under -race
	if testtier.Race() {
		// One batch is still several chunks (chunkInitial is 64 traces)
		// with the writer between them: what the detector needs to see.
		batches = 1
	}
	for i := range batches {
		if err := s.WriteSpans(ctx, shifted(storetest.GenerateTraces(300, 10, int64(i)), now.Add(-30*24*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var fresh []store.Span
	writerErr := make(chan error, 1)
	go func() {
		var err error
		defer func() { writerErr <- err }()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			batch := shifted(storetest.GenerateTraces(3, 10, int64(1000+i)), now.Add(-time.Minute))
			if err = s.WriteSpans(ctx, batch); err != nil {
				return
			}
			fresh = append(fresh, batch...)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	job := &RetentionJob{Store: s, Now: func() time.Time { return now },
		Policies: func() []RetentionPolicy { return []RetentionPolicy{{Retention: 24 * time.Hour}} }}
	res, err := job.RunOnce(ctx)
	close(done)
	if werr := <-writerErr; werr != nil {
		t.Fatalf("write during the pass: %v", werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted %d traces in %d chunks, the write lock held at most %s at once; %d new spans written meanwhile",
		res.Traces, res.Chunks, res.LongestHold, len(fresh))
	if res.Traces != int64(300*batches) || res.Spans != int64(3000*batches) || res.Chunks < 3 {
		t.Errorf("deleted %d traces, %d spans in %d chunks; want %d, %d, in several chunks", res.Traces, res.Spans, res.Chunks, 300*batches, 3000*batches)
	}
	for i := 0; i < len(fresh); i += 10 {
		got, err := s.GetTrace(ctx, fresh[i].TraceID)
		if err != nil || len(got) != 10 {
			t.Fatalf("a trace written during the pass: %d spans, %v; want 10", len(got), err)
		}
	}
	for _, q := range []string{
		`SELECT count(*) FROM traces WHERE start_ns < ` + fmt.Sprint(now.Add(-24*time.Hour).UnixNano()),
		`SELECT count(*) FROM spans WHERE trace_seq NOT IN (SELECT seq FROM traces)`,
		`SELECT count(*) FROM trace_blocks WHERE trace_seq NOT IN (SELECT seq FROM traces)`,
		`SELECT count(*) FROM span_blocks WHERE id NOT IN (SELECT block_id FROM trace_blocks)`,
		`SELECT count(*) FROM trace_calls WHERE trace_seq NOT IN (SELECT seq FROM traces)`,
		`SELECT count(*) FROM search_terms WHERE seq NOT IN (SELECT seq FROM traces)`,
		`SELECT count(*) FROM payload_blocks WHERE id NOT IN (SELECT payload_block FROM spans)`,
		`SELECT count(*) FROM spans WHERE payload_block NOT IN (SELECT id FROM payload_blocks)`,
	} {
		var n int
		if err := s.reader.QueryRowContext(ctx, q).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s = %d, %v; want 0", q, n, err)
		}
	}
}
