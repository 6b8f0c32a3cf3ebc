package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/memory"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
)

// Task is one task to run, Config.Trials times.
type Task struct {
	// CaseID ties the task's runs to an evaluation case ("" for a bare
	// task); it names the runs (runtime.RunID) and is journaled.
	CaseID string
	Input  string
	// Attributes are handed to every tool call (runtime.Task.Attributes),
	// e.g. the research agent's issues to exclude from retrieval.
	Attributes json.RawMessage
}

// Result is what one run did: what `loom-eval run` reports per run (its
// JSON is the command's --json output).
type Result struct {
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
	// (Config.SummaryModel), SummaryUsage their usage; neither is in the
	// journal. SummariesReused counts model summaries a resume took from
	// the journal instead, whose usage is not recorded.
	SummaryCalls    int       `json:"summary_calls"`
	SummaryUsage    llm.Usage `json:"summary_usage"`
	SummariesReused int       `json:"summaries_reused,omitempty"`
	// TotalUsage is Usage plus SummaryUsage.
	TotalUsage llm.Usage `json:"total_usage"`
	// CostUSD prices every call with Config.Price; null when any part
	// cannot be priced (CostNote says why; KnownCostUSD is then the part
	// that could be, a lower bound).
	CostUSD        *float64 `json:"cost_usd"`
	KnownCostUSD   float64  `json:"known_cost_usd"`
	UnpricedModels []string `json:"unpriced_models,omitempty"`
	CostNote       string   `json:"cost_note,omitempty"`
	TraceID        string   `json:"trace_id,omitempty"`
	// Journal is Config.JournalName.
	Journal string `json:"journal"`
	// Recalled are the memory records (Config.Memory) that entered the
	// run's memory tier.
	Recalled []string `json:"recalled_memories,omitempty"`
}

