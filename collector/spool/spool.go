package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	DefaultSegmentBytes = 64 << 20
	DefaultMaxBytes     = 1 << 30
)

var (
	// ErrFull is returned (wrapped) by Append when the record would take
	// the unconsumed bytes past Options.MaxBytes. It is temporary: Append
	// succeeds again once Commit has freed enough.
	ErrFull = errors.New("spool full")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("spool closed")
	// ErrTooLarge is returned (wrapped) by Append for a record that could
	// never fit under Options.MaxBytes (or the format's 4 GiB limit). It is
	// permanent, unlike ErrFull.
	ErrTooLarge = errors.New("record too large for the spool")
)

// Options configure a WAL.
type Options struct {
	// Dir holds the segments and the checkpoint; created if missing.
	Dir string
	// SegmentBytes is the size at which a new segment is started
	// (default 64 MiB). A record never spans segments; a record larger
	// than a segment gets a segment of its own.
	SegmentBytes int64
	// MaxBytes bounds the bytes not yet consumed (after the committed
	// position, segment headers included); Append beyond it fails with
	// ErrFull. Default 1 GiB. The disk holds at most MaxBytes plus the
	// consumed part of the oldest live segment (< SegmentBytes).
	MaxBytes int64
	// Preallocate reserves SegmentBytes of disk for each new segment with
	// fallocate(FALLOC_FL_KEEP_SIZE) (the file size, and so the format, is
	// unchanged). Off by default: docs/spool.md measures it.
	Preallocate bool
	// Logger receives what Open repaired; default slog.Default().
	Logger *slog.Logger
	// Now is the clock for Stats.LastSyncDuration; default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Validate reports every invalid field (zero sizes mean the defaults).
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if o.Dir == "" {
		errs = append(errs, errors.New("dir must be specified"))
	}
	if o.SegmentBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("segment_bytes must be at least 1024 (got %d)", o.SegmentBytes))
	}
	if o.MaxBytes < o.SegmentBytes {
		errs = append(errs, fmt.Errorf("max_bytes must be at least segment_bytes %d (got %d)", o.SegmentBytes, o.MaxBytes))
	}
	return errors.Join(errs...)
}

// Position is a place in the log: a segment index and a byte offset in it.
// The End of a record is the position just after it.
type Position struct {
	Segment uint64
	Offset  int64
}

func (p Position) less(q Position) bool {
	return p.Segment < q.Segment || p.Segment == q.Segment && p.Offset < q.Offset
}

// Record is one record read back.
type Record struct {
	// Data is valid until the next Read or TryRead call.
	Data []byte
	// End is the position after the record: Commit(End) consumes it and
	// everything before it.
	End Position
}

// Stats describe the WAL at the time of the call.
type Stats struct {
	Bytes            int64 // unconsumed bytes (what MaxBytes bounds)
	DiskBytes        int64 // bytes of all live segment files
	MaxBytes         int64
	Segments         int
	Appended         int64 // records appended since Open
	Committed        int64 // records committed since Open (those read before their Commit)
	Pending          int64 // records appended and not committed, counting those found at Open
	SyncCount        int64 // fdatasync calls made for appends since Open
	LastSyncDuration time.Duration
	// DiskFull: the last append failed for lack of disk space, and the
	// file system still has less room than that record needed (it is
	// false again once the spool freed space by Commit, or anything else
	// freed enough). Appends fail meanwhile.
	DiskFull bool
	// DiskFreeBytes is the room left on the spool's file system for an
	// unprivileged writer (statfs), -1 when unknown.
	DiskFreeBytes int64
	// Err is the error that stopped the WAL for good (a failed fdatasync),
	// nil while it takes records. Only a restart clears it.
	Err error
}

type segment struct {
	index uint64
	size  int64 // of the records written (the file's size unless preallocated)
}

