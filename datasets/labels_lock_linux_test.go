package datasets

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Another process's lock (here another open file description, which
// flock(2) treats alike) makes AppendLabel wait until it is released.
func TestAppendLabelWaitsForTheFileLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "labels.jsonl")
	if _, err := AppendLabel(path, Label{CaseID: "c", Trial: 0, Grader: "g", Passed: true}); err != nil {
		t.Fatal(err)
	}
	holder, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := AppendLabel(path, Label{CaseID: "c", Trial: 1, Grader: "g"})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("AppendLabel returned (%v) while another holder had the file locked", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
