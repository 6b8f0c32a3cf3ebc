package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configmiddleware"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/memorylimiterextension"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomwork/loomwork/collector/redact"
	"github.com/loomwork/loomwork/store"
)

// Receivers a Server can run.
const (
	// ReceiverLoomwork is Loomwork's OTLP front (partial_success,
	// INVALID_ARGUMENT for malformed requests). The default.
	ReceiverLoomwork = "loomwork"
	// ReceiverOTLP is the Collector's core otlpreceiver, unchanged. It
	// drops spans with invalid ids without telling the sender (they are
	// logged) and answers INTERNAL to undecodable gRPC requests.
	ReceiverOTLP = "otlp"
)

// DefaultInFlightMiB is the admission budget (request wire bytes being
// read, decoded and handed on at once) for a memory limit of limitMiB: a
// 128th, at least 1 MiB (a request larger than the budget is still
// admitted when nothing else is in flight). More admitted requests buy no
// throughput on a few cores — they wait for the same CPUs — but each holds
// its decoded spans live, and at 512 MiB that live heap made the GC run
// constantly and the memory limiter refuse: docs/reliability.md measured
// goodput under a flood of 300 × 4,096-span requests at 62–73% of capacity
// with a 32nd (16 MiB), 79–101% with a 64th and 98–110% with a 128th (4 MiB),
// RSS under the limit in all three.
func DefaultInFlightMiB(limitMiB uint32) int64 {
	return max(int64(limitMiB)/128, 1)
}

// memoryLimitMiB is the memory limit the server runs with.
func (s *Server) memoryLimitMiB() uint32 {
	switch {
	case s.cfg.MemoryLimitMiB > 0:
		return s.cfg.MemoryLimitMiB
	case s.cfg.MemoryLimitPercent > 0:
		return uint32(availableMemory() >> 20 * uint64(s.cfg.MemoryLimitPercent) / 100)
	}
	return DefaultMemoryLimitMiB()
}

// DefaultSpoolBatchMiB is how much of the spool the feeder reads for one
// insert under a memory limit of limitMiB: a thirty-second, between 16
// and 64 MiB. The feeder holds about three times that (the spool's read
// buffer, its own copy of the records, and the driver's block), so at
// 128 MiB serve's peak RSS was 1.2 GB on the agent load of
// docs/throughput.md; at 64 MiB (~25k agent spans, ~90k of issue 17's
// templated ones) it is 0.75 GB, for 0–5 more ClickHouse CPU-s per million
// spans (docs/bench-ingest.md).
func DefaultSpoolBatchMiB(limitMiB uint32) int {
	return int(min(max(limitMiB/32, 16), 64))
}

// DefaultGCPercent is the Go GC target (GOGC) `loom-eval serve` runs with
// unless told otherwise: Go's own default. It was 400 while ingest
// allocated pointer-rich pdata and a fresh buffer for every request (at
// 100 a quarter of the collector's CPU went to garbage collection); now
// requests are read into recycled buffers and decoded straight to spans,
// and on the agent load 100 and 400 use the same CPU per span within the
// machine's spread while 400 held the heap at the soft memory limit, 1.2
// GB (docs/bench-ingest.md). The memory limiter still bounds the heap:
// serve also sets the runtime's soft memory limit below the limiter's.
const DefaultGCPercent = 100

// Default listen addresses. Loopback by default: serve has no
// authentication, so exposing it is an explicit choice.
const (
	DefaultGRPCAddr = "127.0.0.1:4317"
	DefaultHTTPAddr = "127.0.0.1:4318"
	// AddrOff disables a listener.
	AddrOff = "off"
)