// WAL is a write-ahead log in one directory. Append, Read/TryRead, Commit
// and Stats may be called concurrently; one consumer should Read and Commit.
type WAL struct {
	opts Options
	log  *slog.Logger

	mu         sync.Mutex
	closed     bool
	err        error     // sticky: a failed fdatasync, or a write that could not be undone
	segs       []segment // live segments, ascending; the last one is active
	active     *os.File
	activeFD   int
	retired    []*os.File // sealed (and synced) segments, closed by the syncer
	writtenSeq uint64
	writtenPos Position
	syncedSeq  uint64
	syncedPos  Position      // everything before it is durable
	syncedCh   chan struct{} // closed and replaced whenever syncedPos moves (or the WAL fails/closes)
	ckpt       Position
	unconsumed int64
	appended   int64
	committed  int64
	pending0   int64 // records found after the checkpoint at Open
	syncCount  int64
	lastSync   time.Duration
	// ckptOwed: ckpt moved on but its checkpoint file could not be
	// written (a full disk); the next Commit (or Close) writes it. Until
	// then a restart replays from the checkpoint written last, which is
	// safe: the store absorbs a record stored twice.
	ckptOwed bool
	// short is the frame length of the last record refused for lack of
	// disk space (ENOSPC, EDQUOT, a short write), 0 once an append
	// succeeded or the spool freed its own space since. Stats reports the
	// disk full while the file system has less room than that.
	short int64

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	readMu   sync.Mutex
	cursor   Position
	rfile    *os.File
	rfileIdx uint64
	arena    []byte
	arenaOff int
	readEnds []Position // ends of records read and not committed yet, in order

	commitMu sync.Mutex
}

// Open opens (or creates) the WAL in o.Dir: it loads the checkpoint,
// removes segments wholly before it, checks every record after it,
// truncates a torn tail of the last segment (logging what was cut) and
// starts the syncer. Corruption anywhere else returns a *CorruptionError;
// Repair truncates the log there. The read cursor starts at the checkpoint.
func Open(ctx context.Context, o Options) (*WAL, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("spool options: %w", err)
	}
	o = o.withDefaults()
	w := &WAL{
		opts:     o,
		log:      o.Logger.With("spool", o.Dir),
		syncedCh: make(chan struct{}),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if err := w.load(ctx); err != nil {
		w.closeFiles()
		return nil, err
	}
	go w.syncLoop()
	return w, nil
}

func (w *WAL) load(ctx context.Context) error {
	dir := w.opts.Dir
	// Owner only: the spool holds spans as received, contents and all.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create spool directory: %w", err)
	}
	if err := os.Remove(checkpointPathTmp(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale checkpoint.tmp: %w", err)
	}
	ckpt, haveCkpt, err := readCheckpoint(dir)
	if err != nil {
		return err
	}
	idx, err := listSegments(dir)
	if err != nil {
		return err
	}
	// Segments before the checkpoint are consumed: a crash came between
	// writing the checkpoint and removing them.
	removed := 0
	for len(idx) > 0 && haveCkpt && idx[0] < ckpt.Segment {
		if err := os.Remove(segmentPath(dir, idx[0])); err != nil {
			return fmt.Errorf("remove consumed segment: %w", err)
		}
		idx = idx[1:]
		removed++
	}
	if removed > 0 {
		if err := syncDir(dir); err != nil {
			return err
		}
	}
	if !haveCkpt {
		ckpt = Position{Offset: headerLen}
		if len(idx) > 0 {
			ckpt.Segment = idx[0]
		}
	}
	if len(idx) > 0 && idx[0] > ckpt.Segment {
		ckpt = Position{Segment: idx[0], Offset: headerLen}
	}

	for i, n := range idx {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("open spool: %w", err)
		}
		last := i == len(idx)-1
		f, err := os.OpenFile(segmentPath(dir, n), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("open segment: %w", err)
		}
		from := int64(headerLen)
		if n == ckpt.Segment {
			from = ckpt.Offset
		}
		r, err := scanSegment(f, from)
		if err != nil {
			f.Close()
			return err
		}
		if r.bad != nil {
			if !last || !r.torn {
				f.Close()
				return &CorruptionError{Dir: dir, Segment: n, Offset: r.end, Err: r.bad}
			}
			if err := w.cutTornTail(f, n, r); err != nil {
				f.Close()
				return err
			}
			if errors.Is(r.bad, errBadHeader) {
				r.end = headerLen
			}
		}
		if n == ckpt.Segment && ckpt.Offset > r.end {
			w.log.Warn("spool: the checkpoint is past the end of its segment; reading from the end",
				"segment", segmentName(n), "checkpoint_offset", ckpt.Offset, "end", r.end)
			ckpt.Offset = r.end
		}
		w.segs = append(w.segs, segment{index: n, size: r.end})
		w.pending0 += r.records
		if !last {
			f.Close()
			continue
		}
		// What the previous process wrote may still be only in the page
		// cache: make it durable before serving it.
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			f.Close()
			return fmt.Errorf("fdatasync %s: %w", f.Name(), err)
		}
		w.active, w.activeFD = f, int(f.Fd())
	}
	if len(w.segs) == 0 {
		// A new spool, or every segment of an old one is gone.
		if err := w.createSegment(ckpt.Segment); err != nil {
			return err
		}
		ckpt.Offset = headerLen
	}
	// A last segment that reached its size stays active: the next Append
	// starts a new one. Starting it here needed disk space, and on a full
	// disk a restart could not open the spool at all.

	w.ckpt = ckpt
	w.cursor = ckpt
	act := w.segs[len(w.segs)-1]
	w.writtenPos = Position{Segment: act.index, Offset: act.size}
	w.syncedPos = w.writtenPos
	w.unconsumed = w.liveBytes() - ckpt.Offset
	if w.unconsumed > w.opts.MaxBytes {
		w.log.Warn("spool: holds more than max_bytes; appends fail until it is consumed",
			"bytes", w.unconsumed, "max_bytes", w.opts.MaxBytes)
	}
	return nil
}

