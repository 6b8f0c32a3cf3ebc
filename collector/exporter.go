package collector

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/collector/redact"
	"github.com/loomwork/loomwork/store"
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

// withIngester makes the factory's exporter a view of in, which the
// caller owns (starts and shuts down): the in-process Server's
// `--receiver otlp` pipeline shares its ingester with health reporting
// this way.
func withIngester(in *ingester) FactoryOption {
	return func(fa *factory) { fa.ingester = in }
}

type factory struct {
	store    store.Writer
	slog     *slog.Logger
	ingester *ingester
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
	e := &traceExporter{in: f.ingester, log: set.Logger}
	if e.in == nil {
		e.in = &ingester{cfg: *c, log: set.Logger, slog: f.slog, injected: f.store, policy: f.policy, redactor: f.redactor}
		e.owns = true
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

// traceExporter is the Collector component over an ingester: it maps
// pdata to store spans and consumes them. It is what a custom Collector
// build and `--receiver otlp` run; serve's own front calls the ingester
// without it.
type traceExporter struct {
	in   *ingester
	owns bool // in was made for this exporter: start and shut it down
	log  *zap.Logger
}

func (e *traceExporter) start(ctx context.Context, _ component.Host) error {
	if !e.owns {
		return nil
	}
	return e.in.start(ctx)
}

func (e *traceExporter) shutdown(ctx context.Context) error {
	if !e.owns {
		return nil
	}
	return e.in.shutdown(ctx)
}

func (e *traceExporter) push(ctx context.Context, td ptrace.Traces) error {
	spans, rejected := genai.MapTraces(td, e.in.mapOptions())
	rejected, err := e.in.consume(ctx, spans, rejected)
	if len(rejected) > 0 {
		// A Collector receiver has no way to tell the sender which spans
		// were refused (OTLP's partial_success is the receiver's to set),
		// and they can never be stored: say so in the log.
		e.log.Warn("rejected spans that can never be stored", zap.Int("rejected", len(rejected)),
			zap.String("detail", genai.RejectionSummary(rejected)))
	}
	return err
}
