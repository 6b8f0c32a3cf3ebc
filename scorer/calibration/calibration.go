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
//
// Real runs are correlated, and a design can say how: ICC gives trials of
// a case in one run a shared per-run case effect (the run's probability
// is drawn from a Beta with mean p and intra-class correlation ICC), and
// Groups with ShockSD give groups of cases a shared per-run shock on the
// logit scale (a tool or topic that was bad in that run); the simulated
// cases then declare their group, as a case file would.
package calibration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/stat/distuv"

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
	// ICC is the intra-class correlation of a case's trials within one
	// run (0: independent trials; 1: all trials of a case in a run agree).
	ICC float64 `json:"icc"`
	// Groups splits the cases round-robin into groups the cases declare
	// (0: no groups); ShockSD is the SD of each group's per-run shock on
	// the logit scale (0: groups share nothing).
	Groups  int     `json:"groups,omitempty"`
	ShockSD float64 `json:"shock_sd,omitempty"`
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
		if !(d.ICC >= 0 && d.ICC <= 1) {
			errs = append(errs, fmt.Errorf("design %d: ICC %v, need 0 ≤ ICC ≤ 1", i, d.ICC))
		}
		if d.Groups < 0 || d.Groups > d.Cases {
			errs = append(errs, fmt.Errorf("design %d: %d groups for %d cases, need 0 ≤ groups ≤ cases", i, d.Groups, d.Cases))
		}
		if !(d.ShockSD >= 0 && d.ShockSD <= 10) {
			errs = append(errs, fmt.Errorf("design %d: shock SD %v, need 0 ≤ SD ≤ 10 (logit scale)", i, d.ShockSD))
		}
		if d.ShockSD > 0 && d.Groups == 0 {
			errs = append(errs, fmt.Errorf("design %d: a shock needs groups to share it (groups = 0)", i))
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
	// nil when the design states none for this policy. Verdict says it in
	// words: "holds" or "does NOT hold: …".
	Holds   *bool  `json:"holds,omitempty"`
	Verdict string `json:"verdict,omitempty"`
	// Checks breaks the failures down by the gate's check (a run can fail
	// several), each with its own bound where the policy states one.
	Checks []CheckOutcome `json:"checks"`
}

// CheckOutcome is how often one gate check failed in one design.
type CheckOutcome struct {
	Check  string  `json:"check"`
	Failed int     `json:"failed"`
	Rate   float64 `json:"rate"`
	Lower  float64 `json:"lower"` // 95% Wilson interval
	Upper  float64 `json:"upper"`
	// Bound is the check's stated false-alarm rate; nil for a check that
	// states none (absolute requirements, legacy checks).
	Bound *float64 `json:"bound,omitempty"`
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
	// NaiveCoverage is the delta coverage of the interval that treats
	// cases as independent (stats.PairedDeltaInterval), on the same draws:
	// what grouped designs would get without groups. Nil without groups.
	NaiveCoverage *float64 `json:"naive_coverage,omitempty"`
	// CaseTestCanFire is the share of draws in which the per-case test
	// could have declared a regression at all (Comparison.CaseTestCanFire);
	// FisherCaseAlarms the share in which Fisher's test on raw trial
	// counts (the test before design effects), corrected the same way,
	// declared at least one case regressed: what the old per-case check
	// did on the same draws. Nil when the first policy has no case rule.
	CaseTestCanFire  float64  `json:"case_test_can_fire"`
	FisherCaseAlarms *float64 `json:"fisher_case_alarms,omitempty"`
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
		cell, err := runDesign(cfg, d, level, rand.New(rand.NewPCG(cfg.Seed, uint64(di)+1)))
		if err != nil {
			return nil, err
		}
		res.Cells = append(res.Cells, cell)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "calibrate: %d/%d designs (%s)\n", di+1, len(cfg.Designs), d.label())
		}
	}
	return res, nil
}

// tally counts one design's outcomes.
type tally struct {
	failed                 []int
	checks                 []map[string]int
	covD, covR, covB, covN int
	canFire, fisher        int
	mdes                   []float64
}

