package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/portowner"
	"github.com/loomwork/loomwork/internal/projects"
	"github.com/loomwork/loomwork/internal/texttable"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storeurl"
	"github.com/loomwork/loomwork/web"
)

// The environment variables that set serve's listen addresses (and demo's
// defaults): a flag on the command line wins over them.
const (
	envGRPCAddr = "LOOMWORK_GRPC_ADDR"
	envHTTPAddr = "LOOMWORK_HTTP_ADDR"
	envUIAddr   = "LOOMWORK_UI_ADDR"
	// defaultUIAddr is where the web UI listens when neither --ui-addr nor
	// $LOOMWORK_UI_ADDR says otherwise.
	defaultUIAddr = "127.0.0.1:8080"
)

// listener names one of serve's listen addresses the way a user moves it.
type listener struct {
	name string // "OTLP gRPC"
	flag string // "--grpc-addr"
	env  string // "LOOMWORK_GRPC_ADDR"
	addr string // as configured
}

// ListenError is a listener serve could not open. Its message names the
// address and the flag and environment variable that move it; it unwraps
// to the system's error (errors.Is(err, syscall.EADDRINUSE)).
type ListenError struct {
	Listener string // "OTLP gRPC", "OTLP HTTP", "UI"
	Addr     string // the configured address
	Flag     string
	Env      string
	Err      error
	// Holder says which process holds an address in use, and what to do
	// about it, when that can be told ("" otherwise): see portHolder.
	Holder string
}

func (e *ListenError) Error() string {
	move := fmt.Sprintf("move it with %s or %s", e.Flag, e.Env)
	if errors.Is(e.Err, syscall.EADDRINUSE) {
		if e.Holder != "" {
			return fmt.Sprintf("%s address %s is in use (%s): %s", e.Listener, e.Addr, move, e.Holder)
		}
		return fmt.Sprintf("%s address %s is in use (%s)", e.Listener, e.Addr, move)
	}
	return fmt.Sprintf("cannot listen for %s on %s: %v (%s)", e.Listener, e.Addr, e.Err, move)
}

func (e *ListenError) Unwrap() error { return e.Err }

func (l listener) listenError(err error) error {
	le := &ListenError{Listener: l.name, Addr: l.addr, Flag: l.flag, Env: l.env, Err: err}
	if errors.Is(err, syscall.EADDRINUSE) {
		le.Holder = portHolder(l.addr, demoPIDFile)
	}
	return le
}

// demoPIDFile is where scripts/demo.sh (make demo) records the pid of the
// serve it leaves running; make stop stops that pid.
const demoPIDFile = ".loomwork/serve.pid"

// portHolder names the process listening on addr, when it can tell (Linux,
// a process this user may inspect), and what to do about it: the serve
// make demo left running (its pid is in pidFile) is this folder's server
// already, so use it or stop it with make stop; any other loom-eval serve
// or program is named by pid and command line.
func portHolder(addr, pidFile string) string {
	o, ok := portowner.Listening(addr)
	if !ok {
		return ""
	}
	cmd := texttable.Clip(strings.Join(o.Cmdline, " "), 120)
	if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(o.PID) {
		return fmt.Sprintf("pid %d holds it (%s), the loom-eval serve that make demo left running. "+
			"It serves this folder's store already: use it as it is (loom-eval demo sends to it), or stop it with `make stop` and run serve again", o.PID, cmd)
	}
	if len(o.Cmdline) > 1 && filepath.Base(o.Cmdline[0]) == "loom-eval" && o.Cmdline[1] == "serve" {
		return fmt.Sprintf("pid %d holds it (%s), another loom-eval serve: use it, or stop it (kill %d)", o.PID, cmd, o.PID)
	}
	return fmt.Sprintf("pid %d holds it (%s)", o.PID, cmd)
}

// failedListener finds which of ls a listen error (as returned by
// net.Listen, possibly wrapped) is about, by the address in its
// *net.OpError.
func failedListener(err error, ls ...listener) (listener, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "listen" || op.Addr == nil {
		return listener{}, false
	}
	var byPort []listener
	for _, l := range ls {
		if l.addr == collector.AddrOff {
			continue
		}
		a, rerr := net.ResolveTCPAddr("tcp", l.addr)
		if rerr != nil {
			continue
		}
		if a.String() == op.Addr.String() {
			return l, true
		}
		if ta, ok := op.Addr.(*net.TCPAddr); ok && ta.Port == a.Port {
			byPort = append(byPort, l)
		}
	}
	if len(byPort) == 1 {
		return byPort[0], true
	}
	return listener{}, false
}

