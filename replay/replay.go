package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/journal/memjournal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runtime"
)

// Config configures an Engine.
type Config struct {
	// Registry resolves a journal's recorded agent name to the agent whose
	// tools are re-executed. Required.
	Registry *runtime.Registry
	// TracerProvider receives the replayed runs' spans. Default: none.
	TracerProvider trace.TracerProvider
	// WorkDir holds the scratch databases re-executed effects are applied
	// to: one per run of an agent with a tool that keeps tables in the
	// journal (runtime.Tool.EffectSchema). Other runs replay into an
	// in-memory journal (memjournal) and need no file. Default: a new
	// temporary directory per run.
	WorkDir string
	// KeepDatabases keeps the scratch databases (journal.ReplayReport.Database names
	// each) instead of deleting them after the run.
	KeepDatabases bool
	// Clock stamps the scratch journal and the spans. Default time.Now.
	Clock func() time.Time
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
	// Authorizer re-decides every tool call (package agents/policy's
	// Guard): a journal recorded under a policy carries its decisions, and
	// the replay must make the same ones. nil: each run is re-decided under
	// the policy its run_started records (journal.RunStarted.Policy), or
	// not at all when it records none (a journal recorded without a policy,
	// or before policies were recorded) — see NoRecordedPolicy.
	Authorizer runtime.Authorizer
	// NoRecordedPolicy, with no Authorizer, replays every run without
	// authorization even when its journal records a policy: its journaled
	// decisions then diverge at the first one (how to see that a journal's
	// decisions depend on its policy).
	NoRecordedPolicy bool
	// CaptureContent says which replayed runs record message content on
	// their chat spans (runtime.Config.CaptureContent). Default
	// CaptureNone.
	CaptureContent Capture

	_ struct{}
}

// Capture says which replayed runs record message content.
type Capture int

// The capture settings.
const (
	// CaptureNone records no content.
	CaptureNone Capture = iota
	// CaptureScripted records the content of runs whose recorded model
	// answers are scripted (a live run's content stays off unless asked).
	CaptureScripted
	// CaptureAll records every run's content.
	CaptureAll
)

// captures reports whether a run whose answers carry label records content.
func (c Capture) captures(label string) bool {
	return c == CaptureAll || c == CaptureScripted && label == llm.LabelScripted
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Registry == nil {
		errs = append(errs, errors.New("registry must be set"))
	}
	if c.CaptureContent < CaptureNone || c.CaptureContent > CaptureAll {
		errs = append(errs, fmt.Errorf("capture_content: %d is not none, scripted or all", c.CaptureContent))
	}
	return errors.Join(errs...)
}

// Engine replays journals.
type Engine struct {
	cfg Config
	mu  sync.Mutex
	n   int
}

// New returns an Engine. It does no I/O.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("replay config: %w", err)
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
	return &Engine{cfg: cfg}, nil
}

// ReplayFile reads, verifies and replays every run in a JSONL journal. A
// corrupt journal is rejected before anything runs (*journal.CorruptionError).
func (e *Engine) ReplayFile(ctx context.Context, path string) ([]journal.ReplayReport, error) {
	runs, err := journal.ReadJSONLFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]journal.ReplayReport, 0, len(runs))
	for _, r := range runs {
		rep, err := e.Replay(ctx, r)
		if err != nil {
			return out, err
		}
		out = append(out, rep)
	}
	return out, nil
}

// errRecordedEnd stops a replay that has reached the end of an incomplete
// journal.
var errRecordedEnd = errors.New("end of the recorded journal")

