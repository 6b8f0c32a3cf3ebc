package sqlite

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Synchronous modes accepted by Config.Synchronous.
const (
	// SyncFull fsyncs the WAL on every commit: an acknowledged write survives
	// a power loss. The default.
	SyncFull = "full"
	// SyncNormal fsyncs only at checkpoints: faster, but the last commits
	// before a power loss (not a process crash) may be rolled back. Only for
	// throwaway stores.
	SyncNormal = "normal"
)

// Config configures the embedded store.
type Config struct {
	// Path is the database file. Created (with its schema) when missing,
	// unless ReadOnly; its directory must exist.
	Path string
	// ReadOnly opens an existing store for reading only, e.g. from a second
	// process while another one writes. WriteSpans then fails.
	ReadOnly bool
	// Synchronous is SyncFull (default when empty) or SyncNormal.
	Synchronous string
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection or process before failing. Default 5s.
	BusyTimeout time.Duration
	// MaxReaders caps the read connection pool. Default 4.
	MaxReaders int
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger

	_ struct{} // prevent unkeyed literals
}

var (
	errNoPath = errors.New("path must be set")
)

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	switch {
	case c.Path == "":
		errs = append(errs, errNoPath)
	case c.Path == ":memory:" || strings.HasPrefix(c.Path, "file:"):
		errs = append(errs, fmt.Errorf("path must be a file path (got %q): the store needs a file other connections and processes can open", c.Path))
	}
	switch strings.ToLower(c.Synchronous) {
	case "", SyncFull, SyncNormal:
	default:
		errs = append(errs, fmt.Errorf("synchronous must be %q or %q (got %q)", SyncFull, SyncNormal, c.Synchronous))
	}
	if c.BusyTimeout < 0 {
		errs = append(errs, fmt.Errorf("busy_timeout must not be negative (got %v)", c.BusyTimeout))
	}
	if c.MaxReaders < 0 {
		errs = append(errs, fmt.Errorf("max_readers must not be negative (got %d)", c.MaxReaders))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite store config: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Synchronous == "" {
		c.Synchronous = SyncFull
	}
	c.Synchronous = strings.ToLower(c.Synchronous)
	if c.BusyTimeout == 0 {
		c.BusyTimeout = 5 * time.Second
	}
	if c.MaxReaders == 0 {
		c.MaxReaders = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}
