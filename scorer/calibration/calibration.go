// Package calibration measures what a gate policy decides on random
// agents: seeded simulations that draw baseline and candidate suites with a
// known true effect, run them through the real scorer, comparison and gate
// (scorer.Score, scorer.Compare, gate.Evaluate), and count false alarms,
// detections and interval coverage. It also plans a suite: how many cases
// × trials detect a given drop, simulated from a baseline's own cases.
//
// The simulated agent: each case has a pass probability p (drawn from
// Design.Difficulty for calibration, from a baseline's cases for planning);
// each trial cites the case's required evidence with probability p, and the
// candidate's probability is p + effect. Trials are labelled "live", so the
// gate treats them as random (a scripted label would switch it to exact
// comparison).
package calibration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/stats"
)

// Design is one simulated comparison shape.
type Design struct {
	Cases  int     `json:"cases"`
	Trials int     `json:"trials"`
	Effect float64 `json:"effect"` // true change of every case's pass probability (negative: a drop)
}

// Config is a calibration run.
type Config struct {
	Designs []Design
	// Reps is the number of simulated baseline/candidate pairs per design.
	Reps int
	Seed uint64
	// Policies are gated side by side, by name (e.g. "new", "old").
	Policies []NamedPolicy
	// DifficultyLo and DifficultyHi bound the uniform distribution of case
	// pass probabilities (the measurement used 0.2–0.9).
	DifficultyLo, DifficultyHi float64
	Level                      float64 // interval level (default: each policy's confidence, else 0.95)
	// Bootstrap also measures the percentile bootstrap's coverage on the
	// same draws (1,000 resamples each; most of the run time).
	Bootstrap bool
	Progress  io.Writer
}

// NamedPolicy is a policy under test.
type NamedPolicy struct {
	Name   string
	Policy *gate.Policy
}

// DefaultDesigns is the grid the tested property and docs/scoring.md use:
// 5, 20 and 100 cases × 1 and 3 trials × effects 0, −0.05, −0.15, plus two
// drops of 0.20 near the reported MDE (100 × 1 and 50 × 3), where "detects
// ≥ 80% when the MDE says so" is tested close to its boundary.
func DefaultDesigns() []Design {
	var ds []Design
	for _, n := range []int{5, 20, 100} {
		for _, t := range []int{1, 3} {
			for _, e := range []float64{0, -0.05, -0.15} {
				ds = append(ds, Design{Cases: n, Trials: t, Effect: e})
			}
		}
	}
	return append(ds, Design{Cases: 100, Trials: 1, Effect: -0.2}, Design{Cases: 50, Trials: 3, Effect: -0.2})
}

// Validate reports a configuration error.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Designs) == 0 {
		errs = append(errs, errors.New("no designs"))
	}
	for i, d := range c.Designs {
		if d.Cases < 1 || d.Trials < 1 {
			errs = append(errs, fmt.Errorf("design %d: %d cases × %d trials, need at least 1 × 1", i, d.Cases, d.Trials))
		}
		if lo, hi := c.DifficultyLo+d.Effect, c.DifficultyHi+d.Effect; lo < 0 || hi > 1 {
			errs = append(errs, fmt.Errorf("design %d: effect %+g moves pass probabilities outside [0, 1] (difficulty %g–%g)", i, d.Effect, c.DifficultyLo, c.DifficultyHi))
		}
	}
	if c.Reps < 10 {
		errs = append(errs, fmt.Errorf("reps = %d, need at least 10", c.Reps))
	}
	if !(c.DifficultyLo >= 0 && c.DifficultyLo < c.DifficultyHi && c.DifficultyHi <= 1) {
		errs = append(errs, fmt.Errorf("difficulty %g–%g, need 0 ≤ lo < hi ≤ 1", c.DifficultyLo, c.DifficultyHi))
	}
	if len(c.Policies) == 0 {
		errs = append(errs, errors.New("no policies"))
	}
	for _, p := range c.Policies {
		if p.Policy == nil || p.Name == "" {
			errs = append(errs, errors.New("a policy needs a name and a body"))
		}
	}
	return errors.Join(errs...)
}

// PolicyOutcome is how often one policy failed the gate in one design.
type PolicyOutcome struct {
	Policy   string  `json:"policy"`
	Failed   int     `json:"failed"`
	Rate     float64 `json:"rate"`
	Lower    float64 `json:"lower"` // 95% Wilson interval of the rate
	Upper    float64 `json:"upper"`
	Bound    float64 `json:"false_alarm_bound"` // the policy's stated bound
	Required string  `json:"required,omitempty"`
	// Holds is whether the design's requirement holds (see Result.Check);
	// nil when the design states none for this policy.
	Holds *bool `json:"holds,omitempty"`
}

