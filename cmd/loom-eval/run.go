package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/providers"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/memory"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/pricing"
)

const runUsage = "run --agent research|coding (--task TEXT | --case FILE [--case-id ID]) [--trials N] " +
	"[--provider scripted|openai|anthropic] [--model M] [--base-url URL] [--journal FILE.db] [--journal-out FILE.jsonl] " +
	"[--otlp-endpoint host:4317 [--store URL]] [--capture-content=true|false] [--budget-usd X] [--context-budget N] [--context-strategy S] " +
	"[--experiment-out DIR | --no-experiment] [--label L] [--json]"

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

// runResult is what `run` reports per run.
type runResult struct {
	RunID            string   `json:"run_id"`
	Agent            string   `json:"agent"`
	CaseID           string   `json:"case_id,omitempty"`
	Trial            int      `json:"trial"`
	ModelLabel       string   `json:"model_label"`
	Answer           string   `json:"answer"`
	Citations        []string `json:"citations"`
	Documents        []string `json:"documents"`
	Steps            int      `json:"steps"`
	StepLimitReached bool     `json:"step_limit_reached,omitempty"`
	// Usage is the model steps' usage, as journaled in run_finished.
	Usage      llm.Usage `json:"usage"`
	ModelCalls int       `json:"model_calls"`
	Reused     int       `json:"reused_model_answers"`
	// SummaryCalls are the context layer's summary calls this process made
	// (--context-summarizer model), SummaryUsage their usage; neither is in
	// the journal. SummariesReused counts model summaries a resume took from
	// the journal instead, whose usage is not recorded.
	SummaryCalls    int       `json:"summary_calls"`
	SummaryUsage    llm.Usage `json:"summary_usage"`
	SummariesReused int       `json:"summaries_reused,omitempty"`
	// TotalUsage is Usage plus SummaryUsage.
	TotalUsage llm.Usage `json:"total_usage"`
	// CostUSD prices every call with the table in scorer/pricing; null when
	// any part cannot be priced (CostNote says why; KnownCostUSD is then
	// the part that could be, a lower bound).
	CostUSD        *float64 `json:"cost_usd"`
	KnownCostUSD   float64  `json:"known_cost_usd"`
	UnpricedModels []string `json:"unpriced_models,omitempty"`
	CostNote       string   `json:"cost_note,omitempty"`
	TraceID        string   `json:"trace_id,omitempty"`
	Journal        string   `json:"journal"`
	// Recalled are the memory records (--memory) that entered the run's
	// memory tier.
	Recalled []string `json:"recalled_memories,omitempty"`
}

type runTask struct {
	caseID string
	input  string
	attrs  json.RawMessage
}