// Config is what every run shares: the parts, already built.
type Config struct {
	// Agent is the reference agent, with every tool it is given (an MCP
	// server's included). Its Name names the runs and the results.
	// Required.
	Agent runtime.Agent
	// Journal records every run; a run id it holds already is resumed.
	// Required.
	Journal journal.Journal
	// JournalName names the journal in results and errors (its path).
	JournalName string
	// Models gives trial t its model: one model for every trial (a live
	// provider's gateway), or one of the trial's own (ScriptedPolicies).
	// Required.
	Models func(trial int) runtime.Model
	// Trials is the number of trials per task, numbered from 0 (default 1).
	Trials int
	// RunID, when set, names the one run (one task, one trial); default
	// runtime.RunID(agent, case, input, trial, now).
	RunID string
	// MaxSteps is the step limit (runtime.Config.MaxSteps; 0: its default).
	MaxSteps int
	// Model and MaxTokens are the live model's settings every task
	// carries (runtime.Task.Model, MaxTokens); empty for scripted models.
	Model     string
	MaxTokens int
	// Context is the context layer (nil: none; then Evidence and Memory
	// must be unset, as they go into its tiers).
	Context *runtime.ContextSpec
	// Evidence are pre-retrieved documents for every new run's evidence
	// tier (a resumed run takes its context from the journal).
	Evidence []runtime.TierDoc
	// Memory, when set, is recalled into each new run's memory tier
	// (research.Recall) in MemoryScope, and each run is distilled into it
	// once finished (memory.Store.DistillRun).
	Memory      *memory.Store
	MemoryScope memory.Scope
	// SummaryModel answers the context layer's summary calls when
	// Context's summarizer is runtime.SummarizerModel (a live provider's
	// gateway, asked for Model); each call gets a chat span and is priced
	// into its run's result. nil: none (a resumed run may still reuse the
	// summaries its journal holds).
	SummaryModel contextlayer.Completer
	// Price prices a model call for the results' costs and the summary
	// spans (nil: no call can be priced; every cost is then unknown).
	Price contextlayer.Pricer
	// CaptureContent records message content on chat spans
	// (runtime.Config.CaptureContent).
	CaptureContent bool
	// Authorizer decides every tool call (the policy guard; nil: none).
	Authorizer runtime.Authorizer
	// Approvals holds the calls the Authorizer leaves to a human (nil:
	// such a call is refused and the model told so).
	Approvals runtime.Approvals
	// TracerProvider receives the runs' spans (nil: none).
	TracerProvider trace.TracerProvider
	// MCP are the agent's MCP servers: their tools' pins are journaled
	// with each run's attributes (mcp.Attributes).
	MCP []*mcp.Client
	// Out is where a suspended run says how to resume (nil: nowhere).
	Out io.Writer
	// Clock names runs without a case and stamps recall and distillation.
	// Default time.Now.
	Clock func() time.Time

	_ struct{}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Agent.Name == "" {
		errs = append(errs, errors.New("agent must be set (with a name)"))
	}
	if c.Journal == nil {
		errs = append(errs, errors.New("journal must be set"))
	}
	if c.Models == nil {
		errs = append(errs, errors.New("models must be set"))
	}
	if c.Trials < 0 || c.MaxSteps < 0 || c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("trials, max_steps and max_tokens must not be negative (got %d, %d, %d)", c.Trials, c.MaxSteps, c.MaxTokens))
	}
	if c.Context == nil && (len(c.Evidence) > 0 || c.Memory != nil) {
		errs = append(errs, errors.New("evidence and memory go into the context layer's tiers: they need a context"))
	}
	if c.Context != nil {
		if err := c.Context.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Memory != nil {
		if err := c.MemoryScope.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("memory scope: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Runner runs tasks with a Config's parts.
type Runner struct {
	cfg       Config
	sumTracer trace.Tracer // the summariser's chat spans (nil: none)
}

// New checks cfg and returns its runner. It does no I/O.
func New(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if cfg.Trials == 0 {
		cfg.Trials = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	r := &Runner{cfg: cfg}
	if cfg.SummaryModel != nil && cfg.TracerProvider != nil {
		r.sumTracer = cfg.TracerProvider.Tracer("github.com/loomwork/loomwork/agents/contextlayer")
	}
	return r, nil
}

// ConfigError is Run's error when the runtime refuses a run's
// configuration (runtime.New).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Run runs every trial of every task, in order, and returns their results.
// It stops at the first run that does not finish:
//
//   - suspended for a human's answer: the hint is on Config.Out and the
//     error is the runtime's (errors.As finds a *runtime.SuspendedError);
//   - a resumed run whose steps differ from the journal's: the error names
//     the run and the journal and wraps the *journal.DivergenceError;
//   - the runtime refusing the run's configuration: a *ConfigError;
//   - anything else (the model, the journal, the memory store) as it is.
func (r *Runner) Run(ctx context.Context, tasks []Task) ([]Result, error) {
	if r.cfg.RunID != "" && (len(tasks) != 1 || r.cfg.Trials != 1) {
		return nil, fmt.Errorf("runner: run id %s names one run: give one task and one trial (got %d tasks, %d trials)", r.cfg.RunID, len(tasks), r.cfg.Trials)
	}
	var results []Result
	for _, t := range tasks {
		for trial := range r.cfg.Trials {
			res, err := r.runOne(ctx, t, trial)
			if err != nil {
				return nil, err
			}
			results = append(results, res)
		}
	}
	return results, nil
}

// runOne runs one trial of t, prices it and (with memory) distills it.
func (r *Runner) runOne(ctx context.Context, t Task, trial int) (Result, error) {
	id := r.cfg.RunID
	if id == "" {
		id = runtime.RunID(r.cfg.Agent.Name, t.CaseID, t.Input, trial, r.cfg.Clock())
	}
	rcfg := runtime.Config{Model: r.cfg.Models(trial), Journal: r.cfg.Journal, TracerProvider: r.cfg.TracerProvider,
		MaxSteps: r.cfg.MaxSteps, Context: r.cfg.Context, CaptureContent: r.cfg.CaptureContent,
		Authorizer: r.cfg.Authorizer, Approvals: r.cfg.Approvals}
	recalled, resumed, err := r.recall(ctx, &rcfg, id, t.Input)
	if err != nil {
		return Result{}, err
	}
	if len(r.cfg.Evidence) > 0 && !resumed {
		// A resumed run with memory took its whole context, evidence
		// included, from the journal.
		spec := withEvidence(*rcfg.Context, r.cfg.Evidence)
		rcfg.Context = &spec
	}
	// The summariser's calls get their own chat spans and are priced here:
	// the journal keeps only the summary text.
	sumLog := &contextlayer.CallLog{}
	if r.cfg.SummaryModel != nil && r.cfg.Context != nil && r.cfg.Context.Summarizer == runtime.SummarizerModel {
		rcfg.Summarizer = contextlayer.ModelSummarizer{Model: r.cfg.SummaryModel, ModelName: r.cfg.Model, Tracer: r.sumTracer,
			Price: r.cfg.Price, Log: sumLog}
	}
	res, err := r.execute(ctx, rcfg, t, trial, id)
	if err != nil {
		return Result{}, err
	}
	rc, err := costOf(ctx, r.cfg.Journal, id, r.cfg.Price, sumLog.Calls())
	if err != nil {
		return Result{}, err
	}
	if r.cfg.Memory != nil && !resumed {
		if err := r.distill(ctx, id); err != nil {
			return Result{}, err
		}
	}
	return Result{RunID: id, Agent: r.cfg.Agent.Name, CaseID: t.CaseID, Trial: trial, ModelLabel: res.Label,
		Answer: res.Answer, Citations: nonNil(res.Citations), Documents: nonNil(res.Documents), Steps: res.Steps,
		StepLimitReached: res.StepLimitReached, Usage: res.Usage, ModelCalls: res.ModelCalls, Reused: res.Reused,
		SummaryCalls: rc.SummaryCalls, SummaryUsage: rc.SummaryUsage, SummariesReused: rc.SummariesReused,
		TotalUsage: rc.Total, CostUSD: rc.CostUSD, KnownCostUSD: rc.KnownCostUSD, UnpricedModels: rc.Unpriced, CostNote: rc.Note,
		TraceID: res.TraceID, Journal: r.cfg.JournalName, Recalled: recalled}, nil
}

// execute runs trial of t as run id on a runtime configured by rcfg, and
// turns a suspension into the hint on Out and a divergence from the
// journal into an error naming the run.
func (r *Runner) execute(ctx context.Context, rcfg runtime.Config, t Task, trial int, id string) (runtime.Result, error) {
	rt, err := runtime.New(rcfg)
	if err != nil {
		return runtime.Result{}, &ConfigError{Err: err}
	}
	task, err := r.task(t, trial, id)
	if err != nil {
		return runtime.Result{}, err
	}
	res, err := rt.Run(ctx, r.cfg.Agent, task)
	var sus *runtime.SuspendedError
	if errors.As(err, &sus) {
		fmt.Fprintf(r.cfg.Out, "run %s suspended at call %s (tool %s): loom-eval approve %s %s --approver WHO, then run it again\n",
			sus.RunID, sus.CallID, sus.Tool, sus.RunID, sus.CallID)
		fmt.Fprintf(r.cfg.Out, "resume: run the same command again with --run-id %s (runs already done are read from the journal)\n", id)
		return runtime.Result{}, err
	}
	var de *journal.DivergenceError
	if errors.As(err, &de) {
		hint := ""
		if de.Produced != nil && de.Produced.Kind == journal.KindDecision && de.Recorded != nil && de.Recorded.Kind != journal.KindDecision {
			hint = " (it was recorded without a policy: resume it with --policy none)"
		}
		return runtime.Result{}, fmt.Errorf("run %s: the journal %s already holds this run id with different steps%s: %w", id, r.cfg.JournalName, hint, err)
	}
	return res, err
}

// recall fills run id's memory tier (with memory) and returns the
// recalled keys and whether the run is resumed. A run already journaled
// resumes with the memory it recalled then (recalling again would change
// its first request), and is not distilled twice.
func (r *Runner) recall(ctx context.Context, rcfg *runtime.Config, id, input string) ([]string, bool, error) {
	if r.cfg.Memory == nil {
		return nil, false, nil
	}
	var recalled []string
	prev, err := r.cfg.Journal.Events(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if len(prev) > 0 {
		if rt, err := runtime.ReplayTask(journal.Run{ID: id, Events: prev}); err == nil && rt.Context != nil {
			rcfg.Context = rt.Context
			if rt.Context.Tiers != nil {
				for _, d := range rt.Context.Tiers.Memory {
					recalled = append(recalled, strings.TrimPrefix(d.ID, "memory:"))
				}
			}
		}
		return recalled, true, nil
	}
	docs, scored, err := research.Recall(ctx, r.cfg.Memory, r.cfg.MemoryScope, input, research.RecallConfig{}, r.cfg.Clock())
	if err != nil {
		return nil, false, err
	}
	for _, sc := range scored {
		recalled = append(recalled, sc.Record.Key)
	}
	spec := *r.cfg.Context
	rs := research.RecallContext(spec, docs, research.RecallConfig{Window: spec.Budget + 2000, Reserve: 2000})
	rcfg.Context = &rs
	return recalled, false, nil
}

// task is the runtime's task for trial of t, with the MCP servers' pins
// and the live model's settings.
func (r *Runner) task(t Task, trial int, id string) (runtime.Task, error) {
	task := runtime.Task{RunID: id, Input: t.Input, CaseID: t.CaseID, Trial: trial, Attributes: t.Attributes,
		Model: r.cfg.Model, MaxTokens: r.cfg.MaxTokens}
	if len(r.cfg.MCP) > 0 {
		var err error
		if task.Attributes, err = mcp.Attributes(t.Attributes, r.cfg.MCP...); err != nil {
			return runtime.Task{}, err
		}
	}
	return task, nil
}

// distill distills the journaled run id into the memory store.
func (r *Runner) distill(ctx context.Context, id string) error {
	evs, err := r.cfg.Journal.Events(ctx, id)
	if err != nil {
		return err
	}
	_, err = r.cfg.Memory.DistillRun(ctx, r.cfg.MemoryScope, journal.Run{ID: id, Events: evs}, r.cfg.Clock())
	return err
}

// withEvidence is spec with docs in its evidence tier (a tiered assembly
// sized like the memory tier's, when spec has none yet).
func withEvidence(spec runtime.ContextSpec, docs []runtime.TierDoc) runtime.ContextSpec {
	if spec.Tiers == nil {
		spec.Tiers = &runtime.TierSpec{Window: spec.Budget + 2000, Reserve: 2000}
		spec.Budget = 0
	} else {
		t := *spec.Tiers
		spec.Tiers = &t
	}
	spec.Tiers.Evidence = append(append([]runtime.TierDoc(nil), spec.Tiers.Evidence...), docs...)
	return spec
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
