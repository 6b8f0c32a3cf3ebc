package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
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
	// stateConnecting: Start returned while the server could not be
	// reached (Config.ConnectInBackground); a goroutine keeps connecting.
	stateConnecting
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

	// summaryTable is the quoted traces table (trace summaries); summaries the
	// builders that keep it (summaries.go); schema the version the
	// store was migrated to (math.MaxInt: the latest).
	summaryTable string
	// attrsTable is the quoted trace_attrs table (migration 12): per
	// trace, what its spans' attributes hold, for search (search.go).
	attrsTable string
	summaries  summaryCache
	schema     int
	// The background connection (Config.ConnectInBackground): stopBG
	// ends it, bgDone is closed when it has, and connErr is its last
	// failure (reads and writes name it meanwhile).
	stopBG  context.CancelFunc
	bgDone  chan struct{}
	connMu  sync.Mutex
	connErr error
	connAt  time.Time // since when it has been trying
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
		summaryTable:    d.DB + ".traces",
		attrsTable:      d.DB + ".trace_attrs",
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
	case stateRunning, stateConnecting:
		return errors.New("start clickhouse store: already started")
	case stateShutdown:
		return fmt.Errorf("start clickhouse store: %w", errClosed)
	}
	if !s.cfg.ConnectInBackground {
		return s.connect(ctx, upTo, s.cfg.ConnectWait)
	}
	// An outage at start is just an outage: serve (which sets
	// ConnectInBackground) spools what it acknowledges meanwhile. The
	// connection is made in the background from the start — the driver's
	// handshake with a server that accepts and never answers ignores the
	// context for its dial timeout — and Start waits for it up to
	// ConnectWait (at least a second), failing only when the server
	// answers with a refusal.
	s.connMu.Lock()
	s.connErr, s.connAt = errors.New("the first connection attempt has not finished"), time.Now()
	s.connMu.Unlock()
	bctx, cancel := context.WithCancel(context.Background())
	results := make(chan error, 1)
	s.stopBG, s.bgDone = cancel, make(chan struct{})
	s.state.Store(stateConnecting)
	go s.keepConnecting(bctx, upTo, results)
	t := time.NewTimer(max(s.cfg.ConnectWait, time.Second))
	defer t.Stop()
	for {
		select {
		case err := <-results:
			if err == nil {
				return nil
			}
			if unreachable(err) {
				continue
			}
			s.stopConnecting()
			return err
		case <-ctx.Done():
			s.stopConnecting()
			return fmt.Errorf("connect to clickhouse: %w", ctx.Err())
		case <-t.C:
			s.connMu.Lock()
			err := s.connErr
			s.connMu.Unlock()
			s.log.Warn("clickhouse cannot be reached; started without it, connecting in the background",
				"server", s.server(), "error", err)
			return nil
		}
	}
}

// stopConnecting ends the background connection after a failed Start
// (which may then be retried).
func (s *Store) stopConnecting() {
	s.stopBG()
	<-s.bgDone
	s.stopBG = nil
	if s.state.Load() == stateConnecting {
		s.state.Store(stateNew)
	}
}

// connect connects (waiting up to wait for a server below the protocol),
// migrates and repairs; on success the store is running.
func (s *Store) connect(ctx context.Context, upTo int, wait time.Duration) error {
	conn, err := ch.Open(s.opts)
	if err != nil {
		return fmt.Errorf("connect to clickhouse: %w", err)
	}
	s.conn = conn
	if err := s.firstPing(ctx, conn, wait); err != nil {
		conn.Close()
		s.conn = nil
		return fmt.Errorf("connect to clickhouse: %w", err)
	}
	if _, err := s.migrate(ctx, upTo); err != nil {
		conn.Close()
		s.conn = nil
		return fmt.Errorf("migrate clickhouse database %s: %w", s.ddl.database, err)
	}
	s.schema = math.MaxInt
	if upTo > 0 {
		s.schema = upTo
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
		m, err := s.backfillSummaries(ctx, time.Now().Add(-w))
		if err != nil {
			conn.Close()
			s.conn = nil
			return fmt.Errorf("start clickhouse store %s: %w", s.ddl.database, err)
		}
		if m > 0 {
			s.log.Warn("trace summaries repaired: traces had spans and no summary (a write failed before its summary and was not retried)",
				"traces", m, "window", w)
		}
	}
	// Running only if nothing else happened meanwhile: a Shutdown that
	// gave up waiting for the background connection has closed the store.
	if !s.state.CompareAndSwap(stateNew, stateRunning) && !s.state.CompareAndSwap(stateConnecting, stateRunning) {
		conn.Close()
		return errClosed
	}
	return nil
}

