package spool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// Read returns the next durable records after the read cursor and moves
// the cursor past them: as many as fit in maxBytes of data, but always at
// least one when one is available. It blocks until a record is available,
// ctx ends (ctx.Err()) or the WAL is closed (ErrClosed). The records' Data
// is valid until the next Read or TryRead.
//
// Records are read from the segment files (the page cache, in the common
// case where the feeder keeps up). Only records already fsynced are
// returned, so a record is never handed to the store before its
// acknowledgement could have been sent.
func (w *WAL) Read(ctx context.Context, maxBytes int) ([]Record, error) {
	for {
		w.mu.Lock()
		ch, closed := w.syncedCh, w.closed
		w.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		recs, err := w.TryRead(maxBytes)
		if err != nil || len(recs) > 0 {
			return recs, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// TryRead is Read without waiting: it returns an empty slice when no
// durable record follows the cursor.
func (w *WAL) TryRead(maxBytes int) ([]Record, error) {
	w.readMu.Lock()
	defer w.readMu.Unlock()
	recs, err := w.readLocked(int64(maxBytes))
	for _, r := range recs {
		w.readEnds = append(w.readEnds, r.End)
	}
	return recs, err
}

// readable returns how far the segment at the cursor may be read (its
// final size once sealed, the synced end while active) and the next
// segment's index, if the cursor's segment is sealed and read to its end.
func (w *WAL) readable() (end int64, next uint64, hasNext bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, 0, false, ErrClosed
	}
	c := w.cursor
	if w.syncedPos.Segment < c.Segment {
		return 0, 0, false, nil
	}
	for i, s := range w.segs {
		if s.index < c.Segment {
			continue
		}
		if s.index > c.Segment {
			// The cursor's segment is gone (committed past): go on
			// from the next live one.
			return 0, s.index, true, nil
		}
		if w.syncedPos.Segment == c.Segment {
			return w.syncedPos.Offset, 0, false, nil
		}
		if i+1 < len(w.segs) {
			return s.size, w.segs[i+1].index, true, nil
		}
		return s.size, 0, false, nil
	}
	return 0, 0, false, nil
}

func (w *WAL) readLocked(maxBytes int64) ([]Record, error) {
	if maxBytes < 1 {
		maxBytes = 1
	}
	w.arenaOff = 0
	var recs []Record
	var total int64
	for total < maxBytes {
		end, next, hasNext, err := w.readable()
		if err != nil {
			return recs, err
		}
		if w.cursor.Offset >= end {
			if !hasNext {
				break
			}
			w.cursor = Position{Segment: next, Offset: headerLen}
			continue
		}
		f, err := w.segmentFile(w.cursor.Segment)
		if err != nil {
			return recs, err
		}
		got, n, err := w.readChunk(f, end, maxBytes-total, len(recs) == 0)
		if err != nil {
			return recs, err
		}
		recs = append(recs, got...)
		total += n
		if len(got) == 0 {
			break // the next record does not fit in maxBytes
		}
	}
	return recs, nil
}

// readChunk reads whole records from the cursor up to end, at most budget
// bytes of data (or exactly one record if first and it is larger), and
// moves the cursor past them.
func (w *WAL) readChunk(f *os.File, end, budget int64, first bool) ([]Record, int64, error) {
	start := w.cursor
	want := min(end-start.Offset, budget+frameHeaderLen)
	if want < frameHeaderLen {
		want = min(end-start.Offset, frameHeaderLen)
	}
	buf := w.region(want)
	if _, err := f.ReadAt(buf, start.Offset); err != nil {
		return nil, 0, fmt.Errorf("read %s at %d: %w", f.Name(), start.Offset, err)
	}
	var recs []Record
	var total int64
	p := int64(0)
	for p+frameHeaderLen <= int64(len(buf)) {
		off := start.Offset + p
		length := int64(binary.LittleEndian.Uint32(buf[p : p+4]))
		sum := binary.LittleEndian.Uint32(buf[p+4 : p+8])
		if length == 0 || off+frameHeaderLen+length > end {
			return recs, total, w.corrupt(start.Segment, off, errPastEOF, length == 0)
		}
		if total+length > budget && !(first && len(recs) == 0) {
			break
		}
		var data []byte
		if p+frameHeaderLen+length <= int64(len(buf)) {
			data = buf[p+frameHeaderLen : p+frameHeaderLen+length]
		} else if len(recs) == 0 {
			// One record larger than the chunk: read it whole.
			data = w.region(length)
			if _, err := f.ReadAt(data, off+frameHeaderLen); err != nil {
				return nil, 0, fmt.Errorf("read %s at %d: %w", f.Name(), off, err)
			}
		} else {
			break
		}
		if crc32.Checksum(data, castagnoli) != sum {
			return recs, total, w.corrupt(start.Segment, off, errBadChecksum, false)
		}
		p += frameHeaderLen + length
		total += length
		w.cursor = Position{Segment: start.Segment, Offset: off + frameHeaderLen + length}
		recs = append(recs, Record{Data: data, End: w.cursor})
	}
	if len(recs) == 0 && p == 0 && int64(len(buf)) < frameHeaderLen {
		return nil, 0, w.corrupt(start.Segment, start.Offset, errPastEOF, false)
	}
	return recs, total, nil
}

func (w *WAL) corrupt(seg uint64, off int64, err error, zero bool) error {
	if zero {
		err = errZeroLength
	}
	return &CorruptionError{Dir: w.opts.Dir, Segment: seg, Offset: off, Err: err}
}

// region returns n bytes of the read arena. Records returned earlier in
// the same Read keep pointing into the old array when it is replaced.
func (w *WAL) region(n int64) []byte {
	if int64(cap(w.arena)-w.arenaOff) < n {
		c := max(n, int64(2*cap(w.arena)))
		w.arena = make([]byte, c)
		w.arenaOff = 0
	}
	b := w.arena[w.arenaOff : int64(w.arenaOff)+n : int64(w.arenaOff)+n]
	w.arenaOff += int(n)
	return b
}

func (w *WAL) segmentFile(index uint64) (*os.File, error) {
	if w.rfile != nil && w.rfileIdx == index {
		return w.rfile, nil
	}
	if w.rfile != nil {
		w.rfile.Close()
		w.rfile = nil
	}
	f, err := os.Open(segmentPath(w.opts.Dir, index))
	if err != nil {
		return nil, fmt.Errorf("open segment for reading: %w", err)
	}
	w.rfile, w.rfileIdx = f, index
	return f, nil
}

// Commit records that every record up to p (a Record.End) is consumed. It
// persists the checkpoint durably (temporary file, fsync, rename,
// directory fsync), then removes the segments wholly before p and frees
// their bytes for Append. If p is ahead of the read cursor the cursor
// moves to p. A p at or before the checkpoint is a no-op (it writes a
// checkpoint still owed); a p past the durable end of the log, or not in a
// live segment, is an error.
//
// A checkpoint that cannot be written (the disk is full) does not stop
// the consumption: the segments wholly before p are removed all the same
// — what they hold is stored, and a restart that finds its checkpoint's
// segment gone starts at the first one left — and the checkpoint is
// written by a later Commit or by Close. Commit then returns an error
// wrapping ErrCheckpointDeferred. And when p is the end of everything
// written after an append failed for lack of space, the active segment is
// emptied (renamed to the next index and truncated), so a spool whose
// segment filled its disk takes records again.
func (w *WAL) Commit(p Position) error {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if !w.ckpt.less(p) {
		// Already consumed (a feeder committing a position twice).
		owed, ckpt := w.ckptOwed, w.ckpt
		w.mu.Unlock()
		if owed {
			return w.writeOwedCheckpoint(ckpt)
		}
		return nil
	}
	if w.syncedPos.less(p) {
		sp := w.syncedPos
		w.mu.Unlock()
		return fmt.Errorf("spool commit %v: past the durable end %v", p, sp)
	}
	i := -1
	for j, s := range w.segs {
		if s.index == p.Segment {
			i = j
		}
	}
	if i < 0 || p.Offset < headerLen || p.Offset > w.segs[i].size {
		w.mu.Unlock()
		return fmt.Errorf("spool commit %v: no such position", p)
	}
	orig := p
	// The end of a sealed segment is the start of the next one: moving
	// there lets the sealed segment go.
	for i+1 < len(w.segs) && p.Offset == w.segs[i].size {
		i++
		p = Position{Segment: w.segs[i].index, Offset: headerLen}
	}
	w.mu.Unlock()

	var errs []error
	ckptErr := writeCheckpoint(w.opts.Dir, p)
	if ckptErr != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrCheckpointDeferred, ckptErr))
	}

	w.readMu.Lock()
	n := 0
	for n < len(w.readEnds) && !orig.less(w.readEnds[n]) {
		n++
	}
	w.readEnds = append(w.readEnds[:0], w.readEnds[n:]...)
	if w.cursor.less(p) {
		w.cursor = p
	}
	w.mu.Lock()
	w.ckpt = p
	w.ckptOwed = ckptErr != nil
	w.committed += int64(n)
	var gone []uint64
	for len(w.segs) > 1 && w.segs[0].index < p.Segment {
		gone = append(gone, w.segs[0].index)
		w.segs = w.segs[1:]
	}
	w.unconsumed = w.liveBytes() - p.Offset
	recycled, rerr := w.recycleLocked()
	var retired []*os.File
	if len(gone) > 0 {
		w.short = 0 // the spool freed space: Stats asks the disk again
		// A removed segment's space comes back only once no descriptor
		// holds it: the reader's, and the sealed segments the syncer
		// would close at its next sync — which, on a full disk where
		// every append fails, never comes.
		if w.rfile != nil && w.rfileIdx < p.Segment {
			w.rfile.Close()
			w.rfile = nil
		}
		retired, w.retired = w.retired, nil
	}
	owed, ckpt := w.ckptOwed, w.ckpt
	w.mu.Unlock()
	w.readMu.Unlock()
	if len(retired) > 0 {
		// The syncer may be in an fdatasync of the active segment, never
		// of a sealed one (those were synced when sealed): closing them
		// here is safe.
		closeAll(retired)
	}
	if rerr != nil {
		errs = append(errs, rerr)
	}

	for _, g := range gone {
		if err := os.Remove(segmentPath(w.opts.Dir, g)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove consumed segment: %w", err))
		}
	}
	if len(gone) > 0 {
		if err := syncDir(w.opts.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	// Space was freed: a checkpoint owed can be written now.
	if owed && (len(gone) > 0 || recycled) {
		if err := w.writeOwedCheckpoint(ckpt); err == nil && ckptErr != nil {
			errs = slices.DeleteFunc(errs, func(e error) bool { return errors.Is(e, ErrCheckpointDeferred) })
		}
	}
	if len(errs) > 0 {
		// The position is consumed; a leftover segment is removed at the
		// next Open.
		return fmt.Errorf("spool commit: %w", errors.Join(errs...))
	}
	return nil
}

// ErrCheckpointDeferred is wrapped by Commit when the position was
// consumed but its checkpoint file could not be written (a full disk): a
// later Commit, or Close, writes it.
var ErrCheckpointDeferred = errors.New("checkpoint not written yet")

// writeOwedCheckpoint writes the checkpoint of ckpt, which Commit could
// not write earlier. Called with commitMu held.
func (w *WAL) writeOwedCheckpoint(ckpt Position) error {
	if err := writeCheckpoint(w.opts.Dir, ckpt); err != nil {
		return fmt.Errorf("spool commit: %w: %w", ErrCheckpointDeferred, err)
	}
	w.mu.Lock()
	if w.ckpt == ckpt {
		w.ckptOwed = false
	}
	w.mu.Unlock()
	return nil
}

// recycleLocked empties the active segment when an append failed for lack
// of space and everything written is consumed: the segment's file is
// renamed to the next index and truncated to its header, which frees its
// blocks without needing any (creating a new segment needs a block, and a
// full disk has none). Renaming first keeps positions unique: a
// checkpoint written before names the old index, which is gone, so a
// restart starts at the new segment's first record. A crash between the
// rename and the truncation leaves the consumed records under the new
// index, replayed once more (the store absorbs them). Called with readMu
// and mu held; reports whether it recycled.
func (w *WAL) recycleLocked() (bool, error) {
	act := &w.segs[len(w.segs)-1]
	end := Position{Segment: act.index, Offset: act.size}
	// A position at the end of the sealed segment before the active one is
	// the start of the active one (a rotation whose first write failed
	// leaves the written position there).
	at := func(p Position) Position {
		if p.Segment < act.index {
			return Position{Segment: act.index, Offset: headerLen}
		}
		return p
	}
	if w.short == 0 || act.size <= headerLen || len(w.segs) != 1 || at(w.ckpt) != end || at(w.writtenPos) != end || at(w.syncedPos) != end || w.err != nil {
		return false, nil
	}
	next := act.index + 1
	from, to := segmentPath(w.opts.Dir, act.index), segmentPath(w.opts.Dir, next)
	if err := os.Rename(from, to); err != nil {
		return false, fmt.Errorf("recycle the consumed segment: %w", err)
	}
	if err := w.active.Truncate(headerLen); err != nil {
		// The records stay under the new name; they are consumed, so the
		// log is still right, only not smaller.
		w.renamedLocked(act, next)
		return false, fmt.Errorf("recycle the consumed segment: truncate %s: %w", to, err)
	}
	if err := unix.Fdatasync(w.activeFD); err != nil {
		w.err = fmt.Errorf("fdatasync %s: %w", to, err)
		w.broadcastLocked()
		return false, w.err
	}
	w.renamedLocked(act, next)
	act.size = headerLen
	end = Position{Segment: next, Offset: headerLen}
	w.writtenPos, w.syncedPos, w.ckpt, w.cursor = end, end, end, end
	w.readEnds = w.readEnds[:0]
	w.unconsumed = 0
	w.short = 0
	w.ckptOwed = true // the checkpoint names the old index
	if err := syncDir(w.opts.Dir); err != nil {
		return true, err
	}
	w.log.Info("spool: emptied its consumed segment after the disk filled", "segment", segmentName(next))
	return true, nil
}

// renamedLocked records that the active segment's file now has index next
// (the open descriptors still refer to it).
func (w *WAL) renamedLocked(act *segment, next uint64) {
	old := act.index
	act.index = next
	if w.rfile != nil && w.rfileIdx == old {
		w.rfileIdx = next
	}
	if w.cursor.Segment == old {
		w.cursor.Segment = next
	}
	for i := range w.readEnds {
		if w.readEnds[i].Segment == old {
			w.readEnds[i].Segment = next
		}
	}
	if w.ckpt.Segment == old {
		w.ckpt.Segment = next
		w.ckptOwed = true
	}
	if w.writtenPos.Segment == old {
		w.writtenPos.Segment = next
	}
	if w.syncedPos.Segment == old {
		w.syncedPos.Segment = next
	}
}
