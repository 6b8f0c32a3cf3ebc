package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector/spool"
	"github.com/loomwork/loomwork/store"
)

// spooler stands between the exporter and a store that can spool
// (store.SpoolingWriter, ClickHouse): a request is acknowledged once its
// spans, prepared for the store, are fsynced in the spool, and a feeder
// goroutine writes what the spool holds to the store in large inserts,
// committing its position in the spool after each one. ClickHouse wants
// tens of thousands of rows per insert; without the spool an insert carried
// only what the senders had in flight, and every acknowledgement waited for
// ClickHouse.
//
// A store outage fills the spool instead of failing requests; a full spool
// answers RESOURCE_EXHAUSTED (429) so senders back off and retry. After a
// crash the feeder replays the records after the committed position; some
// may already be stored, which the store's idempotence absorbs.
type spooler struct {
	w          store.SpoolingWriter
	wal        *spool.WAL
	log        *zap.Logger
	retryAfter time.Duration
	timeout    time.Duration // per store write

	// batchBytes is what the feeder reads for one insert; linger is how
	// long it waits for more when a read brings less than minBytes.
	batchBytes, minBytes int
	linger               time.Duration

	bufs sync.Pool // *[]byte record buffers

	cancel context.CancelFunc
	done   chan struct{}
	drain  chan struct{} // closed by shutdown: stop once the spool is empty

	mu         sync.Mutex
	lastErr    error
	lastErrAt  time.Time
	lastOK     time.Time
	storedRecs int64
	failures   int64
}

// Feeder defaults. The feeder reads up to batchBytes of records for an
// insert; a read that brings less than half of that waits up to
// spoolLinger for more. Measured on the side-by-side throughput harness
// (docs/bench-ingest.md), inserts of ~100k spans instead of ~30k cost
// ClickHouse ~40% less CPU per span; a second's wait is what a span's
// visibility pays for it.
const (
	spoolLinger     = time.Second
	spoolBackoffMax = 5 * time.Second
)

func newSpooler(w store.SpoolingWriter, wal *spool.WAL, log *zap.Logger, retryAfter, timeout time.Duration, batchBytes int) *spooler {
	return &spooler{
		w: w, wal: wal, log: log, retryAfter: retryAfter, timeout: timeout,
		batchBytes: batchBytes, minBytes: batchBytes / 2, linger: spoolLinger,
		done: make(chan struct{}), drain: make(chan struct{}),
	}
}

func (s *spooler) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.feed(ctx)
}

// write prepares spans for the store, appends them to the spool and
// returns once they are fsynced there.
func (s *spooler) write(ctx context.Context, spans []store.Span) error {
	b, err := s.w.Prepare(spans)
	if err != nil {
		return newRetryable(codes.Unavailable, fmt.Errorf("prepare %d spans: %w", len(spans), err), s.retryAfter)
	}
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	rec, err := s.w.AppendBatch((*bp)[:0], b)
	if err != nil {
		return newRetryable(codes.Unavailable, fmt.Errorf("encode %d spans for the spool: %w", len(spans), err), s.retryAfter)
	}
	err = s.wal.Append(ctx, rec)
	*bp = rec[:0]
	s.bufs.Put(bp)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, spool.ErrTooLarge):
		// Retrying cannot help: this request alone is larger than the
		// spool may hold.
		return &statusError{err: err, st: status.Newf(codes.InvalidArgument,
			"spool %d spans: the request encodes to %d bytes, more than the spool holds (spool_max_mib); send smaller batches: %v", len(spans), len(rec), err)}
	case errors.Is(err, spool.ErrFull), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, io.ErrShortWrite):
		// A full disk shows as ENOSPC, or as a short write (the kernel
		// writes what fits and reports the count): the same as a full spool.
		st := s.wal.Stats()
		return newRetryable(codes.ResourceExhausted,
			fmt.Errorf("spool %d spans: the spool holds %d of %d bytes (or its disk is full) while the store catches up: %w", len(spans), st.Bytes, st.MaxBytes, err), s.retryAfter)
	}
	return newRetryable(codes.Unavailable, fmt.Errorf("spool %d spans: %w", len(spans), err), s.retryAfter)
}

