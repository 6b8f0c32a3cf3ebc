package sqlite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"
)

// Retention (issue 21): a project's traces older than its retention period
// are deleted whole — the summary, every span, billed calls and search
// terms, and the payload and span blocks no remaining trace uses — and the
// freed pages are handed back to the file system with an incremental vacuum.
// A trace's age is counted from its start (traces.start_ns), so a trace is
// never cut in half: it is kept or deleted as a unit.

// Retention never blocks ingest (issue 36: the first pass over a large
// store deleted 69,237 traces in 24 min 23 s, and ingest requests waited a
// median 10.6 s meanwhile, 34 of 400 offered spans a second getting in).
// Each chunk of traces is one short transaction under the write lock, and
// every statement in it is an index lookup bounded by the chunk: the
// chunk is the next expired traces in seq order (a range of seqs), so the
// search terms, whose key leads with the search key rather than the seq,
// are deleted by a range scan per key, not a scan of the whole table per
// chunk; payload and span blocks are freed after the last chunk, by one
// read of the spans table and of trace_blocks outside the lock (a block
// holds spans of one batch, possibly of several traces, and only a
// deleted trace could have been its last user: new spans always get new
// blocks). The trace tags and search blooms have no rows per trace to
// delete (a chunk's blooms go when its traces are all gone). The chunk
// grows or shrinks to take about chunkTarget, and the pass pauses half as
// long as each chunk took before the next, so ingest waits at most one
// chunk and gets at least a third of the time. Space goes back to the file
// system in steps of incremental vacuum, each its own short hold.
const (
	chunkTarget  = 50 * time.Millisecond
	chunkMin     = 4
	chunkMax     = 1024
	chunkInitial = 64
	// vacuumStep is how many pages one step of incremental vacuum frees.
	vacuumStep = 512
	// blocksPerDelete is how many payload blocks one transaction frees
	// (each ~10–30 KB of pages to the free list).
	blocksPerDelete = 100
	// fullVacuumMaxBytes: a file from before incremental auto-vacuum is
	// converted with one full VACUUM only when it is at most this large
	// (a VACUUM holds the write lock for its whole run, ~1 s at this
	// size); a larger one keeps its free pages for reuse (see reclaim).
	fullVacuumMaxBytes = 16 << 20
)

// DeleteResult is what one deletion pass did.
type DeleteResult struct {
	Traces       int64 // traces deleted
	Spans        int64 // spans deleted
	Blocks       int64 // payload blocks freed
	PagesFreed   int64 // pages the vacuum returned to the file system
	VacuumedFull bool  // the pass ran a full VACUUM (converting the file to incremental auto-vacuum)
	Chunks       int64 // transactions that deleted traces
	// LongestHold is the longest the pass held the write lock at once,
	// and LongestHoldStep the step that did ("chunk", "free blocks",
	// "vacuum", "checkpoint").
	LongestHold     time.Duration
	LongestHoldStep string
}

// DeleteTracesBefore deletes every trace of project (store.Span.Project:
// "" is the default project) that started before cutoff, then reclaims the
// space. It writes under the store's write lock in short transactions,
// yielding it between them (see chunkTarget): ingest goes on meanwhile.
func (s *Store) DeleteTracesBefore(ctx context.Context, project string, cutoff time.Time) (DeleteResult, error) {
	var res DeleteResult
	if err := s.checkWritable(ctx); err != nil {
		return res, err
	}
	p := &deletePass{s: s, project: project, cutoffNS: cutoff.UnixNano(), chunk: chunkInitial, blocks: map[int64]struct{}{}, sblocks: map[int64]struct{}{}, res: &res}
	fail := func(what string, err error) (DeleteResult, error) {
		return res, fmt.Errorf("%s of project %q before %s: %w", what, project, cutoff.UTC().Format(time.RFC3339), err)
	}
	for {
		n, err := p.deleteChunk(ctx)
		if err != nil {
			return fail("delete traces", err)
		}
		if n == 0 {
			break
		}
	}
	if err := p.freeBlocks(ctx); err != nil {
		return fail("free the payload blocks of deleted traces", err)
	}
	if res.Traces > 0 {
		if err := s.reclaim(ctx, &res); err != nil {
			return fail("reclaim space after deleting traces", err)
		}
	}
	return res, nil
}

// deletePass is one DeleteTracesBefore in progress.
type deletePass struct {
	s        *Store
	project  string
	cutoffNS int64
	after    int64              // the last seq looked at
	chunk    int                // traces per transaction, adapted to chunkTarget
	blocks   map[int64]struct{} // payload blocks the deleted spans used
	sblocks  map[int64]struct{} // span blocks the deleted compact traces used
	res      *DeleteResult
}