// Replay re-runs one recorded run. Divergences and differing results are in
// the report; the error is for what kept the replay from running (an
// unregistered agent, a journal that does not start with run_started, I/O).
func (e *Engine) Replay(ctx context.Context, run journal.Run) (journal.ReplayReport, error) {
	rep, started, err := header(run)
	if err != nil {
		return journal.ReplayReport{}, err
	}
	agent, ok := e.cfg.Registry.Agent(started.Agent)
	if !ok {
		return rep, fmt.Errorf("replay run %s: agent %q is not registered (registered: %s)", run.ID, started.Agent, e.cfg.Registry)
	}
	scratch, closeScratch, err := e.scratch(ctx, run.ID, agent, &rep)
	if err != nil {
		return rep, fmt.Errorf("replay run %s: %w", run.ID, err)
	}
	defer closeScratch()

	chk := &checker{Journal: scratch, run: run, rep: &rep, complete: rep.Complete}
	var j journal.Journal = chk
	if se, ok := scratch.(journal.SchemaEnsurer); ok {
		j = tablesChecker{chk, se}
	}
	model := &recordedModel{run: run, label: rep.Label}
	az, err := e.authorizer(run.ID, started, &rep)
	if err != nil {
		return rep, err
	}
	rt, err := runtime.New(runtime.Config{Model: model, Journal: j, TracerProvider: e.cfg.TracerProvider, Clock: e.cfg.Clock, Logger: e.cfg.Logger, Authorizer: az,
		CaptureContent: e.cfg.CaptureContent.captures(rep.Label)})
	if err != nil {
		return rep, err
	}
	// ReplayTask also restores what run_started recorded beyond these
	// fields: the task's tool attributes and the context-layer spec (and
	// any model-made summaries), so the replay compacts as the run did.
	task, err := runtime.ReplayTask(run)
	if err != nil {
		return rep, err
	}
	res, runErr := rt.Run(ctx, agent, task)
	rep.ModelCalls = model.live
	rep.ToolRuns = res.ToolRuns
	var de *journal.DivergenceError
	switch {
	case runErr == nil:
		if chk.matched < len(run.Events) {
			ref := journal.RefOf(run.Events[chk.matched])
			chk.diverge(&journal.DivergenceError{Code: journal.CodeMissing, RunID: run.ID, Seq: run.Events[chk.matched].Seq, Recorded: &ref})
		}
		rep.Answer, rep.Citations, rep.Documents = res.Answer, res.Citations, res.Documents
		rep.Steps, rep.StepLimitReached, rep.Usage = res.Steps, res.StepLimitReached, res.Usage
	case errors.Is(runErr, errRecordedEnd) && !rep.Complete:
		// An incomplete journal replayed to its end: fine.
	case errors.As(runErr, new(*runtime.SuspendedError)) && !rep.Complete:
		// A run suspended at a held call, replayed to its request: fine.
	case errors.As(runErr, &de):
		chk.diverge(de)
	case errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded):
		return rep, runErr
	default:
		if rep.Divergence == nil {
			return rep, fmt.Errorf("replay run %s: %w", run.ID, runErr)
		}
	}
	rep.MatchedEvents = chk.matched
	if rep.Divergence != nil {
		rep.DivergeLine = run.LineOf(rep.Divergence.Seq)
	}
	rep.TraceID = res.TraceID
	rep.ToolsCalled = rescore(run).ToolsCalled
	return rep, nil
}

// scratch returns the journal a replayed run writes, and what closes it. A
// replay re-executes the tools, so an agent whose tools keep tables in the
// journal (runtime.Tool.EffectSchema: their effects are SQL statements,
// journaled and compared) replays into a scratch SQLite database of its
// own, as it was recorded; every other agent replays into memory.
func (e *Engine) scratch(ctx context.Context, runID string, agent runtime.Agent, rep *journal.ReplayReport) (journal.Journal, func(), error) {
	if !keepsTables(agent) {
		return memjournal.New(memjournal.Config{Clock: e.cfg.Clock}), func() {}, nil
	}
	dir, tmp := e.cfg.WorkDir, false
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "loomwork-replay-"); err != nil {
			return nil, nil, err
		}
		tmp = true
	}
	e.mu.Lock()
	e.n++
	dbPath := filepath.Join(dir, fmt.Sprintf("replay-%d-%s.db", e.n, safeName(runID)))
	e.mu.Unlock()
	remove := func() {
		if e.cfg.KeepDatabases {
			return
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(dbPath + suffix)
		}
		if tmp {
			os.RemoveAll(dir)
		}
	}
	db, err := journaldb.Open(ctx, journaldb.Config{Path: dbPath, Clock: e.cfg.Clock, Logger: e.cfg.Logger})
	if err != nil {
		remove()
		return nil, nil, err
	}
	if e.cfg.KeepDatabases {
		rep.Database = dbPath
	}
	return db, func() { db.Shutdown(ctx); remove() }, nil
}

