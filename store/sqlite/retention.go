package sqlite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Retention (issue 21): a project's traces older than its retention period
// are deleted whole — the summary, every span, the tags, billed calls and
// search terms, and the payload blocks no remaining span uses — and the
// freed pages are handed back to the file system with an incremental vacuum.
// A trace's age is counted from its start (traces.start_ns), so a trace is
// never cut in half: it is kept or deleted as a unit.

// deleteChunk is how many traces one transaction deletes: the write lock is
// held per chunk, so ingest waits at most one chunk.
const deleteChunk = 256

// DeleteResult is what one deletion pass did.
type DeleteResult struct {
	Traces       int64 // traces deleted
	Spans        int64 // spans deleted
	Blocks       int64 // payload blocks freed
	PagesFreed   int64 // pages the vacuum returned to the file system
	VacuumedFull bool  // the pass ran a full VACUUM (converting the file to incremental auto-vacuum)
}

// DeleteTracesBefore deletes every trace of project (store.Span.Project:
// "" is the default project) that started before cutoff, then reclaims the
// space. It writes under the store's write lock, one chunk of traces per
// transaction.
func (s *Store) DeleteTracesBefore(ctx context.Context, project string, cutoff time.Time) (DeleteResult, error) {
	var res DeleteResult
	if err := s.checkWritable(ctx); err != nil {
		return res, err
	}
	for {
		n, err := s.deleteChunk(ctx, project, cutoff.UnixNano(), &res)
		if err != nil {
			return res, fmt.Errorf("delete traces of project %q before %s: %w", project, cutoff.UTC().Format(time.RFC3339), err)
		}
		if n < deleteChunk {
			break
		}
	}
	if res.Traces > 0 {
		if err := s.reclaim(ctx, &res); err != nil {
			return res, fmt.Errorf("reclaim space after deleting traces of project %q: %w", project, err)
		}
	}
	return res, nil
}

func (s *Store) deleteChunk(ctx context.Context, project string, cutoffNS int64, res *DeleteResult) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT seq FROM traces WHERE project = ? AND start_ns < ? ORDER BY start_ns LIMIT ?`, project, cutoffNS, deleteChunk)
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
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(seqs)), ",") + ")"
	// The payload blocks the doomed spans use; freed below once no
	// remaining span uses them (a block holds spans of one batch, which
	// may span several traces).
	var blocks []any
	br, err := tx.QueryContext(ctx, `SELECT DISTINCT payload_block FROM spans WHERE trace_seq IN `+in, seqs...)
	if err != nil {
		return 0, fmt.Errorf("find payload blocks: %w", err)
	}
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
	if err := dropSessionTurns(ctx, tx, in, seqs); err != nil {
		return 0, err
	}

	for _, st := range []struct {
		what, sql string
		count     *int64
	}{
		{"spans", `DELETE FROM spans WHERE trace_seq IN ` + in, &res.Spans},
		{"trace tags", `DELETE FROM trace_tags WHERE seq IN ` + in, nil},
		{"billed calls", `DELETE FROM trace_calls WHERE trace_seq IN ` + in, nil},
		{"search terms", `DELETE FROM search_terms WHERE seq IN ` + in, nil},
		{"trace summaries", `DELETE FROM traces WHERE seq IN ` + in, &res.Traces},
	} {
		r, err := tx.ExecContext(ctx, st.sql, seqs...)
		if err != nil {
			return 0, fmt.Errorf("delete %s: %w", st.what, err)
		}
		if st.count != nil {
			n, _ := r.RowsAffected()
			*st.count += n
		}
	}
	if err := dropBlooms(ctx, tx); err != nil {
		return 0, fmt.Errorf("delete search blooms: %w", err)
	}
	if len(blocks) > 0 {
		bin := "(" + strings.TrimSuffix(strings.Repeat("?,", len(blocks)), ",") + ")"
		args := append(append([]any{}, blocks...), blocks...)
		r, err := tx.ExecContext(ctx, `DELETE FROM payload_blocks WHERE id IN `+bin+
			` AND id NOT IN (SELECT payload_block FROM spans WHERE payload_block IN `+bin+`)`, args...)
		if err != nil {
			return 0, fmt.Errorf("delete payload blocks: %w", err)
		}
		n, _ := r.RowsAffected()
		res.Blocks += n
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	// A deleted trace's seq may be handed out again (new seqs are
	// max(seq)+1): no cached summary builder may outlive its trace.
	s.builders.clear()
	return len(seqs), nil
}

// reclaim returns free pages to the file system: an incremental vacuum on a
// file in incremental auto-vacuum mode (every file this version creates),
// else one full VACUUM that also converts the file to that mode.
func (s *Store) reclaim(ctx context.Context, res *DeleteResult) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var mode, before, after int64
	if err := conn.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return fmt.Errorf("read auto_vacuum: %w", err)
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&before); err != nil {
		return fmt.Errorf("read page_count: %w", err)
	}
	if mode == 2 {
		if _, err := conn.ExecContext(ctx, `PRAGMA incremental_vacuum`); err != nil {
			return fmt.Errorf("incremental vacuum: %w", err)
		}
	} else {
		if _, err := conn.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
			return fmt.Errorf("set auto_vacuum: %w", err)
		}
		if _, err := conn.ExecContext(ctx, `VACUUM`); err != nil {
			return fmt.Errorf("vacuum: %w", err)
		}
		res.VacuumedFull = true
	}
	// The WAL holds the moved pages until a checkpoint; truncate it so the
	// space is really back.
	if _, err := conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&after); err != nil {
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
