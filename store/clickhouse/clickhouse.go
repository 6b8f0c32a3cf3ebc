package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/ClickHouse/clickhouse-go/v2/lib/proto"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/internal/ctxlock"
)

var _ store.Store = (*Store)(nil)

var (
	errNotStarted = errors.New("clickhouse store is not started")
	errClosed     = errors.New("clickhouse store is shut down")
)

// Lifecycle states (Store.state).
const (
	stateNew int32 = iota
	stateRunning
	stateShutdown
)

// Store is the ClickHouse trace store. It is safe for concurrent use once
// started.
type Store struct {
	conn driver.Conn // set by Start
	opts *ch.Options // what Start connects with
	ddl  ddl
	cfg  Config
	log  *slog.Logger

	// life serialises Start and Shutdown (a channel so a Shutdown waiting
	// for a Start honours its context); state is read by every method.
	life  ctxlock.Mutex
	state atomic.Int32

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

	// pending holds trace_index rows whose insert failed (repair.go).
	pending pendingIndex
}

// defaultCompression is the wire compression when the DSN names none: LZ4
// to a server across a network, none to one on this machine. Over
// loopback, compressing saves no scarce bandwidth and costs both sides
// CPU for every byte: on agent traffic, whose spans are mostly message
// text, the driver's LZ4 was a sixth of serve's CPU
// (docs/bench-ingest.md).
func defaultCompression(addrs []string) *ch.Compression {
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return &ch.Compression{Method: ch.CompressionLZ4}
		}
	}
	return &ch.Compression{Method: ch.CompressionNone}
}

func hasParam(query, name string) bool {
	q, err := url.ParseQuery(query)
	return err == nil && q.Has(name)
}

// New checks cfg and returns a store that is not started: it does not
// connect. Start connects and migrates.
func New(cfg Config) (*Store, error) {
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
		opts.Compression = defaultCompression(opts.Addr)
		if _, query, ok := strings.Cut(cfg.DSN, "?"); ok && hasParam(query, "compress") {
			// compress=false (or 0): the driver leaves Compression unset.
			opts.Compression = &ch.Compression{Method: ch.CompressionNone}
		}
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
		// Reads filter spans with "trace_id IN (subquery on spans or
		// trace_index)"; over Distributed tables ClickHouse refuses that
		// unless told where the subquery runs. Both tables are sharded by
		// cityHash64(trace_id), so a trace's rows are all on one shard and
		// each shard can answer the subquery from its own local table
		// ("local"), with no set shipped between nodes. Every such
		// subquery in this package is keyed by trace_id.
		if _, set := opts.Settings["distributed_product_mode"]; !set {
			opts.Settings["distributed_product_mode"] = "local"
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	d := newClusterDDL(database, cfg.Cluster, cfg.Coordinator, cfg.TTL)
	return &Store{
		opts:            opts,
		ddl:             d,
		cfg:             cfg,
		log:             log,
		life:            ctxlock.New(),
		spansTable:      d.DB + ".spans",
		traceIndexTable: d.DB + ".trace_index",
	}, nil
}

// Open is New followed by Start.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, 0)
}

// open is Open with the schema brought up to version upTo (0: the latest).
func open(ctx context.Context, cfg Config, upTo int) (*Store, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.start(ctx, upTo); err != nil {
		return nil, err
	}
	return s, nil
}

// Start connects to ClickHouse, creates the database if needed and applies
// pending migrations. A failed Start closes the connection it opened and
// may be retried; Start on a started or shut-down store is an error.
func (s *Store) Start(ctx context.Context) error { return s.start(ctx, 0) }

func (s *Store) start(ctx context.Context, upTo int) error {
	if err := s.life.Lock(ctx); err != nil {
		return fmt.Errorf("connect to clickhouse: %w", err)
	}
	defer s.life.Unlock()
	switch s.state.Load() {
	case stateRunning:
		return errors.New("start clickhouse store: already started")
	case stateShutdown:
		return fmt.Errorf("start clickhouse store: %w", errClosed)
	}
	conn, err := ch.Open(s.opts)
	if err != nil {
		return fmt.Errorf("connect to clickhouse: %w", err)
	}
	s.conn = conn
	if err := s.firstPing(ctx, conn); err != nil {
		conn.Close()
		s.conn = nil
		return fmt.Errorf("connect to clickhouse: %w", err)
	}
	if _, err := s.migrate(ctx, upTo); err != nil {
		conn.Close()
		s.conn = nil
		return fmt.Errorf("migrate clickhouse database %s: %w", s.ddl.database, err)
	}
	// The repair needs the trace index (version 3); a store opened at an
	// older version for a migration test has none.
	if w := s.cfg.indexRepairWindow(); w > 0 && upTo == 0 {
		n, err := s.repairTraceIndex(ctx, time.Now().Add(-w))
		if err != nil {
			conn.Close()
			s.conn = nil
			return fmt.Errorf("start clickhouse store %s: %w", s.ddl.database, err)
		}
		if n > 0 {
			s.log.Warn("trace index repaired: traces had spans and no index row (a write failed between its two inserts and was not retried)",
				"traces", n, "window", w)
		}
	}
	s.state.Store(stateRunning)
	return nil
}

// firstPing pings until the server answers, for up to cfg.ConnectWait
// while the failure is below the protocol. The driver dials lazily, so
// this ping is the first connection and its handshake.
func (s *Store) firstPing(ctx context.Context, conn driver.Conn) error {
	deadline := time.Now().Add(s.cfg.ConnectWait)
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := conn.Ping(ctx)
		var ex *proto.Exception
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ex), ctx.Err() != nil, !time.Now().Add(delay).Before(deadline):
			if attempt > 1 {
				return fmt.Errorf("after %d attempts over %s: %w", attempt, s.cfg.ConnectWait, err)
			}
			return err
		}
		s.log.Warn("clickhouse does not answer yet; retrying", "attempt", attempt, "retry_in", delay, "error", err)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// Shutdown closes the connection pool; queries in flight fail. It is nil
// on a store that was never started and safe to call more than once.
func (s *Store) Shutdown(ctx context.Context) error {
	if err := s.life.Lock(ctx); err != nil {
		return fmt.Errorf("shut down clickhouse store: %w", err)
	}
	defer s.life.Unlock()
	if s.state.Load() != stateRunning {
		s.state.Store(stateShutdown)
		return nil
	}
	// Best effort: what cannot be written now, the next Start repairs.
	if err := s.flushPendingIndex(ctx); err != nil {
		s.log.Warn("shut down clickhouse store: trace index rows left for the next start's repair", "error", err)
	}
	s.state.Store(stateShutdown)
	if err := s.conn.Close(); err != nil {
		return fmt.Errorf("shut down clickhouse store: %w", err)
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

// Database is the database holding the tables.
func (s *Store) Database() string { return s.ddl.database }

var _ store.Pinger = (*Store)(nil)

// Ping asks the server for a round trip: nil when it answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping clickhouse: %w", err)
	}
	return nil
}
