package calibration

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
)

func loadPolicy(t testing.TB, path string) *gate.Policy {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := gate.ParseNamed(b, path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The committed policy is calibrated: on random agents at 5, 20 and 100
// cases × 1 and 3 trials, its false alarms stay within its stated bound,
// it detects drops its reported MDE says it can, and its intervals cover.
// The old policy, run on the same draws, is shown failing for contrast.
//
// 200 reps in every tier. Check tests each requirement as a one-sided
// binomial test at 0.001, so its tolerance widens as reps shrink. At 200 it
// passes up to 21 false alarms against the committed policy's 5% bound
// (10.5%), coverage from 87% (the requirement is 93%) and detection from
// 71% (80%); it catches a 15% false-alarm rate with probability 0.96, 85%
// coverage with 0.75 and 65% detection with 0.96. At 100 reps the
// tolerances are 13% / 84% / 67% and those chances 0.65 / 0.33 / 0.62; at
// 60 (the old -short count) 15% / 82% / 63% and 0.41 / 0.18 / 0.34: a
// policy three times over its bound would pass more often than not. Fewer
// reps would be a weaker check, not a shorter one.
func TestCommittedPolicyIsCalibratedOnRandomAgents(t *testing.T) {
	testtier.Slow(t)
	t.Parallel()
	const reps = 200
	res, err := Run(context.Background(), Config{
		Designs: DefaultDesigns(), Reps: reps, Seed: 1, DifficultyLo: 0.2, DifficultyHi: 0.9,
		Policies: []NamedPolicy{{"committed", loadPolicy(t, "../../baselines/policy.json")}, {"old", loadPolicy(t, "testdata/old-policy.json")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Check() {
		t.Error(e)
	}
	var checked, oldAlarms int
	for _, c := range res.Cells {
		if c.Outcomes[0].Holds != nil {
			checked++
		}
		if c.Effect == 0 && c.Outcomes[1].Rate > 0.5 {
			oldAlarms++
		}
		t.Logf("%3d×%d %+.2f: committed %.3f old %.3f coverage %.3f rate coverage %.3f MDE %.3f",
			c.Cases, c.Trials, c.Effect, c.Outcomes[0].Rate, c.Outcomes[1].Rate, c.DeltaCoverage, c.RateCoverage, c.MedianMDE)
	}
	// Every zero-effect design and at least the large ones below zero state
	// a requirement: the check cannot pass by checking nothing.
	if checked < 9 {
		t.Errorf("only %d designs stated a requirement", checked)
	}
	// The old policy's non-inferiority margin of 0.01 and "no flip" rule
	// fail an unchanged random agent most of the time.
	if oldAlarms < 4 {
		t.Errorf("old policy false-alarmed in only %d of 6 zero-effect designs; the comparison shows nothing", oldAlarms)
	}
}

func TestCheckFailsAPolicyThatFalseAlarms(t *testing.T) {
	// A policy that fails on any all-trials flip false-alarms far above a
	// stated bound; give it a bound by adding a regression rule and make
	// sure Check catches the excess.
	p, err := gate.Parse([]byte(`{"regression": {}, "max_new_failures": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Designs: []Design{{Cases: 20, Trials: 3}}, Reps: 100, Seed: 3, DifficultyLo: 0.2, DifficultyHi: 0.9,
		Policies: []NamedPolicy{{"noisy", p}}})
	if err != nil {
		t.Fatal(err)
	}
	if errs := res.Check(); len(errs) == 0 {
		t.Errorf("false-alarm rate %.2f passed the check", res.Cells[0].Outcomes[0].Rate)
	}
}

func TestConfigValidateNamesTheProblem(t *testing.T) {
	c := Config{Designs: []Design{{Cases: 0, Trials: 1, Effect: -0.5}}, Reps: 5, DifficultyLo: 0.2, DifficultyHi: 0.9}
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"0 cases", "outside [0, 1]", "reps = 5", "no policies"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestPlanFindsMoreCasesForASmallerDrop(t *testing.T) {
	testtier.Slow(t)
	t.Parallel()
	// A baseline of 20 cases with mixed pass counts over 3 trials.
	var cases []scorer.CaseResult
	for i := range 20 {
		cases = append(cases, scorer.CaseResult{CaseID: "c", Trials: 3, Passes: i % 4})
	}
	base := &scorer.Suite{Cases: cases}
	p, err := gate.Parse([]byte(`{"regression": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	run := func(drop float64) *Plan {
		pl, err := RunPlan(context.Background(), PlanConfig{Baseline: base, Drop: drop, Policy: p, Cases: []int{10, 40, 160}, Trials: []int{3}, Power: 0.8, Reps: 80, Seed: 2})
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	big, small := run(0.3), run(0.1)
	if big.Smallest[3] == 0 || (small.Smallest[3] != 0 && small.Smallest[3] <= big.Smallest[3]) {
		t.Errorf("smallest cases: drop 0.3 → %d, drop 0.1 → %d; want more cases for the smaller drop", big.Smallest[3], small.Smallest[3])
	}
	for _, r := range append(big.Rows, small.Rows...) {
		if r.FalseAlarms > 0.1 {
			t.Errorf("design %d×%d: %.2f false alarms with no drop", r.Cases, r.Trials, r.FalseAlarms)
		}
	}
	// Power grows with cases.
	if !(big.Rows[0].Power <= big.Rows[2].Power) {
		t.Errorf("power %v at 10 cases > %v at 160", big.Rows[0].Power, big.Rows[2].Power)
	}
	if _, err := RunPlan(context.Background(), PlanConfig{Baseline: base, Drop: 0, Policy: p, Cases: []int{10}, Trials: []int{3}, Power: 0.8, Reps: 80}); err == nil || !strings.Contains(err.Error(), "drop 0") {
		t.Errorf("drop 0: %v", err)
	}
}

// The committed policy on correlated runs, a short seeded grid (a few
// seconds): trials sharing a per-run case effect (ICC 0.5 and 1 at 10
// trials) and cases sharing per-run shocks in 10 declared groups. False
// alarms stay within the stated bound (plus Monte-Carlo slack), per check
// as well, the per-case check never false-alarms, and the paired interval
// covers ≥ 93%; Fisher on raw trial counts, on the same draws, flags a
// case far more often than its 2.5%.
func TestCommittedPolicyHoldsOnCorrelatedRuns(t *testing.T) {
	testtier.Slow(t)
	t.Parallel()
	const reps = 100
	designs := []Design{
		{Cases: 20, Trials: 10, ICC: 0.5},
		{Cases: 20, Trials: 10, ICC: 1},
		{Cases: 100, Trials: 3, Groups: 10, ShockSD: 0.5},
	}
	res, err := Run(context.Background(), Config{Designs: designs, Reps: reps, Seed: 7, DifficultyLo: 0.2, DifficultyHi: 0.9,
		Policies: []NamedPolicy{{"committed", loadPolicy(t, "../../baselines/policy.json")}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Check() {
		t.Error(e)
	}
	slack := 2 * math.Sqrt(0.05*0.95/reps) // two Monte-Carlo SEs at the bound
	for _, c := range res.Cells {
		o := c.Outcomes[0]
		if o.Rate > o.Bound+slack {
			t.Errorf("%s: false alarms %.3f, bound %.3f", c.label(), o.Rate, o.Bound)
		}
		for _, ck := range o.Checks {
			if ck.Check == "case_regressions" {
				t.Errorf("%s: the per-case check false-alarmed %d/%d", c.label(), ck.Failed, reps)
			}
			if ck.Bound != nil && ck.Rate > *ck.Bound+slack {
				t.Errorf("%s: %s false alarms %.3f, bound %.3f", c.label(), ck.Check, ck.Rate, *ck.Bound)
			}
		}
		if c.DeltaCoverage < 0.93 {
			t.Errorf("%s: paired interval coverage %.3f", c.label(), c.DeltaCoverage)
		}
		if o.Verdict != "holds" {
			t.Errorf("%s: verdict %q", c.label(), o.Verdict)
		}
		t.Logf("%s: fails %.3f, raw Fisher %.3f, can fire %.2f, coverage %.3f (without groups %s)", c.label(), o.Rate, *c.FisherCaseAlarms, c.CaseTestCanFire, c.DeltaCoverage, optPct(c.NaiveCoverage))
	}
	if f := *res.Cells[0].FisherCaseAlarms; f < 0.3 {
		t.Errorf("raw Fisher flagged a case in only %.2f of ICC 0.5 draws; the contrast shows nothing", f)
	}
	if n := *res.Cells[2].NaiveCoverage; n > 0.9 {
		t.Errorf("the interval without groups covered %.2f under shocks; the contrast shows nothing", n)
	}
}

func TestCorrelatedDesignValidation(t *testing.T) {
	c := Config{Designs: []Design{{Cases: 10, Trials: 3, ICC: 1.5}, {Cases: 10, Trials: 3, Groups: 11}, {Cases: 10, Trials: 3, ShockSD: 0.5}}, Reps: 10, DifficultyLo: 0.2, DifficultyHi: 0.9,
		Policies: []NamedPolicy{{"p", &gate.Policy{}}}}
	err := c.Validate()
	for _, want := range []string{"ICC 1.5", "11 groups for 10 cases", "a shock needs groups"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}
