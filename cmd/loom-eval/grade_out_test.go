package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
)

// openFilesNamed counts this process's open file descriptors on path.
func openFilesNamed(t *testing.T, path string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestGradeClosesOutWhenWritingFails: when writing the graded trials to
// --out fails (here /dev/full, where every write fails with ENOSPC), the
// error says so and the file is closed all the same (it stayed open).
func TestGradeClosesOutWhenWritingFails(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	before := openFilesNamed(t, "/dev/full")
	m := &Main{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	trials := []datasets.Trial{{CaseID: "c1"}}
	_, err := m.writeGraded("/dev/full", trials, gradeCarried{inline: []bool{true}, spans: []bool{true}})
	if err == nil || !strings.Contains(err.Error(), "grade: write: ") {
		t.Errorf("writing to /dev/full: %v, want a grade: write: error", err)
	}
	if after := openFilesNamed(t, "/dev/full"); after != before {
		t.Errorf("/dev/full open %d times after the failed write, %d before", after, before)
	}
}
