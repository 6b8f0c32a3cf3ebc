// Package workflow is the deterministic step graph around the model: a
// workflow is a set of named steps (a model call, a tool call, an approval
// gate, or a whole agent loop) with dependencies, run in a topological
// order and journaled through the journal port (journal.Journal, the
// runtime's: journaldb on disk, memjournal in memory), so a run killed at
// any point resumes by replaying recorded results — steps that succeeded
// are walked over as `replayed` (attempt 0) and never executed again. A
// step with a side-effect key runs through the journal's AppendEffect, once
// per key; on a journal with tables (journaldb) inside its write
// transaction: its effects, its ledger row and its `succeeded` event commit
// together or not at all, so a keyed effect happens exactly once across
// crashes. Approval gates suspend a run durably (the process may exit); an
// approval or denial journaled later (`loom-eval approve` / `deny`) lets
// the next Run resume or stop it.
//
// A workflow is built in Go (New) or declared in a JSON file (DecodeFile,
// Compile): reference agents, remote A2A agents, a documented set of
// tools and approval gates as steps, with retries, backoff, timeouts and
// text/template inputs over earlier steps' outputs; a peer's reply keeps
// its origin, so an agent step that reads it runs with a tainted task.
// Each run, attempt, replay and gate decision is a span (semconv's
// workflow keys); Summarize reads a run's per-step state back.
//
// docs/workflow.md describes the event format and the guarantees.
package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/semconv"
)

// Kind is what a step does. It is recorded, not interpreted, except for
// KindApproval, whose step passes through the approval gate first.
type Kind string

// Step kinds.
const (
	KindModel    Kind = "model"
	KindTool     Kind = "tool"
	KindApproval Kind = "approval"
	KindAgent    Kind = "agent" // a whole model-directed agent loop as one step
	KindA2A      Kind = "a2a"   // a message to a remote A2A agent; its reply is untrusted
)

// Step is one node of a workflow.
type Step struct {
	Name     string
	Kind     Kind
	Requires []string
	// Retries is how many times a failed attempt is retried (0: one
	// attempt). Each attempt is journaled: started, then failed and
	// retried, or succeeded.
	Retries int
	// Backoff is the wait before the first retry, doubled before each
	// further one (0: retry at once). Waits use Config.Sleep.
	Backoff time.Duration
	// Timeout bounds one attempt (0: none): the action's context ends
	// then, and the attempt fails (a retry may follow).
	Timeout time.Duration
	// Prompt, for an approval step, is what the human is asked; it is
	// journaled on the approval_required event (nil: none).
	Prompt func(in Input) (string, error)
	// Key is the side-effect key, derived from what the step means (e.g.
	// "pr:checkout-fix"), never from when it ran. A keyed step's Action
	// runs through the journal's AppendEffect, once per key: a key with a
	// recorded result is never executed again in the run. On a journal
	// with tables it runs inside the journal's write transaction
	// (Input.Tx), and its effects and its succeeded event commit together.
	Key string
	// EffectSchema is idempotent DDL for the tables a keyed step writes in
	// the journal's database; it needs a journal with tables.
	EffectSchema string
	// Digest, when set, is journaled with the graph: a step declared in a
	// file carries the hash of its declaration, so a run resumes only
	// under the same declaration.
	Digest string
	// Action does the step. Its result must be JSON-encodable; it is
	// journaled and given to dependent steps (Input.Results).
	Action func(ctx context.Context, in Input) (any, error)
}

// Input is what an Action receives.
type Input struct {
	RunID   string
	Step    string
	Attempt int
	// Results holds the recorded result of every step this one requires
	// (transitively, every completed step), as JSON.
	Results map[string]json.RawMessage
	// Key is the step's side-effect key; Tx is the journal's SQL
	// transaction of a keyed step on a journal with tables (journal.SQLTx,
	// from journaldb; nil otherwise). Statements run through Tx commit
	// with the step's succeeded event.
	Key string
	Tx  journal.SQLTx
	// Approval is the answer of the gate before an approval step's Action.
	Approval *Approval
}

// Approval is a human's (or a gate's) answer to an approval step.
type Approval struct {
	Step     string    `json:"step"`
	Approved bool      `json:"approved"`
	Approver string    `json:"approver"`
	Reason   string    `json:"reason,omitempty"`
	Time     time.Time `json:"time"`
}

// Gate answers approval steps. Decide returns nil when no answer exists
// yet: the run then suspends (Run returns *SuspendedError) and resumes when
// an answer has been journaled (Record) and Run is called again.
type Gate interface {
	Decide(ctx context.Context, runID, step string, results map[string]json.RawMessage) (*Approval, error)
}

// GateFunc is a synchronous Gate: it always answers.
type GateFunc func(step string) (approved bool)

// Decide implements Gate.
func (f GateFunc) Decide(_ context.Context, _ string, step string, _ map[string]json.RawMessage) (*Approval, error) {
	ok := f(step)
	a := &Approval{Step: step, Approved: ok, Approver: "gate"}
	if !ok {
		a.Reason = "denied by gate"
	}
	return a, nil
}

