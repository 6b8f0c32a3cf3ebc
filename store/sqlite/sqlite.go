package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/loomwork/loomwork/internal/sqlmigrate"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/internal/ctxlock"
)

var _ store.Store = (*Store)(nil)

var (
	// errNotStarted is returned by every method before Start.
	errNotStarted = errors.New("sqlite store is not started")
	// errClosed is returned by every method after Shutdown.
	errClosed = errors.New("sqlite store is shut down")
)

// errReadOnly is returned by WriteSpans on a read-only store.
var errReadOnly = errors.New("sqlite store is open read-only")

// Lifecycle states (Store.state).
const (
	stateNew int32 = iota
	stateRunning
	stateShutdown
)

// Store is the embedded trace store. Safe for concurrent use once started.
type Store struct {
	cfg    Config
	log    *slog.Logger
	writer *sql.DB // one connection; nil when read-only
	reader *sql.DB
	codec  *codec

	// writeMu serialises WriteSpans: the summary merge reads then writes,
	// and the resource cache must match what the transaction sees.
	writeMu sync.Mutex
	// resourceIDs caches resource hash → row id for rows known committed.
	resourceIDs map[[16]byte]int64
	// builders caches the summary builders of recently written traces.
	builders *builderCache
	// scopeIDs caches scopes hash → row id likewise.
	scopeIDs map[[16]byte]int64
	// bulkStmts caches the writer's multi-row inserts (see bulkInsert).
	bulkStmts map[bulkKey]*sql.Stmt
	// searchKeys caches search key → search_keys.id (see searchKeyID).
	searchKeys map[searchKey]int64
	// strs caches summary_strings (names.go).
	strs strDict
	// big keeps the child counts of huge traces' big parents, by trace
	// seq (window.go, bigParents).
	bigMu sync.Mutex
	big   map[int64]bigParentSet
	// compactBelow is the span count from which a trace is kept in span
	// rows instead of compact blocks (compact.go): bigTraceSpans; tests
	// set 0 to write files as versions before 9 did.
	compactBelow int
	// writeV8 makes writes store what version 8 stored (span rows, names
	// as text), for upgrade tests.
	writeV8 bool

	// life serialises Start and Shutdown (a channel so a Shutdown waiting
	// for a Start honours its context); state is read by every method.
	life  ctxlock.Mutex
	state atomic.Int32
	// stopped is closed once Shutdown has closed every connection, with
	// closeErr set.
	stopped  chan struct{}
	closeErr error
}

// New checks cfg and returns a store that is not started: it touches no
// file. Start opens the database.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Store{
		cfg:          cfg,
		log:          cfg.Logger,
		resourceIDs:  make(map[[16]byte]int64),
		builders:     newBuilderCache(),
		compactBelow: bigTraceSpans,
		searchKeys:   make(map[searchKey]int64),
		scopeIDs:     make(map[[16]byte]int64),
		life:         ctxlock.New(),
		stopped:      make(chan struct{}),
	}, nil
}

// Open is New followed by Start.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Start opens (creating when missing, unless cfg.ReadOnly) the store at
// cfg.Path and brings its schema up to date. A file written by a newer
// binary is an error, as is a read-only open of a file that needs a
// migration. A failed Start releases everything it opened and may be
// retried; Start on a started or shut-down store is an error.
func (s *Store) Start(ctx context.Context) error {
	if err := s.life.Lock(ctx); err != nil {
		return fmt.Errorf("start trace store %s: %w", s.cfg.Path, err)
	}
	defer s.life.Unlock()
	switch s.state.Load() {
	case stateRunning:
		return fmt.Errorf("start trace store %s: already started", s.cfg.Path)
	case stateShutdown:
		return fmt.Errorf("start trace store %s: %w", s.cfg.Path, errClosed)
	}
	if err := s.open(ctx); err != nil {
		s.closeDBs()
		s.writer, s.reader, s.codec = nil, nil, nil
		return err
	}
	s.state.Store(stateRunning)
	return nil
}

