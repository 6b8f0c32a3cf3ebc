package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/store"
)

// Files of an experiment folder.
const (
	RecordFile = "experiment.json"
	TrialsFile = "trials.jsonl"
	ReportFile = "report.json"
	TracesFile = "traces.db"
)

// Config is one experiment run.
type Config struct {
	// Record is the experiment's record as it starts (a new one, or the
	// one read back to resume); the runner updates its status and summary.
	Record *datasets.Experiment
	Dir    string
	Cases  []datasets.Case
	// Trials per case; Concurrency trials at once.
	Trials      int
	Concurrency int
	// Timeout bounds one attempt of a trial (0: none).
	Timeout time.Duration
	// Retries is how many times an infrastructure failure is retried
	// (0: never); Backoff the first wait, doubled each time up to
	// MaxBackoff.
	Retries    int
	Backoff    time.Duration
	MaxBackoff time.Duration
	// ModelLabel, when set, is every trial's label; "" derives it from
	// the agent's spans (scripted when they say so), else live.
	ModelLabel string
	// Agent is the trials' agent name ("" none).
	Agent string
	// Score configures the progress line's pass verdicts (prices, k).
	Score scorer.Config
}

// Validate reports every problem with the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Record == nil {
		errs = append(errs, errors.New("record: missing"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("dir: missing"))
	}
	if len(c.Cases) == 0 {
		errs = append(errs, errors.New("cases: none (the case file is empty)"))
	}
	if c.Trials < 1 {
		errs = append(errs, fmt.Errorf("trials: %d is not positive", c.Trials))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency: %d is not positive", c.Concurrency))
	}
	if c.Timeout < 0 || c.Backoff < 0 || c.MaxBackoff < 0 || c.Retries < 0 {
		errs = append(errs, errors.New("timeout, retries, backoff: must not be negative"))
	}
	switch c.ModelLabel {
	case "", datasets.LabelLive, datasets.LabelScripted, datasets.LabelReplayed:
	default:
		errs = append(errs, fmt.Errorf("model label: %q is not live, scripted or replayed", c.ModelLabel))
	}
	return errors.Join(errs...)
}

// Deps are what the runner uses.
type Deps struct {
	Target  Target
	Traces  *Traces
	Grading grade.Env
	// Progress receives one line per finished trial (nil: none).
	Progress io.Writer
	Now      func() time.Time
	Sleep    func(context.Context, time.Duration) error
	Logger   *slog.Logger
}

// Runner runs an experiment.
type Runner struct {
	cfg  Config
	deps Deps
}