// hold runs f (step names it) under the write lock, measures how long it
// held it, and then pauses half as long (ctx permitting) so that ingest
// gets its turn.
func (p *deletePass) hold(ctx context.Context, step string, f func() error) (time.Duration, error) {
	p.s.writeMu.Lock()
	began := time.Now()
	err := p.s.usable()
	if err == nil {
		err = f()
	}
	took := time.Since(began)
	p.s.writeMu.Unlock()
	if took > p.res.LongestHold {
		p.res.LongestHold, p.res.LongestHoldStep = took, step
	}
	if err == nil {
		t := time.NewTimer(took / 2)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	return took, err
}

// deleteChunk deletes the next chunk of expired traces (in seq order) in
// one transaction and returns how many it deleted (0: none left).
func (p *deletePass) deleteChunk(ctx context.Context) (int, error) {
	var n int
	took, err := p.hold(ctx, "chunk", func() error {
		var err error
		n, err = p.deleteChunkLocked(ctx)
		return err
	})
	if err != nil {
		return 0, err
	}
	switch {
	case took > chunkTarget && p.chunk > chunkMin:
		p.chunk = max(p.chunk/2, chunkMin)
	case took < chunkTarget/4 && p.chunk < chunkMax:
		p.chunk = min(p.chunk*2, chunkMax)
	}
	return n, nil
}

func (p *deletePass) deleteChunkLocked(ctx context.Context) (int, error) {
	s := p.s
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	// The next expired traces after the last seq looked at, by the
	// primary key (the unary + keeps SQLite from choosing the
	// (project, start_ns) index and sorting every expired trace).
	rows, err := tx.QueryContext(ctx, `SELECT seq FROM traces
		WHERE seq > ? AND +project = ? AND +start_ns < ? ORDER BY seq LIMIT ?`, p.after, p.project, p.cutoffNS, p.chunk)
	if err != nil {
		return 0, fmt.Errorf("find expired traces: %w", err)
	}
	var seqs []any
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			rows.Close()
			return 0, err
		}
		seqs = append(seqs, seq)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	lo, hi := seqs[0].(int64), seqs[len(seqs)-1].(int64)
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(seqs)), ",") + ")"
	// The payload blocks the doomed spans use, freed after the pass once
	// no remaining span uses them.
	br, err := tx.QueryContext(ctx, `SELECT DISTINCT payload_block FROM spans WHERE trace_seq IN `+in, seqs...)
	if err != nil {
		return 0, fmt.Errorf("find payload blocks: %w", err)
	}
	var blocks []int64
	for br.Next() {
		var b int64
		if err := br.Scan(&b); err != nil {
			br.Close()
			return 0, err
		}
		blocks = append(blocks, b)
	}
	br.Close()
	if err := br.Err(); err != nil {
		return 0, err
	}
	// Likewise the span blocks of the compact ones.
	sb, err := tx.QueryContext(ctx, `SELECT DISTINCT block_id FROM trace_blocks WHERE trace_seq IN `+in, seqs...)
	if err != nil {
		return 0, fmt.Errorf("find span blocks: %w", err)
	}
	var sblocks []int64
	for sb.Next() {
		var b int64
		if err := sb.Scan(&b); err != nil {
			sb.Close()
			return 0, err
		}
		sblocks = append(sblocks, b)
	}
	sb.Close()
	if err := sb.Err(); err != nil {
		return 0, err
	}
	// A compact trace's span count, which no span row holds.
	var compactSpans int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(span_count), 0) FROM traces WHERE compact AND seq IN `+in, seqs...).Scan(&compactSpans); err != nil {
		return 0, fmt.Errorf("count compact spans: %w", err)
	}
	if err := dropSessionTurns(ctx, tx, in, seqs); err != nil {
		return 0, err
	}
	var spans, traces int64
	ranged := append([]any{lo, hi}, seqs...)
	for _, st := range []struct {
		what, sql string
		args      []any
		count     *int64
	}{
		{"spans", `DELETE FROM spans WHERE trace_seq IN ` + in, seqs, &spans},
		{"billed calls", `DELETE FROM trace_calls WHERE trace_seq IN ` + in, seqs, nil},
		{"span block lists", `DELETE FROM trace_blocks WHERE trace_seq IN ` + in, seqs, nil},
		// What a view derived from a deleted trace (web's windowed rollup).
		{"derived views", `DELETE FROM trace_derived WHERE trace_seq IN ` + in, seqs, nil},
		// One range scan of the chunk's seqs per search key (the key
		// leads search_terms' primary key).
		{"search terms", `DELETE FROM search_terms WHERE key_id IN (SELECT id FROM search_keys) AND seq BETWEEN ? AND ? AND seq IN ` + in, ranged, nil},
		{"trace summaries", `DELETE FROM traces WHERE seq IN ` + in, seqs, &traces},
	} {
		r, err := tx.ExecContext(ctx, st.sql, st.args...)
		if err != nil {
			return 0, fmt.Errorf("delete %s: %w", st.what, err)
		}
		if st.count != nil {
			*st.count, _ = r.RowsAffected()
		}
	}
	if err := dropBlooms(ctx, tx); err != nil {
		return 0, fmt.Errorf("delete search blooms: %w", err)
	}
	if err := dropRanges(ctx, tx); err != nil {
		return 0, fmt.Errorf("delete search ranges: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	// A deleted trace's seq may be handed out again (new seqs are
	// max(seq)+1): no cached summary builder may outlive its trace.
	s.builders.clear()
	p.after = hi
	for _, b := range blocks {
		p.blocks[b] = struct{}{}
	}
	for _, b := range sblocks {
		p.sblocks[b] = struct{}{}
	}
	p.res.Traces += traces
	p.res.Spans += spans + compactSpans
	p.res.Chunks++
	return len(seqs), nil
}

// freeBlocks deletes the payload blocks the deleted spans used, and the
// span blocks the deleted compact traces used, that nothing uses any more.
// Which blocks are still used is read once, outside the write lock (spans
// has no index on payload_block: one would cost every span ~10 bytes and
// ingest a write; trace_blocks is a row per trace and block): no new span
// can start using an old block, so what the read finds unused stays
// unused. The deletes go in chunks of their own.
func (p *deletePass) freeBlocks(ctx context.Context) error {
	if err := p.freeUnused(ctx, p.blocks, `SELECT DISTINCT payload_block FROM spans WHERE payload_block BETWEEN ? AND ?`, "payload_blocks"); err != nil {
		return err
	}
	p.blocks = map[int64]struct{}{}
	if err := p.freeUnused(ctx, p.sblocks, `SELECT DISTINCT block_id FROM trace_blocks WHERE block_id BETWEEN ? AND ?`, "span_blocks"); err != nil {
		return err
	}
	p.sblocks = map[int64]struct{}{}
	return nil
}

// freeUnused deletes from table the blocks of set that used (a query of
// the blocks in use between two ids) does not return.
func (p *deletePass) freeUnused(ctx context.Context, set map[int64]struct{}, used, table string) error {
	if len(set) == 0 {
		return nil
	}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for b := range set {
		lo, hi = min(lo, b), max(hi, b)
	}
	rows, err := p.s.reader.QueryContext(ctx, used, lo, hi)
	if err != nil {
		return err
	}
	for rows.Next() {
		var b int64
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return err
		}
		delete(set, b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	unused := make([]any, 0, len(set))
	for b := range set {
		unused = append(unused, b)
	}
	for len(unused) > 0 {
		part := unused[:min(blocksPerDelete, len(unused))]
		unused = unused[len(part):]
		_, err := p.hold(ctx, "free blocks", func() error {
			r, err := p.s.writer.ExecContext(ctx, `DELETE FROM `+table+` WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?,", len(part)), ",")+`)`, part...)
			if err != nil {
				return err
			}
			n, _ := r.RowsAffected()
			p.res.Blocks += n
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// reclaim returns free pages to the file system: on a file in incremental
// auto-vacuum mode (every file this version creates) by incremental vacuum
// in steps of vacuumStep pages, each a short hold of the write lock; a
// file from before that mode is converted by one full VACUUM when it is
// small (fullVacuumMaxBytes), and otherwise keeps its free pages, which
// SQLite reuses for new data (the file stops growing but does not shrink;
// `sqlite3 FILE VACUUM` with serve stopped converts it).
func (s *Store) reclaim(ctx context.Context, res *DeleteResult) error {
	var mode, before, after, pageSize int64
	for q, v := range map[string]*int64{`PRAGMA auto_vacuum`: &mode, `PRAGMA page_count`: &before, `PRAGMA page_size`: &pageSize} {
		if err := s.reader.QueryRowContext(ctx, q).Scan(v); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	p := &deletePass{s: s, res: res}
	switch {
	case mode == 2:
		for {
			var free int64
			_, err := p.hold(ctx, "vacuum", func() error {
				if err := s.writer.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil || free == 0 {
					return err
				}
				_, err := s.writer.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, vacuumStep))
				return err
			})
			if err != nil {
				return fmt.Errorf("incremental vacuum: %w", err)
			}
			if free <= vacuumStep {
				break
			}
		}
	case before*pageSize <= fullVacuumMaxBytes:
		_, err := p.hold(ctx, "full vacuum", func() error {
			if _, err := s.writer.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
				return fmt.Errorf("set auto_vacuum: %w", err)
			}
			if _, err := s.writer.ExecContext(ctx, `VACUUM`); err != nil {
				return fmt.Errorf("vacuum: %w", err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		res.VacuumedFull = true
	default:
		s.log.Info("retention: the store file predates incremental auto-vacuum; its free pages are reused, but it does not shrink (stop serve and run `sqlite3 FILE VACUUM` once to convert it)",
			"path", s.cfg.Path, "bytes", before*pageSize)
	}
	// The WAL holds the moved pages until a checkpoint; truncate it so the
	// space is really back. Its size is bounded by the steps above.
	_, err := p.hold(ctx, "checkpoint", func() error {
		_, err := s.writer.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := s.reader.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&after); err != nil {
		return fmt.Errorf("read page_count: %w", err)
	}
	res.PagesFreed = before - after
	return nil
}

// RetentionPolicy is one project's retention period.
type RetentionPolicy struct {
	Project   string        // store.Span.Project ("" is the default project)
	Retention time.Duration // > 0; traces that started longer ago are deleted
}

// RetentionJob deletes expired traces on a schedule. The policies are read
// on every pass (so a changed keys file takes effect without a restart).
type RetentionJob struct {
	Store *Store
	// Policies returns the current policies; projects without one (or
	// with a zero period) keep their traces forever.
	Policies func() []RetentionPolicy
	// Interval between passes; default one hour.
	Interval time.Duration
	// Now is the clock (time.Now when nil); tests inject one.
	Now func() time.Time
	// Logger receives one line per pass that deleted something.
	Logger *slog.Logger

	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// Validate reports configuration errors.
func (j *RetentionJob) Validate() error {
	var errs []error
	if j.Store == nil {
		errs = append(errs, errors.New("retention: store is required"))
	}
	if j.Policies == nil {
		errs = append(errs, errors.New("retention: policies are required"))
	}
	if j.Interval < 0 {
		errs = append(errs, fmt.Errorf("retention: interval must not be negative (got %s)", j.Interval))
	}
	return errors.Join(errs...)
}

// RunOnce runs one pass: for each policy, deletes the project's traces that
// started before now − retention. It returns the totals.
func (j *RetentionJob) RunOnce(ctx context.Context) (DeleteResult, error) {
	now := time.Now
	if j.Now != nil {
		now = j.Now
	}
	var total DeleteResult
	var errs []error
	t := now()
	for _, p := range j.Policies() {
		if p.Retention <= 0 {
			continue
		}
		r, err := j.Store.DeleteTracesBefore(ctx, p.Project, t.Add(-p.Retention))
		total.Traces += r.Traces
		total.Spans += r.Spans
		total.Blocks += r.Blocks
		total.PagesFreed += r.PagesFreed
		total.VacuumedFull = total.VacuumedFull || r.VacuumedFull
		total.Chunks += r.Chunks
		if r.LongestHold > total.LongestHold {
			total.LongestHold, total.LongestHoldStep = r.LongestHold, r.LongestHoldStep
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// Start runs a pass now and then every Interval until Shutdown.
func (j *RetentionJob) Start(ctx context.Context) error {
	if err := j.Validate(); err != nil {
		return err
	}
	log := j.Logger
	if log == nil {
		log = slog.Default()
	}
	every := j.Interval
	if every == 0 {
		every = time.Hour
	}
	j.stop = make(chan struct{})
	ctx = context.WithoutCancel(ctx)
	j.done.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			r, err := j.RunOnce(ctx)
			if err != nil {
				log.Error("retention pass failed", "err", err)
			} else if r.Traces > 0 {
				log.Info("retention pass", "traces_deleted", r.Traces, "spans_deleted", r.Spans, "pages_freed", r.PagesFreed)
			}
			select {
			case <-j.stop:
				return
			case <-tick.C:
			}
		}
	})
	return nil
}

// Shutdown stops the schedule and waits for a running pass. Safe without
// Start and more than once.
func (j *RetentionJob) Shutdown(context.Context) error {
	j.once.Do(func() {
		if j.stop != nil {
			close(j.stop)
		}
	})
	j.done.Wait()
	return nil
}
