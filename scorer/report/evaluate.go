package report

import (
	"context"
	"errors"
	"fmt"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/grade"
)

// ErrBadInput is wrapped by Evaluate's errors that the inputs caused (a
// trial that does not score, a missing trace, suites that cannot be
// compared), as opposed to an unreachable trace store.
var ErrBadInput = errors.New("bad evaluation input")

// Trials is one decoded trials file and where it came from.
type Trials struct {
	Source string
	Trials []datasets.Trial
}

// Inputs is everything one evaluation reads, already decoded: the
// evaluation does no I/O of its own beyond Traces.
type Inputs struct {
	// Cases are the expectations; nil means no case file was given (trials
	// are scored on success alone), an empty slice an empty one.
	Cases     []datasets.Case
	CasesFile string
	Candidate Trials
	// Baseline, when it has a Source, is compared with the candidate case
	// by case.
	Baseline Trials
	// Policy, when set, adjusts cfg (its confidence and per-case test)
	// and gates the comparison. Explicit says which of cfg's settings the
	// user set on purpose: a policy contradicting one is bad input.
	Policy   *gate.Policy
	Explicit gate.Explicit
	// Traces, when set, resolves trial trace ids to stored spans.
	Traces scorer.TraceReader
	// Grading is how the cases' graders run (the sandbox for code graders,
	// a judge for model graders). Every trial of a case with graders is
	// graded before it is scored; with a zero Env only deterministic
	// graders run, and a code or model grader without a recorded verdict
	// is bad input naming it.
	Grading grade.Env
}

// Evaluate is the score → compare → gate pipeline behind `loom-eval score`
// and `loom-eval gate`: it scores the candidate (and the baseline), compares
// them and applies the policy. A failed gate is not an error: it is
// Report.Gate.Passed == false.
func Evaluate(ctx context.Context, cfg scorer.Config, in Inputs) (*Report, error) {
	if in.Policy != nil {
		if err := in.Policy.Apply(&cfg, in.Explicit); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
	}
	r := &Report{}
	var err error
	if r.Suite, err = scoreTrials(ctx, in, in.Candidate, cfg); err != nil {
		return nil, err
	}
	r.Suite.CasesFile = in.CasesFile
	if in.Baseline.Source != "" {
		if r.Baseline, err = scoreTrials(ctx, in, in.Baseline, cfg); err != nil {
			return nil, err
		}
		if r.Comparison, err = scorer.Compare(r.Baseline, r.Suite, cfg); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
	}
	if in.Policy != nil {
		r.Gate = gate.Evaluate(in.Policy, r.Suite, r.Comparison)
	}
	return r, nil
}

func scoreTrials(ctx context.Context, in Inputs, t Trials, cfg scorer.Config) (*scorer.Suite, error) {
	if len(t.Trials) == 0 {
		// Nothing to score is a broken pipeline (a replay that wrote
		// nothing), not a suite that passed.
		return nil, fmt.Errorf("%w: %s: no trials (the file is empty)", ErrBadInput, t.Source)
	}
	if in.Traces != nil {
		if err := scorer.ResolveTraces(ctx, in.Traces, t.Trials); err != nil {
			if errors.Is(err, scorer.ErrTraceMissing) {
				return nil, fmt.Errorf("%w: %s: %w", ErrBadInput, t.Source, err)
			}
			return nil, fmt.Errorf("%s: %w", t.Source, err)
		}
	}
	env := in.Grading
	if env.Prices == nil {
		env.Prices = cfg.Prices
	}
	gs, err := grade.Trials(ctx, env, in.Cases, t.Trials)
	if err != nil {
		if errors.Is(err, grade.ErrNoBackend) {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadInput, t.Source, err)
		}
		return nil, fmt.Errorf("%s: %w", t.Source, err)
	}
	s, err := scorer.Score(in.Cases, t.Trials, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadInput, t.Source, err)
	}
	s.Source = t.Source
	if gs.Trials > 0 {
		note := fmt.Sprintf("graded %d trials: %d verdicts reached now", gs.Trials, gs.Graded)
		if gs.Recorded > 0 {
			note += fmt.Sprintf(", %d code or model verdicts kept as the trials recorded them (regrade to rerun them)", gs.Recorded)
		}
		s.Notes = append(s.Notes, note)
	}
	s.Notes = append(s.Notes, gs.Notes...)
	return s, nil
}