// keepsTables reports whether one of agent's tools keeps tables in the
// journal.
func keepsTables(agent runtime.Agent) bool {
	return slices.ContainsFunc(agent.Tools, func(t runtime.Tool) bool { return t.EffectSchema != "" })
}

// authorizer is what re-decides run's tool calls: the configured
// Authorizer, else the guard of the policy run_started records (none when
// it records none, or with NoRecordedPolicy); rep.Policy says which.
func (e *Engine) authorizer(runID string, started journal.RunStarted, rep *journal.ReplayReport) (runtime.Authorizer, error) {
	switch {
	case e.cfg.Authorizer != nil:
		rep.Policy = "given"
		return e.cfg.Authorizer, nil
	case started.Policy == nil || e.cfg.NoRecordedPolicy:
		return nil, nil
	}
	g, err := policy.RecordedGuard(*started.Policy, policy.GuardConfig{TracerProvider: e.cfg.TracerProvider, Clock: e.cfg.Clock})
	if err != nil {
		return nil, fmt.Errorf("replay run %s: run_started's policy: %w", runID, err)
	}
	rep.Policy = strings.TrimSpace("recorded " + started.Policy.Name)
	return g, nil
}

// Rescore builds the report of a run from its recorded events alone:
// nothing is executed and no model is involved.
func Rescore(run journal.Run) (journal.ReplayReport, error) {
	rep, _, err := header(run)
	if err != nil {
		return journal.ReplayReport{}, err
	}
	r := rescore(run)
	r.File, r.RunID, r.Agent, r.CaseID, r.Trial, r.Label, r.Model = rep.File, rep.RunID, rep.Agent, rep.CaseID, rep.Trial, rep.Label, rep.Model
	r.RecordedEvents, r.Complete, r.DurationMS = rep.RecordedEvents, rep.Complete, rep.DurationMS
	r.Rescored = true
	r.MatchedEvents = len(run.Events)
	return r, nil
}

func rescore(run journal.Run) journal.ReplayReport {
	var r journal.ReplayReport
	seenTool, seenDoc := map[string]bool{}, map[string]bool{}
	for _, e := range run.Events {
		switch e.Kind {
		case journal.KindToolCall:
			if !seenTool[e.Tool] {
				seenTool[e.Tool] = true
				r.ToolsCalled = append(r.ToolsCalled, e.Tool)
			}
		case journal.KindToolResult:
			var tr journal.ToolResult
			if json.Unmarshal(e.Payload, &tr) == nil {
				for _, d := range tr.Documents {
					if !seenDoc[d] {
						seenDoc[d] = true
						r.Documents = append(r.Documents, d)
					}
				}
			}
		case journal.KindModelResponse:
			var resp llm.Response
			if json.Unmarshal(e.Payload, &resp) == nil {
				r.Usage = r.Usage.Add(resp.Usage)
			}
		case journal.KindRunFinished:
			var fin journal.RunFinished
			if json.Unmarshal(e.Payload, &fin) == nil {
				r.Answer, r.Citations, r.Steps, r.StepLimitReached = fin.Answer, fin.Citations, fin.Steps, fin.StepLimitReached
			}
		}
	}
	return r
}

