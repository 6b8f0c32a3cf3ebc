package ci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/replay"

	"go.opentelemetry.io/otel/trace"
)

// FreshResult is step 2.
type FreshResult struct {
	Agents []AgentRun `json:"agents"`
	Runs   int        `json:"runs"`
	// Unchanged counts the fresh runs identical, event for event (the
	// clock aside), to the committed run of the same id; Changed lists the
	// others. On unchanged code every run is unchanged: the committed
	// journals were recorded with these settings. A change is not a
	// verdict — the gate decides whether it made a case worse.
	Unchanged int         `json:"unchanged"`
	Changed   []RunChange `json:"changed"`
	// Errors are the runs that stopped with an error; their trials fail.
	Errors []RunError `json:"errors"`
	// Skipped are cases tagged neither research nor coding: no reference
	// agent runs them.
	Skipped []string `json:"skipped"`
	// TrialsFile holds the fresh trial records (only when Config.WorkDir is
	// kept); the journals are beside it in fresh/.
	TrialsFile string `json:"trials_file,omitempty"`

	trials  []datasets.Trial
	traceOf map[string]string // run id → trace id
	usageOf map[string]int64  // run id → the runtime's own token total
}

func (f *FreshResult) add(a AgentRun) {
	f.Runs += a.Runs
	f.Unchanged += a.Unchanged
	f.Changed = append(f.Changed, a.Changed...)
	f.Errors = append(f.Errors, a.Errors...)
	f.trials = append(f.trials, a.trials...)
	if f.traceOf == nil {
		f.traceOf, f.usageOf = map[string]string{}, map[string]int64{}
	}
	for id, tr := range a.traceOf {
		f.traceOf[id] = tr
	}
	for id, n := range a.usageOf {
		f.usageOf[id] = n
	}
	a.Changed, a.Errors = nil, nil
	f.Agents = append(f.Agents, a)
}

// AgentRun is the fresh run of one reference agent.
type AgentRun struct {
	Agent      string  `json:"agent"`
	Cases      int     `json:"cases"`
	Trials     int     `json:"trials_per_case"`
	Runs       int     `json:"runs"`
	Unchanged  int     `json:"unchanged"`
	Journal    string  `json:"journal,omitempty"` // the exported journal (only when Config.WorkDir is kept)
	DurationMS float64 `json:"duration_ms"`

	Changed []RunChange `json:"-"`
	Errors  []RunError  `json:"-"`
	trials  []datasets.Trial
	traceOf map[string]string
	usageOf map[string]int64
}

// RunChange is a fresh run that differs from the committed run of its id.
type RunChange struct {
	CaseID string `json:"case_id"`
	Trial  int    `json:"trial"`
	RunID  string `json:"run_id"`
	// Seq is the first event that differs, Field what differs in it
	// (kind, step, tool, call_id, args_hash, label, payload, or events: one
	// side has no event there); Recorded and Produced describe the event on
	// each side ("" when that side has none).
	Seq      int64  `json:"seq"`
	Field    string `json:"field"`
	Recorded string `json:"recorded"`
	Produced string `json:"produced"`
}

// RunError is a fresh run that stopped with an error.
type RunError struct {
	CaseID  string `json:"case_id"`
	Trial   int    `json:"trial"`
	RunID   string `json:"run_id"`
	Message string `json:"message"`
}

