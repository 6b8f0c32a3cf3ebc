package chlocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Version is the libchdb release Loomwork is tested with: the npm package
// @chdb/lib-linux-x64-gnu at this version carries the ClickHouse 26.7 engine.
const Version = "26.7.3-stable.1"

// ListenHost is the only address the server binds: it has no password.
const ListenHost = "127.0.0.1"

// DefaultLibPath returns where scripts/clickhouse.sh fetch caches libchdb.so:
// $LOOMWORK_CACHE/chdb/<Version>/libchdb.so, with LOOMWORK_CACHE defaulting
// to $HOME/.cache/loomwork. getenv is usually os.Getenv.
func DefaultLibPath(getenv func(string) string) string {
	return filepath.Join(CacheDir(getenv), "chdb", Version, "libchdb.so")
}

// CacheDir returns Loomwork's cache root ($LOOMWORK_CACHE, else
// $HOME/.cache/loomwork).
func CacheDir(getenv func(string) string) string {
	if d := getenv("LOOMWORK_CACHE"); d != "" {
		return d
	}
	home := getenv("HOME")
	if home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "loomwork")
}

// Config configures a Server.
type Config struct {
	// LibPath is the path of libchdb.so.
	LibPath string
	// DataDir holds the databases; it is created if missing and survives
	// restarts.
	DataDir string
	// PortsFile receives "TCP_PORT\tHTTP_PORT\n" once the server answers
	// queries; it is removed on shutdown.
	PortsFile string
	// StartTimeout bounds start-up (default 60 s).
	StartTimeout time.Duration
	// StopTimeout bounds how long Run waits for ClickHouse to finish after
	// the context is cancelled (default 20 s).
	StopTimeout time.Duration
	// ParentPID, when set, stops the server once that process is no longer
	// its parent (it died): a test binary killed by a timeout must not
	// leave a server running for ever.
	ParentPID int
	// Logger receives progress messages (default: discard).
	Logger *slog.Logger

	// ConfigFile, when set, is a ClickHouse server configuration (XML)
	// loaded at start-up (clickhouse-local's --config-file): a cluster
	// node's remote_servers, macros, zookeeper and memory limits.
	ConfigFile string
	// TCPPort and HTTPPort fix the listeners' ports; 0 lets the OS pick.
	// A cluster node needs a fixed native port: the other nodes'
	// remote_servers name it.
	TCPPort, HTTPPort int
}

// Validate reports a missing or unusable setting.
func (c Config) Validate() error {
	var errs []error
	if c.LibPath == "" {
		errs = append(errs, errors.New("lib: path of libchdb.so must be set (fetch it with scripts/clickhouse.sh fetch)"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("path: data directory must be set"))
	}
	if c.PortsFile == "" {
		errs = append(errs, errors.New("ports-file: must be set"))
	}
	if c.StartTimeout < 0 {
		errs = append(errs, fmt.Errorf("start timeout must not be negative (got %s)", c.StartTimeout))
	}
	if c.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("stop timeout must not be negative (got %s)", c.StopTimeout))
	}
	for _, p := range []struct {
		name string
		port int
	}{{"tcp port", c.TCPPort}, {"http port", c.HTTPPort}} {
		if p.port < 0 || p.port > 65535 {
			errs = append(errs, fmt.Errorf("%s: %d is not a port (0 lets the OS pick)", p.name, p.port))
		}
	}
	return errors.Join(errs...)
}

// Server runs ClickHouse inside the current process. See the package
// comment for why that process must do nothing else.
type Server struct {
	cfg Config
	log *slog.Logger
}

// NewServer validates cfg; it does no I/O.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("clickhouse-local config: %w", err)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 20 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{cfg: cfg, log: log}, nil
}

// keepAliveMarker lets the shutdown query find the keep-alive query in
// system.processes without matching itself (it spells the marker in two
// halves).
const keepAliveMarker = "loomwork_keepalive"

