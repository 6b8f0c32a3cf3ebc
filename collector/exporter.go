package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/collector/redact"
	"github.com/loomwork/loomwork/collector/spool"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storeurl"
)

// TypeStr is the exporter's component type, the key users write in a
// Collector configuration.
const TypeStr = "loomwork"

var componentType = component.MustNewType(TypeStr)

// FactoryOption configures NewFactory.
type FactoryOption func(*factory)

// WithStore makes every exporter the factory creates write to w instead of
// opening the store its Config names. The exporter never closes w; its owner
// does, after the exporter shut down. This is how `loom-eval serve` shares
// one open store between ingestion and the API.
func WithStore(w store.Writer) FactoryOption {
	return func(f *factory) { f.store = w }
}

// WithLogger gives the exporter's spool a logger (default slog.Default()).
func WithLogger(l *slog.Logger) FactoryOption {
	return func(f *factory) { f.slog = l }
}

// withCreated tells the in-process server which exporter the factory
// made, for its health report.
func withCreated(f func(*traceExporter)) FactoryOption {
	return func(fa *factory) { fa.created = f }
}

type factory struct {
	store    store.Writer
	slog     *slog.Logger
	created  func(*traceExporter)
	policy   PolicyFunc
	redactor *redact.Redactor
}

// NewFactory returns the Loomwork exporter factory, for the in-process
// pipeline or a custom Collector build (add it to the exporters list of an
// ocb manifest, or to otelcol.Factories).
func NewFactory(opts ...FactoryOption) exporter.Factory {
	f := &factory{}
	for _, o := range opts {
		o(f)
	}
	return exporter.NewFactory(
		componentType,
		func() component.Config { return createDefaultConfig() },
		exporter.WithTraces(f.createTraces, component.StabilityLevelDevelopment),
	)
}

func (f *factory) createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("loomwork exporter: config is %T, want *collector.Config", cfg)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("loomwork exporter config: %w", err)
	}
	e := &traceExporter{cfg: *c, log: set.Logger, slog: f.slog, injected: f.store, policy: f.policy, redactor: f.redactor}
	if f.created != nil {
		f.created(e)
	}
	return exporterhelper.NewTraces(ctx, set, cfg, e.push,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: c.Timeout}),
		// Reads pdata only: the receiver's buffer need not be copied.
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		// No WithQueue and no WithRetry: the write is synchronous, so the
		// sender is acknowledged only after the store returned; the sender
		// retries (OTLP clients do) when told to.
	)
}

// traceExporter maps OTLP to store rows and writes them.
type traceExporter struct {
	cfg      Config
	log      *zap.Logger
	slog     *slog.Logger
	injected store.Writer
	policy   PolicyFunc       // nil: every project captures content
	redactor *redact.Redactor // nil: no redaction

	contentDropped atomic.Int64

	mu        sync.Mutex
	owned     store.Store // opened in start, shut down in shutdown
	committer *committer
	spooler   *spooler          // instead of the committer when Config.SpoolDir is set
	checker   store.SpanChecker // the store's, when it has spans it can never store
}

// unstorable moves the spans the store can never accept (store.SpanChecker)
// from spans to rejected, so each is refused alone through partial_success
// instead of failing its whole request with a status the sender retries
// for ever.
func unstorable(c store.SpanChecker, spans []store.Span, rejected []genai.Rejection) ([]store.Span, []genai.Rejection) {
	kept := spans[:0]
	for i := range spans {
		sp := &spans[i]
		if err := c.CheckSpan(sp); err != nil {
			rejected = append(rejected, genai.Rejection{TraceID: sp.TraceID, SpanID: sp.SpanID, SpanName: sp.Name, Reason: err.Error()})
			continue
		}
		kept = append(kept, *sp)
	}
	return kept, rejected
}

func (e *traceExporter) start(ctx context.Context, _ component.Host) error {
	w := e.injected
	if w == nil {
		st, err := storeurl.Open(ctx, e.cfg.Store, false)
		if err != nil {
			return fmt.Errorf("loomwork exporter: %w", err)
		}
		e.owned, w = st, st
	}
	// A store write always has a deadline, so a hung store cannot hold
	// the writers for ever; callers' own deadlines still apply.
	writeTimeout := e.cfg.Timeout
	if writeTimeout == 0 {
		writeTimeout = DefaultTimeout
	}
	checker, _ := w.(store.SpanChecker)
	if e.cfg.SpoolDir != "" {
		sw, ok := w.(store.SpoolingWriter)
		if !ok {
			e.closeOwned(ctx)
			return fmt.Errorf("loomwork exporter: spool_dir is set but the store (%T) cannot spool; the embedded store writes directly", w)
		}
		wal, err := spool.Open(ctx, spool.Options{Dir: e.cfg.SpoolDir, MaxBytes: e.cfg.spoolMaxBytes(), Logger: e.slog})
		if err != nil {
			e.closeOwned(ctx)
			return fmt.Errorf("loomwork exporter: open spool: %w", err)
		}
		sp := newSpooler(sw, wal, e.log, e.cfg.retryAfter(), writeTimeout, e.cfg.spoolBatchBytes())
		sp.start()
		e.mu.Lock()
		e.spooler, e.checker = sp, checker
		e.mu.Unlock()
		return nil
	}
	c := newCommitter(w, e.cfg.maxBatchSpans(), writeTimeout)
	c.maxWait = e.cfg.maxQueueWait()
	// A store that can split its writes encodes each request in the
	// request's goroutine (store.PreparingWriter, an optional capability).
	if pw, ok := w.(store.PreparingWriter); ok {
		c.prep = pw
	}
	c.onBatch = func(requests, spans int, d time.Duration, err error) {
		if err != nil {
			e.log.Warn("store write failed; senders are told to retry",
				zap.Int("requests", requests), zap.Int("spans", spans), zap.Duration("took", d), zap.Error(err))
			return
		}
		if ce := e.log.Check(zap.DebugLevel, "stored spans"); ce != nil {
			ce.Write(zap.Int("requests", requests), zap.Int("spans", spans), zap.Duration("took", d))
		}
	}
	c.start(e.cfg.writers())
	e.mu.Lock()
	e.committer, e.checker = c, checker
	e.mu.Unlock()
	return nil
}

