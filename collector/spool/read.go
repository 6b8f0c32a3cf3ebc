package spool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
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
// persists the checkpoint durably before returning (temporary file,
// fsync, rename, directory fsync), then removes the segments wholly before
// p and frees their bytes for Append. If p is ahead of the read cursor the
// cursor moves to p. A p at or before the checkpoint is a no-op;
// a p past the durable end of the log, or not in a live segment, is an
// error.
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
		w.mu.Unlock()
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

	if err := writeCheckpoint(w.opts.Dir, p); err != nil {
		return fmt.Errorf("spool commit: %w", err)
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
	w.readMu.Unlock()

	w.mu.Lock()
	w.ckpt = p
	w.committed += int64(n)
	var gone []uint64
	for len(w.segs) > 1 && w.segs[0].index < p.Segment {
		gone = append(gone, w.segs[0].index)
		w.segs = w.segs[1:]
	}
	w.unconsumed = w.liveBytes() - p.Offset
	w.mu.Unlock()

	var errs []error
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
	if len(errs) > 0 {
		// The checkpoint is durable; a leftover segment is removed at
		// the next Open.
		return fmt.Errorf("spool commit: %w", errors.Join(errs...))
	}
	return nil
}