// Cell is one design's measurement.
type Cell struct {
	Design
	Reps int `json:"reps"`
	// Outcomes per policy: at effect 0 Rate is the false-alarm rate, below
	// 0 the detection rate.
	Outcomes []PolicyOutcome `json:"outcomes"`
	// DeltaCoverage is how often the paired pass-rate interval covered the
	// true effect; RateCoverage how often the candidate's pass-rate
	// interval covered its population mean.
	DeltaCoverage float64 `json:"delta_coverage"`
	RateCoverage  float64 `json:"rate_coverage"`
	// BootstrapCoverage is the same delta coverage for the percentile
	// bootstrap the gate used before (what was replaced); nil unless
	// Config.Bootstrap.
	BootstrapCoverage *float64 `json:"bootstrap_coverage"`
	// MedianMDE is the median reported minimum detectable drop (pass rate,
	// 80% power, margin 0): where |effect| ≥ it, detection should be ≥ 80%.
	MedianMDE float64 `json:"median_mde"`
}

// Result is a calibration run.
type Result struct {
	Seed         uint64  `json:"seed"`
	Reps         int     `json:"reps"`
	DifficultyLo float64 `json:"difficulty_lo"`
	DifficultyHi float64 `json:"difficulty_hi"`
	Level        float64 `json:"level"`
	Cells        []Cell  `json:"cells"`
}

// Run simulates every design. Each design draws from its own stream of
// the seed, so adding a design does not change the others.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	level := cfg.Level
	if level == 0 {
		level = 0.95
		if c := cfg.Policies[0].Policy.Confidence; c != 0 {
			level = c
		}
	}
	res := &Result{Seed: cfg.Seed, Reps: cfg.Reps, DifficultyLo: cfg.DifficultyLo, DifficultyHi: cfg.DifficultyHi, Level: level}
	for di, d := range cfg.Designs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(di)+1))
		cell := Cell{Design: d, Reps: cfg.Reps}
		failed := make([]int, len(cfg.Policies))
		var mdes []float64
		var covD, covR, covB int
		for range cfg.Reps {
			ps := make([]float64, d.Cases)
			for i := range ps {
				ps[i] = cfg.DifficultyLo + (cfg.DifficultyHi-cfg.DifficultyLo)*rng.Float64()
			}
			cand := make([]float64, len(ps))
			for i, p := range ps {
				cand[i] = p + d.Effect
			}
			sim, err := simulate(ps, cand, d.Trials, rng)
			if err != nil {
				return nil, err
			}
			for pi, np := range cfg.Policies {
				r, cmp, err := sim.gate(np.Policy, level)
				if err != nil {
					return nil, fmt.Errorf("calibration: policy %s: %w", np.Name, err)
				}
				if !r.Passed {
					failed[pi]++
				}
				if pi == 0 {
					iv := cmp.PassRateDelta
					if covers(iv.Lower, iv.Upper, d.Effect) {
						covD++
					}
					if m := cmp.PassRateMDE; m != nil {
						mdes = append(mdes, *m)
					} else {
						mdes = append(mdes, math.Inf(1))
					}
					pop := (cfg.DifficultyLo+cfg.DifficultyHi)/2 + d.Effect
					if covers(cmp.Candidate.PassRate.Lower, cmp.Candidate.PassRate.Upper, pop) {
						covR++
					}
					if cfg.Bootstrap {
						lo, hi := percentileBootstrap(sim.deltas(cmp), level, 1000, rng)
						if covers(lo, hi, d.Effect) {
							covB++
						}
					}
				}
			}
		}
		sort.Float64s(mdes)
		cell.MedianMDE = mdes[len(mdes)/2]
		n := float64(cfg.Reps)
		cell.DeltaCoverage, cell.RateCoverage = float64(covD)/n, float64(covR)/n
		if cfg.Bootstrap {
			b := float64(covB) / n
			cell.BootstrapCoverage = &b
		}
		for pi, np := range cfg.Policies {
			bound, _, _ := np.Policy.FalseAlarmBound(level)
			lo, hi := stats.Wilson(failed[pi], cfg.Reps, 0.95)
			cell.Outcomes = append(cell.Outcomes, PolicyOutcome{Policy: np.Name, Failed: failed[pi], Rate: float64(failed[pi]) / n, Lower: lo, Upper: hi, Bound: bound})
		}
		res.Cells = append(res.Cells, cell)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "calibrate: %d/%d designs (%d cases × %d trials, effect %+.2f)\n", di+1, len(cfg.Designs), d.Cases, d.Trials, d.Effect)
		}
	}
	return res, nil
}