// keepConnecting tries connect until it succeeds or ctx (Shutdown) ends
// it, with backoff, sending each attempt's result to results when there is
// room (Start listens while it waits). Failures are logged once a minute
// at most; the last one is what reads, writes and Ping report meanwhile.
func (s *Store) keepConnecting(ctx context.Context, upTo int, results chan<- error) {
	defer close(s.bgDone)
	delay := 200 * time.Millisecond
	var logged time.Time
	for attempt := 1; ; attempt++ {
		err := s.connect(ctx, upTo, 0)
		select {
		case results <- err:
		default:
		}
		if err == nil {
			if attempt > 1 {
				s.log.Info("clickhouse reachable: connected and migrated", "server", s.server(), "attempts", attempt)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.connMu.Lock()
		s.connErr = err
		s.connMu.Unlock()
		if attempt > 1 && time.Since(logged) >= time.Minute {
			s.log.Warn("clickhouse still cannot be reached; retrying", "server", s.server(), "attempt", attempt, "error", err)
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// server names the server(s) the store connects to, for messages.
func (s *Store) server() string {
	if len(s.opts.Addr) == 1 {
		return s.opts.Addr[0]
	}
	return fmt.Sprint(s.opts.Addr)
}

// unreachable reports whether err is a failure below the protocol (the
// server did not answer), as opposed to an answer (an exception: bad
// credentials, a schema the server refuses), which retrying cannot mend.
func unreachable(err error) bool {
	var ex *proto.Exception
	return !errors.As(err, &ex)
}

// firstPing pings until the server answers, for up to wait while the
// failure is below the protocol. The driver dials lazily, so this ping is
// the first connection and its handshake.
func (s *Store) firstPing(ctx context.Context, conn driver.Conn, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := conn.Ping(ctx)
		var ex *proto.Exception
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			// The caller's context ended during the ping, whose own error
			// may be the connection's (reset, refused): say both, so a
			// caller matching the deadline with errors.Is finds it.
			return fmt.Errorf("after %d attempts: %w", attempt, errors.Join(err, ctx.Err()))
		case errors.As(err, &ex), !time.Now().Add(delay).Before(deadline):
			if attempt > 1 {
				return fmt.Errorf("after %d attempts over %s: %w", attempt, wait, err)
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
	if s.stopBG != nil {
		// Connecting in the background: stop that first (it may have
		// just succeeded, and the store is then running).
		s.stopBG()
		select {
		case <-s.bgDone:
		case <-ctx.Done():
			// A handshake with a hung server ignores the context; the
			// attempt closes its connection when it ends (connect).
			s.state.CompareAndSwap(stateConnecting, stateShutdown)
			if s.state.Load() != stateRunning {
				s.stopBG = nil
				return fmt.Errorf("shut down clickhouse store: stop connecting: %w", ctx.Err())
			}
		}
		s.stopBG = nil
	}
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

// usable is nil while the store is started and not shut down; while it
// is still connecting in the background, an error wrapping
// store.ErrUnavailable that names the server and the last failure.
func (s *Store) usable() error {
	switch s.state.Load() {
	case stateRunning:
		return nil
	case stateNew:
		return errNotStarted
	case stateConnecting:
		s.connMu.Lock()
		err, since := s.connErr, s.connAt
		s.connMu.Unlock()
		return fmt.Errorf("clickhouse %s: %w: not connected yet (trying since %s): %w",
			s.server(), store.ErrUnavailable, since.UTC().Format(time.RFC3339), err)
	default:
		return errClosed
	}
}

// preparable is usable for what needs no server (Prepare, AppendBatch):
// nil while connecting in the background too, so a spool can take data.
func (s *Store) preparable() error {
	if s.state.Load() == stateConnecting {
		return nil
	}
	return s.usable()
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