// ServeReady is what --ready-file holds once every listener is bound and
// the store is open: the addresses actually in use ("off" for a listener
// that is off), so a caller that passed port 0 learns the port.
type ServeReady struct {
	PID      int    `json:"pid"`
	Store    string `json:"store"`
	GRPCAddr string `json:"grpc_addr"`
	HTTPAddr string `json:"http_addr"`
	UIAddr   string `json:"ui_addr"`
	UIURL    string `json:"ui_url,omitempty"`
}

// writeReadyFile writes r as indented JSON (one field per line) to path
// atomically: a reader sees no file or the whole file.
func writeReadyFile(path string, r ServeReady) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("ready file %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("ready file %s: %w", path, err)
	}
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("ready file %s: write %s: %w", path, f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("ready file %s: %w", path, err)
	}
	return nil
}

// serveFlags are `loom-eval serve`'s flags.
type serveFlags struct {
	storeURL, grpcAddr, httpAddr, uiAddr, readyFile, receiver, spoolDir, logLevel, authToken *string
	runsDir, reportsDir, approvalsJournal, labelsFile, ablationsDir, pricesFile, keysFile    *string
	datasetsDir, auditFile, cpuProfile                                                       *string
	redact                                                                                   *string
	maxAttr, maxReqMiB, inFlightMiB, spoolMaxMiB, spoolBatchMiB, gcPercent, writers          *int
	memMiB                                                                                   *uint
	retentionEvery, storeWait, readTimeout                                                   *time.Duration
	redactPatterns                                                                           stringList
}

