package spool

import (
	"context"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSpoolFilesAreOwnerOnly: the spool directory is created 0700 and its
// segments and checkpoint 0600 (it holds spans as received), even with a
// umask of 0.
func TestSpoolFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "spool")
	w := mustOpen(t, testOptions(dir))
	for i := 0; i < 50; i++ {
		mustAppend(t, w, make([]byte, 200)) // more than one segment
	}
	recs, err := w.Read(context.Background(), 1<<20)
	if err != nil || len(recs) == 0 {
		t.Fatalf("read: %d records, %v", len(recs), err)
	}
	if err := w.Commit(recs[len(recs)/2].End); err != nil { // writes the checkpoint
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		if m := info.Mode().Perm(); m != want {
			t.Errorf("%s has mode %v, want %v", p, m, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Fatalf("only %d files in the spool: the test checked too little", files)
	}
}
