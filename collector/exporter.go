package collector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/loomwork/loomwork/collector/genai"
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

type factory struct {
	store store.Writer
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
	e := &traceExporter{cfg: *c, log: set.Logger, injected: f.store}
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
	injected store.Writer

	mu        sync.Mutex
	owned     store.Store // opened in start, shut down in shutdown
	committer *committer
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
	c := newCommitter(w, e.cfg.maxBatchSpans(), writeTimeout)
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
	e.committer = c
	e.mu.Unlock()
	return nil
}

func (e *traceExporter) shutdown(ctx context.Context) error {
	e.mu.Lock()
	c, owned := e.committer, e.owned
	e.committer, e.owned = nil, nil
	e.mu.Unlock()
	var errs []error
	if c != nil {
		if err := c.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("drain store writes: %w", err))
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
	if len(rejected) > 0 {
		if !reportRejections(ctx, rejected) {
			// No front to tell the sender (e.g. the core otlpreceiver):
			// the spans can never be stored, so say so in the log.
			e.log.Warn("rejected spans with invalid ids", zap.Int("rejected", len(rejected)),
				zap.String("detail", genai.RejectionSummary(rejected)))
		}
	}
	if len(spans) == 0 {
		return nil
	}
	e.mu.Lock()
	c := e.committer
	e.mu.Unlock()
	if c == nil {
		return newRetryable(codes.Unavailable, errors.New("loomwork exporter is not started"), e.cfg.retryAfter())
	}
	if err := c.write(ctx, spans); err != nil {
		return newRetryable(codes.Unavailable, fmt.Errorf("store %d spans: %w", len(spans), err), e.cfg.retryAfter())
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
