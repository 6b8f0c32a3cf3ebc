package storeurl

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDefaultStoreIsOwnerOnly: opening the default store creates
// .loomwork/ 0700 and traces.db 0600, even with a umask of 0.
func TestDefaultStoreIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	t.Chdir(t.TempDir())
	st, err := Open(context.Background(), "", false)
	if err != nil {
		t.Fatal(err)
	}
	st.Shutdown(context.Background())
	for p, want := range map[string]os.FileMode{filepath.Dir(DefaultPath): 0o700, DefaultPath: 0o600} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := info.Mode().Perm(); m != want {
			t.Errorf("%s has mode %v, want %v", p, m, want)
		}
	}
}
