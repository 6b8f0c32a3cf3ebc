package spool

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

const (
	headerLen      = 8 // segment header: magic, version, 3 zero bytes
	frameHeaderLen = 8 // record: length uint32 + crc uint32
	formatVersion  = 1

	// maxRecordLen bounds one record's data; the length field is a uint32.
	maxRecordLen = 1<<32 - 1

	checkpointName = "checkpoint"
	checkpointLen  = 28
)

var (
	segmentMagic    = [4]byte{'L', 'W', 'S', 'P'}
	checkpointMagic = [4]byte{'L', 'W', 'C', 'K'}
	castagnoli      = crc32.MakeTable(crc32.Castagnoli)
)

func segmentHeader() []byte {
	h := make([]byte, headerLen)
	copy(h, segmentMagic[:])
	h[4] = formatVersion
	return h
}

func segmentName(index uint64) string { return fmt.Sprintf("%020d", index) }

func segmentPath(dir string, index uint64) string {
	return filepath.Join(dir, segmentName(index))
}

// listSegments returns the indexes of the segment files in dir, ascending.
// Files whose names are not 20 digits are not segments and are ignored.
func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments in %s: %w", dir, err)
	}
	var idx []uint64
	for _, e := range entries {
		name := e.Name()
		if len(name) != 20 || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			continue
		}
		idx = append(idx, n)
	}
	slices.Sort(idx)
	return idx, nil
}

// putFrameHeader writes rec's frame header (length, CRC-32C) into h.
func putFrameHeader(h []byte, rec []byte) {
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(rec)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(rec, castagnoli))
}

// appendFrame appends rec's frame (header and data) to dst.
func appendFrame(dst, rec []byte) []byte {
	var h [frameHeaderLen]byte
	putFrameHeader(h[:], rec)
	dst = append(dst, h[:]...)
	return append(dst, rec...)
}

func frameLen(n int) int64 { return frameHeaderLen + int64(n) }

// Errors describing a bad record; a *CorruptionError wraps one of them.
var (
	errBadHeader   = errors.New("bad segment header")
	errZeroLength  = errors.New("zero record length")
	errPastEOF     = errors.New("record length past end of file")
	errBadChecksum = errors.New("record checksum mismatch")
)

// scanResult is what scanning one segment found.
type scanResult struct {
	size    int64 // file size
	end     int64 // offset just after the last good record
	records int64 // good records from the scan's start to end
	bad     error // why scanning stopped before size (nil when end == size)
	torn    bool  // bad is a torn write at the tail: nothing intact follows it
}

