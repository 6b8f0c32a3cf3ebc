package testtier

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs of size bytes on a fresh directory for the test and
// returns the directory: a real file system that fills up (ENOSPC), as a
// spool's disk does in production. It is unmounted when the test ends.
// Mounting needs root; without it the test is skipped, except under CI
// ($CI set), where it fails: the suite never passes by silently leaving
// out its disk-full tests.
func Tmpfs(tb testing.TB, size int) string {
	tb.Helper()
	dir := tb.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("mount a %d-byte tmpfs (needs root): %v: %s", size, err, out)
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	tb.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			tb.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
