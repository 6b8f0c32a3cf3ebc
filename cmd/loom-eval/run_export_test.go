package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal/journaldb"
)

// TestRunExportFailureLeavesNoTempFileAndSaysWhat: when the export's last
// step (renaming FILE.tmp onto --journal-out) fails, the error says it was
// the journal export and FILE.tmp is removed.
func TestRunExportFailureLeavesNoTempFileAndSaysWhat(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(dir, "runs.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	// --journal-out names a folder that holds a file: nothing can be
	// renamed onto it.
	out := filepath.Join(dir, "out.jsonl")
	if err := os.MkdirAll(filepath.Join(out, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = exportRuns(ctx, j, out, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "run: export journal: ") {
		t.Errorf("export onto a folder: %v, want an error starting %q", err, "run: export journal: ")
	}
	if _, serr := os.Stat(out + ".tmp"); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("%s.tmp left behind: %v", out, serr)
	}
}

// TestRunMemoryFolderThatCannotBeCreatedIsNamed: a --memory whose folder
// cannot be created fails naming run and --memory.
func TestRunMemoryFolderThatCannotBeCreatedIsNamed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(file, "sub", "memory.db")
	code, _, stderr := runCLI(t, "run", "--agent", "research", "--task", "hello", "--memory", mem)
	if code != ExitRuntimeErr || !strings.Contains(stderr, "loom-eval: run: --memory "+mem+": mkdir ") {
		t.Errorf("run --memory %s: exit %d, stderr %q", mem, code, stderr)
	}
}
