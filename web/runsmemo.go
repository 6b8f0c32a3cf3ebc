package web

import (
	"os"
	"sync"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
)

// runsMemo keeps each journal file's run rows for the runs list, keyed by
// the file's path and checked against its size and modification time: the
// list used to read and decode every journal in the runs directory on every
// request. A file that changed is decoded again; entries for files that
// are gone are dropped at the next scan.
type runsMemo struct {
	mu      sync.Mutex
	files   map[string]runsMemoEntry
	decodes int // journals decoded, for tests
}

type runsMemoEntry struct {
	size int64
	mod  time.Time
	rows []RunRow
	err  error
}

// rows returns the run rows of the journal at path (name is how the list
// names it), decoding the file only when it changed since it was last
// read.
func (m *runsMemo) rows(name, path string) ([]RunRow, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	e, ok := m.files[path]
	m.mu.Unlock()
	if ok && e.size == fi.Size() && e.mod.Equal(fi.ModTime()) {
		return e.rows, e.err
	}
	runs, err := journal.ReadJSONLFile(path)
	var rows []RunRow
	if err == nil {
		for _, run := range runs {
			rows = append(rows, summariseRun(name, run))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string]runsMemoEntry{}
	}
	m.files[path] = runsMemoEntry{size: fi.Size(), mod: fi.ModTime(), rows: rows, err: err}
	m.decodes++
	return rows, err
}

// keep drops the entries of files not in paths.
func (m *runsMemo) keep(paths map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.files {
		if !paths[p] {
			delete(m.files, p)
		}
	}
}