// Step event statuses (the "event" field of a step event).
const (
	StatusStarted          = "started"
	StatusFailed           = "failed"
	StatusRetried          = "retried"
	StatusSucceeded        = "succeeded"
	StatusReplayed         = "replayed"
	StatusApprovalRequired = "approval_required"
	StatusDenied           = "denied"
	StatusInterrupted      = "interrupted" // an attempt the process died during, found on resume
)

// StepEvent is the payload of a journal.KindStep event.
type StepEvent struct {
	Step     string          `json:"step"`
	Kind     Kind            `json:"kind"`
	Event    string          `json:"event"`
	Attempt  int             `json:"attempt"`
	Key      string          `json:"key,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Approver string          `json:"approver,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	// Prompt is an approval step's question (approval_required).
	Prompt string `json:"prompt,omitempty"`
	// TraceID is the hex trace id of the span of this event's process
	// (started, replayed, approval_required) when spans were recorded: the
	// link from a run to its traces, one per process that ran it.
	TraceID string `json:"trace_id,omitempty"`
}

// Started is the payload of the journal.KindWorkflowStarted event.
type Started struct {
	Workflow string     `json:"workflow"`
	Steps    []StepSpec `json:"steps"`
	// Input is the workflow's input (a file workflow's --input): a run
	// resumes only with the same input.
	Input string `json:"input,omitempty"`
}

// StepSpec is a step as recorded: what a resume must find unchanged.
type StepSpec struct {
	Name     string   `json:"name"`
	Kind     Kind     `json:"kind"`
	Requires []string `json:"requires,omitempty"`
	Retries  int      `json:"retries,omitempty"`
	Key      string   `json:"key,omitempty"`
	Digest   string   `json:"digest,omitempty"`
}

// Workflow is a validated step graph.
type Workflow struct {
	name  string
	steps map[string]*Step
	order []string
	specs []StepSpec
	input string
}

// CycleError reports a dependency cycle, naming its steps in order.
type CycleError struct{ Steps []string }

func (e *CycleError) Error() string {
	return fmt.Sprintf("dependency cycle: %s", strings.Join(e.Steps, " -> "))
}