// runDesign simulates one design's reps from its own stream.
func runDesign(cfg Config, d Design, level float64, rng *rand.Rand) (Cell, error) {
	model := drawModel{trials: d.Trials, icc: d.ICC, groups: d.Groups, shockSD: d.ShockSD}
	popBase, popCand := populationMeans(d, cfg.DifficultyLo, cfg.DifficultyHi)
	truth := popCand - popBase
	tl := tally{failed: make([]int, len(cfg.Policies)), checks: make([]map[string]int, len(cfg.Policies))}
	for pi := range tl.checks {
		tl.checks[pi] = map[string]int{}
	}
	caseRule := cfg.Policies[0].Policy.CaseRegressions
	for range cfg.Reps {
		ps := make([]float64, d.Cases)
		for i := range ps {
			ps[i] = cfg.DifficultyLo + (cfg.DifficultyHi-cfg.DifficultyLo)*rng.Float64()
		}
		cand := make([]float64, len(ps))
		for i, p := range ps {
			cand[i] = p + d.Effect
		}
		sim := simulateRuns(ps, cand, model, rng)
		for pi, np := range cfg.Policies {
			r, cmp, err := sim.gate(np.Policy, level)
			if err != nil {
				return Cell{}, fmt.Errorf("calibration: policy %s: %w", np.Name, err)
			}
			if !r.Passed {
				tl.failed[pi]++
			}
			for _, c := range r.Checks {
				if !c.Passed {
					tl.checks[pi][c.Name]++
				}
			}
			if pi > 0 {
				continue
			}
			if err := tl.measure(cfg, d, cmp, truth, popCand, level, caseRule, sim, rng); err != nil {
				return Cell{}, err
			}
		}
	}
	return tl.cell(cfg, d, level), nil
}

// measure records the first policy's intervals, MDE and per-case test on
// one draw.
func (tl *tally) measure(cfg Config, d Design, cmp *scorer.Comparison, truth, popCand, level float64, caseRule *gate.CaseRule, s *sim, rng *rand.Rand) error {
	iv := cmp.PassRateDelta
	if covers(iv.Lower, iv.Upper, truth) {
		tl.covD++
	}
	m := math.Inf(1)
	if cmp.PassRateMDE != nil {
		m = *cmp.PassRateMDE
	}
	tl.mdes = append(tl.mdes, m)
	if covers(cmp.Candidate.PassRate.Lower, cmp.Candidate.PassRate.Upper, popCand) {
		tl.covR++
	}
	if cmp.CaseTestCanFire {
		tl.canFire++
	}
	deltas := s.deltas(cmp)
	if d.Groups > 0 {
		var b, c []float64
		for _, p := range cmp.Pairs {
			b, c = append(b, float64(p.BasePasses)/float64(p.BaseTrials)), append(c, float64(p.CandPasses)/float64(p.CandTrials))
		}
		naive, err := stats.PairedDeltaInterval(b, c, cmp.IntervalTrials, level)
		if err != nil {
			return fmt.Errorf("calibration: %w", err)
		}
		if covers(naive.Lower, naive.Upper, truth) {
			tl.covN++
		}
	}
	if caseRule != nil {
		fired, err := fisherFires(cmp, caseRule)
		if err != nil {
			return err
		}
		if fired {
			tl.fisher++
		}
	}
	if cfg.Bootstrap {
		lo, hi := percentileBootstrap(deltas, level, 1000, rng)
		if covers(lo, hi, truth) {
			tl.covB++
		}
	}
	return nil
}

// fisherFires: Fisher's test on raw trial counts, corrected across cases
// as the rule says, declares at least one case regressed (the per-case
// check as it was before design effects, measured for contrast).
func fisherFires(cmp *scorer.Comparison, r *gate.CaseRule) (bool, error) {
	alpha, corr := r.Alpha, r.Correction
	if alpha == 0 {
		alpha = 0.05
	}
	if corr == "" {
		corr = stats.Holm
	}
	ps := make([]float64, len(cmp.Pairs))
	for i, p := range cmp.Pairs {
		v, err := stats.FisherOneSided(p.BasePasses, p.BaseTrials, p.CandPasses, p.CandTrials)
		if err != nil {
			return false, fmt.Errorf("calibration: %w", err)
		}
		ps[i] = v
	}
	adj, err := stats.Adjust(ps, corr)
	if err != nil {
		return false, fmt.Errorf("calibration: %w", err)
	}
	return slices.ContainsFunc(adj, func(p float64) bool { return p < alpha }), nil
}

