package filelock_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/filelock"
)

// A lock held through one open of a file makes Lock through a second open
// of the same path (another open file description, which flock(2) treats
// as another process) wait until the first is released; then the second
// holds it, and the first waits in turn.
func TestLockWaitsForTheHolder(t *testing.T) {
	if !filelock.Supported {
		t.Skip("no flock(2) here: Lock is a no-op")
	}
	path := filepath.Join(t.TempDir(), "locked")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	first, second := open(), open()
	unlockFirst, err := filelock.Lock(first)
	if err != nil {
		t.Fatal(err)
	}
	locked := make(chan func(), 1)
	go func() {
		unlock, err := filelock.Lock(second)
		if err != nil {
			t.Error(err)
			unlock = func() {}
		}
		locked <- unlock
	}()
	select {
	case <-locked:
		t.Fatal("the second open took the lock while the first held it")
	case <-time.After(200 * time.Millisecond):
	}
	unlockFirst()
	var unlockSecond func()
	select {
	case unlockSecond = <-locked:
	case <-time.After(10 * time.Second):
		t.Fatal("the second open did not get the lock after the first released it")
	}

	relocked := make(chan struct{})
	go func() {
		unlock, err := filelock.Lock(first)
		if err != nil {
			t.Error(err)
		} else {
			unlock()
		}
		close(relocked)
	}()
	select {
	case <-relocked:
		t.Fatal("the first open took the lock back while the second held it")
	case <-time.After(200 * time.Millisecond):
	}
	unlockSecond()
	<-relocked
}

// Closing the file releases its lock, as for a process that exits
// holding it.
func TestCloseReleases(t *testing.T) {
	if !filelock.Supported {
		t.Skip("no flock(2) here: Lock is a no-op")
	}
	path := filepath.Join(t.TempDir(), "locked")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := filelock.Lock(f); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	done := make(chan error, 1)
	go func() {
		unlock, err := filelock.Lock(g)
		if err == nil {
			unlock()
		}
		done <- err
	}()
	f.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the holder did not release the lock")
	}
}