// header reads the run_started event and the facts every report carries.
func header(run journal.Run) (journal.ReplayReport, journal.RunStarted, error) {
	rep := journal.ReplayReport{File: run.File, RunID: run.ID, RecordedEvents: len(run.Events)}
	if len(run.Events) == 0 || run.Events[0].Kind != journal.KindRunStarted {
		return rep, journal.RunStarted{}, fmt.Errorf("replay run %s: the journal does not start with run_started", run.ID)
	}
	var started journal.RunStarted
	if err := json.Unmarshal(run.Events[0].Payload, &started); err != nil {
		return rep, started, fmt.Errorf("replay run %s: line %d: decode run_started: %w", run.ID, run.LineOf(1), err)
	}
	rep.Agent, rep.CaseID, rep.Trial = started.Agent, started.CaseID, started.Trial
	for _, e := range run.Events {
		switch e.Kind {
		case journal.KindModelResponse:
			var resp llm.Response
			if json.Unmarshal(e.Payload, &resp) == nil {
				if rep.Model == "" {
					rep.Model = resp.Model
				}
				if rep.Label == "" || resp.Label == llm.LabelScripted {
					rep.Label = resp.Label
				}
			}
		case journal.KindRunFinished:
			rep.Complete = true
			rep.DurationMS = float64(e.Time.Sub(run.Events[0].Time).Microseconds()) / 1000
		}
	}
	return rep, started, nil
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}

// recordedModel answers each step with the journal's recorded response for
// that step. It never calls a model.
type recordedModel struct {
	run   journal.Run
	label string
	live  int // calls to a real model: none, ever
}

func (m *recordedModel) Label() string { return m.label }

func (m *recordedModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	// The runtime says which step this is; counting assistant messages is
	// the fallback, and is wrong once the context layer has summarised
	// earlier turns away.
	step, ok := runtime.StepFromContext(ctx)
	if !ok {
		step = 1
		for _, msg := range req.Messages {
			if msg.Role == llm.RoleAssistant {
				step++
			}
		}
	}
	seen := 0
	for _, e := range m.run.Events {
		if e.Kind != journal.KindModelResponse {
			continue
		}
		seen++
		if e.Step == step {
			var resp llm.Response
			if err := json.Unmarshal(e.Payload, &resp); err != nil {
				return llm.Response{}, fmt.Errorf("line %d: decode recorded model response: %w", m.run.LineOf(e.Seq), err)
			}
			return resp, nil
		}
	}
	return llm.Response{}, fmt.Errorf("%w: no recorded model response for step %d (%d recorded)", errRecordedEnd, step, seen)
}

// checker is the scratch journal, checking every appended event against
// the recorded one with the same sequence number.
type checker struct {
	journal.Journal
	run      journal.Run
	rep      *journal.ReplayReport
	complete bool
	matched  int
	// resultsDiffer is set once a re-executed tool returned a different
	// result: from then on the conversation legitimately differs from the
	// recorded one, so model requests are compared by kind and step only.
	resultsDiffer bool
}

func (c *checker) diverge(de *journal.DivergenceError) {
	if c.rep.Divergence == nil {
		c.rep.Divergence = de
	}
}

func (c *checker) Append(ctx context.Context, runID string, recs ...journal.Record) ([]journal.Event, error) {
	evs, err := c.Journal.Append(ctx, runID, recs...)
	if err != nil {
		return nil, err
	}
	return evs, c.check(evs)
}

func (c *checker) AppendEffect(ctx context.Context, runID string, call journal.EffectCall, fn journal.EffectFunc) ([]journal.Event, error) {
	evs, err := c.Journal.AppendEffect(ctx, runID, call, fn)
	if err != nil {
		return nil, err
	}
	return evs, c.check(evs)
}

// tablesChecker is a checker whose scratch journal has tables (a scratch
// database): the runtime creates the agent's tables through it.
type tablesChecker struct {
	*checker
	journal.SchemaEnsurer
}