func checkpointPathTmp(dir string) string { return filepath.Join(dir, checkpointName+".tmp") }

// cutTornTail truncates the last segment before its torn record.
func (w *WAL) cutTornTail(f *os.File, n uint64, r scanResult) error {
	if errors.Is(r.bad, errBadHeader) {
		w.log.Warn("spool: rewrote the torn header of the last segment",
			"segment", segmentName(n), "bytes_cut", r.size)
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("truncate %s: %w", f.Name(), err)
		}
		if _, err := f.WriteAt(segmentHeader(), 0); err != nil {
			return fmt.Errorf("write header %s: %w", f.Name(), err)
		}
		return nil
	}
	w.log.Warn("spool: cut a torn write at the end of the last segment",
		"segment", segmentName(n), "offset", r.end, "bytes_cut", r.size-r.end, "reason", r.bad.Error())
	if err := f.Truncate(r.end); err != nil {
		return fmt.Errorf("truncate %s: %w", f.Name(), err)
	}
	return nil
}

func (w *WAL) liveBytes() int64 {
	var n int64
	for _, s := range w.segs {
		n += s.size
	}
	return n
}

// createSegment makes segment index the active one: the file with its
// header, fsynced, and the directory fsynced so the file survives a crash.
func (w *WAL) createSegment(index uint64) error {
	path := segmentPath(w.opts.Dir, index)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600) // spans may carry secrets: owner only
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("create segment %s: %w", path, err)
	}
	if w.opts.Preallocate {
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, w.opts.SegmentBytes); err != nil {
			return fail(fmt.Errorf("fallocate: %w", err))
		}
	}
	if _, err := f.WriteAt(segmentHeader(), 0); err != nil {
		return fail(err)
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fail(fmt.Errorf("fdatasync: %w", err))
	}
	if err := syncDir(w.opts.Dir); err != nil {
		return fail(err)
	}
	if w.active != nil {
		w.retired = append(w.retired, w.active)
	}
	w.active, w.activeFD = f, int(f.Fd())
	w.segs = append(w.segs, segment{index: index, size: headerLen})
	return nil
}

// Append writes rec as one record and returns nil once it is durable
// (fdatasync). Concurrent appenders share one fdatasync (group commit by a
// syncer goroutine). If ctx ends while waiting for the sync, Append returns
// ctx.Err(): the record may still become durable and be read. An empty rec
// is refused.
func (w *WAL) Append(ctx context.Context, rec []byte) error {
	if len(rec) == 0 {
		return errors.New("spool append: empty record")
	}
	if int64(len(rec)) > maxRecordLen || headerLen+frameLen(len(rec)) > w.opts.MaxBytes {
		return fmt.Errorf("spool append: %d bytes (max_bytes %d): %w", len(rec), w.opts.MaxBytes, ErrTooLarge)
	}
	err := w.appendOnce(ctx, rec)
	if err != nil && isNoSpace(err) && w.recycle() {
		// Everything written was consumed: the spool freed its own
		// segment, so the record may fit now.
		err = w.appendOnce(ctx, rec)
	}
	return err
}

