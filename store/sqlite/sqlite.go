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
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/loomwork/loomwork/store"
)

var _ store.Store = (*Store)(nil)

// errClosed is returned by every method after Close.
var errClosed = errors.New("sqlite store is closed")

// errReadOnly is returned by WriteSpans on a read-only store.
var errReadOnly = errors.New("sqlite store is open read-only")

// Store is the embedded trace store. Safe for concurrent use.
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
	// bulkStmts caches the writer's multi-row inserts (see bulkInsert).
	bulkStmts map[bulkKey]*sql.Stmt

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// Open opens (creating when missing, unless cfg.ReadOnly) the store at
// cfg.Path and brings its schema up to date. A file written by a newer
// binary is an error, as is a read-only open of a file that needs a
// migration.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("open trace store %s: %w", cfg.Path, err)
	}
	cfg.Path = abs
	if cfg.ReadOnly {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("open trace store %s read-only: %w", abs, err)
		}
	} else if st, err := os.Stat(filepath.Dir(abs)); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("open trace store %s: directory %s does not exist", abs, filepath.Dir(abs))
	}

	s := &Store{cfg: cfg, log: cfg.Logger, resourceIDs: make(map[[16]byte]int64), closed: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			s.closeDBs()
		}
	}()

	if !cfg.ReadOnly {
		s.writer, err = sql.Open("sqlite", dsn(abs, cfg, false))
		if err != nil {
			return nil, fmt.Errorf("open trace store %s: %w", abs, err)
		}
		s.writer.SetMaxOpenConns(1)
		s.writer.SetMaxIdleConns(1)
		s.writer.SetConnMaxLifetime(0)
		s.writer.SetConnMaxIdleTime(0)
		if err := s.writer.PingContext(ctx); err != nil {
			return nil, fmt.Errorf("open trace store %s: %w", abs, err)
		}
		if err := migrate(ctx, s.writer, abs, time.Now); err != nil {
			return nil, err
		}
	}

	s.reader, err = sql.Open("sqlite", dsn(abs, cfg, true))
	if err != nil {
		return nil, fmt.Errorf("open trace store %s: %w", abs, err)
	}
	s.reader.SetMaxOpenConns(cfg.MaxReaders)
	s.reader.SetMaxIdleConns(cfg.MaxReaders)
	if cfg.ReadOnly {
		v, err := userVersion(ctx, s.reader)
		if err != nil {
			return nil, fmt.Errorf("open trace store %s read-only: %w", abs, err)
		}
		switch want := schemaVersion(); {
		case v > want:
			return nil, newerSchemaError(abs, v, want)
		case v == 0:
			return nil, fmt.Errorf("open trace store %s read-only: not a Loomwork trace store (no schema)", abs)
		case v < want:
			return nil, fmt.Errorf("open trace store %s read-only: schema version %d needs migrating to %d; open it once read-write (e.g. with loom-eval serve)", abs, v, want)
		}
	}

	s.codec, err = newCodec()
	if err != nil {
		return nil, fmt.Errorf("open trace store %s: %w", abs, err)
	}
	ok = true
	return s, nil
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

// Path is the absolute path of the database file.
func (s *Store) Path() string { return s.cfg.Path }

// Close checkpoints the WAL into the main file (best effort: readers in
// other processes may hold it) and closes every connection. Safe to call
// more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		if s.writer != nil {
			if _, err := s.writer.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				s.log.Warn("trace store: checkpoint on close failed", "path", s.cfg.Path, "err", err)
			}
		}
		s.closeErr = s.closeDBs()
	})
	return s.closeErr
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

func (s *Store) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}
