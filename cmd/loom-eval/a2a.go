package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/loomwork/loomwork/internal/service"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/a2a"
	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
)

// runA2A dispatches `loom-eval a2a …`.
func (m *Main) runA2A(ctx context.Context, args []string) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval a2a serve --agent research|coding [--http ADDR] [flags]\nServes a reference agent over the Agent2Agent protocol (docs/protocols.md); 'loom-eval a2a serve -h' lists its flags.")
		return nil
	}
	if len(args) == 0 || args[0] != "serve" {
		return usageError("a2a: want a subcommand: a2a serve --agent research|coding [--http ADDR] (see docs/protocols.md)")
	}
	return m.runA2AServe(ctx, args[1:])
}

// a2aServeFlags are `loom-eval a2a serve`'s flags.
type a2aServeFlags struct {
	agentName, httpAddr, journalPath, endpoint, dataset, indexCache, workspaces, scriptedModel *string
	// cmd names the command in errors ("" is a2a serve; workflow run opens
	// its agent steps' agents the same way).
	cmd string
}

func (f *a2aServeFlags) register(fs *flag.FlagSet) {
	f.agentName = fs.String("agent", "", "reference agent to serve: research or coding")
	f.httpAddr = fs.String("http", "127.0.0.1:8766", "listen address")
	f.journalPath = fs.String("journal", ".loomwork/a2a.journal.db", "SQLite journal of the served tasks (run id = task id)")
	f.endpoint = fs.String("otlp-endpoint", "", "send spans over OTLP/gRPC to host:port (e.g. 127.0.0.1:4317 of loom-eval serve)")
	f.dataset = fs.String("dataset", "", "research: judged dataset folder")
	f.indexCache = fs.String("index-cache", ".loomwork/index", "research: folder for the persisted BM25 index")
	f.workspaces = fs.String("workspaces", ".loomwork/workspaces", "coding: folder of per-run sandbox workspaces")
	f.scriptedModel = fs.String("scripted-model", scriptedAgent, scriptedModelUsage)
}

// a2aServed is the agent a2a serve serves: the agent, its scripted policy
// and its Agent Card's description.
type a2aServed struct {
	agent runtime.Agent
	model runtime.Model
	desc  string
}

// a2aAgent is the reference agent --agent names, answered by its scripted
// policy or the model --scripted-model names, and the function that
// releases what it holds (the research index, the coding sandbox).
func (m *Main) a2aAgent(ctx context.Context, f *a2aServeFlags) (a2aServed, func(), error) {
	name := scriptedAgent
	if f.scriptedModel != nil {
		name = *f.scriptedModel
	}
	cmd := "a2a serve"
	if f.cmd != "" {
		cmd = f.cmd
	}
	obeys, err := scriptedModel(cmd, name)
	if err != nil {
		return a2aServed{}, nil, err
	}
	served, release, err := m.referenceAgent(ctx, f)
	if err == nil && obeys != nil {
		served.model = obeys
	}
	return served, release, err
}

// referenceAgent is a2aAgent with the agent's own scripted policy.
func (m *Main) referenceAgent(ctx context.Context, f *a2aServeFlags) (a2aServed, func(), error) {
	switch *f.agentName {
	case research.Name:
		idx, err := m.researchIndex("a2a serve", *f.dataset, *f.indexCache)
		if err != nil {
			return a2aServed{}, nil, err
		}
		release := func() { idx.Close(context.WithoutCancel(ctx)) }
		a, err := research.New(research.Config{Index: idx})
		if err != nil {
			release()
			return a2aServed{}, nil, err
		}
		return a2aServed{a, research.Policy(research.PolicyConfig{}), "Answers questions about the project's documentation, citing the sections it read."}, release, nil
	case coding.Name:
		sb, stop := lazySandbox(ctx)
		release := func() { _ = stop() }
		work, err := filepath.Abs(*f.workspaces)
		if err != nil {
			release()
			return a2aServed{}, nil, usageError("a2a serve: --workspaces %s: %v", *f.workspaces, err)
		}
		a, err := coding.New(coding.Config{Sandbox: sb, WorkRoot: work})
		if err != nil {
			release()
			return a2aServed{}, nil, err
		}
		return a2aServed{a, coding.Policy(coding.PolicyConfig{}), "Writes and runs Python in a sandbox to solve a programming task; answers with what the program printed."}, release, nil
	}
	return a2aServed{}, nil, usageError("a2a serve: --agent must be research or coding (got %q)", *f.agentName)
}

