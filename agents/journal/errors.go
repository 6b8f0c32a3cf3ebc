package journal

import (
	"errors"
	"fmt"
)

// Corruption causes, matched with errors.Is.
var (
	ErrBadLine      = errors.New("line is not a valid journal event")
	ErrHashMismatch = errors.New("content hash mismatch: the event was altered")
	ErrChainBroken  = errors.New("hash chain broken: prev is not the previous event's hash (an event was removed, inserted or reordered)")
	ErrSeqGap       = errors.New("sequence gap: events missing or reordered")
	ErrTruncated    = errors.New("journal truncated: run has no seal")
	ErrAfterSeal    = errors.New("event after the run's seal")
	ErrVersion      = errors.New("unsupported journal format version")
)

// CorruptionError reports where a JSONL journal failed verification.
type CorruptionError struct {
	File  string // as given to the reader; may be empty
	Line  int    // 1-based line number
	RunID string // when known
	Seq   int64  // when known
	Err   error
}

func (e *CorruptionError) Error() string {
	where := fmt.Sprintf("line %d", e.Line)
	if e.File != "" {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.RunID != "" {
		where += fmt.Sprintf(" (run %s seq %d)", e.RunID, e.Seq)
	}
	return fmt.Sprintf("corrupt journal: %s: %v", where, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }
