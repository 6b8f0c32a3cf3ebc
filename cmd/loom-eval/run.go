package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/providers"
	"github.com/loomwork/loomwork/agents/graders"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/memory"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/pricing"
)

const runUsage = "run --agent research|coding (--task TEXT | --case FILE [--case-id ID]) [--trials N] " +
	"[--provider scripted|openai|anthropic] [--model M] [--base-url URL] [--journal FILE.db] [--journal-out FILE.jsonl] " +
	"[--otlp-endpoint host:4317 [--store URL]] [--capture-content=true|false] [--budget-usd X] [--context-budget N] [--context-strategy S] [--policy default|FILE|none] [--audit LOG] [--mcp NAME=CMD [--mcp-replace NAME=TOOL]] [--egress FILE] [--sandbox-pool N] [--scripted-model agent|obeys-everything] [--evidence FILE] " +
	"[--experiment-out DIR | --no-experiment] [--label L] [--json]"

// runFlags are `loom-eval run`'s own flags (the MCP, reference and output
// flags have their own types).
type runFlags struct {
	agentName, taskText, caseFile, caseID, caseTag, provider, model, baseURL, apiKeyEnv *string
	journalPath, journalOut, runID, endpoint, ctxStrategy, ctxSummarizer                *string
	dataset, indexCache, workspaces, memoryDB, egress, scriptedModel, evidence          *string
	trials, ctxBudget, maxSteps, maxTokens, sandboxPool                                 *int
	budgetUSD                                                                           *float64
	deterministic                                                                       *bool
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.agentName = fs.String("agent", "", "reference agent: research or coding")
	f.taskText = fs.String("task", "", "the task text")
	f.caseFile = fs.String("case", "", "a cases JSONL file (datasets.Case); research cases tagged issue:N exclude issue N from retrieval")
	f.caseID = fs.String("case-id", "", "the case to run from --case (default: every case in the file)")
	f.caseTag = fs.String("tag", "", "run only the cases of --case carrying this tag (e.g. research)")
	f.trials = fs.Int("trials", 1, "trials per task (trial t of the scripted research policy uses query formulation t mod 3)")
	f.provider = fs.String("provider", "scripted", "scripted, openai (or any OpenAI-compatible server) or anthropic; keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY")
	f.model = fs.String("model", "", "model id for a live provider")
	f.baseURL = fs.String("base-url", "", "API root of the provider (e.g. http://127.0.0.1:8000/v1 for a local OpenAI-compatible server)")
	f.apiKeyEnv = fs.String("api-key-env", "", "environment variable holding the key (default: the provider's)")
	f.journalPath = fs.String("journal", ".loomwork/runs.journal.db", "SQLite journal; a run id already in it is resumed, never re-asked")
	f.journalOut = fs.String("journal-out", "", "also export this invocation's runs to this JSONL `file` (the format loom-eval replay reads)")
	f.runID = fs.String("run-id", "", "run id (one task, one trial; default AGENT-CASE-tN for cases, AGENT-TASKHASH-TIME for --task)")
	f.endpoint = fs.String("otlp-endpoint", "", "send spans over OTLP/gRPC to host:port (e.g. 127.0.0.1:4317 of loom-eval serve)")
	f.budgetUSD = fs.Float64("budget-usd", 0, "refuse model calls whose worst case would exceed this spend (live providers; 0: no budget)")
	f.ctxBudget = fs.Int("context-budget", 0, "context-layer token budget (0: the agent's default, 8000)")
	f.ctxStrategy = fs.String("context-strategy", "", "context strategy: truncate, shrink, shrink+summarise, shrink+summarise+pins, or none (default: the agent's)")
	f.ctxSummarizer = fs.String("context-summarizer", "extractive", "extractive, or model (live providers: the summary is asked of the same model and journaled)")
	f.maxSteps = fs.Int("max-steps", 8, "model calls that may request tools before the tools-withheld last call")
	f.maxTokens = fs.Int("max-tokens", 0, "output cap per model call (live providers; 0: 2048)")
	f.dataset = fs.String("dataset", "", "research corpus: a judged dataset `folder` (default "+datasets.DescribeDefault()+")")
	f.indexCache = fs.String("index-cache", ".loomwork/index", "folder for the persisted BM25 index")
	f.workspaces = fs.String("workspaces", ".loomwork/workspaces", "coding: folder of per-run sandbox workspaces (keep it to resume runs)")
	f.egress = fs.String("egress", "", "coding: run_python's network policy, a JSON `file` (allow/deny rules and credentials the host's proxy injects; docs/sandbox.md); default: no network")
	f.sandboxPool = fs.Int("sandbox-pool", 0, "coding: keep this many sandboxes started ahead of time (warm starts; docs/sandbox.md)")
	f.memoryDB = fs.String("memory", "", "research: recall from this memory store (SQLite, e.g. .loomwork/memory.db) into the context's memory tier before each run, and distill each finished run into it (scope default/research/default)")
	f.scriptedModel = fs.String("scripted-model", scriptedAgent, "with --provider scripted: "+scriptedModelUsage)
	f.evidence = fs.String("evidence", "", "pre-retrieved evidence for the context's evidence tier: a JSONL `file` of {\"id\", \"text\", \"provenance\"} (untrusted: under a policy, a write derived from it is held for approval; journaled with the run)")
	f.deterministic = fs.Bool("deterministic", false, "stamp journal events with a logical clock (2026-01-01T00:00:00Z + 1 ms per event) so a scripted recording is byte-identical on every machine; recorded durations are then logical")
}

// live reports whether a live provider answers (not the scripted policy).
func (f *runFlags) live() bool { return *f.provider != "scripted" }

// validate checks the agent, the task source, the numbers and the
// provider's flags.
func (f *runFlags) validate() error {
	if *f.agentName != research.Name && *f.agentName != coding.Name {
		return usageError("run: --agent must be research or coding (got %q)", *f.agentName)
	}
	if (*f.taskText == "") == (*f.caseFile == "") {
		return usageError("run: give exactly one of --task and --case")
	}
	if (*f.caseID != "" || *f.caseTag != "") && *f.caseFile == "" {
		return usageError("run: --case-id and --tag need --case")
	}
	if *f.agentName != coding.Name && (*f.egress != "" || *f.sandboxPool != 0) {
		return usageError("run: --egress and --sandbox-pool configure the coding agent's sandbox; --agent %s has none", *f.agentName)
	}
	if *f.sandboxPool < 0 {
		return usageError("run: --sandbox-pool must not be negative (got %d)", *f.sandboxPool)
	}
	if *f.trials < 1 || *f.maxSteps < 1 || *f.maxTokens < 0 || *f.budgetUSD < 0 || *f.ctxBudget < 0 {
		return usageError("run: need --trials >= 1, --max-steps >= 1 and non-negative --max-tokens, --budget-usd, --context-budget")
	}
	switch *f.provider {
	case "scripted":
		if *f.model != "" || *f.baseURL != "" || *f.budgetUSD != 0 || *f.apiKeyEnv != "" {
			return usageError("run: --model, --base-url, --api-key-env and --budget-usd are for live providers; the scripted policy takes none")
		}
		if *f.ctxSummarizer == runtime.SummarizerModel {
			return usageError("run: --context-summarizer model needs a live provider")
		}
	case "openai", "anthropic":
		if *f.scriptedModel != scriptedAgent {
			return usageError("run: --scripted-model is for --provider scripted")
		}
		if *f.model == "" {
			return usageError("run: --provider %s needs --model", *f.provider)
		}
	default:
		return usageError("run: --provider must be scripted, openai or anthropic (got %q)", *f.provider)
	}
	return nil
}

// contextSpec is the agent's context layer as the flags change it (nil
// with --context-strategy none).
func (f *runFlags) contextSpec() (*runtime.ContextSpec, error) {
	if *f.ctxStrategy == "none" {
		if *f.ctxBudget > 0 {
			return nil, usageError("run: --context-budget with --context-strategy none")
		}
		return nil, nil
	}
	s := research.DefaultContext()
	if *f.agentName == coding.Name {
		s = coding.DefaultContext()
	}
	if *f.ctxStrategy != "" {
		s.Strategy = *f.ctxStrategy
	}
	if *f.ctxBudget > 0 {
		s.Budget = *f.ctxBudget
	}
	s.Summarizer = *f.ctxSummarizer
	if err := s.Validate(); err != nil {
		return nil, usageError("run: %v", err)
	}
	return &s, nil
}