// ServerConfig configures the in-process pipeline. The zero value is
// valid: it listens on the default addresses with default limits.
type ServerConfig struct {
	// GRPCAddr and HTTPAddr are host:port to listen on (port 0 picks a free
	// one), "" for the default, AddrOff to disable.
	GRPCAddr string
	HTTPAddr string
	// Receiver is ReceiverLoomwork (default when empty) or ReceiverOTLP.
	Receiver string
	// Exporter configures the Loomwork exporter; its Store is ignored (the
	// server writes to the store it is given).
	Exporter Config
	// MemoryLimitMiB is the memory limiter's hard limit; 0 means
	// MemoryLimitPercent of the machine's (or cgroup's) memory when that is
	// set, else DefaultMemoryLimitMiB().
	MemoryLimitMiB uint32
	// MemoryLimitPercent applies when MemoryLimitMiB is 0 and it is set.
	MemoryLimitPercent uint32
	// MaxInFlightMiB bounds the request bytes being read, decoded and
	// handed on at once (admission control); requests beyond it are refused
	// retryably before they are read or decoded. 0 means a 128th of the
	// memory limit (DefaultInFlightMiB): enough requests to keep the cores
	// busy, few enough that their decoded spans leave the limit to the
	// store path and the GC's headroom.
	MaxInFlightMiB int
	// MemoryCheckInterval is how often the limiter measures. Default 1s.
	MemoryCheckInterval time.Duration
	// MaxRequestMiB caps one request's size (gRPC message, HTTP body after
	// decompression). Default 64.
	MaxRequestMiB int
	// AuthToken, when set, is required on every OTLP request as
	// "Authorization: Bearer TOKEN" (HTTP header or gRPC metadata); others
	// get HTTP 401 / gRPC UNAUTHENTICATED. Empty: no authentication, the
	// default for a laptop. Needs the Loomwork receiver.
	AuthToken string
	// Keys, when set, authenticates project API keys (internal/projects):
	// a request with a read-write key is stored under the key's project;
	// one with a read-only key is refused (HTTP 403, PERMISSION_DENIED).
	// AuthToken, if also set, still admits the default project. Needs
	// the Loomwork receiver.
	Keys KeyFunc
	// Policy returns a project's policy (content capture); nil: every
	// project captures content.
	Policy PolicyFunc
	// Redact configures the redaction step (none when empty).
	Redact redact.Config
	// Logger receives the pipeline's logs. Default slog.Default().
	Logger *slog.Logger

	_ struct{}
}

// Validate reports every problem with the configuration.
func (c *ServerConfig) Validate() error {
	var errs []error
	switch c.Receiver {
	case "", ReceiverLoomwork, ReceiverOTLP:
	default:
		errs = append(errs, fmt.Errorf("receiver: must be %q or %q (got %q)", ReceiverLoomwork, ReceiverOTLP, c.Receiver))
	}
	for _, a := range []struct{ key, v string }{{"grpc_addr", c.GRPCAddr}, {"http_addr", c.HTTPAddr}} {
		if a.v == "" || a.v == AddrOff {
			continue
		}
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not host:port: %w", a.key, a.v, err))
		}
	}
	if c.AuthToken != "" && c.Receiver == ReceiverOTLP {
		errs = append(errs, errors.New("auth_token: bearer authentication needs the loomwork receiver"))
	}
	if c.Keys != nil && c.Receiver == ReceiverOTLP {
		errs = append(errs, errors.New("keys: project keys need the loomwork receiver"))
	}
	if err := c.Redact.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.AuthToken != "" && len(c.AuthToken) < 16 {
		errs = append(errs, errors.New("auth_token: must be at least 16 characters"))
	}
	if c.GRPCAddr == AddrOff && c.HTTPAddr == AddrOff {
		errs = append(errs, errors.New("grpc_addr, http_addr: at least one listener must be on"))
	}
	if c.MemoryLimitPercent > 100 {
		errs = append(errs, fmt.Errorf("memory_limit_percent: must be at most 100 (got %d)", c.MemoryLimitPercent))
	}
	if c.MemoryCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("memory_check_interval: must not be negative (got %s)", c.MemoryCheckInterval))
	}
	if c.MaxInFlightMiB < 0 {
		errs = append(errs, fmt.Errorf("max_in_flight_mib: must not be negative (got %d)", c.MaxInFlightMiB))
	}
	if c.MaxRequestMiB < 0 {
		errs = append(errs, fmt.Errorf("max_request_mib: must not be negative (got %d)", c.MaxRequestMiB))
	}
	if err := c.Exporter.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("exporter: %w", err))
	}
	return errors.Join(errs...)
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Server is `loomwork serve`'s ingestion: an OTLP receiver, the Collector's
// memory limiter (memorylimiterextension) and the ingester that writes the
// store. With ReceiverLoomwork (the default) the receiver is Loomwork's
// front (front.go), which asks the limiter before decoding and calls the
// ingester directly; with ReceiverOTLP it is the Collector's otlpreceiver
// with the limiter as its middleware, feeding the Loomwork exporter, a
// Collector component over the same ingester (exporter.go).
type Server struct {
	cfg ServerConfig
	w   store.Writer
	log *slog.Logger

	mu      sync.Mutex
	started bool
	ml      extension.Extension // the memory limiter
	exp     exporter.Traces     // ReceiverOTLP: the exporter over in
	// inStarted: in was started and is not shut down yet.
	inStarted bool
	// For Health, which must answer while Shutdown holds mu.
	admit     atomic.Pointer[admission]
	in        atomic.Pointer[ingester] // the write side (ingest.go)
	listening atomic.Bool
	pinging   atomic.Bool // a health ping is outstanding
	draining  atomic.Bool
	core      receiver.Traces // ReceiverOTLP
	grpcSrv   *grpc.Server
	httpSrv   *http.Server
	grpcAddr  net.Addr
	httpAddr  net.Addr
	serveWG   sync.WaitGroup
}

// NewServer validates cfg; it does no I/O. The server writes to w and never
// closes it.
func NewServer(cfg ServerConfig, w store.Writer) (*Server, error) {
	if w == nil {
		return nil, errors.New("new collector server: store writer is nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("collector server config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Server{cfg: cfg, w: w, log: log}, nil
}

type nopHost struct{}

func (nopHost) GetExtensions() map[component.ID]component.Component { return nil }

// limiterHost offers the memory limiter to a receiver's middleware.
type limiterHost struct {
	id  component.ID
	ext component.Component
}

func (h limiterHost) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{h.id: h.ext}
}

// memoryLimiterID names the memory limiter extension.
var memoryLimiterID = component.MustNewID("memory_limiter")

// newMemoryLimiter creates the Collector's memory limiter extension for a
// limit of limitMiB (or the configured percentage of the machine's
// memory). The front asks it before decoding a request; the core receiver
// takes it as middleware.
func (s *Server) newMemoryLimiter(ctx context.Context, tel component.TelemetrySettings, build component.BuildInfo, limitMiB uint32) (extension.Extension, error) {
	f := memorylimiterextension.NewFactory()
	cfg := f.CreateDefaultConfig().(*memorylimiterextension.Config)
	cfg.CheckInterval = orDefault(s.cfg.MemoryCheckInterval, time.Second)
	if s.cfg.MemoryLimitMiB == 0 && s.cfg.MemoryLimitPercent > 0 {
		cfg.MemoryLimitPercentage = s.cfg.MemoryLimitPercent
		cfg.MemorySpikePercentage = cfg.MemoryLimitPercentage / 4
	} else {
		// The limit is for the process's RSS, which is more than the heap
		// the limiter measures (stacks, runtime, fragmentation): its hard
		// limit sits at 90% and it refuses from 70% (spike 20%); Go's soft
		// limit (GCMemoryLimit, 60%) collects before that.
		cfg.MemoryLimitMiB = max(limitMiB*9/10, 1)
		cfg.MemorySpikeLimitMiB = limitMiB / 5
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("memory limiter config: %w", err)
	}
	set := extension.Settings{ID: memoryLimiterID, TelemetrySettings: tel, BuildInfo: build}
	ml, err := f.Create(ctx, set, cfg)
	if err != nil {
		return nil, fmt.Errorf("create memory limiter: %w", err)
	}
	return ml, nil
}

// Start builds the components, starts them from the exporter up, and opens
// the listeners. On failure everything started is shut down again.
func (s *Server) Start(ctx context.Context) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("collector server already started")
	}
	s.started = true
	defer func() {
		if err != nil {
			err = errors.Join(err, s.shutdownLocked(ctx))
		}
	}()

	tel := telemetrySettings(s.log.With("component", "collector"))
	build := component.BuildInfo{Command: "loom-eval", Description: "Loomwork collector", Version: "dev"}
	host := nopHost{}

	expCfg := s.cfg.Exporter
	if expCfg.SpoolBatchMiB == 0 {
		expCfg.SpoolBatchMiB = DefaultSpoolBatchMiB(s.memoryLimitMiB())
	}
	red, err := redact.New(s.cfg.Redact)
	if err != nil {
		return fmt.Errorf("redaction: %w", err)
	}
	in := &ingester{cfg: expCfg, log: tel.Logger, slog: s.log, injected: s.w, policy: s.cfg.Policy, redactor: red}
	if err = in.start(ctx); err != nil {
		return fmt.Errorf("start loomwork exporter: %w", err)
	}
	s.in.Store(in)
	s.inStarted = true

	limitMiB := s.memoryLimitMiB()
	if s.ml, err = s.newMemoryLimiter(ctx, tel, build, limitMiB); err != nil {
		return err
	}
	if err = s.ml.Start(ctx, host); err != nil {
		return fmt.Errorf("start memory limiter: %w", err)
	}

	maxMiB := orDefault(s.cfg.MaxRequestMiB, 64)
	grpcCfg := configgrpc.NewDefaultServerConfig()
	grpcCfg.NetAddr.Endpoint = orDefault(s.cfg.GRPCAddr, DefaultGRPCAddr)
	grpcCfg.MaxRecvMsgSizeMiB = maxMiB
	grpcCfg.ReadBufferSize = 512 << 10
	httpCfg := confighttp.NewDefaultServerConfig()
	httpCfg.NetAddr.Endpoint = orDefault(s.cfg.HTTPAddr, DefaultHTTPAddr)
	httpCfg.MaxRequestBodySize = int64(maxMiB) << 20
	grpcOn := grpcCfg.NetAddr.Endpoint != AddrOff
	httpOn := httpCfg.NetAddr.Endpoint != AddrOff

	if s.cfg.Receiver == ReceiverOTLP {
		return s.startCoreReceiver(ctx, tel, build, grpcCfg, httpCfg, grpcOn, httpOn)
	}

	inFlight := int64(s.cfg.MaxInFlightMiB) << 20
	if inFlight == 0 {
		inFlight = DefaultInFlightMiB(limitMiB) << 20
	}
	admit := newAdmission(inFlight, s.cfg.Exporter.retryAfter())
	auth := authenticator{token: s.cfg.AuthToken, keys: s.cfg.Keys}
	admit.behind = in.storeBehind
	s.admit.Store(admit)
	limiter, ok := s.ml.(memoryLimiter)
	if !ok {
		return fmt.Errorf("memory limiter extension (%T) has no MustRefuse", s.ml)
	}
	f := &front{in: in, limiter: limiter, retryAfter: s.cfg.Exporter.retryAfter(), log: s.log, admit: admit}
	if grpcOn {
		opts := []configgrpc.ToServerOption{
			configgrpc.WithGrpcServerOption(grpc.ForceServerCodecV2(newRawCodec())),
			// Authentication and admission before a request message is read.
			configgrpc.WithGrpcServerOption(grpc.InTapHandle(admit.tap(auth))),
			configgrpc.WithGrpcServerOption(grpc.StatsHandler(releaser{})),
			// Fixed flow-control windows. By default gRPC grows them from
			// its bandwidth estimate up to 16 MiB a stream, so on a fast link
			// every sender pushes its whole request before the server has
			// decided anything, and a flood of 300 × 2 MB requests sat in
			// the server's buffers (and its RSS) while the ones it could
			// not take timed out. With fixed windows an unread stream holds
			// at most 1 MiB, and a refused one stops sending.
			configgrpc.WithGrpcServerOption(grpc.InitialWindowSize(1 << 20)),
			configgrpc.WithGrpcServerOption(grpc.InitialConnWindowSize(8 << 20)),
		}
		if auth.on() {
			opts = append(opts, configgrpc.WithGrpcServerOption(grpc.UnaryInterceptor(auth.unary())))
		}
		s.grpcSrv, err = grpcCfg.ToServer(ctx, nil, tel, opts...)
		if err != nil {
			return fmt.Errorf("create OTLP gRPC server: %w", err)
		}
		s.grpcSrv.RegisterService(&traceServiceDesc, f)
		ln, lerr := grpcCfg.NetAddr.Listen(ctx)
		if lerr != nil {
			return fmt.Errorf("listen for OTLP gRPC on %s: %w", grpcCfg.NetAddr.Endpoint, lerr)
		}
		s.grpcAddr = ln.Addr()
		srv := s.grpcSrv
		s.serveWG.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				s.log.Error("OTLP gRPC server stopped", "error", err)
			}
		})
	}
	if httpOn {
		mux := http.NewServeMux()
		mux.HandleFunc(TracesPath, f.handleHTTP)
		var h http.Handler = mux
		if auth.on() {
			h = auth.http(mux)
		}
		s.httpSrv, err = httpCfg.ToServer(ctx, nil, tel, h, confighttp.WithErrorHandler(httpErrorHandler))
		if err != nil {
			return fmt.Errorf("create OTLP HTTP server: %w", err)
		}
		ln, lerr := httpCfg.ToListener(ctx)
		if lerr != nil {
			return fmt.Errorf("listen for OTLP HTTP on %s: %w", httpCfg.NetAddr.Endpoint, lerr)
		}
		s.httpAddr = ln.Addr()
		srv := s.httpSrv
		s.serveWG.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("OTLP HTTP server stopped", "error", err)
			}
		})
	}
	s.log.Info("OTLP collector listening", "grpc", addrString(s.grpcAddr), "http", addrString(s.httpAddr), "receiver", ReceiverLoomwork)
	s.listening.Store(true)
	return nil
}

// httpErrorHandler answers failures inside confighttp's decompression
// (e.g. a corrupt gzip body) as OTLP errors.
func httpErrorHandler(w http.ResponseWriter, r *http.Request, msg string, code int) {
	writeHTTPStatus(w, contentTypeJSON, code, status.New(codes.InvalidArgument, msg))
}

func (s *Server) startCoreReceiver(ctx context.Context, tel component.TelemetrySettings, build component.BuildInfo,
	grpcCfg configgrpc.ServerConfig, httpCfg confighttp.ServerConfig, grpcOn, httpOn bool,
) error {
	rf := otlpreceiver.NewFactory()
	rcfg := rf.CreateDefaultConfig().(*otlpreceiver.Config)
	rcfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	rcfg.Protocols.HTTP = configoptional.None[otlpreceiver.HTTPConfig]()
	mw := []configmiddleware.Config{{ID: memoryLimiterID}}
	grpcCfg.Middlewares, httpCfg.Middlewares = mw, mw
	if grpcOn {
		rcfg.Protocols.GRPC = configoptional.Some(grpcCfg)
	}
	if httpOn {
		rcfg.Protocols.HTTP = configoptional.Some(otlpreceiver.HTTPConfig{
			ServerConfig: httpCfg, TracesURLPath: TracesPath, MetricsURLPath: "/v1/metrics", LogsURLPath: "/v1/logs",
		})
	}
	expSet := exporter.Settings{ID: component.NewID(componentType), TelemetrySettings: tel, BuildInfo: build}
	var err error
	if s.exp, err = NewFactory(withIngester(s.in.Load())).CreateTraces(ctx, expSet, &s.cfg.Exporter); err != nil {
		return fmt.Errorf("create loomwork exporter: %w", err)
	}
	if err = s.exp.Start(ctx, nopHost{}); err != nil {
		return fmt.Errorf("start loomwork exporter: %w", err)
	}
	set := receiver.Settings{ID: component.NewID(rf.Type()), TelemetrySettings: tel, BuildInfo: build}
	if s.core, err = rf.CreateTraces(ctx, set, rcfg, s.exp); err != nil {
		return fmt.Errorf("create otlp receiver: %w", err)
	}
	// The receiver finds the memory limiter among the host's extensions by
	// the ID its middleware configuration names.
	if err = s.core.Start(ctx, limiterHost{id: memoryLimiterID, ext: s.ml}); err != nil {
		return fmt.Errorf("start otlp receiver: %w", err)
	}
	s.log.Info("OTLP collector listening", "grpc", grpcCfg.NetAddr.Endpoint, "http", httpCfg.NetAddr.Endpoint, "receiver", ReceiverOTLP)
	s.listening.Store(true)
	return nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return AddrOff
	}
	return a.String()
}