// recycle empties the active segment if it is wholly consumed and an
// append failed for lack of space (recycleLocked), and writes the
// checkpoint that then names the new segment.
func (w *WAL) recycle() bool {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	w.readMu.Lock()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.readMu.Unlock()
		return false
	}
	ok, err := w.recycleLocked()
	ckpt := w.ckpt
	w.mu.Unlock()
	w.readMu.Unlock()
	if err != nil {
		w.log.Warn("spool: could not empty the consumed segment of a full disk", "error", err)
	}
	if ok {
		if err := w.writeOwedCheckpoint(ckpt); err != nil {
			w.log.Warn("spool: checkpoint after emptying the consumed segment", "error", err)
		}
	}
	return ok
}

func (w *WAL) appendOnce(ctx context.Context, rec []byte) error {
	fl := frameLen(len(rec))

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return fmt.Errorf("spool append: %w", err)
	}
	act := &w.segs[len(w.segs)-1]
	rotate := act.size > headerLen && act.size+fl > w.opts.SegmentBytes
	need := fl
	if rotate {
		need += headerLen
	}
	if w.unconsumed+need > w.opts.MaxBytes {
		u := w.unconsumed
		w.mu.Unlock()
		return fmt.Errorf("spool append: %d bytes unconsumed + %d > max_bytes %d: %w", u, need, w.opts.MaxBytes, ErrFull)
	}
	if rotate {
		if err := w.rotateLocked(); err != nil {
			if isNoSpace(err) {
				w.short = need
			}
			w.mu.Unlock()
			return fmt.Errorf("spool append: %w", err)
		}
		w.unconsumed += headerLen
		act = &w.segs[len(w.segs)-1]
	}
	var h [frameHeaderLen]byte
	putFrameHeader(h[:], rec)
	n, err := unix.Pwritev(w.activeFD, [][]byte{h[:], rec}, act.size)
	if err == nil && int64(n) != fl {
		err = io.ErrShortWrite
	}
	if err != nil {
		// Undo a partial write so the next record starts on a boundary.
		if terr := w.active.Truncate(act.size); terr != nil {
			w.err = fmt.Errorf("write %s failed (%w) and could not be undone: %w", w.active.Name(), err, terr)
			w.broadcastLocked()
		}
		if isNoSpace(err) {
			w.short = fl
		}
		w.mu.Unlock()
		return fmt.Errorf("spool append: write %s: %w", segmentName(act.index), err)
	}
	w.short = 0
	act.size += fl
	w.unconsumed += fl
	w.appended++
	w.writtenSeq++
	seq := w.writtenSeq
	w.writtenPos = Position{Segment: act.index, Offset: act.size}
	w.mu.Unlock()

	select {
	case w.kick <- struct{}{}:
	default:
	}
	return w.waitSynced(ctx, seq)
}

// rotateLocked seals the active segment (fdatasync: so a torn write can
// only ever be in the last segment) and starts the next one.
func (w *WAL) rotateLocked() error {
	if err := unix.Fdatasync(w.activeFD); err != nil {
		w.err = fmt.Errorf("fdatasync %s: %w", w.active.Name(), err)
		w.broadcastLocked()
		return w.err
	}
	if w.writtenSeq > w.syncedSeq {
		w.syncedSeq, w.syncedPos = w.writtenSeq, w.writtenPos
		w.broadcastLocked()
	}
	return w.createSegment(w.segs[len(w.segs)-1].index + 1)
}

func (w *WAL) broadcastLocked() {
	close(w.syncedCh)
	w.syncedCh = make(chan struct{})
}

