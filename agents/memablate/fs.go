package memablate

import (
	"errors"
	"io/fs"
	"os"
)

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func mkdirAll(p string) error { return os.MkdirAll(p, 0o755) }