// GRPCAddr returns the address the OTLP gRPC listener is bound to ("" when
// off or not started, or with the core receiver).
func (s *Server) GRPCAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grpcAddr == nil {
		return ""
	}
	return s.grpcAddr.String()
}

// HTTPAddr returns the address the OTLP HTTP listener is bound to.
func (s *Server) HTTPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.httpAddr == nil {
		return ""
	}
	return s.httpAddr.String()
}

// Shutdown stops accepting requests, waits for the requests in flight
// (their store writes included) to be answered, then stops the memory
// limiter and the exporter. It is safe to call without Start and more than
// once. The store stays open: its owner closes it afterwards.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdownLocked(ctx)
}

func (s *Server) shutdownLocked(ctx context.Context) error {
	var errs []error
	if s.grpcSrv != nil {
		stopped := make(chan struct{})
		go func() { s.grpcSrv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			s.grpcSrv.Stop()
			<-stopped
			errs = append(errs, fmt.Errorf("drain OTLP gRPC requests: %w", ctx.Err()))
		}
		s.grpcSrv = nil
	}
	if s.httpSrv != nil {
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("drain OTLP HTTP requests: %w", err))
			_ = s.httpSrv.Close()
		}
		s.httpSrv = nil
	}
	s.serveWG.Wait()
	if s.core != nil {
		if err := s.core.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down otlp receiver: %w", err))
		}
		s.core = nil
	}
	if s.exp != nil {
		if err := s.exp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down loomwork exporter: %w", err))
		}
		s.exp = nil
	}
	if s.ml != nil {
		if err := s.ml.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down memory limiter: %w", err))
		}
		s.ml = nil
	}
	if s.inStarted {
		if err := s.in.Load().shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down loomwork exporter: %w", err))
		}
		s.inStarted = false
	}
	return errors.Join(errs...)
}

