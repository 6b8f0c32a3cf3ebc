package experiment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/loomwork/loomwork/datasets"
)

// TrialKey is a (case, trial) pair.
type TrialKey struct {
	CaseID string
	Trial  int
}

// Journal is an experiment's trials.jsonl: one graded datasets.Trial per
// line, appended and fsynced one record at a time, so a run killed at any
// point loses at most the record being written. Open reads what is there:
// a last line without its newline (torn by the kill) is cut off; any other
// line that does not decode is an error naming it.
type Journal struct {
	mu   sync.Mutex
	path string
	f    *os.File
	done map[TrialKey]bool
	// Torn is the number of bytes cut off a torn last line at Open.
	Torn int
}

// OpenJournal opens (creating) the trials file at path and returns it
// with the trials it already holds.
func OpenJournal(path string) (*Journal, []datasets.Trial, error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("trials file %s: %w", path, err)
	}
	complete := b
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		complete = b[:i+1]
	}
	trials, err := datasets.ReadTrials(bytes.NewReader(complete), path)
	if err != nil {
		return nil, nil, err
	}
	torn := len(b) - len(complete)
	if torn > 0 {
		if err := os.Truncate(path, int64(len(complete))); err != nil {
			return nil, nil, fmt.Errorf("trials file %s: cut the torn last line: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("trials file %s: %w", path, err)
	}
	j := &Journal{path: path, f: f, done: map[TrialKey]bool{}, Torn: torn}
	for _, t := range trials {
		j.done[TrialKey{t.CaseID, t.Trial}] = true
	}
	return j, trials, nil
}

// Has says whether (case, trial) is recorded.
func (j *Journal) Has(k TrialKey) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done[k]
}

// Append writes t as one line and fsyncs it. A (case, trial) already
// recorded is an error: a trial is recorded exactly once.
func (j *Journal) Append(t *datasets.Trial) error {
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode trial %d of case %q: %w", t.Trial, t.CaseID, err)
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	k := TrialKey{t.CaseID, t.Trial}
	if j.done[k] {
		return fmt.Errorf("trial %d of case %q: already recorded in %s", t.Trial, t.CaseID, j.path)
	}
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("append to %s: %w", j.path, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", j.path, err)
	}
	j.done[k] = true
	return nil
}

// Close closes the file.
func (j *Journal) Close() error { return j.f.Close() }