// Run loads libchdb, starts the server and blocks until ctx is cancelled
// (then it stops ClickHouse and returns nil) or ClickHouse fails.
func (s *Server) Run(ctx context.Context) error {
	dataDir, err := filepath.Abs(s.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("resolve data dir %s: %w", s.cfg.DataDir, err)
	}
	portsFile, err := filepath.Abs(s.cfg.PortsFile)
	if err != nil {
		return fmt.Errorf("resolve ports file %s: %w", s.cfg.PortsFile, err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	rawPorts := portsFile + ".raw"
	for _, f := range []string{portsFile, rawPorts} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale ports file: %w", err)
		}
	}
	if _, err := os.Stat(s.cfg.LibPath); err != nil {
		return fmt.Errorf("open libchdb: %w (fetch it with scripts/clickhouse.sh fetch)", err)
	}
	lib, err := loadLib(s.cfg.LibPath)
	if err != nil {
		return err
	}

	args := []string{"clickhouse"}
	if s.cfg.ConfigFile != "" {
		cf, err := filepath.Abs(s.cfg.ConfigFile)
		if err != nil {
			return fmt.Errorf("resolve config file %s: %w", s.cfg.ConfigFile, err)
		}
		if _, err := os.Stat(cf); err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		args = append(args, "--config-file="+cf)
	}
	args = append(args,
		"--path="+dataDir,
		"--listen_host="+ListenHost,
		"--tcp_port="+strconv.Itoa(s.cfg.TCPPort),
		"--http_port="+strconv.Itoa(s.cfg.HTTPPort),
	)
	args = append(args, "--multiquery", "--query="+startupQuery(rawPorts))
	s.log.Info("starting ClickHouse", "lib", s.cfg.LibPath, "data", dataDir)
	done := make(chan string, 1)
	go func() { done <- lib.queryCmdline(args) }()

	tcp, httpPort, err := s.awaitReady(ctx, rawPorts, done)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			// Cancelled during start-up: stop what may be running.
			return s.stop(httpPort, done)
		}
		return err
	}
	if err := writeFileAtomic(portsFile, fmt.Sprintf("%d\t%d\n", tcp, httpPort)); err != nil {
		_ = s.stop(httpPort, done)
		return fmt.Errorf("write ports file: %w", err)
	}
	_ = os.Remove(rawPorts)
	s.log.Info("ClickHouse ready", "tcp_port", tcp, "http_port", httpPort, "ports_file", portsFile)

	parentGone := make(chan struct{})
	if s.cfg.ParentPID > 0 {
		go watchParent(ctx, s.cfg.ParentPID, parentGone)
	}
	select {
	case msg := <-done:
		_ = os.Remove(portsFile)
		return fmt.Errorf("clickhouse stopped unexpectedly: %s", orUnknown(msg))
	case <-parentGone:
		s.log.Warn("parent process is gone", "parent_pid", s.cfg.ParentPID)
	case <-ctx.Done():
	}
	err = s.stop(httpPort, done)
	_ = os.Remove(portsFile)
	return err
}

// startupQuery opens the listeners, reports their ports and keeps the
// server alive: the listeners live only while chdb_query_cmdline runs.
func startupQuery(portsFile string) string {
	// clickhouse-local opens only these two: "SYSTEM START/STOP LISTEN in
	// clickhouse-local supports only TCP and HTTP listeners". Without the
	// interserver HTTP listener no ReplicatedMergeTree replica can start
	// (docs/clickhouse.md, "Cluster on one machine").
	return strings.Join([]string{
		"SYSTEM START LISTEN TCP",
		"SYSTEM START LISTEN HTTP",
		"SELECT getServerPort('tcp_port'), getServerPort('http_port') INTO OUTFILE " + quote(portsFile) + " TRUNCATE FORMAT TSV",
		// One row per second for ~31 years. max_block_size=1 makes the
		// sleep per row; the other settings lift the per-block sleep cap
		// and the execution time limit. The alias carries the marker that
		// stop looks for.
		"SELECT sleepEachRow(1) AS " + keepAliveMarker + " FROM numbers(1000000000) SETTINGS function_sleep_max_microseconds_per_block=0, max_block_size=1, max_execution_time=0 FORMAT Null",
	}, "; ")
}

// quote returns s as a ClickHouse string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

func (s *Server) awaitReady(ctx context.Context, rawPorts string, done <-chan string) (tcp, httpPort int, err error) {
	deadline := time.NewTimer(s.cfg.StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case msg := <-done:
			return 0, 0, fmt.Errorf("clickhouse start-up failed: %s", orUnknown(msg))
		case <-ctx.Done():
			return tcp, httpPort, ctx.Err()
		case <-deadline.C:
			return 0, 0, fmt.Errorf("clickhouse did not answer within %s", s.cfg.StartTimeout)
		case <-tick.C:
		}
		if httpPort == 0 {
			b, err := os.ReadFile(rawPorts)
			if err != nil {
				continue
			}
			t, h, ok := ParsePorts(string(b))
			if !ok {
				continue
			}
			tcp, httpPort = t, h
		}
		if err := pingHTTP(ctx, httpPort); err == nil {
			return tcp, httpPort, nil
		}
	}
}