// runRun runs a reference agent, journaled (SQLite) and traced (OTLP), on a
// scripted policy by default or a live provider through the gateway.
func (m *Main) runRun(ctx context.Context, args []string) error {
	fs := m.newFlagSet("run", runUsage)
	agentName := fs.String("agent", "", "reference agent: research or coding")
	taskText := fs.String("task", "", "the task text")
	caseFile := fs.String("case", "", "a cases JSONL file (datasets.Case); research cases tagged issue:N exclude issue N from retrieval")
	caseID := fs.String("case-id", "", "the case to run from --case (default: every case in the file)")
	caseTag := fs.String("tag", "", "run only the cases of --case carrying this tag (e.g. research)")
	trials := fs.Int("trials", 1, "trials per task (trial t of the scripted research policy uses query formulation t mod 3)")
	provider := fs.String("provider", "scripted", "scripted, openai (or any OpenAI-compatible server) or anthropic; keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY")
	model := fs.String("model", "", "model id for a live provider")
	baseURL := fs.String("base-url", "", "API root of the provider (e.g. http://127.0.0.1:8000/v1 for a local OpenAI-compatible server)")
	apiKeyEnv := fs.String("api-key-env", "", "environment variable holding the key (default: the provider's)")
	journalPath := fs.String("journal", ".loomwork/runs.journal.db", "SQLite journal; a run id already in it is resumed, never re-asked")
	journalOut := fs.String("journal-out", "", "also export this invocation's runs to this JSONL `file` (the format loom-eval replay reads)")
	runID := fs.String("run-id", "", "run id (one task, one trial; default AGENT-CASE-tN for cases, AGENT-TASKHASH-TIME for --task)")
	endpoint := fs.String("otlp-endpoint", "", "send spans over OTLP/gRPC to host:port (e.g. 127.0.0.1:4317 of loom-eval serve)")
	budgetUSD := fs.Float64("budget-usd", 0, "refuse model calls whose worst case would exceed this spend (live providers; 0: no budget)")
	ctxBudget := fs.Int("context-budget", 0, "context-layer token budget (0: the agent's default, 8000)")
	ctxStrategy := fs.String("context-strategy", "", "context strategy: truncate, shrink, shrink+summarise, shrink+summarise+pins, or none (default: the agent's)")
	ctxSummarizer := fs.String("context-summarizer", "extractive", "extractive, or model (live providers: the summary is asked of the same model and journaled)")
	maxSteps := fs.Int("max-steps", 8, "model calls that may request tools before the tools-withheld last call")
	maxTokens := fs.Int("max-tokens", 0, "output cap per model call (live providers; 0: 2048)")
	dataset := fs.String("dataset", "", "research corpus: a judged dataset `folder` (default "+datasets.DescribeDefault()+")")
	indexCache := fs.String("index-cache", ".loomwork/index", "folder for the persisted BM25 index")
	workspaces := fs.String("workspaces", ".loomwork/workspaces", "coding: folder of per-run sandbox workspaces (keep it to resume runs)")
	memoryDB := fs.String("memory", "", "research: recall from this memory store (SQLite, e.g. .loomwork/memory.db) into the context's memory tier before each run, and distill each finished run into it (scope default/research/default)")
	deterministic := fs.Bool("deterministic", false, "stamp journal events with a logical clock (2026-01-01T00:00:00Z + 1 ms per event) so a scripted recording is byte-identical on every machine; recorded durations are then logical")
	var mcpf mcpFlags
	mcpf.add(fs, "take tools")
	var ref referenceFlags
	ref.register(fs, "true for the scripted policy, false for a live provider")
	outFmt := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	asJSON := format == "json"
	if fs.NArg() > 0 {
		return usageError("run: unexpected argument %q", fs.Arg(0))
	}
	if *agentName != research.Name && *agentName != coding.Name {
		return usageError("run: --agent must be research or coding (got %q)", *agentName)
	}
	if (*taskText == "") == (*caseFile == "") {
		return usageError("run: give exactly one of --task and --case")
	}
	if (*caseID != "" || *caseTag != "") && *caseFile == "" {
		return usageError("run: --case-id and --tag need --case")
	}
	if *trials < 1 || *maxSteps < 1 || *maxTokens < 0 || *budgetUSD < 0 || *ctxBudget < 0 {
		return usageError("run: need --trials >= 1, --max-steps >= 1 and non-negative --max-tokens, --budget-usd, --context-budget")
	}
	live := *provider != "scripted"
	switch *provider {
	case "scripted":
		if *model != "" || *baseURL != "" || *budgetUSD != 0 || *apiKeyEnv != "" {
			return usageError("run: --model, --base-url, --api-key-env and --budget-usd are for live providers; the scripted policy takes none")
		}
		if *ctxSummarizer == runtime.SummarizerModel {
			return usageError("run: --context-summarizer model needs a live provider")
		}
	case "openai", "anthropic":
		if *model == "" {
			return usageError("run: --provider %s needs --model", *provider)
		}
	default:
		return usageError("run: --provider must be scripted, openai or anthropic (got %q)", *provider)
	}
	if err := ref.check("run", *endpoint); err != nil {
		return err
	}

	tasks, err := runTasks(*agentName, *taskText, *caseFile, *caseID, *caseTag)
	if err != nil {
		return err
	}
	if *runID != "" && (len(tasks) != 1 || *trials != 1) {
		return usageError("run: --run-id names one run: use it with one task and --trials 1")
	}

	// Context layer.
	var spec *runtime.ContextSpec
	if *ctxStrategy != "none" {
		s := research.DefaultContext()
		if *agentName == coding.Name {
			s = coding.DefaultContext()
		}
		if *ctxStrategy != "" {
			s.Strategy = *ctxStrategy
		}
		if *ctxBudget > 0 {
			s.Budget = *ctxBudget
		}
		s.Summarizer = *ctxSummarizer
		if err := s.Validate(); err != nil {
			return usageError("run: %v", err)
		}
		spec = &s
	} else if *ctxBudget > 0 {
		return usageError("run: --context-budget with --context-strategy none")
	}
	var mem *memory.Store
	memScope := memory.Scope{Tenant: "default", Agent: research.Name, Namespace: "default"}
	if *memoryDB != "" {
		if *agentName != research.Name || spec == nil {
			return usageError("run: --memory is for the research agent with a context layer (the memory tier is part of it)")
		}
		if err := os.MkdirAll(filepath.Dir(*memoryDB), 0o755); err != nil {
			return err
		}
		if mem, err = memory.Open(ctx, memory.Config{Path: *memoryDB}); err != nil {
			return usageError("run: --memory: %v", err)
		}
		defer mem.Shutdown(context.WithoutCancel(ctx)) //nolint:errcheck // every write is committed
	}

	// Tracing.
	var tp trace.TracerProvider
	if *endpoint != "" {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(*endpoint), otlptracegrpc.WithInsecure())
		if err != nil {
			return fmt.Errorf("run: otlp exporter: %w", err)
		}
		sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "loom-eval-run"))))
		defer func() {
			if err := sdk.Shutdown(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(m.Stderr, "loom-eval run: flush spans to %s: %v\n", *endpoint, err)
			}
		}()
		tp = sdk
	}

	// The agent.
	var agent runtime.Agent
	switch *agentName {
	case research.Name:
		idx, err := m.researchIndex("run", *dataset, *indexCache)
		if err != nil {
			return err
		}
		if tp != nil {
			idx.Tracer = tp.Tracer("github.com/loomwork/loomwork/retrieval")
		}
		defer idx.Close(context.WithoutCancel(ctx))
		a, err := research.New(research.Config{Index: idx})
		if err != nil {
			return err
		}
		agent = a
	case coding.Name:
		sb, stopSandbox := lazySandbox(ctx)
		defer func() { _ = stopSandbox() }()
		// The sandbox's init helper starts in "/", so a relative workspace
		// (the default .loomwork/workspaces) would name another directory
		// there than here: every run_python failed to open its workspace.
		work, err := filepath.Abs(*workspaces)
		if err != nil {
			return usageError("run: --workspaces %s: %v", *workspaces, err)
		}
		a, err := coding.New(coding.Config{Sandbox: sb, WorkRoot: work})
		if err != nil {
			return err
		}
		agent = a
	}

	// Tools from MCP servers (pinned now; the pins are journaled with
	// each run's attributes).
	mcpClients, stopMCP, err := m.mcpConnect(ctx, &mcpf, tp)
	defer stopMCP()
	if err != nil {
		return err
	}
	agent = withMCPTools(agent, mcpClients)

	// The journal.
	if dir := filepath.Dir(*journalPath); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("run: %w", err)}
		}
	}
	jcfg := journaldb.Config{Path: *journalPath}
	if *deterministic {
		jcfg.Clock = journaldb.DeterministicClock()
	}
	j, err := journaldb.Open(ctx, jcfg)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("run: %w", err)}
	}
	defer j.Shutdown(context.WithoutCancel(ctx))

	// The model: a scripted policy (one per trial, see below) or the gateway.
	var gw *gateway.Gateway
	if live {
		mc := gateway.ModelConfig{Provider: *provider, Model: *model, BaseURL: *baseURL, APIKeyEnv: *apiKeyEnv,
			MaxOutputTokens: 2048, Capabilities: []gateway.Capability{gateway.CapTools}, Timeout: gateway.Duration(2 * time.Minute)}
		if *maxTokens > 0 {
			mc.MaxOutputTokens = *maxTokens
		}
		if pm, _, ok := pricing.Default().Lookup(*model); ok {
			mc.Prices = gatewayPrices(pm)
		} else if *budgetUSD > 0 {
			return usageError("run: --budget-usd: no price is known for model %q, so the budget cannot be enforced", *model)
		}
		cfg := gateway.DefaultConfig()
		cfg.Models = []gateway.ModelConfig{mc}
		cfg.BudgetUSD = *budgetUSD
		opts := gateway.Options{Providers: providers.Standard(), Getenv: m.getenv}
		if tp != nil {
			opts.Tracer = tp.Tracer("github.com/loomwork/loomwork/agents/gateway")
		}
		if gw, err = gateway.New(cfg, opts); err != nil {
			return usageError("run: %v", err)
		}
	}
	var counter contextlayer.Counter = contextlayer.Estimate{}
	if !live {
		tok, err := contextlayer.NewTokenizer()
		if err != nil {
			return err
		}
		counter = tok
	}

	pricer := callPricer{table: pricing.Default()}
	var sumTracer trace.Tracer
	if live {
		pricer.requested = *model
		if tp != nil {
			sumTracer = tp.Tracer("github.com/loomwork/loomwork/agents/contextlayer")
		}
	}

	var results []runResult
	for _, t := range tasks {
		for trial := range *trials {
			var mdl runtime.Model
			switch {
			case live:
				mdl = gw
			case *agentName == research.Name:
				mdl = research.Policy(research.PolicyConfig{QueryStyle: research.QueryStyleForTrial(trial), Counter: counter})
			default:
				mdl = coding.Policy(coding.PolicyConfig{Trial: trial, Counter: counter})
			}
			rcfg := runtime.Config{Model: mdl, Journal: j, TracerProvider: tp, MaxSteps: *maxSteps, Context: spec, CaptureContent: ref.capture.or(!live)}
			var recalled []string
			id := *runID
			if id == "" {
				id = runtime.RunID(*agentName, t.caseID, t.input, trial, time.Now())
			}
			resumed := false
			if mem != nil {
				// A run already journaled resumes with the memory it recalled
				// then (recalling again would change its first request), and
				// is not distilled twice.
				prev, err := j.Events(ctx, id)
				if err != nil {
					return &ExitError{Code: ExitRuntimeErr, Err: err}
				}
				if resumed = len(prev) > 0; resumed {
					if rt, err := runtime.ReplayTask(journal.Run{ID: id, Events: prev}); err == nil && rt.Context != nil {
						rcfg.Context = rt.Context
						if rt.Context.Tiers != nil {
							for _, d := range rt.Context.Tiers.Memory {
								recalled = append(recalled, strings.TrimPrefix(d.ID, "memory:"))
							}
						}
					}
				}
			}
			if mem != nil && !resumed {
				docs, scored, err := research.Recall(ctx, mem, memScope, t.input, research.RecallConfig{}, time.Now())
				if err != nil {
					return &ExitError{Code: ExitRuntimeErr, Err: err}
				}
				for _, sc := range scored {
					recalled = append(recalled, sc.Record.Key)
				}
				rs := research.RecallContext(*spec, docs, research.RecallConfig{Window: spec.Budget + 2000, Reserve: 2000})
				rcfg.Context = &rs
			}
			// The summariser's calls get their own chat spans and are priced
			// and logged here: the journal keeps only the summary text.
			sumLog := &contextlayer.CallLog{}
			if live && spec != nil && spec.Summarizer == runtime.SummarizerModel {
				rcfg.Summarizer = contextlayer.ModelSummarizer{Model: gw, ModelName: *model, Tracer: sumTracer, Price: pricer.price, Log: sumLog}
			}
			rt, err := runtime.New(rcfg)
			if err != nil {
				return usageError("run: %v", err)
			}
			task := runtime.Task{RunID: id, Input: t.input, CaseID: t.caseID, Trial: trial, Attributes: t.attrs}
			if len(mcpClients) > 0 {
				if task.Attributes, err = mcp.Attributes(t.attrs, mcpClients...); err != nil {
					return err
				}
			}
			if live {
				task.Model = *model
				task.MaxTokens = *maxTokens
			}
			res, err := rt.Run(ctx, agent, task)
			if err != nil {
				var de *journal.DivergenceError
				if errors.As(err, &de) {
					return &ExitError{Code: ExitFailure, Err: fmt.Errorf("run %s: the journal %s already holds this run id with different steps: %w", id, *journalPath, err)}
				}
				return &ExitError{Code: ExitRuntimeErr, Err: err}
			}
			rc, err := costOfRun(ctx, j, id, pricer, sumLog.Calls())
			if err != nil {
				return &ExitError{Code: ExitRuntimeErr, Err: err}
			}
			results = append(results, runResult{RunID: id, Agent: *agentName, CaseID: t.caseID, Trial: trial, ModelLabel: res.Label,
				Answer: res.Answer, Citations: nonNilStrings(res.Citations), Documents: nonNilStrings(res.Documents), Steps: res.Steps,
				StepLimitReached: res.StepLimitReached, Usage: res.Usage, ModelCalls: res.ModelCalls, Reused: res.Reused,
				SummaryCalls: rc.SummaryCalls, SummaryUsage: rc.SummaryUsage, SummariesReused: rc.SummariesReused,
				TotalUsage: rc.Total, CostUSD: rc.CostUSD, KnownCostUSD: rc.KnownCostUSD, UnpricedModels: rc.Unpriced, CostNote: rc.Note,
				TraceID: res.TraceID, Journal: *journalPath, Recalled: recalled})
			if mem != nil && !resumed {
				evs, err := j.Events(ctx, id)
				if err != nil {
					return &ExitError{Code: ExitRuntimeErr, Err: err}
				}
				if _, err := distillInto(ctx, mem, memScope, journal.Run{ID: id, Events: evs}, time.Now()); err != nil {
					return &ExitError{Code: ExitRuntimeErr, Err: err}
				}
			}
		}
	}

	if *journalOut != "" {
		ids := make([]string, len(results))
		for i, r := range results {
			ids[i] = r.RunID
		}
		if err := exportRuns(ctx, j, *journalOut, ids); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: err}
		}
	}
	if err := m.recordRun(ctx, &ref, j, results, *agentName, *caseFile, runModelDescription(*provider, *model)); err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(results)
	}
	printRunResults(m.Stdout, results, *journalPath)
	return nil
}

// runTasks is what run runs: the --task text, or the cases of --case
// (filtered by --case-id and --tag), with a research case's issue:N tags
// turned into the task attributes that exclude its own issue.
func runTasks(agentName, taskText, caseFile, caseID, caseTag string) ([]runTask, error) {
	var tasks []runTask
	if taskText != "" {
		tasks = []runTask{{input: taskText}}
	} else {
		cases, err := datasets.LoadCases(caseFile)
		if err != nil {
			return nil, usageError("run: %v", err)
		}
		for _, c := range cases {
			if caseID != "" && c.ID != caseID || caseTag != "" && !slices.Contains(c.Tags, caseTag) {
				continue
			}
			t := runTask{caseID: c.ID, input: c.Task}
			if agentName == research.Name {
				excl, err := research.ExcludedIssues(c.Tags)
				if err != nil {
					return nil, usageError("run: %s line %d: field \"tags\": %v", caseFile, c.Line, err)
				}
				t.attrs = research.TaskAttributes(excl...)
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
func printRunResults(w io.Writer, results []runResult, journalPath string) {
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
	return os.Rename(tmp, path)
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