// scanSegment checks the header and the records of the segment file f from
// offset from (a record boundary, ≥ headerLen) to the end of the file.
func scanSegment(f *os.File, from int64) (scanResult, error) {
	st, err := f.Stat()
	if err != nil {
		return scanResult{}, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	r := scanResult{size: st.Size()}
	hdr := make([]byte, headerLen)
	n, err := f.ReadAt(hdr, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return r, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if n < headerLen || !bytes.Equal(hdr, segmentHeader()) {
		r.bad = errBadHeader
		// A file shorter than a header, or all zeros, was being created
		// when the process died; anything else is not ours or was damaged.
		r.torn = n < headerLen
		if !r.torn {
			z, zerr := zeroFrom(f, 0, r.size)
			if zerr != nil {
				return r, zerr
			}
			r.torn = z
		}
		return r, nil
	}
	if from < headerLen {
		from = headerLen
	}
	r.end = from
	if from > r.size {
		r.end = r.size
		return r, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, from, r.size-from), 1<<20)
	var fh [frameHeaderLen]byte
	var buf []byte
	for r.end < r.size {
		if r.size-r.end < frameHeaderLen {
			r.bad, r.torn = errPastEOF, true
			return r, nil
		}
		if _, err := io.ReadFull(br, fh[:]); err != nil {
			return r, fmt.Errorf("read %s at %d: %w", f.Name(), r.end, err)
		}
		length := int64(binary.LittleEndian.Uint32(fh[0:4]))
		sum := binary.LittleEndian.Uint32(fh[4:8])
		if length == 0 {
			r.bad = errZeroLength
			z, err := zeroFrom(f, r.end, r.size)
			if err != nil {
				return r, err
			}
			r.torn = z
			return r, nil
		}
		next := r.end + frameHeaderLen + length
		if next > r.size {
			r.bad, r.torn = errPastEOF, true
			return r, nil
		}
		if int64(cap(buf)) < length {
			buf = make([]byte, length)
		}
		buf = buf[:length]
		if _, err := io.ReadFull(br, buf); err != nil {
			return r, fmt.Errorf("read %s at %d: %w", f.Name(), r.end, err)
		}
		if crc32.Checksum(buf, castagnoli) != sum {
			r.bad = errBadChecksum
			// The final record, or one followed only by zeros, was cut
			// short by a crash; a bad record with data after it is not.
			z, err := zeroFrom(f, next, r.size)
			if err != nil {
				return r, err
			}
			r.torn = z
			return r, nil
		}
		r.end = next
		r.records++
	}
	return r, nil
}

// zeroFrom reports whether f holds only zero bytes in [off, size).
func zeroFrom(f *os.File, off, size int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for off < size {
		n := int64(len(buf))
		if size-off < n {
			n = size - off
		}
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return false, fmt.Errorf("read %s at %d: %w", f.Name(), off, err)
		}
		if !allZero(buf[:n]) {
			return false, nil
		}
		off += n
	}
	return true, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkpoint encoding.

func encodeCheckpoint(p Position) []byte {
	b := make([]byte, checkpointLen)
	copy(b, checkpointMagic[:])
	b[4] = formatVersion
	binary.LittleEndian.PutUint64(b[8:16], p.Segment)
	binary.LittleEndian.PutUint64(b[16:24], uint64(p.Offset))
	binary.LittleEndian.PutUint32(b[24:28], crc32.Checksum(b[:24], castagnoli))
	return b
}

func decodeCheckpoint(b []byte) (Position, error) {
	if len(b) != checkpointLen {
		return Position{}, fmt.Errorf("checkpoint is %d bytes, want %d", len(b), checkpointLen)
	}
	if !bytes.Equal(b[:4], checkpointMagic[:]) || b[4] != formatVersion {
		return Position{}, fmt.Errorf("checkpoint: bad magic or version %x", b[:8])
	}
	if crc32.Checksum(b[:24], castagnoli) != binary.LittleEndian.Uint32(b[24:28]) {
		return Position{}, errors.New("checkpoint: checksum mismatch")
	}
	p := Position{Segment: binary.LittleEndian.Uint64(b[8:16]), Offset: int64(binary.LittleEndian.Uint64(b[16:24]))}
	if p.Offset < headerLen {
		return Position{}, fmt.Errorf("checkpoint: offset %d inside the segment header", p.Offset)
	}
	return p, nil
}

// readCheckpoint returns the committed position, ok=false when there is
// none yet.
func readCheckpoint(dir string) (Position, bool, error) {
	path := filepath.Join(dir, checkpointName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Position{}, false, nil
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("read checkpoint: %w", err)
	}
	p, err := decodeCheckpoint(b)
	if err != nil {
		return Position{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return p, true, nil
}

// writeCheckpoint replaces the checkpoint atomically and durably: a
// temporary file, fsynced, renamed over the old one, and the directory
// fsynced so that the rename survives a crash.
func writeCheckpoint(dir string, p Position) error {
	tmp := checkpointPathTmp(dir)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	_, err = f.Write(encodeCheckpoint(p))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, checkpointName))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		// A full disk fails the write: leave no file behind holding the
		// little room there is.
		_ = os.Remove(tmp)
		return fmt.Errorf("write checkpoint %s: %w", tmp, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