// feed moves records from the spool to the store until cancelled, or,
// after shutdown asked it to drain, until the spool is empty.
func (s *spooler) feed(ctx context.Context) {
	defer close(s.done)
	// Owned copies of the records of one insert, sized once: a read brings
	// at most batchBytes plus one record.
	buf := make([]byte, 0, s.batchBytes+s.batchBytes/4)
	var ends []int // where each record ends in buf
	commitFailing := false
	for {
		recs, err := s.wal.TryRead(s.batchBytes)
		if err == nil && len(recs) == 0 {
			select {
			case <-s.drain:
				return
			default:
			}
			// Nothing new: wait for a record, but wake up to drain.
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			recs, err = s.wal.Read(wctx, s.batchBytes)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil && errors.Is(err, context.DeadlineExceeded) {
				continue
			}
		}
		if err != nil {
			s.fail(err, "read the spool")
			if !sleepCtx(ctx, time.Second) {
				return
			}
			continue
		}
		// Copy: a record's bytes are valid until the next read, and an
		// insert that fails is retried from them.
		buf, ends = buf[:0], ends[:0]
		var end spool.Position
		take := func(rs []spool.Record) {
			for _, r := range rs {
				buf = append(buf, r.Data...)
				ends = append(ends, len(buf))
				end = r.End
			}
		}
		take(recs)
		// A small read waits a moment for more: ClickHouse prefers few
		// large inserts to many small ones.
		deadline := time.Now().Add(s.linger)
		for len(buf) < s.minBytes && time.Now().Before(deadline) {
			if !sleepCtx(ctx, 10*time.Millisecond) {
				return
			}
			if more, err := s.wal.TryRead(s.batchBytes - len(buf)); err == nil {
				take(more)
			}
		}
		if !s.store(ctx, buf, ends) {
			return
		}
		if err := s.wal.Commit(end); err != nil {
			// The records are stored; committing later (or replaying them
			// after a restart) is harmless. A full disk defers the
			// checkpoint (spool.ErrCheckpointDeferred) but still frees
			// what it can.
			if !commitFailing {
				s.log.Warn("spool feeder: commit the spool position failed; the records are stored, the spool retries at the next commit", zap.Error(err))
			}
			commitFailing = true
			s.fail(err, "commit the spool position")
		} else if commitFailing {
			commitFailing = false
			st := s.wal.Stats()
			s.log.Info("spool feeder: the spool position is committed again", zap.Int64("bytes", st.Bytes), zap.Bool("disk_full", st.DiskFull))
		}
	}
}

// splitAfter is how many times the feeder offers a batch of several
// records whole to a store that answers and refuses it, before it stores
// the batch in halves.
const splitAfter = 3