// runA2AServe serves one reference agent over A2A (JSON-RPC on /a2a, the
// Agent Card at /.well-known/agent-card.json). Each task is a run in the
// journal whose run id is the task id; the model is the agent's scripted
// policy (labelled scripted).
func (m *Main) runA2AServe(ctx context.Context, args []string) error {
	fs := m.newFlagSet("a2a serve", "a2a serve --agent research|coding [--http 127.0.0.1:8766] [--journal F] [--otlp-endpoint host:4317] [--dataset DIR] [--workspaces DIR] [--mcp NAME=CMD | --mcp-url NAME=URL] [--policy default|FILE|none] [--audit LOG] [--scripted-model agent|obeys-everything]")
	var f a2aServeFlags
	f.register(fs)
	var mcpf mcpFlags
	mcpf.add(fs, "give the served agent tools")
	var pol policyFlags
	pol.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("a2a serve: unexpected arguments %q", fs.Args())
	}
	var tp trace.TracerProvider
	if *f.endpoint != "" {
		sdk, err := otlpProvider(ctx, "a2a serve", "loom-eval-a2a", *f.endpoint)
		if err != nil {
			return err
		}
		defer sdk.Shutdown(context.WithoutCancel(ctx))
		tp = sdk
	}
	served, release, err := m.a2aAgent(ctx, &f)
	if err != nil {
		return err
	}
	defer release()
	tools, stopMCP, err := m.mcpTools(ctx, &mcpf, served.agent, tp)
	defer stopMCP()
	if err != nil {
		return err
	}
	served.agent = tools.agent
	j, err := openJournalDB(ctx, "a2a serve", *f.journalPath, false)
	if err != nil {
		return err
	}
	defer j.Shutdown(context.WithoutCancel(ctx))
	// A peer's task is untrusted input (a2a.PeerOrigin): under a policy
	// no write derived from it runs without approval.
	az, audit, err := pol.guard("a2a serve", tools.origins, tp)
	if err != nil {
		return err
	}
	// Under a policy a held call waits in the approval queue beside the
	// journal, and its task in input-required, until a person answers
	// (loom-eval approve / deny, serve's /approvals).
	var queue runtime.Approvals
	if az != nil {
		q, _, err := openApprovalQueue(ctx, j, audit, time.Now)
		if err != nil {
			return err
		}
		queue = q
	}
	rt, err := runtime.New(runtime.Config{Model: served.model, Journal: j, TracerProvider: tp, Authorizer: az, Approvals: queue})
	if err != nil {
		return err
	}
	srv, err := a2a.NewServer(a2a.ServerConfig{Agent: served.agent, Runtime: rt, Description: served.desc, TracerProvider: tp, TaskAttributes: tools.attrs})
	if err != nil {
		return err
	}
	return m.serveA2AHTTP(ctx, srv, *f.httpAddr, served.agent.Name, *f.journalPath)
}

// serveA2AHTTP serves srv on addr until ctx ends.
func (m *Main) serveA2AHTTP(ctx context.Context, srv *a2a.Server, addr, agentName, journalPath string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("a2a serve: %w", err)}
	}
	base := "http://" + ln.Addr().String()
	hs := &http.Server{Handler: srv.Handler(base), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(m.Stderr, "loom-eval a2a serve: agent %s (scripted policy) at %s (card %s/.well-known/agent-card.json, journal %s)\n", agentName, base, base, journalPath)
	h := service.ServeHTTP(hs, ln, nil)
	select {
	case <-h.Done():
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("a2a serve: %w", h.Err())}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return h.Shutdown(sctx)
	}
}