// New validates steps and computes their order. An unknown dependency, a
// duplicate name, a missing action or a cycle is an error naming the step.
func New(name string, steps []Step) (*Workflow, error) {
	if name == "" {
		return nil, errors.New("workflow: name must be set")
	}
	w := &Workflow{name: name, steps: map[string]*Step{}}
	var errs []error
	for i := range steps {
		s := &steps[i]
		switch {
		case s.Name == "":
			errs = append(errs, fmt.Errorf("workflow %s: step %d has no name", name, i))
			continue
		case w.steps[s.Name] != nil:
			errs = append(errs, fmt.Errorf("workflow %s: step %q declared twice", name, s.Name))
			continue
		case s.Action == nil:
			errs = append(errs, fmt.Errorf("workflow %s: step %q has no action", name, s.Name))
		case s.Retries < 0:
			errs = append(errs, fmt.Errorf("workflow %s: step %q: retries must not be negative (got %d)", name, s.Name, s.Retries))
		}
		switch s.Kind {
		case KindModel, KindTool, KindApproval, KindAgent, KindA2A:
		default:
			errs = append(errs, fmt.Errorf("workflow %s: step %q: unknown kind %q (want model, tool, approval, agent or a2a)", name, s.Name, s.Kind))
		}
		if s.Backoff < 0 || s.Timeout < 0 {
			errs = append(errs, fmt.Errorf("workflow %s: step %q: backoff and timeout must not be negative", name, s.Name))
		}
		w.steps[s.Name] = s
	}
	keys := map[string]string{}
	for i := range steps {
		s := &steps[i]
		for _, r := range s.Requires {
			if w.steps[r] == nil {
				errs = append(errs, fmt.Errorf("workflow %s: step %q requires unknown step %q", name, s.Name, r))
			}
		}
		if s.Key != "" {
			if other, dup := keys[s.Key]; dup && other != s.Name {
				errs = append(errs, fmt.Errorf("workflow %s: steps %q and %q share side-effect key %q", name, other, s.Name, s.Key))
			}
			keys[s.Key] = s.Name
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	order, err := topo(steps)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", name, err)
	}
	w.order = order
	for _, n := range order {
		s := w.steps[n]
		w.specs = append(w.specs, StepSpec{Name: s.Name, Kind: s.Kind, Requires: s.Requires, Retries: s.Retries, Key: s.Key, Digest: s.Digest})
	}
	return w, nil
}

// topo is Kahn's algorithm; ties are broken by declaration order so the
// order is deterministic.
func topo(steps []Step) ([]string, error) {
	indeg := map[string]int{}
	dependents := map[string][]string{}
	for _, s := range steps {
		indeg[s.Name] += 0
		for _, r := range s.Requires {
			indeg[s.Name]++
			dependents[r] = append(dependents[r], s.Name)
		}
	}
	done := map[string]bool{}
	var order []string
	for len(order) < len(steps) {
		progressed := false
		for _, s := range steps {
			if !done[s.Name] && indeg[s.Name] == 0 {
				done[s.Name] = true
				order = append(order, s.Name)
				for _, d := range dependents[s.Name] {
					indeg[d]--
				}
				progressed = true
				break
			}
		}
		if !progressed {
			return nil, &CycleError{Steps: findCycle(steps, done)}
		}
	}
	return order, nil
}

// findCycle walks requirements from the first unfinished step until a step
// repeats, and returns the cycle.
func findCycle(steps []Step, done map[string]bool) []string {
	req := map[string][]string{}
	var start string
	for _, s := range steps {
		req[s.Name] = s.Requires
		if start == "" && !done[s.Name] {
			start = s.Name
		}
	}
	seen := map[string]int{}
	var path []string
	cur := start
	for {
		if i, ok := seen[cur]; ok {
			return append(path[i:], cur)
		}
		seen[cur] = len(path)
		path = append(path, cur)
		next := ""
		for _, r := range req[cur] {
			if !done[r] {
				next = r
				break
			}
		}
		if next == "" {
			return path
		}
		cur = next
	}
}

// Name returns the workflow's name.
func (w *Workflow) Name() string { return w.name }

// Order returns the steps in the order they run.
func (w *Workflow) Order() []string { return append([]string(nil), w.order...) }

// Config configures a Runner.
type Config struct {
	// Journal is the journal port (journal.Journal), as the runtime's.
	// Steps with an EffectSchema need one with tables
	// (journal.SchemaEnsurer, e.g. journaldb).
	Journal journal.Journal
	// Gate answers approval steps. Default: the journal gate (answers
	// recorded with Record; none yet suspends the run).
	Gate           Gate
	TracerProvider trace.TracerProvider
	Clock          func() time.Time
	// Sleep waits d between a failed attempt and its retry (Step.Backoff),
	// returning early with ctx's error. Default: a timer.
	Sleep  func(ctx context.Context, d time.Duration) error
	Logger *slog.Logger
	// Attributes are added to the invoke_workflow span (e.g. the file a
	// workflow was declared in, semconv.AttrWorkflowFile).
	Attributes []attribute.KeyValue

	_ struct{}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	if c.Journal == nil {
		return errors.New("workflow config: journal must be set")
	}
	return nil
}

// Runner runs workflows on a journal.
type Runner struct {
	cfg    Config
	tracer trace.Tracer
}

// NewRunner returns a Runner. It does no I/O.
func NewRunner(cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	return &Runner{cfg: cfg, tracer: cfg.TracerProvider.Tracer("github.com/loomwork/loomwork/agents/workflow")}, nil
}

// Result is the state of a run after Run returns.
type Result struct {
	RunID     string
	Completed []string // steps with a recorded result, in order
	Results   map[string]json.RawMessage
	Ledger    map[string]json.RawMessage // side-effect key → result
	Events    []StepEvent                // every step event of the run, old and new
	// TraceID is the hex trace id of this process's invoke_workflow span
	// ("" when spans are not recorded).
	TraceID string
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SuspendedError is returned when the run waits for an approval: its
// approval_required event is durable and the process may exit. When an
// agent step's policy held one of its tool calls, AgentRun and Call name
// the held call (answer it with loom-eval approve AGENTRUN CALL); the
// step's attempt is then journaled interrupted on resume and the agent
// run resumes from its own journal.
type SuspendedError struct {
	RunID, Step    string
	AgentRun, Call string
}

func (e *SuspendedError) Error() string {
	if e.Call != "" {
		return fmt.Sprintf("run %s suspended at step %s: its agent run %s waits for approval of call %s (loom-eval approve %s %s)", e.RunID, e.Step, e.AgentRun, e.Call, e.AgentRun, e.Call)
	}
	return fmt.Sprintf("run %s suspended at step %s: waiting for approval (loom-eval approve %s %s)", e.RunID, e.Step, e.RunID, e.Step)
}

// DeniedError is returned when an approval step was denied: the run stops
// at that step.
type DeniedError struct {
	RunID, Step, Approver, Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("run %s stopped at step %s: approval denied by %s: %s", e.RunID, e.Step, e.Approver, e.Reason)
}

// StepError is returned when a step failed on its last allowed attempt.
type StepError struct {
	RunID, Step string
	Attempts    int
	Err         error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("run %s: step %s failed after %d attempt(s): %v", e.RunID, e.Step, e.Attempts, e.Err)
}
func (e *StepError) Unwrap() error { return e.Err }

// CrashError is what RunOptions.CrashAfter returns: a simulated process
// death right after a step's success became durable.
type CrashError struct{ Step string }

func (e *CrashError) Error() string { return "simulated crash after step " + e.Step }

// DivergenceError is returned when a run is resumed with a workflow whose
// graph differs from the recorded one.
type DivergenceError struct {
	RunID              string
	Recorded, Produced string
}

func (e *DivergenceError) Error() string {
	return fmt.Sprintf("run %s: the workflow changed since the run started (recorded graph %s, this graph %s)", e.RunID, e.Recorded, e.Produced)
}

// RunOptions are per-run knobs.
type RunOptions struct {
	// CrashAfter simulates a crash right after the named step's success is
	// journaled (tests and the reference example; real crashes are
	// SIGKILL, see the package tests).
	CrashAfter string
}

// Run executes the workflow as runID, or resumes it if the journal has its
// events. It returns the result, and *SuspendedError, *DeniedError,
// *StepError or *CrashError when the run did not complete.
func (rn *Runner) Run(ctx context.Context, w *Workflow, runID string, opt RunOptions) (res Result, err error) {
	if runID == "" {
		return Result{}, errors.New("run workflow: empty run id")
	}
	if err := rn.ensureSchemas(ctx, w); err != nil {
		return Result{}, fmt.Errorf("run %s: %w", runID, err)
	}
	recorded, err := rn.cfg.Journal.Events(ctx, runID)
	if err != nil {
		return Result{}, fmt.Errorf("run %s: %w", runID, err)
	}
	st, err := fold(runID, recorded)
	if err != nil {
		return Result{}, err
	}
	started := Started{Workflow: w.name, Steps: w.specs, Input: w.input}
	h, err := journal.HashValue(started)
	if err != nil {
		return Result{}, err
	}
	if st.graphHash == "" {
		if _, err := rn.cfg.Journal.Append(ctx, runID, journal.Record{Kind: journal.KindWorkflowStarted, ArgsHash: h, Payload: started}); err != nil {
			return Result{}, fmt.Errorf("run %s: %w", runID, err)
		}
	} else if st.graphHash != h {
		return Result{}, &DivergenceError{RunID: runID, Recorded: st.graphHash, Produced: h}
	}
	ctx, span := rn.tracer.Start(ctx, semconv.OpInvokeWorkflow+" "+w.name, trace.WithTimestamp(rn.cfg.Clock()),
		trace.WithAttributes(append([]attribute.KeyValue{attribute.String(semconv.AttrOperationName, semconv.OpInvokeWorkflow),
			attribute.String(semconv.AttrWorkflowName, w.name), attribute.String(semconv.AttrWorkflowRunID, runID)}, rn.cfg.Attributes...)...))
	defer func() {
		span.SetAttributes(attribute.String(semconv.AttrWorkflowState, runState(err)))
		if err != nil && runState(err) != semconv.WorkflowSuspended {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End(trace.WithTimestamp(rn.cfg.Clock()))
	}()
	r := &run{rn: rn, w: w, runID: runID, st: st}
	err = r.walk(ctx, opt)
	res = Result{RunID: runID, Results: st.results, Ledger: st.ledger, Events: st.events, TraceID: traceID(span)}
	for _, n := range w.order {
		if _, ok := st.results[n]; ok {
			res.Completed = append(res.Completed, n)
		}
	}
	return res, err
}

// ensureSchemas creates the tables the steps keep in the journal
// (Step.EffectSchema) and the workflow_ledger, on a journal that has
// tables; on another, a step that declares tables is an error.
func (rn *Runner) ensureSchemas(ctx context.Context, w *Workflow) error {
	se, tables := rn.cfg.Journal.(journal.SchemaEnsurer)
	for _, n := range w.order {
		s := w.steps[n]
		switch {
		case s.EffectSchema == "":
		case !tables:
			return fmt.Errorf("step %s keeps tables in the journal (EffectSchema), and the journal (%T) has none: use a journal with tables, such as journaldb", n, rn.cfg.Journal)
		default:
			if err := se.EnsureSchema(ctx, s.EffectSchema); err != nil {
				return fmt.Errorf("step %s: %w", n, err)
			}
		}
	}
	if !tables {
		return nil
	}
	return se.EnsureSchema(ctx, ledgerDDL)
}

// runState is how a run that returned err ended (semconv.AttrWorkflowState).
func runState(err error) string {
	var sus *SuspendedError
	var den *DeniedError
	var crash *CrashError
	switch {
	case err == nil:
		return semconv.WorkflowCompleted
	case errors.As(err, &sus):
		return semconv.WorkflowSuspended
	case errors.As(err, &den):
		return semconv.WorkflowDenied
	case errors.As(err, &crash):
		return semconv.WorkflowCrashed
	}
	return semconv.WorkflowFailed
}

const ledgerDDL = `CREATE TABLE IF NOT EXISTS workflow_ledger (
  run_id TEXT NOT NULL,
  key    TEXT NOT NULL,
  step   TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID`

// state is a run folded from its journal.
type state struct {
	graphHash string
	results   map[string]json.RawMessage
	ledger    map[string]json.RawMessage
	events    []StepEvent
	// per step: the highest attempt started, failures, whether the last
	// started attempt has an outcome, whether approval_required was
	// journaled
	lastAttempt map[string]int
	failures    map[string]int
	open        map[string]bool
	asked       map[string]bool
	approvals   map[string]*Approval
}

func fold(runID string, evs []journal.Event) (*state, error) {
	st := &state{results: map[string]json.RawMessage{}, ledger: map[string]json.RawMessage{},
		lastAttempt: map[string]int{}, failures: map[string]int{}, open: map[string]bool{},
		asked: map[string]bool{}, approvals: map[string]*Approval{}}
	for _, e := range evs {
		switch e.Kind {
		case journal.KindWorkflowStarted:
			st.graphHash = e.ArgsHash
		case journal.KindApproval:
			var a Approval
			if err := json.Unmarshal(e.Payload, &a); err != nil {
				return nil, fmt.Errorf("run %s seq %d: decode approval: %w", runID, e.Seq, err)
			}
			if st.approvals[a.Step] == nil { // the first answer stands
				st.approvals[a.Step] = &a
			}
		case journal.KindStep:
			var se StepEvent
			if err := json.Unmarshal(e.Payload, &se); err != nil {
				return nil, fmt.Errorf("run %s seq %d: decode step event: %w", runID, e.Seq, err)
			}
			st.apply(se)
		}
	}
	return st, nil
}

func (st *state) apply(se StepEvent) {
	st.events = append(st.events, se)
	switch se.Event {
	case StatusStarted:
		st.lastAttempt[se.Step] = se.Attempt
		st.open[se.Step] = true
	case StatusFailed:
		st.failures[se.Step]++
		st.open[se.Step] = false
	case StatusInterrupted:
		st.open[se.Step] = false
	case StatusSucceeded:
		st.open[se.Step] = false
		st.results[se.Step] = se.Result
		if se.Key != "" {
			st.ledger[se.Key] = se.Result
		}
	case StatusApprovalRequired:
		st.asked[se.Step] = true
	}
}

type run struct {
	rn    *Runner
	w     *Workflow
	runID string
	st    *state
}

func (r *run) emit(ctx context.Context, se StepEvent) error {
	h, err := journal.HashValue(se)
	if err != nil {
		return err
	}
	if _, err := r.rn.cfg.Journal.Append(ctx, r.runID, journal.Record{Kind: journal.KindStep, Tool: se.Step, ArgsHash: h, Payload: se}); err != nil {
		return fmt.Errorf("run %s: step %s: %w", r.runID, se.Step, err)
	}
	r.st.apply(se)
	return nil
}

// stepSpan starts the workflow_step span of one attempt of s (0: a replay
// or an approval gate's decision).
func (r *run) stepSpan(ctx context.Context, s *Step, attempt int) (context.Context, trace.Span) {
	return r.rn.tracer.Start(ctx, semconv.OpWorkflowStep+" "+s.Name, trace.WithTimestamp(r.rn.cfg.Clock()),
		trace.WithAttributes(attribute.String(semconv.AttrWorkflowStep, s.Name),
			attribute.String(semconv.AttrWorkflowStepKind, string(s.Kind)),
			attribute.Int(semconv.AttrWorkflowAttempt, attempt),
			attribute.Int(semconv.AttrWorkflowStepRetries, s.Retries)))
}

// endStep ends a step span in state; err (a failed attempt) is its status.
func (r *run) endStep(span trace.Span, state string, err error) {
	span.SetAttributes(attribute.String(semconv.AttrWorkflowStepState, state))
	if err != nil && state != semconv.WorkflowSuspended {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(r.rn.cfg.Clock()))
}

// traceID is the hex trace id of span ("" when spans are not recorded).
func traceID(span trace.Span) string {
	if sc := span.SpanContext(); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

// replay journals s as replayed with its recorded result, under a span.
func (r *run) replay(ctx context.Context, s *Step, res json.RawMessage) error {
	_, span := r.stepSpan(ctx, s, 0)
	err := r.emit(ctx, StepEvent{Step: s.Name, Kind: s.Kind, Event: StatusReplayed, Attempt: 0, Key: s.Key, Result: res, TraceID: traceID(span)})
	r.endStep(span, semconv.WorkflowStepReplayed, err)
	return err
}

func (r *run) walk(ctx context.Context, opt RunOptions) error {
	gate := r.rn.cfg.Gate
	if gate == nil {
		gate = JournalGate{}
	}
	// Replay: every step with a recorded result is walked over first, in
	// order, reusing the result.
	var todo []string
	for _, n := range r.w.order {
		s := r.w.steps[n]
		if res, ok := r.st.results[n]; ok {
			if err := r.replay(ctx, s, res); err != nil {
				return err
			}
			continue
		}
		todo = append(todo, n)
	}
	for _, n := range todo {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("run %s: step %s: %w", r.runID, n, err)
		}
		s := r.w.steps[n]
		in := Input{RunID: r.runID, Step: n, Key: s.Key, Results: r.st.results}
		if s.Key != "" {
			if res, ok := r.st.ledger[s.Key]; ok {
				// The key has a result (recorded under this step before
				// it was renamed, or by a replayed path): never again.
				if err := r.replay(ctx, s, res); err != nil {
					return err
				}
				r.st.results[n] = res
				continue
			}
		}
		if s.Kind == KindApproval {
			a, err := r.gate(ctx, gate, s, in)
			if err != nil {
				return err
			}
			in.Approval = a
		}
		if err := r.execute(ctx, s, in); err != nil {
			return err
		}
		if opt.CrashAfter == n {
			return &CrashError{Step: n}
		}
	}
	return nil
}

// gate is the approval of s under a span (attempt 0) whose state is the
// answer: approved, denied, or suspended while there is none.
func (r *run) gate(ctx context.Context, gate Gate, s *Step, in Input) (*Approval, error) {
	ctx, span := r.stepSpan(ctx, s, 0)
	a, err := r.approval(ctx, gate, s, in, traceID(span))
	var sus *SuspendedError
	var den *DeniedError
	switch {
	case err == nil:
		r.endStep(span, semconv.WorkflowStepApproved, nil)
	case errors.As(err, &sus):
		r.endStep(span, semconv.WorkflowSuspended, err)
	case errors.As(err, &den):
		r.endStep(span, semconv.WorkflowDenied, err)
	default:
		r.endStep(span, semconv.WorkflowFailed, err)
	}
	return a, err
}

// approval consults the journal first (an answer recorded by `loom-eval
// approve`/`deny`), then the gate. No answer: the run suspends.
func (r *run) approval(ctx context.Context, gate Gate, s *Step, in Input, trace string) (*Approval, error) {
	if !r.st.asked[s.Name] {
		prompt := ""
		if s.Prompt != nil {
			p, err := s.Prompt(in)
			if err != nil {
				return nil, fmt.Errorf("run %s: step %s: prompt: %w", r.runID, s.Name, err)
			}
			prompt = p
		}
		if err := r.emit(ctx, StepEvent{Step: s.Name, Kind: s.Kind, Event: StatusApprovalRequired, Prompt: prompt, TraceID: trace}); err != nil {
			return nil, err
		}
	}
	a := r.st.approvals[s.Name]
	if a == nil {
		var err error
		if a, err = gate.Decide(ctx, r.runID, s.Name, r.st.results); err != nil {
			return nil, fmt.Errorf("run %s: step %s: approval gate: %w", r.runID, s.Name, err)
		}
		if a != nil {
			a.Step = s.Name
			if a.Time.IsZero() {
				a.Time = r.rn.cfg.Clock().UTC()
			}
			if _, err := r.rn.cfg.Journal.Append(ctx, r.runID, journal.Record{Kind: journal.KindApproval, Tool: s.Name, Payload: a}); err != nil {
				return nil, fmt.Errorf("run %s: step %s: %w", r.runID, s.Name, err)
			}
			r.st.approvals[s.Name] = a
		}
	}
	if a == nil {
		return nil, &SuspendedError{RunID: r.runID, Step: s.Name}
	}
	if !a.Approved {
		if err := r.emit(ctx, StepEvent{Step: s.Name, Kind: s.Kind, Event: StatusDenied, Approver: a.Approver, Reason: a.Reason}); err != nil {
			return nil, err
		}
		return nil, &DeniedError{RunID: r.runID, Step: s.Name, Approver: a.Approver, Reason: a.Reason}
	}
	return a, nil
}

func (r *run) execute(ctx context.Context, s *Step, in Input) error {
	// An attempt started by a process that died has no outcome: it is
	// marked interrupted and run again under the same attempt number (the
	// crash is not the step's failure, so it does not use a retry).
	attempt := r.st.lastAttempt[s.Name]
	if r.st.failures[s.Name] > s.Retries {
		// A step that used its retries in an earlier process stays failed.
		return &StepError{RunID: r.runID, Step: s.Name, Attempts: attempt, Err: errors.New("retries exhausted in an earlier run")}
	}
	if r.st.open[s.Name] {
		if err := r.emit(ctx, StepEvent{Step: s.Name, Kind: s.Kind, Event: StatusInterrupted, Attempt: attempt, Key: s.Key}); err != nil {
			return err
		}
	} else {
		attempt++
	}
	for {
		in.Attempt = attempt
		err := r.attempt(ctx, s, in)
		if err == nil {
			return nil
		}
		var held *runtime.SuspendedError
		if errors.As(err, &held) {
			// An agent step's policy held a call for a human: the run
			// suspends, not fails; resuming reruns this attempt, whose
			// agent run resumes from its own journal.
			return &SuspendedError{RunID: r.runID, Step: s.Name, AgentRun: held.RunID, Call: held.CallID}
		}
		var journalErr *journalError
		if errors.As(err, &journalErr) {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("run %s: step %s: %w", r.runID, s.Name, cerr)
		}
		if ferr := r.emit(ctx, StepEvent{Step: s.Name, Kind: s.Kind, Event: StatusFailed, Attempt: attempt, Key: s.Key, Error: err.Error()}); ferr != nil {
			return ferr
		}
		if r.st.failures[s.Name] > s.Retries {
			return &StepError{RunID: r.runID, Step: s.Name, Attempts: attempt, Err: err}
		}
		if rerr := r.emit(ctx, StepEvent{Step: s.Name, Kind: s.Kind, Event: StatusRetried, Attempt: attempt, Key: s.Key}); rerr != nil {
			return rerr
		}
		if d := backoff(s.Backoff, r.st.failures[s.Name]); d > 0 {
			if serr := r.rn.cfg.Sleep(ctx, d); serr != nil {
				return fmt.Errorf("run %s: step %s: backoff before attempt %d: %w", r.runID, s.Name, attempt+1, serr)
			}
		}
		attempt++
	}
}

// maxBackoff caps the doubled backoff.
const maxBackoff = 10 * time.Minute

// backoff is the wait before the retry that follows the nth failure: base,
// doubled for each earlier failure, at most maxBackoff.
func backoff(base time.Duration, failures int) time.Duration {
	d := base
	for i := 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// journalError is a failure to journal the started event: the step did
// not run, and it is not the step's failure.
type journalError struct{ err error }

func (e *journalError) Error() string { return e.err.Error() }
func (e *journalError) Unwrap() error { return e.err }

// attempt runs the action once, under its span and Step.Timeout, and
// journals its start and success.
func (r *run) attempt(ctx context.Context, s *Step, in Input) (err error) {
	ctx, span := r.stepSpan(ctx, s, in.Attempt)
	defer func() {
		var held *runtime.SuspendedError
		switch {
		case err == nil:
			r.endStep(span, semconv.WorkflowStepSucceeded, nil)
		case errors.As(err, &held):
			r.endStep(span, semconv.WorkflowSuspended, err)
		default:
			r.endStep(span, semconv.WorkflowFailed, err)
		}
	}()
	if err := r.emit(ctx, StepEvent{Step: s.Name, Kind: s.Kind, Event: StatusStarted, Attempt: in.Attempt, Key: s.Key, TraceID: traceID(span)}); err != nil {
		return &journalError{err}
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	defer func() {
		if err != nil && s.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("attempt timed out after %s: %w", s.Timeout, err)
		}
	}()
	succeeded := func(v any) (StepEvent, journal.Record, error) {
		raw, err := json.Marshal(v)
		if err != nil {
			return StepEvent{}, journal.Record{}, fmt.Errorf("step %s: result is not JSON-encodable: %w", s.Name, err)
		}
		se := StepEvent{Step: s.Name, Kind: s.Kind, Event: StatusSucceeded, Attempt: in.Attempt, Key: s.Key, Result: raw}
		h, err := journal.HashValue(se)
		if err != nil {
			return StepEvent{}, journal.Record{}, err
		}
		return se, journal.Record{Kind: journal.KindStep, Tool: s.Name, ArgsHash: h, Payload: se}, nil
	}
	if s.Key == "" {
		v, err := safeAction(ctx, s, in)
		if err != nil {
			return err
		}
		se, rec, err := succeeded(v)
		if err != nil {
			return err
		}
		if _, err := r.rn.cfg.Journal.Append(ctx, r.runID, rec); err != nil {
			return fmt.Errorf("run %s: step %s: %w", r.runID, s.Name, err)
		}
		r.st.apply(se)
		return nil
	}
	var (
		se  StepEvent
		ran bool
	)
	evs, err := r.rn.cfg.Journal.AppendEffect(ctx, r.runID, journal.EffectCall{Tool: s.Name, Key: r.runID + "/" + s.Key},
		func(ctx context.Context, tx journal.EffectTx) (journal.Record, error) {
			ran = true
			in.Tx, _ = tx.(journal.SQLTx) // nil on a journal without tables
			v, err := safeAction(ctx, s, in)
			if err != nil {
				return journal.Record{}, err
			}
			// The ledger row: the data itself proves the key ran once.
			if in.Tx != nil {
				if err := in.Tx.Exec(ctx, `INSERT INTO workflow_ledger(run_id, key, step) VALUES (?,?,?)`, r.runID, s.Key, s.Name); err != nil {
					return journal.Record{}, fmt.Errorf("step %s: ledger key %s: %w", s.Name, s.Key, err)
				}
			}
			var rec journal.Record
			se, rec, err = succeeded(v)
			return rec, err
		})
	if err != nil {
		return err
	}
	if !ran {
		// The journal had the key's success already: it stands.
		if se, err = recordedSuccess(r.runID, s.Name, evs); err != nil {
			return err
		}
	}
	r.st.apply(se)
	return nil
}

// recordedSuccess is the succeeded event among the events AppendEffect
// returned for a key it had completed before (the last of them).
func recordedSuccess(runID, step string, evs []journal.Event) (StepEvent, error) {
	var se StepEvent
	if len(evs) == 0 || evs[len(evs)-1].Kind != journal.KindStep {
		return se, fmt.Errorf("run %s: step %s: the journal answered a completed key without its step event", runID, step)
	}
	e := evs[len(evs)-1]
	if err := json.Unmarshal(e.Payload, &se); err != nil {
		return se, fmt.Errorf("run %s seq %d: decode step event: %w", runID, e.Seq, err)
	}
	return se, nil
}

func safeAction(ctx context.Context, s *Step, in Input) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("step %s panicked: %v", s.Name, p)
		}
	}()
	return s.Action(ctx, in)
}

// JournalGate is the durable gate: it never answers by itself, so an
// approval step suspends until Record journals an answer.
type JournalGate struct{}

// Decide implements Gate.
func (JournalGate) Decide(context.Context, string, string, map[string]json.RawMessage) (*Approval, error) {
	return nil, nil
}

// Record journals a human's answer to run's approval step. The run must be
// suspended at that step (approval_required journaled, no answer yet).
func Record(ctx context.Context, j journal.Journal, runID, step string, a Approval) error {
	if a.Approver == "" {
		return errors.New("record approval: approver must be set")
	}
	evs, err := j.Events(ctx, runID)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return fmt.Errorf("record approval: run %s not found", runID)
	}
	st, err := fold(runID, evs)
	if err != nil {
		return err
	}
	if !st.asked[step] {
		return fmt.Errorf("record approval: run %s has no approval pending at step %q (pending: %s)", runID, step, strings.Join(st.pending(), ", "))
	}
	if prev := st.approvals[step]; prev != nil {
		verb := "approved"
		if !prev.Approved {
			verb = "denied"
		}
		return fmt.Errorf("record approval: run %s step %s was already %s by %s", runID, step, verb, prev.Approver)
	}
	a.Step = step
	_, err = j.Append(ctx, runID, journal.Record{Kind: journal.KindApproval, Tool: step, Payload: a})
	return err
}