func (c *checker) check(evs []journal.Event) error {
	for _, got := range evs {
		idx := int(got.Seq) - 1
		if idx >= len(c.run.Events) {
			if !c.complete {
				return errRecordedEnd
			}
			ref := journal.RefOf(got)
			de := &journal.DivergenceError{Code: journal.CodeExtra, RunID: c.run.ID, Seq: got.Seq, Produced: &ref}
			c.diverge(de)
			return de
		}
		want := c.run.Events[idx]
		wr, gr := journal.RefOf(want), journal.RefOf(got)
		if got.Kind == journal.KindModelRequest && c.resultsDiffer {
			gr.ArgsHash, wr.ArgsHash = "", ""
		}
		if got.Kind == journal.KindDecision && c.resultsDiffer && sameVerdict(want, got) {
			// A decision's record names the taint's origin, which names
			// the documents the (now different) results returned: the
			// same verdict on the same call is a match. A changed verdict
			// still diverges here.
			gr.ArgsHash, wr.ArgsHash = "", ""
		}
		if f := journal.Compare(wr, gr); f != "" {
			wr, gr = journal.RefOf(want), journal.RefOf(got)
			de := &journal.DivergenceError{Code: journal.CodeMismatch, RunID: c.run.ID, Seq: got.Seq, Field: f, Recorded: &wr, Produced: &gr}
			if f == "args_hash" && got.Kind == journal.KindModelRequest {
				de.Detail = "the run built a different conversation although every earlier tool result matched"
			}
			c.diverge(de)
			return de
		}
		if got.Kind == journal.KindToolResult {
			if de := c.compareResult(want, got); de != nil {
				c.diverge(de)
				return de
			}
		}
		c.matched++
	}
	return nil
}

// sameVerdict reports whether two policy_decision events decided the same
// (allow, deny or require_approval) on the same tool, whatever their
// reasons and taint origins say.
func sameVerdict(a, b journal.Event) bool {
	var x, y policy.DecisionRecord
	if json.Unmarshal(a.Payload, &x) != nil || json.Unmarshal(b.Payload, &y) != nil {
		return false
	}
	return x.Tool == y.Tool && x.CallID == y.CallID && x.Writes == y.Writes && x.Verdict.Decision == y.Verdict.Decision
}

// compareResult reports a re-executed tool's result that differs from the
// recorded one (a ResultDiff, not a divergence of control flow). A result
// that does not decode, recorded or produced, cannot be compared: that is
// a divergence, never a match.
func (c *checker) compareResult(want, got journal.Event) *journal.DivergenceError {
	var w, g journal.ToolResult
	for _, side := range []struct {
		name string
		e    journal.Event
		into *journal.ToolResult
	}{{"recorded", want, &w}, {"produced", got, &g}} {
		if err := json.Unmarshal(side.e.Payload, side.into); err != nil {
			wr, gr := journal.RefOf(want), journal.RefOf(got)
			return &journal.DivergenceError{Code: journal.CodeMismatch, RunID: c.run.ID, Seq: got.Seq, Field: "payload",
				Recorded: &wr, Produced: &gr, Detail: fmt.Sprintf("the %s tool_result of %s does not decode: %v", side.name, got.Tool, err)}
		}
	}
	if w.Content == g.Content && w.IsError == g.IsError && slices.Equal(w.Documents, g.Documents) &&
		slices.EqualFunc(w.Events, g.Events, func(a, b journal.ToolEvent) bool { return a.Name == b.Name && maps.Equal(a.Attrs, b.Attrs) }) {
		return nil
	}
	c.resultsDiffer = true
	c.rep.ResultDiffs = append(c.rep.ResultDiffs, journal.ResultDiff{
		Code: journal.CodeResultDiffers, Seq: got.Seq, Line: c.run.LineOf(got.Seq), Step: got.Step, Tool: got.Tool, CallID: got.CallID,
		Recorded: describeResult(w), Replayed: describeResult(g),
	})
	return nil
}

func describeResult(r journal.ToolResult) string {
	s := r.Content
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	if r.IsError {
		s = "(error) " + s
	}
	if len(r.Documents) > 0 {
		s += " [documents: " + strings.Join(r.Documents, ", ") + "]"
	}
	if len(r.Events) > 0 {
		evs := make([]string, len(r.Events))
		for i, e := range r.Events {
			evs[i] = e.String()
		}
		s += " [events: " + strings.Join(evs, "; ") + "]"
	}
	return s
}