// closeOwned shuts down a store start opened, when start fails after.
func (e *traceExporter) closeOwned(ctx context.Context) {
	if e.owned != nil {
		_ = e.owned.Shutdown(ctx)
		e.owned = nil
	}
}

func (e *traceExporter) shutdown(ctx context.Context) error {
	e.mu.Lock()
	c, sp, owned := e.committer, e.spooler, e.owned
	e.committer, e.spooler, e.owned = nil, nil, nil
	e.mu.Unlock()
	var errs []error
	if c != nil {
		if err := c.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("drain store writes: %w", err))
		}
	}
	if sp != nil {
		if err := sp.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop spool: %w", err))
		}
	}
	if owned != nil {
		if err := owned.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down store: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (e *traceExporter) push(ctx context.Context, td ptrace.Traces) error {
	spans, rejected := genai.MapTraces(td, e.cfg.mapOptions())
	return e.consumeSpans(ctx, spans, rejected)
}

// mapOptions and consumeSpans are the direct entry the in-process front
// uses for OTLP protobuf: it decodes the wire bytes straight into store
// spans (genai.DecodeProto) instead of building pdata for push to walk.
func (e *traceExporter) mapOptions() genai.Options { return e.cfg.mapOptions() }

// storeBehind reports whether the committer would refuse a write now for
// its backlog (never, with the spool: a full spool refuses on its own).
func (e *traceExporter) storeBehind() bool {
	e.mu.Lock()
	c := e.committer
	e.mu.Unlock()
	return c != nil && c.behind()
}

// consumeSpans stores spans already mapped; rejected are the request's
// spans the mapping refused, reported to the sender.
func (e *traceExporter) consumeSpans(ctx context.Context, spans []store.Span, rejected []genai.Rejection) error {
	// Project, content capture and redaction, before anything is written
	// (projects.go).
	e.prepare(ctx, spans)
	e.mu.Lock()
	c, sp, checker := e.committer, e.spooler, e.checker
	e.mu.Unlock()
	if checker != nil {
		spans, rejected = unstorable(checker, spans, rejected)
	}
	if len(rejected) > 0 {
		if !reportRejections(ctx, rejected) {
			// No front to tell the sender (e.g. the core otlpreceiver):
			// the spans can never be stored, so say so in the log.
			e.log.Warn("rejected spans that can never be stored", zap.Int("rejected", len(rejected)),
				zap.String("detail", genai.RejectionSummary(rejected)))
		}
	}
	if len(spans) == 0 {
		return nil
	}
	if sp != nil {
		return sp.write(ctx, spans)
	}
	if c == nil {
		return newRetryable(codes.Unavailable, errors.New("loomwork exporter is not started"), e.cfg.retryAfter())
	}
	if err := c.write(ctx, spans); err != nil {
		code := codes.Unavailable
		if errors.Is(err, errBacklog) {
			code = codes.ResourceExhausted
		}
		return newRetryable(code, fmt.Errorf("store %d spans: %w", len(spans), err), e.cfg.retryAfter())
	}
	return nil
}

// rejectionReport collects the spans the exporter rejected for one request,
// so the receiver can answer with partial_success. The pipeline is
// synchronous (no queue), so the exporter runs within the receiver's call
// and the context carries the report.
type rejectionReport struct {
	mu       sync.Mutex
	rejected []genai.Rejection
}

type rejectionReportKey struct{}

func withRejectionReport(ctx context.Context) (context.Context, *rejectionReport) {
	r := &rejectionReport{}
	return context.WithValue(ctx, rejectionReportKey{}, r), r
}

func reportRejections(ctx context.Context, rs []genai.Rejection) bool {
	r, ok := ctx.Value(rejectionReportKey{}).(*rejectionReport)
	if !ok {
		return false
	}
	r.mu.Lock()
	r.rejected = append(r.rejected, rs...)
	r.mu.Unlock()
	return true
}

func (r *rejectionReport) get() []genai.Rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rejected
}

// spoolHealth reports the spool's state; false when there is no spool.
func (e *traceExporter) spoolHealth() (SpoolHealth, bool) {
	e.mu.Lock()
	sp := e.spooler
	e.mu.Unlock()
	if sp == nil {
		return SpoolHealth{}, false
	}
	return sp.health(e.cfg.SpoolDir), true
}
