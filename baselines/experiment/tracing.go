package experiment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Service names.
const (
	// RunnerService is the service.name of the runner's root spans.
	RunnerService = "loom-eval-experiment"
	// DefaultAgentService is OTEL_SERVICE_NAME for a command whose
	// environment sets none.
	DefaultAgentService = "agent-under-test"
)

// Backend is where trials' traces go and are read back: the OTLP/HTTP
// endpoint the runner and the agent export to, and a reader of the store
// behind it. cmd/loom-eval wires one (an in-process collector on loopback
// writing the experiment's store, or the user's running collector and its
// store), so this package opens no store and starts no server.
type Backend interface {
	// OTLPEndpoint is the collector's OTLP/HTTP base URL.
	OTLPEndpoint() string
	// GRPCAddr is its OTLP/gRPC host:port, "" when not known.
	GRPCAddr() string
	Reader() store.Reader
}

// TracesConfig says where trials' traces go.
type TracesConfig struct {
	Backend Backend
	// Wait bounds how long the runner waits for a trial's spans to land
	// after the agent returned; Quiet is how long no new span must arrive
	// before it stops waiting early. Defaults 2s and 300ms.
	Wait, Quiet time.Duration
	// Poll is how often it looks (default 50ms).
	Poll   time.Duration
	Logger *slog.Logger
}

// Validate reports every problem with the configuration.
func (c *TracesConfig) Validate() error {
	var errs []error
	if c.Backend == nil {
		errs = append(errs, errors.New("backend: none (a collector endpoint and its store)"))
	} else if err := checkURL(c.Backend.OTLPEndpoint()); err != nil {
		errs = append(errs, fmt.Errorf("otlp endpoint: %w", err))
	}
	if c.Wait < 0 || c.Quiet < 0 || c.Poll < 0 {
		errs = append(errs, errors.New("wait, quiet, poll: must not be negative"))
	}
	return errors.Join(errs...)
}

// Traces owns the runner's side of an experiment's traces: the tracer
// that opens each trial's root span, and the reads that find a trial's
// spans in the backend's store.
type Traces struct {
	cfg    TracesConfig
	st     store.Reader
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// NewTraces validates cfg; Start does the I/O.
func NewTraces(cfg TracesConfig) (*Traces, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Wait == 0 {
		cfg.Wait = 2 * time.Second
	}
	if cfg.Quiet == 0 {
		cfg.Quiet = 300 * time.Millisecond
	}
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Traces{cfg: cfg}, nil
}

// Start starts the runner's tracer, exporting to the backend.
func (t *Traces) Start(ctx context.Context) error {
	t.st = t.cfg.Backend.Reader()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(t.Endpoint()+"/v1/traces"))
	if err != nil {
		return fmt.Errorf("runner's exporter: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", RunnerService))
	// A syncer: a trial's root span is stored when End returns.
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.tracer = t.tp.Tracer("github.com/loomwork/loomwork/baselines/experiment")
	return nil
}

// Endpoint is the OTLP/HTTP base URL agents export to.
func (t *Traces) Endpoint() string { return t.cfg.Backend.OTLPEndpoint() }

// GRPCAddr is the collector's OTLP/gRPC host:port ("" when not known).
func (t *Traces) GRPCAddr() string { return t.cfg.Backend.GRPCAddr() }

// Reader reads the store.
func (t *Traces) Reader() store.Reader { return t.st }

// Shutdown stops the tracer (the backend is its owner's to stop).
func (t *Traces) Shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	err := t.tp.Shutdown(context.WithoutCancel(ctx))
	t.tp = nil
	return err
}

// TrialSpan is the runner's root span of one trial.
type TrialSpan struct {
	span    trace.Span
	TraceID string
	SpanID  string
	Prop    Propagation
	started time.Time
}

