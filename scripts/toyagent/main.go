// Command toyagent is a toy agent that is NOT on Loomwork's runtime: it
// uses only the OpenTelemetry Go SDK, as any outside agent would, to send
// one GenAI trace per task to an OTLP endpoint (`loom-eval serve`), with
// its root span marked with the task's case id (loomwork.case.id).
//
// It is a toy: its "model" is deterministic Go code (labelled scripted on
// every model-call span), a calculator agent answering "what is the mean /
// sum / median / maximum / minimum of ..." questions. Its answers round
// the calculator's exact value to --precision decimals, and its median is
// deliberately wrong on an unsorted list, so graders have something to
// catch. docs/scoring.md ("Any agent's traces become cases") runs it.
//
//	go run ./scripts/toyagent --endpoint 127.0.0.1:4317 --insecure --tasks scripts/toyagent/tasks.json
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	otelsemconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// Exit codes, as loom-eval's.
const (
	exitOK      = 0
	exitUsage   = 2
	exitRuntime = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, time.Now)
	stop()
	os.Exit(code)
}

// run parses the flags, sends the traces and flushes them; it returns the
// exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, now func() time.Time) int {
	fs := flag.NewFlagSet("toyagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("endpoint", "127.0.0.1:4317", "OTLP endpoint, host:port (loom-eval serve's OTLP gRPC address, or its HTTP one with --protocol http)")
	protocol := fs.String("protocol", "grpc", "OTLP protocol: grpc or http (protobuf)")
	insecure := fs.Bool("insecure", false, "send without TLS (loom-eval serve on loopback)")
	tasksFile := fs.String("tasks", "", "task list: a JSON array of {\"case_id\": ..., \"task\": ...} (required)")
	service := fs.String("service", "toy-calculator", "service.name of the traces")
	version := fs.String("service-version", "1", "service.version of the traces (tells one run of the suite from another)")
	agent := fs.String("agent", "calculator", "the agent's name (gen_ai.agent.name on every run's root span)")
	trials := fs.Int("trials", 1, "run each task this many times (loomwork.trial 0, 1, ...)")
	precision := fs.Int("precision", 2, "decimals the answers keep")
	timeout := fs.Duration("timeout", 15*time.Second, "give up sending after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "toyagent: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return usage("unexpected arguments %q", fs.Args())
	case *tasksFile == "":
		return usage("--tasks FILE is required")
	case *trials < 1:
		return usage("--trials %d: want at least 1", *trials)
	case *precision < 0 || *precision > 15:
		return usage("--precision %d: want 0 to 15", *precision)
	case *protocol != "grpc" && *protocol != "http":
		return usage("--protocol %q: want grpc or http", *protocol)
	}
	if _, _, err := net.SplitHostPort(*endpoint); err != nil {
		return usage("--endpoint %q is not host:port", *endpoint)
	}
	f, err := os.Open(*tasksFile)
	if err != nil {
		return usage("--tasks: %v", err)
	}
	tasks, err := ReadTasks(f, *tasksFile)
	f.Close()
	if err != nil {
		return usage("--tasks: %v", err)
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	exp, err := newExporter(ctx, *protocol, *endpoint, *insecure, *timeout)
	if err != nil {
		fmt.Fprintf(stderr, "toyagent: OTLP exporter: %v\n", err)
		return exitRuntime
	}
	res := resource.NewSchemaless(
		attribute.String(string(otelsemconv.ServiceNameKey), *service),
		attribute.String(string(otelsemconv.ServiceVersionKey), *version),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(exp))
	results := Run(ctx, tp, tasks, Options{Agent: *agent, Trials: *trials, Precision: *precision, End: now()})
	// ForceFlush exports every batched span and returns the export's
	// error (Shutdown only logs it); Shutdown then stops the exporter. A
	// trace the program prints has reached the endpoint.
	flushErr := tp.ForceFlush(ctx)
	if err := errors.Join(flushErr, tp.Shutdown(context.WithoutCancel(ctx))); err != nil {
		fmt.Fprintf(stderr, "toyagent: send traces to %s over OTLP/%s: %v (is loom-eval serve running there? TLS without --insecure?)\n", *endpoint, *protocol, err)
		return exitRuntime
	}
	failed := 0
	for _, r := range results {
		mark := ""
		if r.Failed {
			mark, failed = " (failed)", failed+1
		}
		fmt.Fprintf(stdout, "%s trial %d: %s%s  trace %s\n", r.CaseID, r.Trial, r.Answer, mark, r.TraceID)
	}
	fmt.Fprintf(stdout, "Sent %d traces (%d tasks × %d trials, %d failed runs) to %s over OTLP/%s as service %s version %s.\n",
		len(results), len(tasks), *trials, failed, *endpoint, *protocol, *service, *version)
	return exitOK
}

func newExporter(ctx context.Context, protocol, endpoint string, insecure bool, timeout time.Duration) (sdktrace.SpanExporter, error) {
	if protocol == "http" {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(endpoint),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: timeout})}
		if insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return otlptracehttp.New(ctx, opts...)
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(endpoint),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 200 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: timeout})}
	if insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	return otlptracegrpc.New(ctx, opts...)
}