// openMemory opens the --memory store (nil without it); the caller shuts
// it down.
func (f *runFlags) openMemory(ctx context.Context, spec *runtime.ContextSpec) (*memory.Store, error) {
	if *f.memoryDB == "" {
		return nil, nil
	}
	if *f.agentName != research.Name || spec == nil {
		return nil, usageError("run: --memory is for the research agent with a context layer (the memory tier is part of it)")
	}
	if err := os.MkdirAll(filepath.Dir(*f.memoryDB), 0o755); err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("run: --memory %s: %w", *f.memoryDB, err)}
	}
	mem, err := memory.Open(ctx, memory.Config{Path: *f.memoryDB})
	if err != nil {
		return nil, usageError("run: --memory: %v", err)
	}
	return mem, nil
}

// runAgent is the reference agent --agent names and the function that
// releases what it holds (the research index, the coding sandbox).
func (m *Main) runAgent(ctx context.Context, f *runFlags, tp trace.TracerProvider) (runtime.Agent, func(), error) {
	switch *f.agentName {
	case research.Name:
		idx, err := m.researchIndex("run", *f.dataset, *f.indexCache)
		if err != nil {
			return runtime.Agent{}, nil, err
		}
		if tp != nil {
			idx.Tracer = tp.Tracer("github.com/loomwork/loomwork/retrieval")
		}
		release := func() { idx.Close(context.WithoutCancel(ctx)) }
		a, err := research.New(research.Config{Index: idx})
		if err != nil {
			release()
			return runtime.Agent{}, nil, err
		}
		return a, release, nil
	case coding.Name:
		return m.codingAgent(ctx, f)
	}
	return runtime.Agent{}, func() {}, nil
}

// codingAgent is the coding agent on a sandbox with --egress's network
// policy and --sandbox-pool's warm sandboxes.
func (m *Main) codingAgent(ctx context.Context, f *runFlags) (runtime.Agent, func(), error) {
	egress, err := loadEgressFor("run", *f.egress, m.getenv)
	if err != nil {
		return runtime.Agent{}, nil, err
	}
	// The sandbox's init helper starts in "/", so a relative workspace
	// (the default .loomwork/workspaces) would name another directory
	// there than here: every run_python failed to open its workspace.
	work, err := filepath.Abs(*f.workspaces)
	if err != nil {
		return runtime.Agent{}, nil, usageError("run: --workspaces %s: %v", *f.workspaces, err)
	}
	sb, stopSandbox := pooledSandbox(ctx, *f.sandboxPool)
	release := func() { _ = stopSandbox() }
	if *f.sandboxPool > 0 {
		// The pool fills while the run starts, so the first execution can
		// claim a warm sandbox (each records which it got).
		if err := sb.Start(ctx); err != nil {
			release()
			return runtime.Agent{}, nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("run: --sandbox-pool: start the sandbox: %w", err)}
		}
	}
	a, err := coding.New(coding.Config{Sandbox: sb, WorkRoot: work, Egress: egress})
	if err != nil {
		release()
		return runtime.Agent{}, nil, usageError("run: %v", err)
	}
	return a, release, nil
}

// runGateway is the gateway to the live provider.
func runGateway(f *runFlags, tp trace.TracerProvider, getenv func(string) string) (*gateway.Gateway, error) {
	mc := gateway.ModelConfig{Provider: *f.provider, Model: *f.model, BaseURL: *f.baseURL, APIKeyEnv: *f.apiKeyEnv,
		MaxOutputTokens: 2048, Capabilities: []gateway.Capability{gateway.CapTools}, Timeout: gateway.Duration(2 * time.Minute)}
	if *f.maxTokens > 0 {
		mc.MaxOutputTokens = *f.maxTokens
	}
	if pm, _, ok := pricing.Default().Lookup(*f.model); ok {
		mc.Prices = graders.GatewayPrices(pm)
	} else if *f.budgetUSD > 0 {
		return nil, usageError("run: --budget-usd: no price is known for model %q, so the budget cannot be enforced", *f.model)
	}
	cfg := gateway.DefaultConfig()
	cfg.Models = []gateway.ModelConfig{mc}
	cfg.BudgetUSD = *f.budgetUSD
	opts := gateway.Options{Providers: providers.Standard(), Getenv: getenv}
	if tp != nil {
		opts.Tracer = tp.Tracer("github.com/loomwork/loomwork/agents/gateway")
	}
	gw, err := gateway.New(cfg, opts)
	if err != nil {
		return nil, usageError("run: %v", err)
	}
	return gw, nil
}