// Health is what the server reports to /healthz and /readyz.
type Health struct {
	// Status is "ok"; "degraded" when the store is unreachable or failing
	// but the spool absorbs what arrives; "unavailable" when data would be
	// refused (store down without a spool, spool full); "draining" once
	// shutdown began.
	Status string `json:"status"`
	// Ready says whether a load balancer should send data here now.
	Ready bool `json:"ready"`
	// Reason says, in words without secrets, why the server is not ok
	// (what it waits for); empty when it is.
	Reason    string          `json:"reason,omitempty"`
	Store     StoreHealth     `json:"store"`
	Spool     *SpoolHealth    `json:"spool,omitempty"`
	Admission AdmissionHealth `json:"admission"`
	// Redaction counts what the redaction step replaced and the content
	// dropped for projects that do not capture it (issue 21).
	Redaction *RedactionHealth `json:"redaction,omitempty"`
}

// StoreHealth says whether the store answered a ping just now.
type StoreHealth struct {
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
}

// AdmissionHealth is the admission control's state.
type AdmissionHealth struct {
	InFlightBytes    int64 `json:"in_flight_bytes"`
	MaxInFlightBytes int64 `json:"max_in_flight_bytes"`
	Refused          int64 `json:"refused_requests"`
}

// pingTimeout bounds how long a health check waits for the store.
const pingTimeout = 2 * time.Second