// cell turns the tally into the design's row.
func (tl *tally) cell(cfg Config, d Design, level float64) Cell {
	n := float64(cfg.Reps)
	cell := Cell{Design: d, Reps: cfg.Reps, DeltaCoverage: float64(tl.covD) / n, RateCoverage: float64(tl.covR) / n, CaseTestCanFire: float64(tl.canFire) / n}
	sort.Float64s(tl.mdes)
	cell.MedianMDE = tl.mdes[len(tl.mdes)/2]
	if cfg.Bootstrap {
		b := float64(tl.covB) / n
		cell.BootstrapCoverage = &b
	}
	if d.Groups > 0 {
		v := float64(tl.covN) / n
		cell.NaiveCoverage = &v
	}
	if cfg.Policies[0].Policy.CaseRegressions != nil {
		v := float64(tl.fisher) / n
		cell.FisherCaseAlarms = &v
	}
	for pi, np := range cfg.Policies {
		bound, _, _ := np.Policy.FalseAlarmBound(level)
		lo, hi := stats.Wilson(tl.failed[pi], cfg.Reps, 0.95)
		o := PolicyOutcome{Policy: np.Name, Failed: tl.failed[pi], Rate: float64(tl.failed[pi]) / n, Lower: lo, Upper: hi, Bound: bound, Checks: []CheckOutcome{}}
		bounds := np.Policy.CheckBounds(level)
		for _, name := range slices.Sorted(maps.Keys(tl.checks[pi])) {
			k := tl.checks[pi][name]
			lo, hi := stats.Wilson(k, cfg.Reps, 0.95)
			co := CheckOutcome{Check: name, Failed: k, Rate: float64(k) / n, Lower: lo, Upper: hi}
			if b, ok := bounds[name]; ok {
				co.Bound = &b
			}
			o.Checks = append(o.Checks, co)
		}
		cell.Outcomes = append(cell.Outcomes, o)
	}
	return cell
}

// Check states and tests the calibration requirements for the policy named
// first (the one under test), each as a one-sided binomial test at
// significance 0.001 so that a seeded run fails only when the property is
// really violated, not on simulation noise:
//   - at effect 0, false alarms ≤ the policy's stated bound, and each
//     calibrated check's false alarms ≤ its own part of it;
//   - below 0, detection ≥ 80% wherever the median reported MDE ≤ |effect|;
//   - paired-interval coverage ≥ 93%, and suite-rate coverage ≥ 93% except
//     where groups share a per-run shock (the suite rate of one run is not
//     cluster-robust; its coverage is reported, not required).
//
// It fills Required/Holds/Verdict on the first policy's outcomes and
// returns every violation.
func (r *Result) Check() []error {
	var errs []error
	for i := range r.Cells {
		c := &r.Cells[i]
		o := &c.Outcomes[0]
		name := c.label()
		var why []string
		switch {
		case c.Effect == 0:
			o.Required = fmt.Sprintf("false alarms ≤ %.1f%%", 100*o.Bound)
			if binomUpperTail(o.Failed, c.Reps, o.Bound) < 0.001 {
				why = append(why, fmt.Sprintf("%d/%d false alarms (%.1f%%), above the stated %.1f%%", o.Failed, c.Reps, 100*o.Rate, 100*o.Bound))
			}
			for _, ck := range o.Checks {
				if ck.Bound != nil && binomUpperTail(ck.Failed, c.Reps, *ck.Bound) < 0.001 {
					why = append(why, fmt.Sprintf("%s false-alarmed %d/%d (%.1f%%), above its %.1f%%", ck.Check, ck.Failed, c.Reps, 100*ck.Rate, 100**ck.Bound))
				}
			}
		case c.MedianMDE <= -c.Effect:
			o.Required = "detection ≥ 80% (MDE ≤ the drop)"
			if binomLowerTail(o.Failed, c.Reps, 0.8) < 0.001 {
				why = append(why, fmt.Sprintf("detected %d/%d (%.1f%%) although the reported MDE %.3f says ≥ 80%%", o.Failed, c.Reps, 100*o.Rate, c.MedianMDE))
			}
		}
		covs := []struct {
			what string
			v    float64
		}{{"paired interval", c.DeltaCoverage}}
		if c.ShockSD == 0 {
			covs = append(covs, struct {
				what string
				v    float64
			}{"suite pass-rate interval", c.RateCoverage})
		}
		for _, cov := range covs {
			covered := int(math.Round(cov.v * float64(c.Reps)))
			if binomLowerTail(covered, c.Reps, 0.93) < 0.001 {
				why = append(why, fmt.Sprintf("%s covered the truth %.1f%% of the time, below 93%%", cov.what, 100*cov.v))
			}
		}
		if o.Required != "" {
			o.Required += ", coverage ≥ 93%"
		} else {
			o.Required = "coverage ≥ 93%"
		}
		ok := len(why) == 0
		o.Holds = &ok
		o.Verdict = "holds"
		if !ok {
			o.Verdict = "does NOT hold: " + strings.Join(why, "; ")
			for _, w := range why {
				errs = append(errs, fmt.Errorf("%s: %s", name, w))
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

// simulate draws independent trials: trial k of case i cites the
// required evidence (the outcome) with probability base[i] in the baseline
// and cand[i] in the candidate.
func simulate(base, cand []float64, trials int, rng *rand.Rand) (*sim, error) {
	return simulateRuns(base, cand, drawModel{trials: trials}, rng), nil
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
	return 1 - binomLowerTail(k-1, n, p)
}

// binomLowerTail is P(X ≤ k).
func binomLowerTail(k, n int, p float64) float64 {
	return distuv.Binomial{N: float64(n), P: p}.CDF(float64(k))
}
