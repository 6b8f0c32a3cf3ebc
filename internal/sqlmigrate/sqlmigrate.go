// Package sqlmigrate owns schema versioning for every SQLite file Loomwork
// keeps — the trace store (store/sqlite), the journal
// (agents/journal/journaldb), the memory store (agents/memory) and the
// coordinator (internal/coord) — and the durable way to open one
// (OpenDurable).
//
// A store's schema is a list of numbered migrations, NNNN_description.sql,
// versions 1..N with no gaps (Load). Apply brings a file up to date one
// migration at a time: each runs in its own write transaction together
// with its row in schema_migrations(version, name, applied_at_ns) and the
// bump of PRAGMA user_version, so a crash leaves the file at the previous
// version, and a file whose user_version is newer than the build knows is
// refused (NewerError). Files made before a store used this package carry
// user_version 0; Options.Adopt tells Apply which version such a file is
// equivalent to.
//
// The package imports only the standard library: the caller registers the
// SQLite driver ("sqlite", modernc.org/sqlite).
package sqlmigrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migration is one step of a schema.
type Migration struct {
	Version int    // 1, 2, … in order, no gaps
	Name    string // the file name, e.g. 0001_init.sql; recorded in schema_migrations
	SQL     string // one or more statements, run in the migration's transaction
}

// Load reads the migrations in directory dir of fsys (typically an
// embed.FS) in version order. Every file there must be named
// NNNN_description.sql with NNNN a positive number; the versions must run
// 1, 2, … with no gap and no repeat. Errors name the offending file.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("list migrations in %s: %w", dir, err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			return nil, fmt.Errorf("migration %s: a directory, want NNNN_description.sql files only", path.Join(dir, name))
		}
		num, desc, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || strings.TrimSuffix(desc, ".sql") == "" || !strings.HasSuffix(name, ".sql") ||
			strings.Trim(num, "0123456789") != "" {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql with NNNN a positive version number", path.Join(dir, name))
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", path.Join(dir, name), err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			what := "versions must run 1, 2, … with no gaps"
			if i > 0 && ms[i-1].Version == m.Version {
				what = fmt.Sprintf("version %d is also %s", m.Version, ms[i-1].Name)
			}
			return nil, fmt.Errorf("migration %s: expected version %d (%s)", path.Join(dir, m.Name), i+1, what)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return ms, nil
}

// Options adjusts Apply. The zero value applies every migration.
type Options struct {
	// UpTo stops at this version (0: the latest). A file already past it,
	// but not past the latest, is left as it is.
	UpTo int
	// After, when not nil, runs in a migration's transaction after its
	// SQL, for the steps SQL cannot do. It is not called for versions a
	// file is adopted at.
	After func(ctx context.Context, tx *sql.Tx, version int) error
	// Adopt, when not nil, is called (in a write transaction) for a file
	// whose user_version is 0, before migration 1. It returns the version
	// the file is equivalent to: 0 for a new file (the migrations run from
	// 1), v > 0 for a file made before the store used this package, whose
	// schema is already migration v's (versions 1..v are then recorded
	// without running). An error refuses the file (e.g. one that is not
	// this store's).
	Adopt func(ctx context.Context, tx *sql.Tx) (int, error)
	// Now stamps schema_migrations rows. Default time.Now.
	Now func() time.Time
	// Logger receives a line per upgrade or adoption of an existing file
	// (Info) and per migration of a new one (Debug). Default: none.
	Logger *slog.Logger
}

// NewerError is Apply's error for a file written by a newer build.
type NewerError struct {
	Name   string // the file, as Apply was told (e.g. "trace store /data/traces.db")
	Have   int    // the file's user_version
	Latest int    // the newest version this build knows
}

func (e *NewerError) Error() string {
	return fmt.Sprintf("%s has schema version %d, newer than this binary supports (%d): upgrade loom-eval", e.Name, e.Have, e.Latest)
}

