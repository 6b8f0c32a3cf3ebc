package projects

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// faultFS is the real file system with one step made to fail.
type faultFS struct {
	osFS
	fail string // chmod, write, sync, close, rename or syncdir
}

var errInjected = errors.New("injected failure")

func (f faultFS) CreateTemp(dir, pattern string) (tempFile, error) {
	t, err := f.osFS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return faultFile{tempFile: t, fail: f.fail}, nil
}

func (f faultFS) Rename(o, n string) error {
	if f.fail == "rename" {
		return errInjected
	}
	return f.osFS.Rename(o, n)
}

func (f faultFS) SyncDir(dir string) error {
	if f.fail == "syncdir" {
		return errInjected
	}
	return f.osFS.SyncDir(dir)
}

type faultFile struct {
	tempFile
	fail string
}

func (f faultFile) Chmod(m os.FileMode) error {
	if f.fail == "chmod" {
		return errInjected
	}
	return f.tempFile.Chmod(m)
}

func (f faultFile) Write(b []byte) (int, error) {
	if f.fail == "write" {
		return 0, errInjected
	}
	return f.tempFile.Write(b)
}

func (f faultFile) Sync() error {
	if f.fail == "sync" {
		return errInjected
	}
	return f.tempFile.Sync()
}

func (f faultFile) Close() error {
	err := f.tempFile.Close()
	if f.fail == "close" {
		return errInjected
	}
	return err
}

// TestFailedSaveIsAnErrorAndNoKey: whichever step of saving the keys file
// fails, Create returns the error and no secret (so `keys create` prints
// none), Revoke returns the error (so `keys revoke` reports nothing), the
// registry keeps what is on disk, and no temporary file is left.
func TestFailedSaveIsAnErrorAndNoKey(t *testing.T) {
	for _, step := range []string{"chmod", "write", "sync", "close", "rename", "syncdir"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "keys.json")
			reg, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			live, k, err := reg.Create("alpha", KindReadWrite, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)

			reg.fs = faultFS{fail: step}
			secret, nk, err := reg.Create("alpha", KindRead, rand.Reader)
			if !errors.Is(err, errInjected) || secret != "" || nk.ID != "" || !strings.Contains(err.Error(), path) {
				t.Errorf("Create with a failing %s = (%q, %q, %v); want no key and the error naming %s", step, secret, nk.ID, err, path)
			}
			if _, err := reg.Revoke(k.ID); !errors.Is(err, errInjected) {
				t.Errorf("Revoke with a failing %s = %v; want the error", step, err)
			}
			if step != "syncdir" { // the rename happened; only its durability is unknown
				if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
					t.Errorf("the keys file changed although saving failed at %s", step)
				}
				if _, ok := reg.Authenticate(live); !ok {
					t.Errorf("after a failed revocation (%s) the registry no longer authenticates the live key", step)
				}
			}
			if m, _ := filepath.Glob(filepath.Join(dir, ".keys-*.tmp")); len(m) != 0 {
				t.Errorf("temporary files left: %v", m)
			}
		})
	}
}

// TestKeysFileIsOwnerOnly: the keys file is 0600 and a directory made for
// it 0700, even with a umask of 0.
func TestKeysFileIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), ".loomwork")
	path := filepath.Join(dir, "keys.json")
	reg, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.Create("alpha", KindRead, rand.Reader); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m != want {
			t.Errorf("%s has mode %v, want %v", p, m, want)
		}
	}
}
