package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/loomwork/loomwork/store/storetest"
)

// TestStoreFilesAreOwnerOnly: the trace store's database and its -wal and
// -shm files are created 0600 (traces carry prompts and tool outputs),
// even with a umask of 0 — the mode is the code's, not the environment's.
func TestStoreFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	path := filepath.Join(t.TempDir(), "traces.db")
	s, err := Open(context.Background(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if err := s.WriteSpans(context.Background(), storetest.GenerateTraces(2, 3, 1)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %v, want -rw------- (0600)", filepath.Base(p), m)
		}
	}
}