// Querier is what Version reads through: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Version is the file's schema version (PRAGMA user_version).
func Version(ctx context.Context, q Querier) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Apply brings the schema of db up to version opts.UpTo (the latest of ms
// when 0) and returns the version the file was at (after adoption) and the
// version it is at now.
//
// Each migration runs in a transaction of its own with its
// schema_migrations row and the user_version bump, so a failure or a
// crash leaves the file at the previous version with nothing of the
// failed migration applied. db's transactions must take the write lock at
// BEGIN (BEGIN IMMEDIATE: the modernc DSN parameter _txlock=immediate, as
// OpenDurable sets): the version is read inside the transaction, so two
// processes (or two *sql.DB) applying at once serialise, and each
// migration runs once.
//
// A file whose user_version is newer than the latest of ms is refused with
// a *NewerError. name identifies the file in every error and log line,
// e.g. "journal /abs/path/run.db"; callers need not wrap the errors.
func Apply(ctx context.Context, db *sql.DB, name string, ms []Migration, opts Options) (from, to int, err error) {
	latest := len(ms)
	for i, m := range ms {
		if m.Version != i+1 {
			return 0, 0, fmt.Errorf("%s: migration %s has version %d, want %d (use Load)", name, m.Name, m.Version, i+1)
		}
	}
	target := opts.UpTo
	switch {
	case target < 0 || target > latest:
		return 0, 0, fmt.Errorf("%s: cannot migrate to version %d: this build knows versions 1..%d", name, target, latest)
	case target == 0:
		target = latest
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	// A file already up to date (the usual case) is checked without
	// taking the write lock. Versions only rise, so what is read here
	// stays true.
	cur, err := Version(ctx, db)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", name, err)
	}
	if cur > latest {
		return cur, cur, &NewerError{Name: name, Have: cur, Latest: latest}
	}
	if cur >= target && cur > 0 {
		return cur, cur, nil
	}

	r := run{db: db, name: name, ms: ms, target: target, now: now, opts: opts, log: log}
	from = -1
	for {
		was, at, done, err := r.step(ctx)
		if from < 0 {
			from = was
		}
		if err != nil {
			return from, at, err
		}
		if done {
			if at > from && !r.fresh {
				log.Info("schema migrated", "file", name, "from", from, "to", at)
			}
			return from, at, nil
		}
	}
}

// run is one Apply.
type run struct {
	db     *sql.DB
	name   string
	ms     []Migration
	target int
	now    func() time.Time
	opts   Options
	log    *slog.Logger
	fresh  bool // the file had no schema when Apply began (not adopted)
}

// step runs one transaction: it reads the version under the write lock
// (was; for a legacy file, the version Adopt found), and adopts the file
// or applies the next migration. at is the version the file is at when
// step returns, also on error; done reports that it is at or past target.
func (r *run) step(ctx context.Context) (was, at int, done bool, err error) {
	name, ms := r.name, r.ms
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: begin migration: %w", name, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback() //nolint:errcheck // the error that matters is err
		}
	}()
	cur, err := Version(ctx, tx)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: %w", name, err)
	}
	if cur > len(ms) {
		return cur, cur, false, &NewerError{Name: name, Have: cur, Latest: len(ms)}
	}
	if cur == 0 {
		adopted := 0
		if r.opts.Adopt != nil {
			if adopted, err = r.opts.Adopt(ctx, tx); err != nil {
				return 0, 0, false, fmt.Errorf("%s: %w", name, err)
			}
		}
		switch {
		case adopted < 0:
			return 0, 0, false, fmt.Errorf("%s: adoption returned version %d", name, adopted)
		case adopted > len(ms):
			return 0, 0, false, &NewerError{Name: name, Have: adopted, Latest: len(ms)}
		case adopted > 0:
			if err := createTable(ctx, tx, name); err != nil {
				return 0, 0, false, err
			}
			for _, m := range ms[:adopted] {
				if err := record(ctx, tx, name, m, r.now); err != nil {
					return 0, 0, false, err
				}
			}
			if err := setVersion(ctx, tx, name, adopted); err != nil {
				return 0, 0, false, err
			}
			if err := tx.Commit(); err != nil {
				return 0, 0, false, fmt.Errorf("%s: commit adoption at version %d: %w", name, adopted, err)
			}
			r.log.Info("schema adopted", "file", name, "version", adopted, "migration", ms[adopted-1].Name)
			return adopted, adopted, adopted >= r.target, nil
		default:
			r.fresh = true
		}
	}
	if cur >= r.target {
		if err := tx.Commit(); err != nil {
			return cur, cur, false, fmt.Errorf("%s: %w", name, err)
		}
		return cur, cur, true, nil
	}
	m := ms[cur]
	if err := createTable(ctx, tx, name); err != nil {
		return cur, cur, false, err
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return cur, cur, false, fmt.Errorf("%s: apply migration %s: %w", name, m.Name, err)
	}
	if r.opts.After != nil {
		if err := r.opts.After(ctx, tx, m.Version); err != nil {
			return cur, cur, false, fmt.Errorf("%s: apply migration %s: %w", name, m.Name, err)
		}
	}
	if err := record(ctx, tx, name, m, r.now); err != nil {
		return cur, cur, false, err
	}
	if err := setVersion(ctx, tx, name, m.Version); err != nil {
		return cur, cur, false, err
	}
	if err := tx.Commit(); err != nil {
		return cur, cur, false, fmt.Errorf("%s: commit migration %s: %w", name, m.Name, err)
	}
	level := slog.LevelInfo
	if r.fresh {
		level = slog.LevelDebug
	}
	r.log.Log(ctx, level, "schema migration applied", "file", name, "migration", m.Name)
	return cur, m.Version, m.Version >= r.target, nil
}