// open acquires the connections and the codec; on error the caller
// releases whatever it set.
func (s *Store) open(ctx context.Context) error {
	abs, err := filepath.Abs(s.cfg.Path)
	if err != nil {
		return fmt.Errorf("open trace store %s: %w", s.cfg.Path, err)
	}
	s.cfg.Path = abs
	cfg := s.cfg
	if cfg.ReadOnly {
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("open trace store %s read-only: %w", abs, err)
		}
	} else if st, err := os.Stat(filepath.Dir(abs)); err != nil || !st.IsDir() {
		return fmt.Errorf("open trace store %s: directory %s does not exist", abs, filepath.Dir(abs))
	}

	// The codec first: a migration may re-encode stored rows.
	s.codec, err = newCodec()
	if err != nil {
		return fmt.Errorf("open trace store %s: %w", abs, err)
	}
	if !cfg.ReadOnly {
		if err := createPrivate(abs); err != nil {
			return fmt.Errorf("open trace store %s: %w", abs, err)
		}
		s.writer, err = sql.Open("sqlite", dsn(abs, cfg, false))
		if err != nil {
			return fmt.Errorf("open trace store %s: %w", abs, err)
		}
		s.writer.SetMaxOpenConns(1)
		s.writer.SetMaxIdleConns(1)
		s.writer.SetConnMaxLifetime(0)
		s.writer.SetConnMaxIdleTime(0)
		if err := s.writer.PingContext(ctx); err != nil {
			return fmt.Errorf("open trace store %s: %w", abs, err)
		}
		if err := migrate(ctx, s.writer, abs, time.Now, s.log, s.afterMigration); err != nil {
			return err
		}
	}

	s.reader, err = sql.Open("sqlite", dsn(abs, cfg, true))
	if err != nil {
		return fmt.Errorf("open trace store %s: %w", abs, err)
	}
	s.reader.SetMaxOpenConns(cfg.MaxReaders)
	s.reader.SetMaxIdleConns(cfg.MaxReaders)
	if cfg.ReadOnly {
		v, err := sqlmigrate.Version(ctx, s.reader)
		if err != nil {
			return fmt.Errorf("open trace store %s read-only: %w", abs, err)
		}
		switch want := schemaVersion(); {
		case v > want:
			return &sqlmigrate.NewerError{Name: "trace store " + abs, Have: v, Latest: want}
		case v == 0:
			return fmt.Errorf("open trace store %s read-only: not a Loomwork trace store (no schema)", abs)
		case v < want:
			return fmt.Errorf("open trace store %s read-only: schema version %d needs migrating to %d; open it once read-write (e.g. with loom-eval serve)", abs, v, want)
		}
	}

	if s.writer != nil {
		if err := s.backfillSearch(ctx); err != nil {
			return fmt.Errorf("open trace store %s: %w", abs, err)
		}
	}
	return nil
}

// dsn builds the modernc URI for path. Readers are query_only so a bug can
// never write through them; read-only stores also open the file mode=ro.
func dsn(path string, cfg Config, reader bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)+")")
	if reader {
		q.Add("_pragma", "query_only(1)")
		if cfg.ReadOnly {
			q.Set("mode", "ro")
		}
	} else {
		// Incremental auto-vacuum, so the retention job can hand the
		// pages of deleted traces back to the file system. It takes
		// effect on a new file (set before the first table); an older
		// file is converted by the job's first VACUUM (retention.go).
		q.Add("_pragma", "auto_vacuum(2)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+cfg.Synchronous+")")
		// 64 MiB page cache: span ids are random, so index inserts touch
		// pages all over the file.
		q.Add("_pragma", "cache_size(-65536)")
		// Take the write lock at BEGIN: the summary merge reads then writes,
		// and another process might write the same file.
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// Path is the absolute path of the database file once Start has run (the
// configured path before).
func (s *Store) Path() string { return s.cfg.Path }

// Shutdown stops new calls, waits for the write in flight, checkpoints the
// WAL into the main file (best effort: readers in other processes may hold
// it) and closes every connection. It returns ctx's error if that does not
// finish in time (the connections are then closed once the write ends). It
// is nil on a store that was never started, and safe to call more than
// once: later calls wait for the first one and return its result.
func (s *Store) Shutdown(ctx context.Context) error {
	if err := s.life.Lock(ctx); err != nil {
		return fmt.Errorf("shut down trace store %s: %w", s.cfg.Path, err)
	}
	switch s.state.Swap(stateShutdown) {
	case stateRunning:
		go func() {
			s.writeMu.Lock()
			defer s.writeMu.Unlock()
			if s.writer != nil {
				if _, err := s.writer.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
					s.log.Warn("trace store: checkpoint on shutdown failed", "path", s.cfg.Path, "err", err)
				}
			}
			s.closeErr = s.closeDBs()
			close(s.stopped)
		}()
	case stateNew:
		close(s.stopped) // never started: nothing to close
	}
	s.life.Unlock()
	select {
	case <-s.stopped:
		return s.closeErr
	default:
	}
	select {
	case <-s.stopped:
		return s.closeErr
	case <-ctx.Done():
		return fmt.Errorf("shut down trace store %s: %w", s.cfg.Path, context.Cause(ctx))
	}
}

func (s *Store) closeDBs() error {
	var errs []error
	if s.codec != nil {
		s.codec.close()
	}
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close trace store %s: %w", s.cfg.Path, err)
	}
	return nil
}

// usable is nil while the store is started and not shut down.
func (s *Store) usable() error {
	switch s.state.Load() {
	case stateRunning:
		return nil
	case stateNew:
		return errNotStarted
	default:
		return errClosed
	}
}

var _ store.Pinger = (*Store)(nil)

// Ping checks that the file can still be read.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.reader.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite store %s: %w", s.cfg.Path, err)
	}
	return nil
}

// createPrivate creates the database file, empty (a valid new SQLite
// database), with mode 0600 when it does not exist: traces carry prompts,
// tool arguments and outputs, and SQLite would create it 0644. SQLite
// gives the -wal and -shm files the database file's mode. An existing file
// keeps its mode (its owner chose it).
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// Explicit, so the mode does not depend on the umask.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