func (st *state) pending() []string {
	var out []string
	for s := range st.asked {
		if st.approvals[s] == nil {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// Pending is an approval a run is suspended on.
type Pending struct {
	RunID, Workflow, Step string
}

// Status reads a run's step events and pending approvals from the journal.
func Status(ctx context.Context, j journal.Journal, runID string) (events []StepEvent, approvals []Approval, pending []string, err error) {
	evs, err := j.Events(ctx, runID)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(evs) == 0 {
		return nil, nil, nil, fmt.Errorf("run %s not found", runID)
	}
	st, err := fold(runID, evs)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, e := range evs {
		if e.Kind == journal.KindApproval {
			var a Approval
			if json.Unmarshal(e.Payload, &a) == nil {
				approvals = append(approvals, a)
			}
		}
	}
	for s := range st.asked {
		if st.approvals[s] == nil {
			pending = append(pending, s)
		}
	}
	sort.Strings(pending)
	return st.events, approvals, pending, nil
}

// RunLister is a journal that can list its runs (journaldb's and
// memjournal's can).
type RunLister interface {
	journal.Journal
	Runs(ctx context.Context) ([]string, error)
}

// PendingApproval is a run suspended at an approval step.
type PendingApproval struct {
	RunID, Workflow, Step string
	Since                 time.Time // when approval_required was journaled
	// Prompt is what the step asks the human (its approval_required
	// event's prompt; "" for a step without one).
	Prompt string
}

// PendingApprovals lists every run of the journal suspended at an approval
// step with no answer yet, in run order. It reads every run's events: a
// page for a journal of many thousands of runs would want an index.
func PendingApprovals(ctx context.Context, j RunLister) ([]PendingApproval, error) {
	runs, err := j.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var out []PendingApproval
	for _, id := range runs {
		evs, err := j.Events(ctx, id)
		if err != nil {
			return nil, err
		}
		name := ""
		asked := map[string]time.Time{}
		prompts := map[string]string{}
		var order []string
		answered := map[string]bool{}
		for _, e := range evs {
			switch e.Kind {
			case journal.KindWorkflowStarted:
				var s Started
				if json.Unmarshal(e.Payload, &s) == nil {
					name = s.Workflow
				}
			case journal.KindStep:
				var se StepEvent
				if json.Unmarshal(e.Payload, &se) == nil && se.Event == StatusApprovalRequired {
					if _, ok := asked[se.Step]; !ok {
						order = append(order, se.Step)
					}
					asked[se.Step] = e.Time
					if se.Prompt != "" {
						prompts[se.Step] = se.Prompt
					}
				}
			case journal.KindApproval:
				var a Approval
				if json.Unmarshal(e.Payload, &a) == nil {
					answered[a.Step] = true
				}
			}
		}
		for _, s := range order {
			if !answered[s] {
				out = append(out, PendingApproval{RunID: id, Workflow: name, Step: s, Since: asked[s], Prompt: prompts[s]})
			}
		}
	}
	return out, nil
}