// runRun runs a reference agent, journaled (SQLite) and traced (OTLP), on a
// scripted policy by default or a live provider through the gateway.
func (m *Main) runRun(ctx context.Context, args []string) error {
	fs := m.newFlagSet("run", runUsage)
	var f runFlags
	f.register(fs)
	var mcpf mcpFlags
	mcpf.add(fs, "take tools")
	var ref referenceFlags
	ref.register(fs, "true for the scripted policy, false for a live provider")
	var pol policyFlags
	pol.register(fs)
	outFmt := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("run: unexpected argument %q", fs.Arg(0))
	}
	if err := f.validate(); err != nil {
		return err
	}
	if err := ref.check("run", *f.endpoint); err != nil {
		return err
	}
	tasks, err := runTasks(*f.agentName, *f.taskText, *f.caseFile, *f.caseID, *f.caseTag)
	if err != nil {
		return err
	}
	if *f.runID != "" && (len(tasks) != 1 || *f.trials != 1) {
		return usageError("run: --run-id names one run: use it with one task and --trials 1")
	}
	p := &runParts{f: &f, live: f.live()}
	if err := p.setContext(ctx); err != nil {
		return err
	}
	if p.mem != nil {
		defer p.mem.Shutdown(context.WithoutCancel(ctx)) //nolint:errcheck // every write is committed
	}
	tp, flush, err := m.otlpTracing(ctx, "run", *f.endpoint)
	if err != nil {
		return err
	}
	defer flush()
	p.tp = tp
	agent, release, err := m.runAgent(ctx, &f, tp)
	if err != nil {
		return err
	}
	defer release()
	stopMCP, err := p.setTools(ctx, m, agent, &mcpf, &pol)
	defer stopMCP()
	if err != nil {
		return err
	}
	err = p.openJournal(ctx)
	if p.j != nil {
		defer p.j.Shutdown(context.WithoutCancel(ctx))
	}
	if err != nil {
		return err
	}
	results, err := p.run(ctx, tasks, ref.capture.or(!p.live), m.getenv, termSafe(m.Stderr))
	if err != nil {
		return err
	}
	return m.finishRun(ctx, &f, &ref, p.j, results, format)
}

// runParts are the parts run opens from its flags and hands to the
// runner (agents/runner), which runs the tasks with them.
type runParts struct {
	f         *runFlags
	live      bool
	spec      *runtime.ContextSpec // nil: no context layer
	evidence  []runtime.TierDoc    // --evidence
	obeys     runtime.Model        // --scripted-model obeys-everything; nil: the agent's own
	mem       *memory.Store        // nil: no --memory
	tp        trace.TracerProvider
	agent     runtime.Agent
	mcp       []*mcp.Client
	j         *journaldb.Store
	az        runtime.Authorizer // --policy's guard; nil: no policy
	audit     *policy.AuditLog   // --audit, shared by the guard and the queue
	approvals runtime.Approvals  // the queue of held calls (with a policy)
}

// setContext sets what the runs are given besides their task: the context
// layer, the memory store (--memory), the pre-retrieved evidence
// (--evidence) and the scripted model (--scripted-model).
func (p *runParts) setContext(ctx context.Context) (err error) {
	f := p.f
	if p.obeys, err = scriptedModel("run", *f.scriptedModel); err != nil {
		return err
	}
	if p.spec, err = f.contextSpec(); err != nil {
		return err
	}
	if *f.evidence != "" {
		if p.spec == nil {
			return usageError("run: --evidence goes into the context layer's evidence tier; --context-strategy none has none")
		}
		if p.evidence, err = loadEvidence(*f.evidence); err != nil {
			return err
		}
	}
	p.mem, err = f.openMemory(ctx, p.spec)
	return err
}