// StartTrial opens the root span of a trial and returns the context the
// agent gets.
func (t *Traces) StartTrial(ctx context.Context, expID, caseID string, trial int, agent string, now time.Time) *TrialSpan {
	name := semconv.OpInvokeAgent
	if agent != "" {
		name += " " + agent
	}
	attrs := []attribute.KeyValue{
		attribute.String(semconv.AttrExperimentID, expID),
		attribute.String(semconv.AttrCaseID, caseID),
		attribute.Int(semconv.AttrTrial, trial),
		attribute.String(semconv.AttrOperationName, semconv.OpInvokeAgent),
	}
	if agent != "" {
		attrs = append(attrs, attribute.String(semconv.AttrAgentName, agent))
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithAttributes(attrs...), trace.WithTimestamp(now), trace.WithSpanKind(trace.SpanKindClient))
	var bag baggage.Baggage
	for _, kv := range [][2]string{{semconv.AttrExperimentID, expID}, {semconv.AttrCaseID, caseID}, {semconv.AttrTrial, strconv.Itoa(trial)}} {
		if m, err := baggage.NewMemberRaw(kv[0], kv[1]); err == nil {
			bag, _ = bag.SetMember(m)
		}
	}
	carrier := propagation.MapCarrier{}
	propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}).Inject(baggage.ContextWithBaggage(ctx, bag), carrier)
	sc := span.SpanContext()
	return &TrialSpan{
		span: span, TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), started: now,
		Prop: Propagation{
			TraceParent: carrier.Get("traceparent"), TraceState: carrier.Get("tracestate"), Baggage: carrier.Get("baggage"),
			OTLPEndpoint: t.Endpoint(), OTLPProtocol: "http/protobuf", ServiceName: DefaultAgentService,
			Resource: [][2]string{{semconv.AttrExperimentID, expID}, {semconv.AttrCaseID, caseID}, {semconv.AttrTrial, strconv.Itoa(trial)}},
		},
	}
}

// End ends the root span (exported synchronously), marking the agent's
// failure on it.
func (s *TrialSpan) End(failure string, now time.Time) {
	if failure != "" {
		s.span.SetStatus(codes.Error, failure)
	}
	s.span.End(trace.WithTimestamp(now))
}

// Collect waits for the trial's spans to land (the root always; the
// agent's until none arrived for Quiet, at most Wait; with flushed, an
// agent that exported nothing is not waited for beyond Quiet) and returns
// them.
// When the agent did not join the runner's trace (its SDK does not read
// TRACEPARENT) but tagged its resource with the experiment, case and trial
// (OTEL_RESOURCE_ATTRIBUTES, which every SDK reads), Collect finds its
// trace among those started during the trial and returns that trace's
// spans: joined is false then.
func (t *Traces) Collect(ctx context.Context, ts *TrialSpan, expID, caseID string, trial int, flushed bool, sleep func(context.Context, time.Duration) error, now func() time.Time) (spans []store.Span, joined bool, err error) {
	deadline := now().Add(t.cfg.Wait)
	last, lastChange := -1, now()
	for {
		spans, err = t.st.GetTrace(ctx, ts.TraceID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, false, fmt.Errorf("read trace %s: %w", ts.TraceID, err)
		}
		if len(spans) != last {
			last, lastChange = len(spans), now()
		}
		done := (len(spans) > 1 || (flushed && len(spans) == 1)) && now().Sub(lastChange) >= t.cfg.Quiet
		if done || !now().Before(deadline) {
			break
		}
		if err := sleep(ctx, t.cfg.Poll); err != nil {
			return nil, false, err
		}
	}
	if len(spans) > 1 {
		return spans, true, nil
	}
	other, err := t.findByResource(ctx, ts, expID, caseID, trial)
	if err != nil || other == nil {
		return spans, true, err
	}
	return other, false, nil
}

// findByResource looks for a trace started during the trial whose
// resource says it is this trial.
func (t *Traces) findByResource(ctx context.Context, ts *TrialSpan, expID, caseID string, trial int) ([]store.Span, error) {
	q := store.TraceQuery{Start: ts.started.Add(-time.Second), Limit: store.MaxPageSize}
	page, err := t.st.ListTraces(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	want := strconv.Itoa(trial)
	for _, s := range page.Traces {
		if s.TraceID == ts.TraceID {
			continue
		}
		spans, err := t.st.GetTrace(ctx, s.TraceID)
		if err != nil {
			continue
		}
		for i := range spans {
			r := spans[i].ResourceAttributes
			if attrString(r, semconv.AttrExperimentID) == expID && attrString(r, semconv.AttrCaseID) == caseID && attrString(r, semconv.AttrTrial) == want {
				return spans, nil
			}
		}
	}
	return nil, nil
}

func attrString(a store.Attributes, key string) string {
	v, ok := a[key]
	if !ok {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}