// register adds serve's flags to fs; the listen addresses default to their
// environment variables, read with getenv.
func (f *serveFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	envOr := func(k, def string) string {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
		return def
	}
	addrUsage := func(what, env, def string) string {
		return fmt.Sprintf("%s listen address: host:port (port 0 picks a free one) or off; default $%s, else %s", what, env, def)
	}
	f.storeURL = fs.String("store", "", "trace store URL: a file path or sqlite:PATH (embedded), clickhouse://HOST:PORT/DB; default $"+storeurl.EnvVar+", else "+storeurl.DefaultPath)
	f.grpcAddr = fs.String("grpc-addr", envOr(envGRPCAddr, collector.DefaultGRPCAddr), addrUsage("OTLP/gRPC", envGRPCAddr, collector.DefaultGRPCAddr))
	f.httpAddr = fs.String("http-addr", envOr(envHTTPAddr, collector.DefaultHTTPAddr), addrUsage("OTLP/HTTP", envHTTPAddr, collector.DefaultHTTPAddr))
	f.uiAddr = fs.String("ui-addr", envOr(envUIAddr, defaultUIAddr), addrUsage("web UI and JSON API", envUIAddr, defaultUIAddr))
	f.readyFile = fs.String("ready-file", "", "once every listener is bound and the store is open, write the addresses in use here as JSON (pid, store, grpc_addr, http_addr, ui_addr, ui_url); removed on exit")
	f.maxAttr = fs.Int("max-attr-bytes", genai.DefaultMaxAttrBytes, "truncate attribute values larger than this many bytes (-1: never)")
	f.receiver = fs.String("receiver", collector.ReceiverLoomwork, "OTLP receiver: loomwork (partial_success, precise errors) or otlp (the Collector's core otlpreceiver)")
	f.memMiB = fs.Uint("memory-limit-mib", 0, fmt.Sprintf("refuse data (retryably) above this heap size; 0: an eighth of the machine's (or cgroup's) memory, between 512 and 2048 (here %d)", collector.DefaultMemoryLimitMiB()))
	f.maxReqMiB = fs.Int("max-request-mib", 64, "largest request accepted (gRPC message; HTTP body after decompression); larger ones are refused without being decoded")
	f.inFlightMiB = fs.Int("max-in-flight-mib", 0, "request bytes admitted at once (read, decoded and handed on); more are refused retryably before being read; 0: a 128th of the memory limit")
	f.spoolDir = fs.String("spool-dir", "", "durable spool for the ClickHouse store: acknowledge once fsynced here, feed ClickHouse in large inserts, ride out its outages; off: write directly; default "+defaultSpoolDir+" (the embedded store always writes directly)")
	f.spoolMaxMiB = fs.Int("spool-max-mib", collector.DefaultSpoolMaxMiB, "bound on the spool's unconsumed data; a full spool refuses retryably (429 / RESOURCE_EXHAUSTED)")
	f.spoolBatchMiB = fs.Int("spool-batch-mib", 0, "spooled data the feeder writes to ClickHouse in one insert; 0: a thirty-second of the memory limit, 16 to 64")
	f.gcPercent = fs.Int("gc-percent", 0, fmt.Sprintf("Go GC target percentage (GOGC); 0: $GOGC when set, else %d (trades heap for CPU; the memory limit still applies)", collector.DefaultGCPercent))
	f.writers = fs.Int("writers", 1, "concurrent store writes; 1 coalesces the most requests per write, which ClickHouse needs most")
	f.logLevel = fs.String("log-level", "info", "log level: debug, info, warn, error")
	f.authToken = fs.String("auth-token", "", "require this bearer token on OTLP ingest, the UI and the API (default $LOOMWORK_AUTH_TOKEN; empty: no authentication)")
	f.runsDir = fs.String("runs-dir", "", "directory of journals (*.jsonl) and replay reports (loom-eval replay --json) for the Runs pages; other files there are listed as other files")
	f.reportsDir = fs.String("reports-dir", "", "directory of score reports (loom-eval score --format json) for the Reports pages; other files there are listed as other files")
	f.approvalsJournal = fs.String("approvals-journal", "", "workflow journal (SQLite) whose suspended approval gates the UI lists and answers at /approvals (answers need --auth-token), and whose workflow runs /workflows lists")
	f.auditFile = fs.String("audit", defaultAuditFile, "policy audit log the UI shows at /audit, with whether its hash chain verifies (what run, ci, a2a serve, mcp serve, workflow run, approve and deny append to by default; suite run's workers keep one each in OUT/audit/; empty: none)")
	f.datasetsDir = fs.String("datasets", defaultDatasetsDir, "folder of versioned case datasets the UI lists (/datasets) and grows from ticked traces; loom-eval datasets list|show|commit reads it too (empty: none)")
	f.labelsFile = fs.String("labels", "", "human labels file (labels JSONL, created if missing) that the UI's label form appends to and /labels exports; loom-eval labels agreement --labels reads it")
	f.ablationsDir = fs.String("ablations-dir", "", "directory of ablation results (the report.json of loom-eval ablate --out DIR) for the Ablations pages; other files there are listed as other files")
	f.pricesFile = fs.String("prices", "", "price table JSON merged over the built-in one, for the cost the UI and the JSON API show (the same file score, rollup and traces take)")
	f.keysFile = fs.String("keys", "", "projects and API keys file (loom-eval keys; default $"+envKeysFile+"): spans are stored under the sending key's project and each key reads only its project (docs/projects.md)")
	f.redact = fs.String("redact", "", "redact before storing: comma-separated api_key, email, card, or all")
	fs.Var(&f.redactPatterns, "redact-pattern", "redact matches of a custom RE2 pattern, NAME=REGEX (repeatable)")
	f.retentionEvery = fs.Duration("retention-interval", time.Hour, "how often the embedded store deletes traces past their project's retention")
	f.readTimeout = fs.Duration("read-timeout", web.DefaultStoreTimeout, "how long a UI or API request waits for the trace store; past it (and while the store is unreachable) it answers 503 with Retry-After")
	f.cpuProfile = fs.String("cpu-profile", "", "write a Go CPU profile of this run to this file when serve stops (go tool pprof reads it; scripts/throughput profiles with it)")
	f.storeWait = fs.Duration("store-wait", 2*time.Second, "how long to wait for a ClickHouse store that cannot be reached at start before serving without it (it keeps connecting in the background; with a spool, data is acknowledged meanwhile)")
}

