//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filelock

import "os"

// Supported is whether Lock locks: flock(2) is not available here.
const Supported = false

// Lock is a no-op where flock(2) is not available.
func Lock(*os.File) (unlock func(), err error) { return func() {}, nil }
