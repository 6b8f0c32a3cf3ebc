package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/loomwork/loomwork/store"
)

var _ store.Store = (*Store)(nil)

var errClosed = errors.New("clickhouse store is closed")

// Store is the ClickHouse trace store. It is safe for concurrent use.
type Store struct {
	conn   driver.Conn
	ddl    ddl
	cfg    Config
	log    *slog.Logger
	closed atomic.Bool

	// spansTable and traceIndexTable are the quoted tables reads and
	// writes use (Distributed tables under a cluster).
	spansTable      string
	traceIndexTable string

	// batches and prepared recycle the column slices and JSON arenas of
	// writes: the driver copies every value into its own buffers, so
	// nothing refers to them once the insert returns, and reusing them
	// spares a kilobyte or more of garbage per span.
	batches  sync.Pool // *spanBatch
	prepared sync.Pool // *PreparedSpans
}

// Open connects to ClickHouse, creates the database if needed and applies
// pending migrations.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, 0)
}

// open is Open with the schema brought up to version upTo (0: the latest).
func open(ctx context.Context, cfg Config, upTo int) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("clickhouse store config: %w", err)
	}
	opts, err := ch.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("clickhouse store config: dsn: %w", err)
	}
	database := cfg.database(opts)
	// Connect without a current database (it may not exist yet); every
	// statement names its tables in full.
	opts.Auth.Database = ""
	if opts.Compression == nil {
		opts.Compression = &ch.Compression{Method: ch.CompressionLZ4}
	}
	if opts.Settings == nil {
		opts.Settings = ch.Settings{}
	}
	if cfg.Cluster != "" {
		// Acknowledge an insert only once the shards have it, not when the
		// Distributed table has queued it on the local disk.
		if _, set := opts.Settings["distributed_foreground_insert"]; !set {
			opts.Settings["distributed_foreground_insert"] = 1
		}
	}
	conn, err := ch.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("connect to clickhouse: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d := newDDL(database, cfg.Cluster, cfg.TTL)
	s := &Store{
		conn:            conn,
		ddl:             d,
		cfg:             cfg,
		log:             log,
		spansTable:      d.DB + ".spans",
		traceIndexTable: d.DB + ".trace_index",
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect to clickhouse: %w", err)
	}
	if _, err := s.migrate(ctx, upTo); err != nil {
		conn.Close()
		return nil, fmt.Errorf("migrate clickhouse database %s: %w", database, err)
	}
	return s, nil
}

// Close closes the connection pool. It is safe to call more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.conn.Close()
}

// Database is the database holding the tables.
func (s *Store) Database() string { return s.ddl.database }