// Check states and tests the calibration requirements for the policy named
// first (the one under test), each as a one-sided binomial test at
// significance 0.001 so that a seeded run fails only when the property is
// really violated, not on simulation noise:
//   - at effect 0, false alarms ≤ the policy's stated bound;
//   - below 0, detection ≥ 80% wherever the median reported MDE ≤ |effect|;
//   - paired-interval coverage ≥ 93% and suite-rate coverage ≥ 93%.
//
// It fills Required/Holds on the first policy's outcomes and returns every
// violation.
func (r *Result) Check() []error {
	var errs []error
	for i := range r.Cells {
		c := &r.Cells[i]
		o := &c.Outcomes[0]
		name := fmt.Sprintf("%d cases × %d trials, effect %+.2f", c.Cases, c.Trials, c.Effect)
		switch {
		case c.Effect == 0:
			o.Required = fmt.Sprintf("false alarms ≤ %.1f%%", 100*o.Bound)
			ok := binomUpperTail(o.Failed, c.Reps, o.Bound) >= 0.001
			o.Holds = &ok
			if !ok {
				errs = append(errs, fmt.Errorf("%s: %d/%d false alarms (%.1f%%), above the stated %.1f%%", name, o.Failed, c.Reps, 100*o.Rate, 100*o.Bound))
			}
		case c.MedianMDE <= -c.Effect:
			o.Required = "detection ≥ 80% (MDE ≤ the drop)"
			ok := binomLowerTail(o.Failed, c.Reps, 0.8) >= 0.001
			o.Holds = &ok
			if !ok {
				errs = append(errs, fmt.Errorf("%s: detected %d/%d (%.1f%%) although the reported MDE %.3f says ≥ 80%%", name, o.Failed, c.Reps, 100*o.Rate, c.MedianMDE))
			}
		}
		for _, cov := range []struct {
			what string
			v    float64
		}{{"paired interval", c.DeltaCoverage}, {"suite pass-rate interval", c.RateCoverage}} {
			covered := int(math.Round(cov.v * float64(c.Reps)))
			if binomLowerTail(covered, c.Reps, 0.93) < 0.001 {
				errs = append(errs, fmt.Errorf("%s: %s covered the truth %.1f%% of the time, below 93%%", name, cov.what, 100*cov.v))
			}
		}
	}
	return errs
}

func covers(lo, hi, v float64) bool { return lo <= v+1e-12 && v-1e-12 <= hi }

// sim is one simulated baseline/candidate pair.
type sim struct {
	cases      []datasets.Case
	base, cand []datasets.Trial
}

// simulate draws trials: trial k of case i cites the required evidence
// (the outcome) with probability base[i] in the baseline and cand[i] in
// the candidate.
func simulate(base, cand []float64, trials int, rng *rand.Rand) (*sim, error) {
	s := &sim{}
	yes := true
	for i, p := range base {
		id := "case-" + strconv.Itoa(i)
		ev := "doc:" + strconv.Itoa(i)
		s.cases = append(s.cases, datasets.Case{ID: id, Task: "simulated", RequiredEvidence: []string{ev}})
		for k := range trials {
			for _, side := range []struct {
				out *[]datasets.Trial
				p   float64
			}{{&s.base, p}, {&s.cand, cand[i]}} {
				t := datasets.Trial{CaseID: id, Trial: k, ModelLabel: datasets.LabelLive, Model: "simulated", TraceID: "sim", Success: &yes}
				if rng.Float64() < side.p {
					t.EvidenceCited = []string{ev}
				}
				*side.out = append(*side.out, t)
			}
		}
	}
	return s, nil
}

// gate scores both sides and applies the policy, as `loom-eval gate` does.
func (s *sim) gate(p *gate.Policy, level float64) (*gate.Result, *scorer.Comparison, error) {
	cfg := scorer.DefaultConfig()
	cfg.Prices = nil
	cfg.Level = level
	if err := p.Apply(&cfg, gate.Explicit{}); err != nil {
		return nil, nil, err
	}
	b, err := scorer.Score(s.cases, s.base, cfg)
	if err != nil {
		return nil, nil, err
	}
	c, err := scorer.Score(s.cases, s.cand, cfg)
	if err != nil {
		return nil, nil, err
	}
	cmp, err := scorer.Compare(b, c, cfg)
	if err != nil {
		return nil, nil, err
	}
	return gate.Evaluate(p, c, cmp), cmp, nil
}

func (s *sim) deltas(cmp *scorer.Comparison) []float64 {
	d := make([]float64, len(cmp.Pairs))
	for i, p := range cmp.Pairs {
		d[i] = float64(p.CandPasses)/float64(p.CandTrials) - float64(p.BasePasses)/float64(p.BaseTrials)
	}
	return d
}

// percentileBootstrap is the interval the scorer used before this
// package's measurements replaced it, kept here only to measure it.
func percentileBootstrap(xs []float64, level float64, resamples int, rng *rand.Rand) (float64, float64) {
	means := make([]float64, resamples)
	n := len(xs)
	for b := range means {
		var sum float64
		for range n {
			sum += xs[rng.IntN(n)]
		}
		means[b] = sum / float64(n)
	}
	slices.Sort(means)
	a := (1 - level) / 2
	lo := means[int(math.Floor(a*float64(resamples-1)))]
	hi := means[int(math.Ceil((1-a)*float64(resamples-1)))]
	return lo, hi
}

// binomUpperTail is P(X ≥ k) for X ~ Binomial(n, p).
func binomUpperTail(k, n int, p float64) float64 {
	if k <= 0 {
		return 1
	}
	return 1 - stats.BinomialCDF(k-1, n, p)
}

// binomLowerTail is P(X ≤ k).
func binomLowerTail(k, n int, p float64) float64 { return stats.BinomialCDF(k, n, p) }
