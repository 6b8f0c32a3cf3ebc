//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filelock

import (
	"os"
	"syscall"
)

// Supported is whether Lock locks (flock(2) is available here).
const Supported = true

// Lock blocks until it holds an exclusive lock on f, retrying when a
// signal interrupts the wait, and returns the function that releases it.
// Closing f releases the lock too.
func Lock(f *os.File) (unlock func(), err error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
	}
}
