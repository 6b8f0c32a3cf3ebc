package spool

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// CorruptionError is a bad record (or segment header) that is not a torn
// write at the end of the log: Open refuses the log, and Repair truncates
// it at Offset.
type CorruptionError struct {
	Dir     string
	Segment uint64
	Offset  int64
	Err     error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("spool corruption in %s at offset %d: %v",
		filepath.Join(e.Dir, segmentName(e.Segment)), e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// Repair discards the log from its first bad record on: it truncates that
// segment before the record (removing the segment if its header is bad)
// and removes every later segment. It checks the records after the
// checkpoint, as Open does, and returns the bytes it removed (0 when there
// was nothing to repair). The WAL in dir must not be open.
func Repair(dir string, logger *slog.Logger) (lost int64, err error) {
	if logger == nil {
		logger = slog.Default()
	}
	ckpt, haveCkpt, err := readCheckpoint(dir)
	if err != nil {
		return 0, fmt.Errorf("repair %s: %w", dir, err)
	}
	idx, err := listSegments(dir)
	if err != nil {
		return 0, fmt.Errorf("repair: %w", err)
	}
	for i, n := range idx {
		if haveCkpt && n < ckpt.Segment {
			continue
		}
		from := int64(headerLen)
		if haveCkpt && n == ckpt.Segment {
			from = ckpt.Offset
		}
		r, err := scanPath(segmentPath(dir, n), from)
		if err != nil {
			return 0, fmt.Errorf("repair: %w", err)
		}
		if r.bad == nil {
			continue
		}
		path := segmentPath(dir, n)
		if errors.Is(r.bad, errBadHeader) {
			err = os.Remove(path)
			lost += r.size
		} else {
			err = truncateSync(path, r.end)
			lost += r.size - r.end
		}
		if err != nil {
			return lost, fmt.Errorf("repair: %w", err)
		}
		logger.Warn("spool: repair cut the log at a bad record",
			"spool", dir, "segment", segmentName(n), "offset", r.end, "reason", r.bad.Error())
		for _, later := range idx[i+1:] {
			p := segmentPath(dir, later)
			st, err := os.Stat(p)
			if err != nil {
				return lost, fmt.Errorf("repair: %w", err)
			}
			if err := os.Remove(p); err != nil {
				return lost, fmt.Errorf("repair: %w", err)
			}
			lost += st.Size()
			logger.Warn("spool: repair removed a segment after the bad record", "spool", dir, "segment", segmentName(later), "bytes", st.Size())
		}
		if err := syncDir(dir); err != nil {
			return lost, fmt.Errorf("repair: %w", err)
		}
		return lost, nil
	}
	return 0, nil
}

func scanPath(path string, from int64) (scanResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return scanResult{}, err
	}
	defer f.Close()
	return scanSegment(f, from)
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
