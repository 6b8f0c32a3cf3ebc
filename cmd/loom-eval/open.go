package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/datasets"
)

// The parts several commands open the same way: the judged dataset, the
// environment, OTLP tracing, the SQLite journal and the research index.

// judgedDataset is the judged set a command reads: its --dataset flag,
// else $LOOMWORK_DATASET, else the shipped set (see datasets.ResolveJudged).
func (m *Main) judgedDataset(flagValue string) (string, error) {
	dir, err := datasets.ResolveJudged(flagValue, m.getenv)
	if err != nil {
		return "", &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return dir, nil
}

func (m *Main) getenv(k string) string {
	if m.Getenv == nil {
		return os.Getenv(k)
	}
	return m.Getenv(k)
}

// otlpProvider is a tracer provider that batches service's spans over
// OTLP/gRPC to endpoint; cmd names the command in its error.
func otlpProvider(ctx context.Context, cmd, service, endpoint string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		return nil, fmt.Errorf("%s: otlp exporter: %w", cmd, err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service)))), nil
}

// otlpTracing is the tracer provider that sends cmd's spans (service
// loom-eval-CMD) over OTLP/gRPC to endpoint (nil without one) and the
// function that flushes it, saying on stderr when that fails.
func (m *Main) otlpTracing(ctx context.Context, cmd, endpoint string) (trace.TracerProvider, func(), error) {
	if endpoint == "" {
		return nil, func() {}, nil
	}
	sdk, err := otlpProvider(ctx, cmd, "loom-eval-"+cmd, endpoint)
	if err != nil {
		return nil, nil, err
	}
	flush := func() {
		if err := sdk.Shutdown(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(m.Stderr, "loom-eval %s: flush spans to %s: %v\n", cmd, endpoint, err)
		}
	}
	return sdk, flush, nil
}

// openJournalDB opens (creating its folder) the SQLite journal at path
// for cmd, which its errors name; deterministic stamps events with a
// logical clock.
func openJournalDB(ctx context.Context, cmd, path string, deterministic bool) (*journaldb.Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("%s: %w", cmd, err)}
		}
	}
	jcfg := journaldb.Config{Path: path}
	if deterministic {
		jcfg.Clock = journaldb.DeterministicClock()
	}
	j, err := journaldb.Open(ctx, jcfg)
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("%s: %w", cmd, err)}
	}
	return j, nil
}

// researchIndex is the research agent's search index over the judged
// dataset (--dataset, else $LOOMWORK_DATASET or the shipped copy), for the
// commands that run the agent or serve its tools; cmd names the command in
// the error when the dataset has no judgements.
func (m *Main) researchIndex(cmd, dataset, cacheDir string) (*research.DatasetIndex, error) {
	dir, err := m.judgedDataset(dataset)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "qrels.jsonl")); err != nil {
		return nil, usageError("%s: research dataset %s: %v (set --dataset or $LOOMWORK_DATASET)", cmd, dir, err)
	}
	return &research.DatasetIndex{Dir: dir, CacheDir: cacheDir}, nil
}
