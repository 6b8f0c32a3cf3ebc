//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package datasets

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f, so two processes adding
// labels to one file (two `loom-eval labels add`, or the CLI and a server)
// cannot both pass the duplicate check and write the same label.
func lockFile(f *os.File) (func(), error) {
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