// ping asks the store whether it is reachable, waiting at most
// pingTimeout. A driver may not honour the context everywhere (a
// ClickHouse that accepts connections but never answers held a ping in its
// handshake for the dial timeout), so the ping runs on its own goroutine
// and is abandoned at the deadline; while one is outstanding, later checks
// do not start another and report the store unreachable.
func (s *Server) ping(ctx context.Context, p store.Pinger) error {
	if !s.pinging.CompareAndSwap(false, true) {
		return errors.New("the store has not answered an earlier ping yet")
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	done := make(chan error, 1)
	go func() {
		defer s.pinging.Store(false)
		defer cancel()
		done <- p.Ping(pctx)
	}()
	t := time.NewTimer(pingTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("the store did not answer a ping within %s", pingTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// spoolFullAt is the fill from which the server stops saying it is ready:
// a load balancer should move senders elsewhere before refusals begin.
const spoolFullAt = 0.9

// Health pings the store (bounded by ctx) and reads the spool's state.
func (s *Server) Health(ctx context.Context) Health {
	in, admit := s.in.Load(), s.admit.Load()
	h := Health{Status: "ok", Ready: true}
	if p, ok := s.w.(store.Pinger); ok {
		err := s.ping(ctx, p)
		h.Store.Reachable = err == nil
		if err != nil {
			h.Store.Error = err.Error()
		}
	} else {
		h.Store.Reachable = true
	}
	if admit != nil {
		h.Admission = AdmissionHealth{InFlightBytes: admit.used.Load(), MaxInFlightBytes: admit.budget, Refused: admit.refused.Load()}
	}
	if in != nil {
		if sh, ok := in.spoolHealth(); ok {
			h.Spool = &sh
		}
		rh := in.redactionHealth()
		h.Redaction = &rh
	}
	h.Status, h.Ready, h.Reason = s.verdict(h)
	return h
}

// verdict is a health report's status, readiness and reason.
func (s *Server) verdict(h Health) (status string, ready bool, reason string) {
	sp := h.Spool
	switch {
	case s.draining.Load() || !s.listening.Load():
		return "draining", false, "shutting down (or not started): send elsewhere"
	case sp != nil && sp.Error != "":
		return "unavailable", false, "the spool failed and refuses data until serve is restarted"
	case sp != nil && sp.DiskFull:
		return "unavailable", false, fmt.Sprintf("the spool's disk is full (%d bytes free): data is refused until the feeder has stored the spool's records in the store%s, or space is freed",
			sp.DiskFreeBytes, storeWait(h.Store))
	case sp != nil && sp.Fill >= spoolFullAt:
		return "unavailable", false, fmt.Sprintf("the spool is %.0f%% full: data is refused from 100%% until the feeder has stored more of it%s",
			100*sp.Fill, storeWait(h.Store))
	case sp != nil && !h.Store.Reachable:
		return "degraded", true, "the store is unreachable: data is acknowledged into the spool and stored once it answers"
	case sp != nil && sp.LastError != "":
		return "degraded", true, "the feeder's last store write failed; it is retrying, and data is acknowledged into the spool meanwhile"
	case !h.Store.Reachable:
		return "unavailable", false, "the store is unreachable and there is no spool: data is refused until it answers"
	}
	return "ok", true, ""
}

// storeWait says, after a spool's refusal, that the store is what it waits
// for when the store is down.
func storeWait(st StoreHealth) string {
	if st.Reachable {
		return ""
	}
	return " (waiting for the store, which does not answer)"
}
