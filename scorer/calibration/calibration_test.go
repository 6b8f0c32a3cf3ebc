package calibration

import (
	"context"
	"os"
	"strings"
	"testing"

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
func TestCommittedPolicyIsCalibratedOnRandomAgents(t *testing.T) {
	reps := 200
	if testing.Short() {
		reps = 60
	}
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