// freshRun runs one reference agent's scripted policy over its cases, as
// `loom-eval run --agent AGENT --case CASES --tag AGENT --trials N
// --deterministic` does: one journal per agent on the deterministic clock
// (the clock runs on across the agent's runs, so the order — cases in
// file order, trials within — is part of the recording), the agent's
// default context layer with the extractive summariser, the runtime's
// default step limit, a research case's issue:N tags excluded from
// retrieval. The runs are exported to fresh/AGENT.jsonl and turned into
// trial records from the exported events (replay.Rescore), the path the
// baseline's records took. The runs' spans go to tp, stamped by a logical
// clock of their own (one per agent, like the journal's), so a run's span
// durations are deterministic; traceOf records each run's trace.
func freshRun(ctx context.Context, cfg Config, in *inputs, a agentPlan, work string, tp trace.TracerProvider) (AgentRun, error) {
	out := AgentRun{Agent: a.agent, Cases: len(a.cases), Trials: in.trials, traceOf: map[string]string{}, usageOf: map[string]int64{}}
	spanClock := journaldb.DeterministicClock()
	dir := filepath.Join(work, "fresh")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return out, fmt.Errorf("ci: fresh run: %w", err)
	}
	var agent runtime.Agent
	var spec runtime.ContextSpec
	var err error
	switch a.agent {
	case research.Name:
		agent, err = research.New(research.Config{Index: cfg.Index})
		spec = research.DefaultContext()
	case coding.Name:
		agent, err = coding.New(coding.Config{Sandbox: cfg.Sandbox, WorkRoot: filepath.Join(work, "fresh-workspaces")})
		spec = coding.DefaultContext()
	}
	if err != nil {
		return out, fmt.Errorf("ci: fresh run: %w", err)
	}
	spec.Summarizer = runtime.SummarizerExtract
	if err := spec.Validate(); err != nil {
		return out, fmt.Errorf("ci: fresh run: %w", err)
	}
	tok, err := contextlayer.NewTokenizer()
	if err != nil {
		return out, fmt.Errorf("ci: fresh run: %w", err)
	}
	az, err := freshGuard(cfg, tp, spanClock)
	if err != nil {
		return out, err
	}
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(dir, a.agent+".journal.db"), Clock: journaldb.DeterministicClock(), Logger: cfg.Logger})
	if err != nil {
		return out, fmt.Errorf("ci: fresh run: %w", err)
	}
	defer j.Shutdown(context.WithoutCancel(ctx))

	type planned struct {
		c     datasets.Case
		trial int
		id    string
	}
	var plan []planned
	var ids []string
	errByID := map[string]RunError{}
	for _, c := range a.cases {
		var attrs json.RawMessage
		if a.agent == research.Name {
			excl, err := research.ExcludedIssues(c.Tags)
			if err != nil {
				return out, fmt.Errorf("%w: %s line %d: field \"tags\": %w", ErrBadInput, in.casesPath, c.Line, err)
			}
			attrs = research.TaskAttributes(excl...)
		}
		models, err := runner.ScriptedPolicies(a.agent, tok)
		if err != nil {
			return out, err
		}
		for trial := range in.trials {
			model := models(trial)
			rt, err := runtime.New(runtime.Config{Model: model, Journal: j, Context: &spec, Logger: cfg.Logger,
				TracerProvider: tp, Clock: spanClock, Authorizer: az})
			if err != nil {
				return out, fmt.Errorf("ci: fresh run: %w", err)
			}
			// The case id names the run; the clock is not consulted.
			id := runtime.RunID(a.agent, c.ID, c.Task, trial, cfg.Now())
			ids = append(ids, id)
			plan = append(plan, planned{c, trial, id})
			res, err := rt.Run(ctx, agent, runtime.Task{RunID: id, Input: c.Task, CaseID: c.ID, Trial: trial, Attributes: attrs})
			if res.TraceID != "" {
				out.traceOf[id] = res.TraceID
			}
			if err == nil {
				out.usageOf[id] = res.Usage.InputTokens + res.Usage.OutputTokens
			}
			if err != nil {
				if ctx.Err() != nil {
					return out, err
				}
				// The run stopped (a model step that errored, a journal
				// that refused an event): what it journaled is kept, and
				// its trial fails.
				errByID[id] = RunError{CaseID: c.ID, Trial: trial, RunID: id, Message: err.Error()}
			}
		}
	}
	path := filepath.Join(dir, a.agent+".jsonl")
	if err := exportRuns(ctx, j, path, ids); err != nil {
		return out, err
	}
	runs, err := journal.ReadJSONLFile(path)
	if err != nil {
		return out, fmt.Errorf("ci: fresh run: read back %s: %w", path, err)
	}
	got := map[string]journal.Run{}
	for _, r := range runs {
		got[r.ID] = r
	}
	for _, p := range plan {
		c, trial, id := p.c, p.trial, p.id
		out.Runs++
		if e, failed := errByID[id]; failed {
			out.Errors = append(out.Errors, e)
		}
		run, ok := got[id]
		if !ok || len(run.Events) == 0 {
			// Nothing journaled at all (the run failed before
			// run_started): a failed trial, so the case is not
			// silently missing from the gate.
			f := false
			out.trials = append(out.trials, datasets.Trial{CaseID: c.ID, Trial: trial, ModelLabel: datasets.LabelScripted,
				Journal: &datasets.JournalRef{Path: path, RunID: id}, Success: &f})
			continue
		}
		rep, err := replay.Rescore(run)
		if err != nil {
			return out, fmt.Errorf("ci: fresh run %s: %w", id, err)
		}
		t := replay.TrialRecord(&rep, false)
		if t.CaseID != c.ID || t.Trial != trial {
			return out, fmt.Errorf("ci: fresh run %s recorded case %s trial %d, not case %s trial %d", id, t.CaseID, t.Trial, c.ID, trial)
		}
		out.trials = append(out.trials, t)
		if ch, same := compareRuns(in.recorded[id], run); same {
			out.Unchanged++
		} else {
			ch.CaseID, ch.Trial, ch.RunID = c.ID, trial, id
			out.Changed = append(out.Changed, ch)
		}
	}
	if cfg.WorkDir != "" {
		out.Journal = path
	}
	return out, nil
}