// setTools gives the runner its agent with the MCP servers' tools
// (pinned now; the pins are journaled with each run's attributes) and
// --policy's guard, which knows those tools' origins. stop ends the
// servers; call it even on an error.
func (p *runParts) setTools(ctx context.Context, m *Main, agent runtime.Agent, mcpf *mcpFlags, pol *policyFlags) (stop func(), err error) {
	p.mcp, stop, err = m.mcpConnect(ctx, mcpf, p.tp)
	if err != nil {
		return stop, err
	}
	if p.agent, err = withMCPTools(agent, p.mcp, mcpf); err != nil {
		return stop, err
	}
	p.az, p.audit, err = pol.guard("run", mcp.Origins(p.mcp...), p.tp)
	return stop, err
}

// openJournal opens the run journal and, under a policy, the approval
// queue beside it (sharing the guard's audit log): a held call suspends
// the run until someone answers (loom-eval approve / deny, /approvals).
func (p *runParts) openJournal(ctx context.Context) (err error) {
	if p.j, err = openJournalDB(ctx, "run", *p.f.journalPath, *p.f.deterministic); err != nil || p.az == nil {
		return err
	}
	q, _, err := openApprovalQueue(ctx, p.j, p.audit, time.Now)
	if err == nil {
		p.approvals = q
	}
	return err
}

// run runs every trial of every task with the runner: the model side is
// set up here (the gateway for a live provider, else the scripted
// policies with their token counter; the pricer), and a suspended run's
// hint goes to out.
func (p *runParts) run(ctx context.Context, tasks []runner.Task, capture bool, getenv func(string) string, out io.Writer) ([]runner.Result, error) {
	f := p.f
	cfg := runner.Config{Agent: p.agent, Journal: p.j, JournalName: *f.journalPath, Trials: *f.trials, RunID: *f.runID,
		MaxSteps: *f.maxSteps, Context: p.spec, Evidence: p.evidence, CaptureContent: capture,
		Authorizer: p.az, Approvals: p.approvals, TracerProvider: p.tp, MCP: p.mcp, Out: out}
	pricer := callPricer{table: pricing.Default()}
	if p.mem != nil {
		cfg.Memory, cfg.MemoryScope = p.mem, memory.Scope{Tenant: "default", Agent: research.Name, Namespace: "default"}
	}
	switch {
	case p.live:
		gw, err := runGateway(f, p.tp, getenv)
		if err != nil {
			return nil, err
		}
		cfg.Models = func(int) runtime.Model { return gw }
		cfg.Model, cfg.MaxTokens, cfg.SummaryModel = *f.model, *f.maxTokens, gw
		pricer.requested = *f.model
	default:
		tok, err := contextlayer.NewTokenizer()
		if err != nil {
			return nil, err
		}
		if cfg.Models, err = runner.ScriptedPolicies(*f.agentName, tok); err != nil {
			return nil, err
		}
		if obeys := p.obeys; obeys != nil {
			cfg.Models = func(int) runtime.Model { return obeys }
		}
	}
	cfg.Price = pricer.price
	r, err := runner.New(cfg)
	if err != nil {
		return nil, usageError("run: %v", err)
	}
	results, err := r.Run(ctx, tasks)
	return results, runExit(err)
}

// runExit is the exit of a run that did not finish (nil for nil): 4 for
// one suspended for a human's answer (the runner said how to resume), 1
// for a resumed run whose steps differ from the journal's, 2 for a run the
// runtime refused or a task the scripted coding policy cannot play, 3
// otherwise.
func runExit(err error) error {
	var sus *runtime.SuspendedError
	var de *journal.DivergenceError
	var ce *runner.ConfigError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &sus):
		return &ExitError{Code: ExitSuspended, Err: err}
	case errors.As(err, &ce):
		return usageError("run: %v", ce.Err)
	case errors.Is(err, coding.ErrNoSolution):
		// The task, not the machine: the scripted policy plays only the
		// solutions it was given.
		return usageError("%v; it solves the coding cases of baselines/cases.jsonl (e.g. --case baselines/cases.jsonl --case-id coding-roman), or give --provider openai|anthropic --model M", err)
	case errors.As(err, &de):
		return &ExitError{Code: ExitFailure, Err: err}
	}
	return &ExitError{Code: ExitRuntimeErr, Err: err}
}