// listeners are the three listen addresses as configured.
func (f *serveFlags) listeners() (grpcL, httpL, uiL listener) {
	return listener{name: "OTLP gRPC", flag: "--grpc-addr", env: envGRPCAddr, addr: strings.TrimSpace(*f.grpcAddr)},
		listener{name: "OTLP HTTP", flag: "--http-addr", env: envHTTPAddr, addr: strings.TrimSpace(*f.httpAddr)},
		listener{name: "UI", flag: "--ui-addr", env: envUIAddr, addr: strings.TrimSpace(*f.uiAddr)}
}

// validate checks --gc-percent and the listen addresses.
func (f *serveFlags) validate() error {
	if *f.gcPercent < 0 {
		return usageError("serve: --gc-percent: must not be negative (got %d)", *f.gcPercent)
	}
	grpcL, httpL, uiL := f.listeners()
	for _, l := range []listener{grpcL, httpL, uiL} {
		if l.addr == collector.AddrOff {
			continue
		}
		if _, _, err := net.SplitHostPort(l.addr); err != nil {
			return usageError("serve: %s (or $%s): %q is not host:port or off", l.flag, l.env, l.addr)
		}
	}
	return nil
}

// checkFiles removes a stale --ready-file and checks --labels before
// anything starts.
func (f *serveFlags) checkFiles() error {
	if *f.readyFile != "" {
		// A ready file left by a serve that died must not say this one is ready.
		if err := os.Remove(*f.readyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: --ready-file: remove the old %s: %w", *f.readyFile, err)}
		}
	}
	if *f.labelsFile != "" {
		// A file that does not decode is found now, not at the first label.
		if _, err := datasets.LoadLabels(*f.labelsFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return inputError("serve: --labels", err)
		}
		if fi, err := os.Stat(filepath.Dir(*f.labelsFile)); err != nil || !fi.IsDir() {
			return usageError("serve: --labels %s: its directory does not exist", *f.labelsFile)
		}
	}
	return nil
}

// serveSetup is what serve runs with once its flags and environment are
// read.
type serveSetup struct {
	cfg               collector.ServerConfig
	url               string // the store URL (--store, else $LOOMWORK_STORE)
	loc               storeurl.Location
	keys              *projects.Registry // nil without --keys
	grpcL, httpL, uiL listener
	log               *slog.Logger
	storeWait         time.Duration
}

// serveConfig tunes the GC, fills the flags the environment defaults
// (auth token, store, keys file) and configures the collector.
func (m *Main) serveConfig(f *serveFlags, log *slog.Logger) (*serveSetup, error) {
	s := &serveSetup{log: log, storeWait: *f.storeWait}
	s.grpcL, s.httpL, s.uiL = f.listeners()
	if *f.memMiB == 0 {
		*f.memMiB = uint(collector.DefaultMemoryLimitMiB())
	}
	tuneGC(m.Getenv, *f.gcPercent, *f.memMiB, log)
	if *f.authToken == "" && m.Getenv != nil {
		*f.authToken = m.Getenv("LOOMWORK_AUTH_TOKEN")
	}
	s.url = *f.storeURL
	if s.url == "" && m.Getenv != nil {
		s.url = m.Getenv(storeurl.EnvVar)
	}
	var err error
	if s.loc, err = storeurl.Parse(s.url); err != nil {
		return nil, usageError("serve: --store: %v", err)
	}
	if sd := strings.TrimSpace(*f.spoolDir); s.loc.Backend != storeurl.ClickHouse && sd != "" && sd != "off" {
		log.Info("--spool-dir ignored: the embedded store writes directly (its commit is as durable as the spool's)", "spool_dir", sd)
	}
	redactCfg, err := parseRedact(*f.redact, f.redactPatterns)
	if err != nil {
		return nil, usageError("serve: %v", err)
	}
	if *f.keysFile == "" && m.Getenv != nil {
		*f.keysFile = m.Getenv(envKeysFile)
	}
	if *f.keysFile != "" {
		if s.keys, err = projects.Open(*f.keysFile, nil); err != nil {
			return nil, usageError("serve: --keys: %v", err)
		}
	}
	s.cfg = collector.ServerConfig{
		GRPCAddr: s.grpcL.addr,
		HTTPAddr: s.httpL.addr,
		Receiver: *f.receiver,
		Exporter: collector.Config{
			MaxAttributeBytes: *f.maxAttr,
			Writers:           *f.writers,
			Timeout:           collector.DefaultTimeout,
			SpoolDir:          spoolFor(s.loc.Backend, *f.spoolDir),
			SpoolMaxMiB:       *f.spoolMaxMiB,
			SpoolBatchMiB:     *f.spoolBatchMiB,
		},
		MemoryLimitMiB: uint32(*f.memMiB),
		MaxInFlightMiB: *f.inFlightMiB,
		MaxRequestMiB:  *f.maxReqMiB,
		AuthToken:      *f.authToken,
		Redact:         redactCfg,
		Logger:         log,
	}
	if s.keys != nil {
		s.cfg.Keys, s.cfg.Policy = keyAuth(s.keys), servePolicy(s.keys)
	}
	if err := s.cfg.Validate(); err != nil {
		return nil, usageError("serve: %v", err)
	}
	return s, nil
}