// freshGuard is the fresh runs' authorizer (Config.ToolPolicy; nil
// without one): its decision spans are stamped by the runs' span clock, so
// their traces stay deterministic.
func freshGuard(cfg Config, tp trace.TracerProvider, clock func() time.Time) (runtime.Authorizer, error) {
	if cfg.ToolPolicy == nil {
		return nil, nil
	}
	e, err := policy.NewEngine(*cfg.ToolPolicy)
	if err != nil {
		return nil, fmt.Errorf("%w: ci: tool policy %s: %w", ErrBadInput, cfg.ToolPolicyName, err)
	}
	g, err := policy.NewGuard(policy.GuardConfig{Engine: e, Rules: *cfg.ToolPolicy, Name: cfg.ToolPolicyName, Audit: cfg.Audit, TracerProvider: tp, Clock: clock})
	if err != nil {
		return nil, fmt.Errorf("ci: fresh run: %w", err)
	}
	return g, nil
}

// exportRuns writes the runs that journaled anything (a run that failed
// before run_started has no events to export) to path.
func exportRuns(ctx context.Context, j *journaldb.Store, path string, ids []string) error {
	var keep []string
	for _, id := range ids {
		evs, err := j.Events(ctx, id)
		if err != nil {
			return fmt.Errorf("ci: fresh run: export journal: %w", err)
		}
		if len(evs) > 0 {
			keep = append(keep, id)
		}
	}
	var buf bytes.Buffer
	if len(keep) == 0 {
		return os.WriteFile(path, nil, 0o644)
	}
	if err := j.Export(ctx, &buf, keep...); err != nil {
		return fmt.Errorf("ci: fresh run: export journal: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("ci: fresh run: export journal: %w", err)
	}
	return nil
}

// compareRuns finds the first event in which a fresh run differs from the
// recorded run of the same id. Times, and the hash chain that covers them,
// are left out: the journal clock runs on across an agent's runs, so one
// run that takes an extra step shifts every later run's times without
// changing what those runs did.
func compareRuns(rec, got journal.Run) (RunChange, bool) {
	if rec.ID == "" {
		return RunChange{Seq: 1, Field: "events", Recorded: "(no committed run with this id)", Produced: describe(got.Events, 0)}, false
	}
	for i := 0; i < max(len(rec.Events), len(got.Events)); i++ {
		field := "events"
		if i < len(rec.Events) && i < len(got.Events) {
			if field = eventDiff(rec.Events[i], got.Events[i]); field == "" {
				continue
			}
		}
		return RunChange{Seq: int64(i + 1), Field: field, Recorded: describe(rec.Events, i), Produced: describe(got.Events, i)}, false
	}
	return RunChange{}, true
}

// eventDiff names the first field in which two events differ, "" when
// they agree.
func eventDiff(a, b journal.Event) string {
	if f := journal.Compare(journal.RefOf(a), journal.RefOf(b)); f != "" {
		return f
	}
	if a.Label != b.Label {
		return "label"
	}
	if bytes.Equal(a.Payload, b.Payload) {
		return ""
	}
	ca, errA := journal.Canonical(a.Payload)
	cb, errB := journal.Canonical(b.Payload)
	if errors.Join(errA, errB) == nil && bytes.Equal(ca, cb) {
		return ""
	}
	return "payload"
}

func describe(evs []journal.Event, i int) string {
	if i >= len(evs) {
		return ""
	}
	return journal.RefOf(evs[i]).String()
}