// finishRun exports the runs (--journal-out), records them (the reference
// flags) and writes them in format to stdout.
func (m *Main) finishRun(ctx context.Context, f *runFlags, ref *referenceFlags, j *journaldb.Store, results []runner.Result, format string) error {
	if *f.journalOut != "" {
		ids := make([]string, len(results))
		for i, r := range results {
			ids[i] = r.RunID
		}
		if err := exportRuns(ctx, j, *f.journalOut, ids); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: err}
		}
	}
	if err := m.recordRun(ctx, ref, j, results, *f.agentName, *f.caseFile, runModelDescription(*f.provider, *f.model)); err != nil {
		return err
	}
	if format == "json" {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(results)
	}
	printRunResults(m.Stdout, results, *f.journalPath)
	return nil
}

// runTasks is what run runs: the --task text, or the cases of --case
// (filtered by --case-id and --tag), with a research case's issue:N tags
// turned into the task attributes that exclude its own issue.
func runTasks(agentName, taskText, caseFile, caseID, caseTag string) ([]runner.Task, error) {
	var tasks []runner.Task
	if taskText != "" {
		tasks = []runner.Task{{Input: taskText}}
	} else {
		cases, err := datasets.LoadCases(caseFile)
		if err != nil {
			return nil, usageError("run: %v", err)
		}
		for _, c := range cases {
			if caseID != "" && c.ID != caseID || caseTag != "" && !slices.Contains(c.Tags, caseTag) {
				continue
			}
			t := runner.Task{CaseID: c.ID, Input: c.Task}
			if agentName == research.Name {
				excl, err := research.ExcludedIssues(c.Tags)
				if err != nil {
					return nil, usageError("run: %s line %d: field \"tags\": %v", caseFile, c.Line, err)
				}
				t.Attributes = research.TaskAttributes(excl...)
			}
			tasks = append(tasks, t)
		}
		if len(tasks) == 0 {
			if caseID != "" {
				return nil, usageError("run: case %q is not in %s (or lacks tag %q)", caseID, caseFile, caseTag)
			}
			return nil, usageError("run: %s has no cases", caseFile)
		}
	}
	return tasks, nil
}

// printRunResults is run's human output: one block per run.
func printRunResults(w io.Writer, results []runner.Result, journalPath string) {
	for _, r := range results {
		fmt.Fprintf(w, "%s (agent %s, model label %s): %d steps, %d model calls (%d reused), tokens in %d out %d, cost %s\n",
			r.RunID, r.Agent, r.ModelLabel, r.Steps, r.ModelCalls, r.Reused, r.TotalUsage.InputTokens, r.TotalUsage.OutputTokens, formatCost(r))
		if r.SummaryCalls > 0 || r.SummariesReused > 0 {
			fmt.Fprintf(w, "  context summaries: %d model calls, tokens in %d out %d (included above)",
				r.SummaryCalls, r.SummaryUsage.InputTokens, r.SummaryUsage.OutputTokens)
			if r.SummariesReused > 0 {
				fmt.Fprintf(w, "; %d reused from the journal (usage not recorded)", r.SummariesReused)
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "  retrieved: %s\n  cited:     %s\n", strings.Join(r.Documents, ", "), strings.Join(r.Citations, ", "))
		for _, line := range strings.Split(r.Answer, "\n") {
			fmt.Fprintf(w, "  | %s\n", line)
		}
		if r.TraceID != "" {
			fmt.Fprintf(w, "  trace %s\n", r.TraceID)
		}
	}
	fmt.Fprintf(w, "%d run(s) journaled in %s\n", len(results), journalPath)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func exportRuns(ctx context.Context, j *journaldb.Store, path string, ids []string) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("run: export journal: %w", err)
		}
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("run: export journal: %w", err)
	}
	if err := j.Export(ctx, f, ids...); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("run: export journal: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("run: export journal: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("run: export journal: %w", err)
	}
	return nil
}