// projectNames lists the projects serve stores traces for: the default
// project, and each project of --keys.
func (s *serveSetup) projectNames() []string {
	names := []string{""}
	if s.keys != nil {
		for _, p := range s.keys.Projects() {
			if p.Name != "" {
				names = append(names, p.Name)
			}
		}
	}
	return names
}

// uiHandler is the web UI and JSON API over the store.
func (s *serveSetup) uiHandler(f *serveFlags, srv *collector.Server, st store.Store, prices *pricing.Table, approvals web.Approvals) (*web.Server, error) {
	files := &web.FileSources{RunsDir: *f.runsDir, ReportsDir: *f.reportsDir, AblationsDir: *f.ablationsDir}
	health := func(ctx context.Context) web.HealthReport {
		h := srv.Health(ctx)
		return web.HealthReport{Healthy: h.Status == "ok" || h.Status == "degraded", Ready: h.Ready, Status: h.Status, Reason: h.Reason, Detail: h}
	}
	webCfg := web.Config{AuthToken: *f.authToken, StoreTimeout: *f.readTimeout}
	if s.keys != nil {
		webCfg.Keys = keyAuth(s.keys)
	}
	workflows, _ := approvals.(web.Workflows) // the approvals journal's workflow runs (/workflows)
	return web.New(webCfg, web.Deps{Traces: st, Prices: prices, Logger: s.log, Files: files, Labels: *f.labelsFile, Health: health, Approvals: approvals,
		Workflows: workflows, Experiments: newWebExperiments(st), Datasets: *f.datasetsDir, Audit: auditSource(*f.auditFile), StoreName: s.loc.String()})
}

// serveReady is what --ready-file says: the addresses in use.
func serveReady(loc storeurl.Location, srv *collector.Server, cfg collector.ServerConfig, uiLn net.Listener, uiURL string) ServeReady {
	ready := ServeReady{
		PID:      os.Getpid(),
		Store:    loc.String(),
		GRPCAddr: serveAddr(srv.GRPCAddr(), cfg.GRPCAddr),
		HTTPAddr: serveAddr(srv.HTTPAddr(), cfg.HTTPAddr),
		UIAddr:   collector.AddrOff,
		UIURL:    uiURL,
	}
	if uiLn != nil {
		ready.UIAddr = uiLn.Addr().String()
	}
	return ready
}

// printServing tells the user where serve listens.
func (m *Main) printServing(loc storeurl.Location, ready ServeReady) {
	fmt.Fprintf(m.Stdout, "loom-eval serve: storing traces in %s\n", loc)
	fmt.Fprintf(m.Stdout, "  OTLP gRPC  %s\n", ready.GRPCAddr)
	fmt.Fprintf(m.Stdout, "  OTLP HTTP  %s\n", ready.HTTPAddr)
	if ready.UIURL != "" {
		fmt.Fprintf(m.Stdout, "  UI / API   %s  (JSON under /api/v1/)\n", ready.UIURL)
	}
	fmt.Fprintln(m.Stdout, "Send a trace with: loom-eval demo   (Ctrl-C stops; acknowledged spans are on disk)")
}