func (w *WAL) waitSynced(ctx context.Context, seq uint64) error {
	for {
		w.mu.Lock()
		if w.syncedSeq >= seq {
			w.mu.Unlock()
			return nil
		}
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return fmt.Errorf("spool append: %w", err)
		}
		if w.closed && w.active == nil {
			w.mu.Unlock()
			return ErrClosed
		}
		ch := w.syncedCh
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// syncLoop is the group commit: whenever records were written since the
// last fdatasync it makes one, which covers every record written before it
// started, and wakes their appenders. Appends that arrive during a sync
// wait for the next one, so the number of fdatasyncs is bounded by the
// disk's latency, not by the number of appenders.
func (w *WAL) syncLoop() {
	defer close(w.done)
	for {
		select {
		case <-w.kick:
			w.syncOnce()
		case <-w.stop:
			w.syncOnce()
			return
		}
	}
}

func (w *WAL) syncOnce() {
	w.mu.Lock()
	retired := w.retired
	w.retired = nil
	if w.err != nil || w.writtenSeq <= w.syncedSeq {
		w.mu.Unlock()
		closeAll(retired)
		return
	}
	target, pos, fd, name := w.writtenSeq, w.writtenPos, w.activeFD, w.active.Name()
	w.mu.Unlock()
	// The retired files were synced when they were sealed, and no sync of
	// this loop uses them any more.
	closeAll(retired)

	start := w.opts.Now()
	err := unix.Fdatasync(fd)
	d := w.opts.Now().Sub(start)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.syncCount++
	w.lastSync = d
	if err != nil {
		// After a failed fsync the page cache may have dropped the
		// data; nothing written since the last good sync can be
		// trusted, so the WAL stops accepting records.
		w.err = fmt.Errorf("fdatasync %s: %w", name, err)
		w.broadcastLocked()
		return
	}
	if target > w.syncedSeq {
		w.syncedSeq, w.syncedPos = target, pos
		w.broadcastLocked()
	}
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// Stats returns counters; safe to call at any time.
func (w *WAL) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	pending := w.pending0 + w.appended - w.committed
	if pending < 0 {
		pending = 0
	}
	free := diskFree(w.opts.Dir)
	return Stats{
		DiskFull:         w.short > 0 && (free < 0 || free < w.short+diskSlack),
		DiskFreeBytes:    free,
		Err:              w.err,
		Bytes:            w.unconsumed,
		DiskBytes:        w.liveBytes(),
		MaxBytes:         w.opts.MaxBytes,
		Segments:         len(w.segs),
		Appended:         w.appended,
		Committed:        w.committed,
		Pending:          pending,
		SyncCount:        w.syncCount,
		LastSyncDuration: w.lastSync,
	}
}

// Close stops the syncer after a last sync of what was written (so
// appenders already waiting get nil), and closes the files. Later calls
// return nil; every other method returns ErrClosed after it.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done

	w.commitMu.Lock()
	w.mu.Lock()
	owed, ckpt := w.ckptOwed, w.ckpt
	w.mu.Unlock()
	if owed {
		if err := writeCheckpoint(w.opts.Dir, ckpt); err != nil {
			w.log.Warn("spool: the checkpoint could not be written at close; the next start replays from the one before", "error", err)
		}
	}
	w.commitMu.Unlock()

	w.readMu.Lock()
	if w.rfile != nil {
		w.rfile.Close()
		w.rfile = nil
	}
	w.readMu.Unlock()

	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.closeFiles()
	w.broadcastLocked()
	return err
}

func (w *WAL) closeFiles() error {
	closeAll(w.retired)
	w.retired = nil
	if w.active == nil {
		return nil
	}
	err := w.active.Close()
	w.active = nil
	if err != nil {
		return fmt.Errorf("close spool: %w", err)
	}
	return nil
}

// diskSlack is room, beyond the refused record, that the file system must
// have before Stats stops calling the disk full: file systems allocate in
// blocks and pages, and other writers share the disk.
const diskSlack = 64 << 10

// isNoSpace reports whether err says the disk (or the user's quota) is
// full. A short write is the kernel writing what fits and reporting the
// count.
func isNoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) || errors.Is(err, io.ErrShortWrite)
}

// diskFree returns the bytes an unprivileged writer may still use on the
// file system holding dir, or -1.
func diskFree(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
