package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/a2a"
	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
)

// runA2A dispatches `loom-eval a2a …`.
func (m *Main) runA2A(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "serve" {
		return usageError("a2a: want a subcommand: a2a serve --agent research|coding [--http ADDR] (see docs/protocols.md)")
	}
	return m.runA2AServe(ctx, args[1:])
}

// runA2AServe serves one reference agent over A2A (JSON-RPC on /a2a, the
// Agent Card at /.well-known/agent-card.json). Each task is a run in the
// journal whose run id is the task id; the model is the agent's scripted
// policy (labelled scripted).
func (m *Main) runA2AServe(ctx context.Context, args []string) error {
	fs := m.newFlagSet("a2a serve", "a2a serve --agent research|coding [--http 127.0.0.1:8766] [--journal F] [--otlp-endpoint host:4317] [--dataset DIR] [--workspaces DIR]")
	agentName := fs.String("agent", "", "reference agent to serve: research or coding")
	httpAddr := fs.String("http", "127.0.0.1:8766", "listen address")
	journalPath := fs.String("journal", ".loomwork/a2a.journal.db", "SQLite journal of the served tasks (run id = task id)")
	endpoint := fs.String("otlp-endpoint", "", "send spans over OTLP/gRPC to host:port (e.g. 127.0.0.1:4317 of loom-eval serve)")
	dataset := fs.String("dataset", "", "research: judged dataset folder")
	indexCache := fs.String("index-cache", ".loomwork/index", "research: folder for the persisted BM25 index")
	workspaces := fs.String("workspaces", ".loomwork/workspaces", "coding: folder of per-run sandbox workspaces")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("a2a serve: unexpected arguments %q", fs.Args())
	}
	var tp trace.TracerProvider
	if *endpoint != "" {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(*endpoint), otlptracegrpc.WithInsecure())
		if err != nil {
			return fmt.Errorf("a2a serve: otlp exporter: %w", err)
		}
		sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "loom-eval-a2a"))))
		defer sdk.Shutdown(context.WithoutCancel(ctx))
		tp = sdk
	}
	var (
		agent runtime.Agent
		model runtime.Model
		desc  string
	)
	switch *agentName {
	case research.Name:
		idx, err := m.researchIndex("a2a serve", *dataset, *indexCache)
		if err != nil {
			return err
		}
		defer idx.Close(context.WithoutCancel(ctx))
		a, err := research.New(research.Config{Index: idx})
		if err != nil {
			return err
		}
		agent, model, desc = a, research.Policy(research.PolicyConfig{}), "Answers questions about the project's documentation, citing the sections it read."
	case coding.Name:
		sb, stop := lazySandbox(ctx)
		defer func() { _ = stop() }()
		work, err := filepath.Abs(*workspaces)
		if err != nil {
			return usageError("a2a serve: --workspaces %s: %v", *workspaces, err)
		}
		a, err := coding.New(coding.Config{Sandbox: sb, WorkRoot: work})
		if err != nil {
			return err
		}
		agent, model, desc = a, coding.Policy(coding.PolicyConfig{}), "Writes and runs Python in a sandbox to solve a programming task; answers with what the program printed."
	default:
		return usageError("a2a serve: --agent must be research or coding (got %q)", *agentName)
	}
	if dir := filepath.Dir(*journalPath); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("a2a serve: %w", err)}
		}
	}
	j, err := journaldb.Open(ctx, journaldb.Config{Path: *journalPath})
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("a2a serve: %w", err)}
	}
	defer j.Shutdown(context.WithoutCancel(ctx))
	rt, err := runtime.New(runtime.Config{Model: model, Journal: j, TracerProvider: tp})
	if err != nil {
		return err
	}
	srv, err := a2a.NewServer(a2a.ServerConfig{Agent: agent, Runtime: rt, Description: desc, TracerProvider: tp})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("a2a serve: %w", err)}
	}
	base := "http://" + ln.Addr().String()
	hs := &http.Server{Handler: srv.Handler(base), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(m.Stderr, "loom-eval a2a serve: agent %s (scripted policy) at %s (card %s/.well-known/agent-card.json, journal %s)\n", agent.Name, base, base, *journalPath)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("a2a serve: %w", err)}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	}
}
