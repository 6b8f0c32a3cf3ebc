// Package storeurl opens a trace store from the one string users configure
// (the --store flag or LOOMWORK_STORE): empty for the embedded default, a
// file path or sqlite:/file: URL for the embedded store, clickhouse://… for
// ClickHouse.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// DefaultPath is the embedded store used when no store is configured,
// relative to the working directory.
const DefaultPath = ".loomwork/traces.db"

// EnvVar names the environment variable commands read the store URL from
// when no flag is given.
const EnvVar = "LOOMWORK_STORE"

// Backend kinds.
const (
	SQLite     = "sqlite"
	ClickHouse = "clickhouse"
)

// Location is a parsed store URL.
type Location struct {
	Backend string // SQLite or ClickHouse
	Path    string // SQLite: the database file
	DSN     string // ClickHouse: the DSN handed to the driver
}

// String describes the location for logs and messages, without secrets.
func (l Location) String() string {
	if l.Backend == ClickHouse {
		return "clickhouse " + redact(l.DSN)
	}
	return "sqlite " + l.Path
}

var schemeRe = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.\-]*):`)

// Parse interprets a store URL.
func Parse(raw string) (Location, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return Location{Backend: SQLite, Path: DefaultPath}, nil
	}
	m := schemeRe.FindStringSubmatch(s)
	if m == nil {
		return Location{Backend: SQLite, Path: s}, nil
	}
	switch scheme := strings.ToLower(m[1]); scheme {
	case "sqlite", "file":
		p := strings.TrimPrefix(s[len(m[0]):], "//")
		if i := strings.IndexAny(p, "?#"); i >= 0 {
			return Location{}, fmt.Errorf("store URL %q: %s: URLs take no query or fragment", raw, scheme)
		}
		if p == "" {
			return Location{}, fmt.Errorf("store URL %q: missing the database file path (e.g. sqlite:%s)", raw, DefaultPath)
		}
		return Location{Backend: SQLite, Path: p}, nil
	case "clickhouse":
		if !strings.HasPrefix(s[len(m[0]):], "//") {
			return Location{}, fmt.Errorf("store URL %q: want clickhouse://HOST:PORT/DATABASE", raw)
		}
		return Location{Backend: ClickHouse, DSN: s}, nil
	default:
		return Location{}, fmt.Errorf("store URL %q: unknown scheme %q (want a file path, sqlite:PATH, file:PATH or clickhouse://HOST:PORT/DATABASE)", raw, scheme)
	}
}

// Open returns the store raw names, started (the backend's New then
// Start); the caller shuts it down. readOnly opens the embedded store for
// reading only (so commands can read while serve writes); a missing
// embedded store is then an error rather than created. For the default
// location, the .loomwork directory is created when writing.
func Open(ctx context.Context, raw string, readOnly bool) (store.Store, error) {
	return OpenWithLogger(ctx, raw, readOnly, nil)
}

// Option adjusts how OpenWithLogger opens a store.
type Option func(*options)

type options struct {
	connectWait time.Duration
	background  bool
}

// WaitForServer makes the open of a server backend (ClickHouse) keep
// trying for up to d while the server cannot be reached — it may still be
// starting. The embedded store ignores it.
func WaitForServer(d time.Duration) Option { return func(o *options) { o.connectWait = d } }

// KeepConnecting makes the open of a server backend (ClickHouse) succeed
// while the server cannot be reached (after WaitForServer's wait): the
// store keeps connecting in the background, its reads and writes failing
// with store.ErrUnavailable until it has (clickhouse.Config
// .ConnectInBackground). For `loom-eval serve`, whose spool takes data
// meanwhile. The embedded store ignores it.
func KeepConnecting() Option { return func(o *options) { o.background = true } }

// OpenWithLogger is Open with a logger for the backend's operational
// messages (nil: the backend's default).
func OpenWithLogger(ctx context.Context, raw string, readOnly bool, log *slog.Logger, opts ...Option) (store.Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	loc, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	switch loc.Backend {
	case SQLite:
		if readOnly {
			if _, err := os.Stat(loc.Path); errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("open trace store %s: no such file (has loom-eval serve stored anything yet?)", loc.Path)
			}
		} else if raw == "" || loc.Path == DefaultPath {
			if err := os.MkdirAll(filepath.Dir(loc.Path), 0o700); err != nil { // the store holds traces: owner only
				return nil, fmt.Errorf("create store directory: %w", err)
			}
		}
		st, err := sqlite.Open(ctx, sqlite.Config{Path: loc.Path, ReadOnly: readOnly, Logger: log})
		if err != nil {
			return nil, err
		}
		return st, nil
	case ClickHouse:
		return openClickHouse(ctx, loc, log, o)
	}
	return nil, fmt.Errorf("store URL %q: unsupported backend %q", raw, loc.Backend)
}

// redact hides a password in a DSN.
func redact(dsn string) string {
	i := strings.Index(dsn, "://")
	if i < 0 {
		return dsn
	}
	rest := dsn[i+3:]
	at := strings.Index(rest, "@")
	slash := strings.Index(rest, "/")
	if at < 0 || (slash >= 0 && slash < at) {
		return dsn
	}
	user := rest[:at]
	if c := strings.Index(user, ":"); c >= 0 {
		user = user[:c] + ":***"
	}
	return dsn[:i+3] + user + rest[at:]
}
