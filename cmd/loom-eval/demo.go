package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/agenttrace"
)

// runDemo sends one realistic (scripted) agent trace to a running
// `loom-eval serve` through the OpenTelemetry SDK's OTLP exporter, and says
// where to look at it.
func (m *Main) runDemo(ctx context.Context, args []string) error {
	fs := m.newFlagSet("demo", "demo [--endpoint HOST:PORT] [--http] [--ui URL]")
	endpoint := fs.String("endpoint", "", fmt.Sprintf("collector address (default $%s, else %s; with --http $%s, else %s)", envGRPCAddr, collector.DefaultGRPCAddr, envHTTPAddr, collector.DefaultHTTPAddr))
	useHTTP := fs.Bool("http", false, "send over OTLP/HTTP (protobuf) instead of OTLP/gRPC")
	uiDefault := "http://" + defaultUIAddr
	if a := strings.TrimSpace(m.getenv(envUIAddr)); a != "" && a != collector.AddrOff {
		uiDefault = "http://" + a
	}
	uiURL := fs.String("ui", uiDefault, fmt.Sprintf("where serve's UI listens, for the printed link (default from $%s)", envUIAddr))
	timeout := fs.Duration("timeout", 15*time.Second, "give up sending after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("demo: unexpected arguments %q", fs.Args())
	}
	addr := *endpoint
	if addr == "" {
		addr = collector.DefaultGRPCAddr
		if v := strings.TrimSpace(m.getenv(envGRPCAddr)); v != "" {
			addr = v
		}
		if *useHTTP {
			addr = collector.DefaultHTTPAddr
			if v := strings.TrimSpace(m.getenv(envHTTPAddr)); v != "" {
				addr = v
			}
		}
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usageError("demo: collector address %q (--endpoint, $%s or $%s) is not host:port", addr, envGRPCAddr, envHTTPAddr)
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var (
		exp sdktrace.SpanExporter
		err error
	)
	// A project key ($LOOMWORK_KEY) stores the trace under its project.
	headers := map[string]string{}
	if k := m.getenv(envKey); k != "" {
		headers["authorization"] = "Bearer " + k
	}
	protocol := "OTLP/gRPC"
	if *useHTTP {
		protocol = "OTLP/HTTP"
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(), otlptracehttp.WithHeaders(headers),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: *timeout}))
	} else {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithHeaders(headers),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: *timeout}))
	}
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("demo: create %s exporter: %w", protocol, err)}
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "loomwork-demo"),
		attribute.String("service.version", "0.1.0"),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Hour)))
	traceID := agenttrace.Emit(ctx, tp, agenttrace.Options{
		// The scripted run lasts 4.2s; date it so that it has just ended.
		Start:        time.Now().Add(-5 * time.Second),
		Conversation: "conv-demo-" + time.Now().UTC().Format("20060102T150405")})
	flushErr := tp.ForceFlush(ctx)
	shutErr := tp.Shutdown(context.Background())
	if flushErr != nil || shutErr != nil {
		err := flushErr
		if err == nil {
			err = shutErr
		}
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("demo: send trace to %s over %s: %w (is `loom-eval serve` running?)", addr, protocol, err)}
	}
	fmt.Fprintf(m.Stdout, "Sent a scripted research-agent trace (6 spans) to %s over %s.\n", addr, protocol)
	fmt.Fprintf(m.Stdout, "Trace ID: %s\n\n", traceID)
	fmt.Fprintf(m.Stdout, "Look at it:\n  loom-eval traces get %s\n  loom-eval traces list --since 1h\n  %s/api/v1/traces/%s\n", traceID, *uiURL, traceID)
	return nil
}