// runServe runs the OTLP collector pipeline, the trace store and the HTTP
// API/UI (serveService) until the context ends (SIGINT/SIGTERM), then
// drains and closes.
// It binds every listener before it says it is ready; a listener it cannot
// bind is an operational error (exit 3) naming the address and the flag
// and environment variable that move it.
func (m *Main) runServe(ctx context.Context, args []string) error {
	fs := m.newFlagSet("serve", "serve [--store URL] [--grpc-addr ADDR] [--http-addr ADDR] [--ui-addr ADDR] [--labels FILE] [--ready-file PATH]")
	var f serveFlags
	f.register(fs, m.getenv)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintf(m.Stderr, "\nEnvironment: $%s, $%s and $%s set the listen addresses (a flag wins);\n$%s the store; $LOOMWORK_AUTH_TOKEN the bearer token.\n", envGRPCAddr, envHTTPAddr, envUIAddr, storeurl.EnvVar)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("serve: unexpected arguments %q", fs.Args())
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*f.logLevel)); err != nil {
		return usageError("serve: --log-level: %v", err)
	}
	prices, err := scorerLoadPrices(*f.pricesFile)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: level}))
	if err := f.validate(); err != nil {
		return err
	}
	if err := f.checkFiles(); err != nil {
		return err
	}
	s, err := m.serveConfig(&f, log)
	if err != nil {
		return err
	}
	if *f.cpuProfile != "" {
		stop, err := startCPUProfile(*f.cpuProfile)
		if err != nil {
			return usageError("serve: --cpu-profile: %v", err)
		}
		defer stop(log)
	}
	svc := newServeService(s, &f, prices)
	if err := svc.Start(ctx); err != nil {
		return err
	}
	m.printServing(s.loc, svc.ready)
	<-ctx.Done()
	log.Info("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), serveShutdownTimeout)
	defer cancel()
	if err := svc.Shutdown(sctx); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("serve: %w", err)}
	}
	return nil
}

// startCPUProfile profiles the process's CPU into path until the returned
// function runs.
func startCPUProfile(path string) (func(*slog.Logger), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func(log *slog.Logger) {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Warn("could not write the CPU profile", "path", path, "error", err)
		}
	}, nil
}

// removeReadyFile removes --ready-file on the way out.
func removeReadyFile(path string, log *slog.Logger) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("could not remove the ready file", "path", path, "error", err)
	}
}

// defaultSpoolDir is where serve spools for ClickHouse unless told.
const defaultSpoolDir = ".loomwork/spool"

// spoolFor is the exporter's spool directory: none for the embedded store
// (its commit is as durable as the spool's, which would only add a copy)
// or when turned off.
func spoolFor(backend, flag string) string {
	flag = strings.TrimSpace(flag)
	switch {
	case backend != storeurl.ClickHouse, flag == "off":
		return ""
	case flag == "":
		return defaultSpoolDir
	}
	return flag
}

func serveAddr(actual, configured string) string {
	if actual != "" {
		return actual
	}
	if configured == collector.AddrOff {
		return "off"
	}
	return strings.TrimSpace(configured)
}

// tuneGC sets the process's GC target and soft memory limit: an explicit
// --gc-percent wins, then $GOGC (the runtime read it already), then
// collector.DefaultGCPercent. The runtime's soft limit goes below the
// memory limiter's refusal threshold (collector.GCMemoryLimit), so the GC
// works harder before the limiter starts refusing data; $GOMEMLIMIT wins
// over it.
func tuneGC(getenv func(string) string, percent int, memMiB uint, log *slog.Logger) {
	env := func(k string) string {
		if getenv == nil {
			return ""
		}
		return getenv(k)
	}
	gogc := "GOGC=" + env("GOGC")
	switch {
	case percent > 0:
		debug.SetGCPercent(percent)
		gogc = strconv.Itoa(percent)
	case env("GOGC") == "":
		debug.SetGCPercent(collector.DefaultGCPercent)
		gogc = strconv.Itoa(collector.DefaultGCPercent)
	}
	if memMiB > 0 && env("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(collector.GCMemoryLimit(uint32(memMiB)))
	}
	log.Debug("garbage collector", "gc_percent", gogc, "soft_memory_limit_bytes", debug.SetMemoryLimit(-1))
}

// auditSource is the UI's view of --audit (nil without one).
func auditSource(file string) web.AuditSource {
	if file == "" {
		return nil
	}
	return newWebAudit(file)
}