// ParsePorts reads "TCP\tHTTP\n" as written to the ports file.
func ParsePorts(s string) (tcp, http int, ok bool) {
	if !strings.HasSuffix(s, "\n") {
		return 0, 0, false
	}
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, false
	}
	t, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || t <= 0 || t > 65535 || h <= 0 || h > 65535 {
		return 0, 0, false
	}
	return t, h, true
}

// stop cancels the keep-alive query; chdb_query_cmdline then shuts
// ClickHouse down cleanly (parts flushed, locks released) and returns.
// The KILL is repeated until ClickHouse has stopped: a stop that comes
// right after start-up (a parent that died at once, on a busy machine)
// can run before the keep-alive statement has begun, kill nothing, and
// leave the server running for good (TestProcessStopsWhenItsParentIsGone
// timed out so under load).
func (s *Server) stop(httpPort int, done <-chan string) error {
	s.log.Info("stopping ClickHouse")
	deadline := time.NewTimer(s.cfg.StopTimeout)
	defer deadline.Stop()
	again := time.NewTicker(500 * time.Millisecond)
	defer again.Stop()
	for {
		if httpPort != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			q := "KILL QUERY WHERE position(query, concat('loomwork', '_keepalive')) > 0 SYNC"
			if _, err := httpQuery(ctx, httpPort, q); err != nil {
				s.log.Warn("cancel keep-alive query", "err", err)
			}
			cancel()
		}
		select {
		case <-done:
			s.log.Info("ClickHouse stopped")
			return nil
		case <-deadline.C:
			return fmt.Errorf("clickhouse did not stop within %s", s.cfg.StopTimeout)
		case <-again.C:
		}
	}
}

// watchParent closes gone when the process is re-parented, i.e. pid died.
func watchParent(ctx context.Context, pid int, gone chan<- struct{}) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != pid {
				close(gone)
				return
			}
		}
	}
}

func pingHTTP(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	body, err := httpQuery(ctx, port, "SELECT 1")
	if err != nil {
		return err
	}
	if strings.TrimSpace(body) != "1" {
		return fmt.Errorf("ping: unexpected answer %q", body)
	}
	return nil
}

// httpQuery runs q through the HTTP interface on 127.0.0.1:port.
func httpQuery(ctx context.Context, port int, q string) (string, error) {
	u := "http://" + ListenHost + ":" + strconv.Itoa(port) + "/?query=" + url.QueryEscape(q)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return "", fmt.Errorf("build request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("query %q: %w", q, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read answer to %q: %w", q, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("query %q: HTTP %d: %s", q, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func orUnknown(msg string) string {
	if msg == "" {
		return "no error message (see the log above)"
	}
	return msg
}

// chdbLib is the part of libchdb's C API the server uses.
type chdbLib struct {
	queryCmdlineFn func(argc int32, argv unsafe.Pointer) uintptr
	resultErrorFn  func(result uintptr) unsafe.Pointer
	destroyFn      func(result uintptr)
}

func loadLib(path string) (*chdbLib, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("load libchdb %s: %w", path, err)
	}
	l := &chdbLib{}
	for _, f := range []struct {
		name string
		fn   any
	}{
		{"chdb_query_cmdline", &l.queryCmdlineFn},
		{"chdb_result_error", &l.resultErrorFn},
		{"chdb_destroy_query_result", &l.destroyFn},
	} {
		sym, err := purego.Dlsym(h, f.name)
		if err != nil {
			return nil, fmt.Errorf("load libchdb %s: symbol %s: %w", path, f.name, err)
		}
		purego.RegisterFunc(f.fn, sym)
	}
	return l, nil
}

// queryCmdline calls chdb_query_cmdline(argc, argv) and returns the error
// message of its result ("" if none).
func (l *chdbLib) queryCmdline(args []string) string {
	bufs := make([][]byte, len(args))
	argv := make([]*byte, len(args)+1)
	for i, a := range args {
		bufs[i] = append([]byte(a), 0)
		argv[i] = &bufs[i][0]
	}
	res := l.queryCmdlineFn(int32(len(args)), unsafe.Pointer(&argv[0]))
	runtime.KeepAlive(bufs)
	runtime.KeepAlive(argv)
	if res == 0 {
		return "chdb_query_cmdline returned no result"
	}
	msg := goString(l.resultErrorFn(res))
	l.destroyFn(res)
	return msg
}

// goString copies a NUL-terminated C string.
func goString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	var n int
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}