// store writes the records buf holds (each ending at an offset in ends) in
// one insert, retrying with backoff until it succeeds; false when ctx ended
// first (the records stay in the spool). A batch the store refuses whole
// while it is reachable (an error not wrapping store.ErrUnavailable; issue
// 36 found one, a query over the server's size limit) is stored in halves
// after splitAfter attempts, each half the same way: such an error never
// wedges the spool, and an outage still ends in one large insert.
func (s *spooler) store(ctx context.Context, buf []byte, ends []int) bool {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.storeOnce(ctx, buf, ends)
		if err == nil {
			s.mu.Lock()
			s.lastOK = time.Now()
			s.storedRecs += int64(len(ends))
			s.mu.Unlock()
			if attempt > 1 {
				s.log.Info("spool feeder: stored again after failed attempts", zap.Int("attempts", attempt), zap.Int("records", len(ends)), zap.Int("bytes", len(buf)))
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		s.fail(err, "store spooled spans")
		if attempt >= splitAfter && len(ends) > 1 && !errors.Is(err, store.ErrUnavailable) {
			mid := len(ends) / 2
			cut := ends[mid-1]
			rest := make([]int, len(ends)-mid)
			for i, e := range ends[mid:] {
				rest[i] = e - cut
			}
			s.log.Warn("spool feeder: the store refuses this batch whole; storing it in halves", zap.Int("records", len(ends)), zap.Int("attempts", attempt))
			return s.store(ctx, buf[:cut], ends[:mid]) && s.store(ctx, buf[cut:], rest)
		}
		if !sleepCtx(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, spoolBackoffMax)
	}
}

func (s *spooler) storeOnce(ctx context.Context, buf []byte, ends []int) error {
	recs := make([][]byte, len(ends))
	from := 0
	for i, to := range ends {
		recs[i] = buf[from:to:to]
		from = to
	}
	wctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	began := time.Now()
	// A record that does not decode passed the spool's checksum, so it is
	// what an earlier AppendBatch wrote: a bug or a format from another
	// version. Keeping it blocks the spool; the error says so loudly.
	spans, err := s.w.WriteSpooled(wctx, recs)
	if err != nil {
		return fmt.Errorf("write %d spooled records: %w", len(recs), err)
	}
	if ce := s.log.Check(zap.DebugLevel, "stored spooled spans"); ce != nil {
		ce.Write(zap.Int("records", len(ends)), zap.Int("spans", spans), zap.Int("bytes", len(buf)), zap.Duration("took", time.Since(began)))
	}
	return nil
}

func (s *spooler) fail(err error, what string) {
	s.mu.Lock()
	first := s.lastErr == nil || s.lastOK.After(s.lastErrAt)
	s.lastErr, s.lastErrAt = err, time.Now()
	s.failures++
	s.mu.Unlock()
	// Once per outage at warn; every retry at debug.
	if first {
		s.log.Warn("spool feeder: "+what+" failed; retrying, acknowledged data stays in the spool", zap.Error(err))
	} else if ce := s.log.Check(zap.DebugLevel, "spool feeder: retry failed"); ce != nil {
		ce.Write(zap.String("what", what), zap.Error(err))
	}
}

// shutdown lets the feeder empty the spool until ctx ends, then stops it
// and closes the spool. What is not stored by then stays in the spool for
// the next start.
func (s *spooler) shutdown(ctx context.Context) error {
	close(s.drain)
	var errs []error
	select {
	case <-s.done:
	case <-ctx.Done():
		s.cancel()
		<-s.done
		st := s.wal.Stats()
		s.log.Info("spool not drained before shutdown; the rest is stored at the next start",
			zap.Int64("records", st.Pending), zap.Int64("bytes", st.Bytes))
	}
	s.cancel()
	if err := s.wal.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close spool: %w", err))
	}
	return errors.Join(errs...)
}

// SpoolHealth is the spool's part of a health report.
type SpoolHealth struct {
	Dir      string  `json:"dir"`
	Bytes    int64   `json:"bytes"`
	MaxBytes int64   `json:"max_bytes"`
	Fill     float64 `json:"fill"`
	// Pending counts records acknowledged and not yet stored.
	Pending int64 `json:"pending_records"`
	// Stored counts records stored since start; Failures failed store
	// attempts (each retried).
	Stored   int64 `json:"stored_records"`
	Failures int64 `json:"failed_writes"`
	// LastError is the feeder's last failure when no write succeeded since.
	LastError string `json:"last_error,omitempty"`
	// DiskFull: the spool's disk refused the last record for lack of
	// space and still has too little (requests are refused until the
	// feeder frees its segments or something else frees space);
	// DiskFreeBytes is the room left there (-1: unknown).
	DiskFull      bool  `json:"disk_full"`
	DiskFreeBytes int64 `json:"disk_free_bytes"`
	// Error is what stopped the spool for good (a failed fsync): only a
	// restart clears it.
	Error string `json:"error,omitempty"`
}

func (s *spooler) health(dir string) SpoolHealth {
	st := s.wal.Stats()
	h := SpoolHealth{Dir: dir, Bytes: st.Bytes, MaxBytes: st.MaxBytes, Pending: st.Pending, DiskFull: st.DiskFull, DiskFreeBytes: st.DiskFreeBytes}
	if st.Err != nil {
		h.Error = st.Err.Error()
	}
	if st.MaxBytes > 0 {
		h.Fill = float64(st.Bytes) / float64(st.MaxBytes)
	}
	s.mu.Lock()
	h.Stored, h.Failures = s.storedRecs, s.failures
	if s.lastErr != nil && !s.lastOK.After(s.lastErrAt) {
		h.LastError = s.lastErr.Error()
	}
	s.mu.Unlock()
	return h
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