func createTable(ctx context.Context, tx *sql.Tx, name string) error {
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version       INTEGER PRIMARY KEY,
		name          TEXT    NOT NULL,
		applied_at_ns INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("%s: create schema_migrations: %w", name, err)
	}
	return nil
}

func record(ctx context.Context, tx *sql.Tx, name string, m Migration, now func() time.Time) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at_ns) VALUES (?, ?, ?)`,
		m.Version, m.Name, now().UnixNano()); err != nil {
		return fmt.Errorf("%s: record migration %s: %w", name, m.Name, err)
	}
	return nil
}

func setVersion(ctx context.Context, tx *sql.Tx, name string, v int) error {
	// PRAGMA takes no bound parameters; v is an int from this binary.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		return fmt.Errorf("%s: set schema version %d: %w", name, v, err)
	}
	return nil
}

// LegacyVersion reads the schema version a store recorded before it used
// this package: the value under key 'schema_version' in table (columns
// key, value). It returns 0 when the table or the row does not exist. It
// is meant for Options.Adopt.
func LegacyVersion(ctx context.Context, tx *sql.Tx, table string) (int, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil {
		return 0, fmt.Errorf("inspect legacy table %s: %w", table, err)
	}
	if n == 0 {
		return 0, nil
	}
	var have string
	// table is a constant of the caller's, not input.
	err := tx.QueryRowContext(ctx, `SELECT value FROM "`+strings.ReplaceAll(table, `"`, `""`)+`" WHERE key = 'schema_version'`).Scan(&have)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read legacy schema version from %s: %w", table, err)
	}
	v, err := strconv.Atoi(have)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("read legacy schema version from %s: %q is not a version number", table, have)
	}
	return v, nil
}

// OpenDurable opens the SQLite file at path (made absolute) for a durable
// store: WAL, synchronous FULL, the given busy timeout, foreign keys when
// asked, and write transactions that take the lock at BEGIN (BEGIN
// IMMEDIATE: no lock upgrade, so no SQLITE_BUSY in the middle of one, and
// Apply's version check holds the lock). The caller registers the
// "sqlite" driver (modernc.org/sqlite).
func OpenDurable(path string, busy time.Duration, foreignKeys bool) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	if foreignKeys {
		q.Add("_pragma", "foreign_keys(1)")
	}
	q.Set("_txlock", "immediate")
	return sql.Open("sqlite", "file:"+abs+"?"+q.Encode())
}
