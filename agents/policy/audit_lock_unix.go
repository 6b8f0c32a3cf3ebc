//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package policy

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on f, so processes appending to
// one audit log (run, serve's approvals, a2a serve) extend one chain.
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
