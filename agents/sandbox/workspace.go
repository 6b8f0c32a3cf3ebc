package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ErrTooLarge is returned by ReadWorkspaceFile for a file over its limit.
var ErrTooLarge = errors.New("sandbox: workspace file too large")

// ReadWorkspaceFile reads a file the sandboxed command left in its
// workspace, for host-side code that collects results. The command controls
// everything in the workspace, so a plain os.ReadFile(filepath.Join(ws,
// name)) is an escape hatch in the other direction: a symlink "result.txt ->
// /etc/shadow" made inside the sandbox would be followed on the host. This
// resolves name strictly beneath ws and refuses every symlink on the way
// (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), refuses anything but a
// regular file, and reads at most max bytes.
func ReadWorkspaceFile(ws, name string, max int64) ([]byte, error) {
	dir, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", ws, err)
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, fmt.Errorf("open workspace file %q: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat workspace file %q: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read workspace file %q: not a regular file (%s)", name, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("read workspace file %q: %d bytes over the %d-byte limit: %w", name, fi.Size(), max, ErrTooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read workspace file %q: %w", name, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("read workspace file %q: over the %d-byte limit: %w", name, max, ErrTooLarge)
	}
	return data, nil
}