// New validates; it does no I/O.
func New(cfg Config, deps Deps) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Target == nil || deps.Traces == nil {
		return nil, errors.New("experiment: a target and traces are required")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Sleep == nil {
		deps.Sleep = sleepCtx
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Progress == nil {
		deps.Progress = io.Discard
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	return &Runner{cfg: cfg, deps: deps}, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// Run runs every (case, trial) the trials file does not hold yet and
// returns every recorded trial. Infrastructure failures that outlast the
// retries leave their trials unrecorded (Record.Status incomplete); an
// error stops the run (what was recorded stays recorded).
func (r *Runner) Run(ctx context.Context) ([]datasets.Trial, error) {
	rec := r.cfg.Record
	if err := os.MkdirAll(r.cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("experiment folder: %w", err)
	}
	j, have, err := OpenJournal(filepath.Join(r.cfg.Dir, TrialsFile))
	if err != nil {
		return nil, err
	}
	defer j.Close()
	if j.Torn > 0 {
		r.deps.Logger.Warn("cut a torn last line off the trials file (a run was killed while writing it)", "bytes", j.Torn)
	}
	var todo []TrialKey
	cases := map[string]*datasets.Case{}
	for i := range r.cfg.Cases {
		c := &r.cfg.Cases[i]
		cases[c.ID] = c
		for t := 0; t < r.cfg.Trials; t++ {
			if k := (TrialKey{c.ID, t}); !j.Has(k) {
				todo = append(todo, k)
			}
		}
	}
	for _, t := range have {
		if cases[t.CaseID] == nil || t.Trial >= r.cfg.Trials {
			return nil, fmt.Errorf("%s: trial %d of case %q is not in this experiment (%d cases × %d trials)", j.path, t.Trial, t.CaseID, len(cases), r.cfg.Trials)
		}
	}
	rec.Status = datasets.ExperimentRunning
	rec.Summary.Expected = len(r.cfg.Cases) * r.cfg.Trials
	rec.Summary.InfraFailures = 0
	if err := WriteRecord(r.cfg.Dir, rec); err != nil {
		return nil, err
	}
	p := &progress{w: r.deps.Progress, total: rec.Summary.Expected, done: len(have), resumed: len(have), start: r.deps.Now(), now: r.deps.Now}
	for i := range have {
		if r.passed(cases[have[i].CaseID], &have[i]) {
			p.passed++
		}
	}
	if len(have) > 0 {
		fmt.Fprintf(p.w, "resuming %s: %d of %d trials already recorded, %d to run\n", rec.ID, len(have), p.total, len(todo))
	}
	runErr := r.pool(ctx, todo, cases, j, p)
	all, err := r.finish(j, cases, p)
	return all, errors.Join(runErr, err)
}

// pool runs todo on Concurrency workers.
func (r *Runner) pool(ctx context.Context, todo []TrialKey, cases map[string]*datasets.Case, j *Journal, p *progress) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan TrialKey)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < r.cfg.Concurrency; w++ {
		wg.Go(func() {
			for k := range next {
				c := cases[k.CaseID]
				t, err := r.trial(ctx, c, k.Trial)
				var ie *InfraError
				switch {
				case errors.As(err, &ie):
					r.deps.Logger.Error("trial not run: infrastructure failure after retries", "case", k.CaseID, "trial", k.Trial, "error", err)
					p.infra(k, err)
					continue
				case err == nil:
					err = j.Append(t)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel(err)
					continue
				}
				p.record(k, t, r.passed(c, t))
			}
		})
	}
feed:
	for _, k := range todo {
		select {
		case next <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return context.Cause(ctx)
}

// finish rewrites the record with the outcome and returns every trial.
func (r *Runner) finish(j *Journal, cases map[string]*datasets.Case, p *progress) ([]datasets.Trial, error) {
	rec := r.cfg.Record
	all, err := datasets.LoadTrials(j.path)
	if err != nil {
		return nil, err
	}
	rec.Summary.Recorded, rec.Summary.Passed, rec.Summary.AgentFailures = len(all), 0, 0
	for i := range all {
		t := &all[i]
		if r.passed(cases[t.CaseID], t) {
			rec.Summary.Passed++
		}
		if t.Success != nil && !*t.Success {
			rec.Summary.AgentFailures++
		}
		if rec.ModelLabel == "" {
			rec.ModelLabel = t.ModelLabel
		}
	}
	rec.Summary.InfraFailures = p.infraCount()
	rec.Status = datasets.ExperimentIncomplete
	if rec.Summary.Recorded == rec.Summary.Expected {
		rec.Status = datasets.ExperimentComplete
	}
	rec.Finished = r.deps.Now().UTC()
	return all, WriteRecord(r.cfg.Dir, rec)
}

// passed is the progress line's verdict: the trial as scored alone.
func (r *Runner) passed(c *datasets.Case, t *datasets.Trial) bool {
	if c == nil {
		return false
	}
	ts, err := scorer.ScoreTrial(c, t, r.cfg.Score)
	return err == nil && ts.Passed
}

// trial runs one (case, trial) with retries of infrastructure failures.
func (r *Runner) trial(ctx context.Context, c *datasets.Case, n int) (*datasets.Trial, error) {
	wait := r.cfg.Backoff
	for attempt := 0; ; attempt++ {
		t, err := r.attempt(ctx, c, n)
		var ie *InfraError
		if !errors.As(err, &ie) || !ie.Retryable || attempt >= r.cfg.Retries {
			if ie != nil && attempt > 0 {
				err = fmt.Errorf("after %d attempts: %w", attempt+1, err)
			}
			return t, err
		}
		r.deps.Logger.Warn("infrastructure failure, retrying", "case", c.ID, "trial", n, "attempt", attempt+1, "wait", wait, "error", err)
		if err := r.deps.Sleep(ctx, wait); err != nil {
			return nil, err
		}
		wait = min(wait*2, r.cfg.MaxBackoff)
	}
}

// attempt runs the agent once under a root span and builds the graded
// trial.
func (r *Runner) attempt(ctx context.Context, c *datasets.Case, n int) (*datasets.Trial, error) {
	rec := r.cfg.Record
	start := r.deps.Now()
	ts := r.deps.Traces.StartTrial(ctx, rec.ID, c.ID, n, r.cfg.Agent, start)
	tctx, cancel := ctx, context.CancelFunc(func() {})
	if r.cfg.Timeout > 0 {
		tctx, cancel = context.WithTimeoutCause(ctx, r.cfg.Timeout, fmt.Errorf("timeout %v", r.cfg.Timeout))
	}
	resp, err := r.deps.Target.Run(tctx, Request{ExperimentID: rec.ID, Case: c, Trial: n, Trace: ts.Prop})
	cancel()
	end := r.deps.Now()
	if err != nil {
		ts.End(err.Error(), end)
		var ie *InfraError
		if errors.As(err, &ie) || ctx.Err() != nil {
			return nil, err
		}
		return nil, &InfraError{Err: err}
	}
	ts.End(resp.Failure, end)
	if resp.Failure != "" {
		r.deps.Logger.Info("the agent failed the trial", "case", c.ID, "trial", n, "failure", resp.Failure)
	}
	fl, _ := r.deps.Target.(Flusher)
	spans, joined, err := r.deps.Traces.Collect(ctx, ts, rec.ID, c.ID, n, fl != nil && fl.FlushedOnReturn(), r.deps.Sleep, r.deps.Now)
	if err != nil {
		return nil, err
	}
	return r.build(ctx, c, n, ts, spans, joined, resp, end.Sub(start))
}

// build turns an attempt into a graded trial record.
func (r *Runner) build(ctx context.Context, c *datasets.Case, n int, ts *TrialSpan, spans []store.Span, joined bool, resp Response, took time.Duration) (*datasets.Trial, error) {
	finished := resp.Failure == ""
	ms := math.Round(float64(took.Microseconds())/10) / 100
	t := &datasets.Trial{CaseID: c.ID, Trial: n, Agent: r.cfg.Agent, TraceID: ts.TraceID, Success: &finished, DurationMS: &ms, ModelLabel: r.cfg.ModelLabel}
	var agent []store.Span
	for _, s := range spans {
		if s.SpanID != ts.SpanID || s.TraceID != ts.TraceID {
			agent = append(agent, s)
		}
	}
	if !joined && len(spans) > 0 {
		t.TraceID = spans[0].TraceID // the agent's own trace, found by its resource
	}
	tr := datasets.Transcript{}
	if len(agent) > 0 {
		tr = grade.TranscriptFromSpans(agent)
	}
	tr.Task = c.Task
	if resp.Answer != "" {
		tr.Answer, tr.Source = resp.Answer, "agent output"
	}
	t.Transcript = &tr
	usage := false
	for i := range agent {
		usage = usage || agent[i].CarriesUsage()
	}
	t.Spans = spans
	f, err := scorer.TrialFacts(t, r.cfg.Score.Prices)
	if err != nil {
		return nil, fmt.Errorf("trial %d of case %q: %w (--model-label)", n, c.ID, err)
	}
	t.ModelLabel = f.ModelLabel
	if t.ModelLabel == "" || t.ModelLabel == "unknown" {
		t.ModelLabel = datasets.LabelLive
	}
	t.Model = f.Model
	if t.Model == "" {
		t.Model = resp.Model
	}
	t.ToolsCalled, t.EvidenceRetrieved, t.EvidenceCited = f.ToolsCalled, f.EvidenceRetrieved, f.EvidenceCited
	switch {
	case usage:
		t.Tokens, t.CostUSD = f.Tokens, f.CostUSD
	case resp.Usage != nil:
		tok := resp.Usage.Input + resp.Usage.Output
		t.Tokens = &tok
	}
	env := r.deps.Grading
	if env.Prices == nil {
		env.Prices = r.cfg.Score.Prices
	}
	one := []datasets.Trial{*t}
	if _, err := grade.Trials(ctx, env, []datasets.Case{*c}, one); err != nil {
		return nil, fmt.Errorf("grade: %w", err)
	}
	*t = one[0]
	t.Spans = nil // the trace stays in the store; the record names it
	return t, nil
}
