package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/store/storeurl"
)

// runDemo sends one realistic (scripted) agent trace to a running
// `loom-eval serve` through the OpenTelemetry SDK's OTLP exporter, and says
// where to look at it.
func (m *Main) runDemo(ctx context.Context, args []string) error {
	fs := m.newFlagSet("demo", "demo [--endpoint HOST:PORT] [--http] [--ui URL]")
	endpoint := fs.String("endpoint", "", fmt.Sprintf("collector address (default $%s, else %s; with --http $%s, else %s)", envGRPCAddr, collector.DefaultGRPCAddr, envHTTPAddr, collector.DefaultHTTPAddr))
	useHTTP := fs.Bool("http", false, "send over OTLP/HTTP (protobuf) instead of OTLP/gRPC")
	uiDefault := "http://" + defaultUIAddr
	switch a := strings.TrimSpace(m.getenv(envUIAddr)); a {
	case "":
	case collector.AddrOff:
		uiDefault = collector.AddrOff
	default:
		uiDefault = "http://" + a
	}
	uiURL := fs.String("ui", uiDefault, fmt.Sprintf("where serve's UI listens, for the links (default from $%s); %s: no UI, no links", envUIAddr, collector.AddrOff))
	timeout := fs.Duration("timeout", 15*time.Second, "give up sending, and waiting for serve's UI to show the trace, after this long")
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
	traceID, protocol, err := m.sendDemoTrace(ctx, addr, *useHTTP, *timeout)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "Sent a scripted research-agent trace (6 spans) to %s over %s.\n", addr, protocol)
	fmt.Fprintf(m.Stdout, "Trace ID: %s\n", traceID)
	ui := strings.TrimRight(*uiURL, "/")
	if ui != collector.AddrOff {
		switch m.awaitStored(ctx, ui, traceID) {
		case storedNo:
			fmt.Fprintf(m.Stdout, "(serve acknowledged it, but its UI at %s did not show it within %s: a ClickHouse store is fed from serve's spool in batches; look again in a moment)\n", ui, *timeout)
		case storedUnknown:
			fmt.Fprintf(m.Stdout, "(no serve UI answered at %s to confirm it is stored: --ui names where it listens)\n", ui)
		}
	}
	fmt.Fprintln(m.Stdout, "\nLook at it:")
	if ui != collector.AddrOff {
		fmt.Fprintf(m.Stdout, "  %s/traces/%s   (the trace page)\n  %s/api/v1/traces/%s   (the same, as JSON)\n", ui, traceID, ui, traceID)
	}
	hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer hcancel()
	m.printDemoCLIHint(hctx, traceID)
	return nil
}

// sendDemoTrace sends the scripted agent trace to the collector at addr
// (OTLP/gRPC, or OTLP/HTTP with useHTTP) and returns its id and the
// protocol's name.
func (m *Main) sendDemoTrace(ctx context.Context, addr string, useHTTP bool, timeout time.Duration) (string, string, error) {
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
	if useHTTP {
		protocol = "OTLP/HTTP"
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(), otlptracehttp.WithHeaders(headers),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: timeout}))
	} else {
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithHeaders(headers),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: timeout}))
	}
	if err != nil {
		return "", "", &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("demo: create %s exporter: %w", protocol, err)}
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
	if err := errors.Join(flushErr, shutErr); err != nil {
		return "", "", &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("demo: send trace to %s over %s: %w (is `loom-eval serve` running?)", addr, protocol, err)}
	}
	return traceID.String(), protocol, nil
}

// Whether serve has stored the demo's trace, as its UI says.
const (
	storedYes     = iota
	storedNo      // the UI answered, but not with the trace, until ctx ended
	storedUnknown // no UI answered (another address, off, or a sign-in)
)

// awaitStored waits until serve's UI at ui serves the trace (its JSON
// API), so the links and commands demo prints work when they are read: an
// acknowledgement means the spans are safe, and a ClickHouse store gets
// them from serve's spool a moment later. It asks by the id's first eight
// digits, as a user copying the id often does: a prefix is resolved
// through the store's trace index, which ClickHouse writes apart from the
// spans (a full id is not), so the trace is found both ways once it
// answers.
func (m *Main) awaitStored(ctx context.Context, ui, traceID string) int {
	client := &http.Client{Timeout: 2 * time.Second}
	answered := false
	prefix := traceID
	if len(prefix) > 8 {
		prefix = prefix[:8]
	}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ui+"/api/v1/traces/"+prefix+"?limit=1", nil)
		if err != nil {
			return storedUnknown
		}
		if k := m.getenv(envKey); k != "" {
			req.Header.Set("Authorization", "Bearer "+k)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK, http.StatusConflict: // 409: the prefix names it and another
				return storedYes
			case http.StatusNotFound, http.StatusServiceUnavailable:
				// 503: serve is still connecting to its store (it starts
				// during an outage and feeds its spool once the store
				// answers), or the read timed out: not yet.
				answered = true
			default:
				return storedUnknown
			}
		} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			answered = true // a UI too busy to answer in 2 s is there
		} else if !answered {
			return storedUnknown
		}
		select {
		case <-ctx.Done():
			return storedNo
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// printDemoCLIHint prints the traces commands that show the trace, with
// --store when the store they read by default ($LOOMWORK_STORE, else
// .loomwork/traces.db here) does not hold it: serve writes elsewhere (a
// ClickHouse, another file).
func (m *Main) printDemoCLIHint(ctx context.Context, traceID string) {
	def := m.getenv(storeurl.EnvVar)
	if def == "" {
		def = storeurl.DefaultPath
	}
	if st, err := m.tracesOpenStore(ctx, ""); err == nil {
		_, gerr := st.GetTrace(ctx, traceID)
		st.Shutdown(context.WithoutCancel(ctx))
		if gerr == nil {
			fmt.Fprintf(m.Stdout, "  %s traces get %s\n  %s traces list --since 1h\n", m.prog(), traceID, m.prog())
			return
		}
	}
	fmt.Fprintf(m.Stdout, "  %s traces get %s --store URL\n  %s traces list --since 1h --store URL\n", m.prog(), traceID, m.prog())
	fmt.Fprintf(m.Stdout, "  (URL: the --store serve writes to, e.g. \"$LOOMWORK_CLICKHOUSE_DSN\"; without --store they read %s, which does not hold this trace)\n", def)
}
