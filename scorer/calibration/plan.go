package calibration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/stats"
)

// PlanConfig plans a suite from a scored baseline.
type PlanConfig struct {
	// Baseline's cases give the pass probabilities to simulate from: case
	// i passes with (passes_i + ½)/(trials_i + 1) (Jeffreys' estimate, so
	// a case that passed 3/3 is not assumed never to fail).
	Baseline *scorer.Suite
	// Drop is the true drop to detect (> 0): the candidate's probability
	// is max(0, p − Drop) per case.
	Drop float64
	// Policy decides; Plan counts how often it fails the candidate.
	Policy *gate.Policy
	// Cases and Trials are the designs tried (cases are drawn from the
	// baseline's with replacement).
	Cases  []int
	Trials []int
	Power  float64 // target, e.g. 0.8
	Reps   int
	Seed   uint64
	// Progress, when set, gets a line per design.
	Progress io.Writer
}

// PlanRow is one simulated design.
type PlanRow struct {
	Cases  int     `json:"cases"`
	Trials int     `json:"trials"`
	Power  float64 `json:"power"`
	Lower  float64 `json:"lower"` // 95% Wilson interval of the power
	Upper  float64 `json:"upper"`
	// FalseAlarms is the same design's failure rate with no drop.
	FalseAlarms float64 `json:"false_alarms"`
	MedianMDE   float64 `json:"median_mde"`
}

// Plan is the answer: power per design, and per trial count the fewest
// cases reaching the target power (0 when none tried does).
type Plan struct {
	Drop          float64     `json:"drop"`
	RealizedDrop  float64     `json:"realized_drop"` // mean drop after clamping at 0
	Power         float64     `json:"target_power"`
	BaselineCases int         `json:"baseline_cases"`
	Reps          int         `json:"reps"`
	Seed          uint64      `json:"seed"`
	Rows          []PlanRow   `json:"rows"`
	Smallest      map[int]int `json:"smallest_cases_by_trials"`
	Assumptions   []string    `json:"assumptions"`
}

// RunPlan simulates each design with the real scorer and gate.
func RunPlan(ctx context.Context, cfg PlanConfig) (*Plan, error) {
	var errs []error
	if cfg.Baseline == nil || len(cfg.Baseline.Cases) == 0 {
		errs = append(errs, errors.New("the baseline has no scored cases"))
	}
	if !(cfg.Drop > 0 && cfg.Drop <= 1) {
		errs = append(errs, fmt.Errorf("drop %v: need 0 < drop ≤ 1 (a drop in pass rate)", cfg.Drop))
	}
	if cfg.Policy == nil {
		errs = append(errs, errors.New("no policy"))
	}
	if !(cfg.Power > 0 && cfg.Power < 1) {
		errs = append(errs, fmt.Errorf("power %v: need 0 < power < 1", cfg.Power))
	}
	if cfg.Reps < 10 {
		errs = append(errs, fmt.Errorf("reps %d: need at least 10", cfg.Reps))
	}
	for _, n := range append(append([]int{}, cfg.Cases...), cfg.Trials...) {
		if n < 1 {
			errs = append(errs, fmt.Errorf("design size %d: need at least 1", n))
		}
	}
	if len(cfg.Cases) == 0 || len(cfg.Trials) == 0 {
		errs = append(errs, errors.New("no designs (cases × trials)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	var ps []float64
	var realized float64
	for _, c := range cfg.Baseline.Cases {
		p := (float64(c.Passes) + 0.5) / (float64(c.Trials) + 1)
		ps = append(ps, p)
		realized += p - math.Max(0, p-cfg.Drop)
	}
	level := 0.95
	if cfg.Policy.Confidence != 0 {
		level = cfg.Policy.Confidence
	}
	pl := &Plan{Drop: cfg.Drop, RealizedDrop: realized / float64(len(ps)), Power: cfg.Power, BaselineCases: len(ps), Reps: cfg.Reps, Seed: cfg.Seed,
		Smallest: map[int]int{},
		Assumptions: []string{
			"each case's pass probability is its baseline rate, Jeffreys-shrunk: (passes + 1/2) / (trials + 1)",
			"a design of N cases draws N of the baseline's cases with replacement; trials are independent given the case",
			fmt.Sprintf("the candidate's probability is max(0, p - %g) on every case (realized mean drop %.3f)", cfg.Drop, realized/float64(len(ps))),
			"trials are treated as random (live): scripted runs are compared exactly instead and need no planning",
		}}
	cases := append([]int{}, cfg.Cases...)
	sort.Ints(cases)
	trials := append([]int{}, cfg.Trials...)
	sort.Ints(trials)
	di := 0
	for _, t := range trials {
		for _, n := range cases {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			di++
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(n)<<16|uint64(t)))
			failed, alarms := 0, 0
			var mdes []float64
			for range cfg.Reps {
				base := make([]float64, n)
				drop := make([]float64, n)
				for i := range base {
					base[i] = ps[rng.IntN(len(ps))]
					drop[i] = math.Max(0, base[i]-cfg.Drop)
				}
				for _, side := range []struct {
					cand  []float64
					count *int
				}{{drop, &failed}, {base, &alarms}} {
					s, err := simulate(base, side.cand, t, rng)
					if err != nil {
						return nil, err
					}
					r, cmp, err := s.gate(cfg.Policy, level)
					if err != nil {
						return nil, fmt.Errorf("plan: %w", err)
					}
					if !r.Passed {
						*side.count++
					}
					if side.count == &failed {
						m := math.Inf(1)
						if cmp.PassRateMDE != nil {
							m = *cmp.PassRateMDE
						}
						mdes = append(mdes, m)
					}
				}
			}
			sort.Float64s(mdes)
			lo, hi := stats.Wilson(failed, cfg.Reps, 0.95)
			row := PlanRow{Cases: n, Trials: t, Power: float64(failed) / float64(cfg.Reps), Lower: lo, Upper: hi,
				FalseAlarms: float64(alarms) / float64(cfg.Reps), MedianMDE: mdes[len(mdes)/2]}
			pl.Rows = append(pl.Rows, row)
			if row.Power >= cfg.Power && pl.Smallest[t] == 0 {
				pl.Smallest[t] = n
			}
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "plan: %d/%d designs (%d cases × %d trials: power %.2f)\n", di, len(cases)*len(trials), n, t, row.Power)
			}
		}
	}
	return pl, nil
}
