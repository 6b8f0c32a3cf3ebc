package gate

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
)

func load(t *testing.T) (*scorer.Suite, *scorer.Comparison) {
	t.Helper()
	cases, err := datasets.LoadCases("../testdata/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cfg := scorer.DefaultConfig()
	score := func(p string) *scorer.Suite {
		tr, err := datasets.LoadTrials(p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := scorer.Score(cases, tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base, cand := score("../testdata/baseline.jsonl"), score("../testdata/candidate.jsonl")
	cmp, err := scorer.Compare(base, cand, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cand, cmp
}

func checks(r *Result) map[string]Check {
	m := map[string]Check{}
	for _, c := range r.Checks {
		m[c.Name] = c
	}
	return m
}

func TestGateFailsARegressionAndSaysWhy(t *testing.T) {
	const path = "../testdata/policy.json"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseNamed(b, path)
	if err != nil {
		t.Fatal(err)
	}
	cand, cmp := load(t)
	r := Evaluate(p, cand, cmp)
	if r.Passed {
		t.Fatal("gate passed a run whose must-pass case stopped citing its evidence")
	}
	c := checks(r)
	// Both runs are scripted: a trial of cite-docs that passed now fails,
	// which is a change in behaviour, not noise.
	if c["case_regressions"].Passed || !strings.Contains(c["case_regressions"].Detail, "[cite-docs]") {
		t.Errorf("case_regressions: %+v", c["case_regressions"])
	}
	// Three paired cases cannot show a suite-level drop.
	if !c["regression"].Passed || !strings.Contains(c["regression"].Detail, "over 3 cases") {
		t.Errorf("regression: %+v", c["regression"])
	}
	if c["must_pass"].Passed || !strings.Contains(c["must_pass"].Detail, "cite-docs (1/2 trials passed)") {
		t.Errorf("must_pass: %+v", c["must_pass"])
	}
	// new-case has no cost: the ceiling cannot be shown to hold.
	if c["max_mean_cost_usd"].Passed || !strings.Contains(c["max_mean_cost_usd"].Detail, "unknown") {
		t.Errorf("max_mean_cost_usd: %+v", c["max_mean_cost_usd"])
	}
	// A missing case is reported, and by default not a failure.
	if m := c["missing_from_candidate"]; !m.Passed || !strings.Contains(m.Detail, "dropped-case") {
		t.Errorf("missing_from_candidate: %+v", m)
	}
	// One regression and one fix: McNemar sees no significant change.
	if !c["mcnemar_alpha"].Passed {
		t.Errorf("mcnemar_alpha: %+v", c["mcnemar_alpha"])
	}
}

func TestGatePassesWhenThePolicyHolds(t *testing.T) {
	p, _ := Parse([]byte(`{"regression": {}, "max_new_failures": 1, "max_cost_increase_pct": 10}`))
	cand, cmp := load(t)
	cand.MustPass = nil // the case file's must-pass flags are tested above
	r := Evaluate(p, cand, cmp)
	if !r.Passed {
		t.Fatalf("gate failed: %+v", r.Failed())
	}
}

func TestChecksThatNeedABaselineFailWithoutOne(t *testing.T) {
	p, _ := Parse([]byte(`{"max_new_failures": 0}`))
	cand, _ := load(t)
	r := Evaluate(p, cand, nil)
	if r.Passed || !strings.Contains(r.Failed()[0].Detail, "needs a baseline") {
		t.Fatalf("result %+v", r)
	}
}

func TestBadPoliciesNameTheKey(t *testing.T) {
	for body, want := range map[string]string{
		`{"max_new_failure": 0}`:                             `unknown field "max_new_failure"`,
		`{"max_new_failures": "0"}`:                          "max_new_failures: wrong type",
		`{"min_delta_lower": -3}`:                            "min_delta_lower",
		`{"mcnemar_alpha": 1.5}`:                             "mcnemar_alpha",
		`{"must_pass": [""]}`:                                "must_pass[0]",
		`{"resamples": 5}`:                                   "resamples: 5: intervals are analytic",
		`{"regression": {"metric": "score"}}`:                "regression.metric",
		`{"non_inferiority": {"margin": -0.1}}`:              "non_inferiority.margin",
		`{"case_regressions": {"correction": "bonferroni"}}`: "case_regressions.correction",
		`{"max_detectable_drop": 0.1}`:                       "max_detectable_drop: needs a regression rule",
		``:                                                   "empty policy",
		`{} {}`:                                              "trailing",
		`{"min_pass_rate": 2, "confidence": 1}`:              "confidence",
	} {
		_, err := Parse([]byte(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want it to mention %q", body, err, want)
		}
	}
}

func TestMustPassCaseWithoutTrialsFailsTheGate(t *testing.T) {
	cases := []datasets.Case{{ID: "a", Task: "t"}, {ID: "critical", Task: "t", MustPass: true}}
	ok := true
	tr := []datasets.Trial{{CaseID: "a", ModelLabel: "scripted", TraceID: "x", Success: &ok}}
	cfg := scorer.DefaultConfig()
	s, err := scorer.Score(cases, tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := Evaluate(&Policy{}, s, nil)
	if r.Passed || !strings.Contains(r.Failed()[0].Detail, "no trials: critical") {
		t.Fatalf("result %+v", r)
	}
}

// pairedSuites builds a baseline and candidate of n cases × trials with
// the given pass counts per case.
func pairedSuites(t *testing.T, label string, trials int, base, cand []int) (*scorer.Suite, *scorer.Comparison) {
	t.Helper()
	var cases []datasets.Case
	var bt, ct []datasets.Trial
	for i := range base {
		id := string(rune('a'+i/26)) + string(rune('a'+i%26))
		cases = append(cases, datasets.Case{ID: id, Task: "t"})
		for k := range trials {
			bt = append(bt, datasets.Trial{CaseID: id, Trial: k, ModelLabel: label, TraceID: "x", Success: ptr(k < base[i])})
			ct = append(ct, datasets.Trial{CaseID: id, Trial: k, ModelLabel: label, TraceID: "x", Success: ptr(k < cand[i])})
		}
	}
	cfg := scorer.DefaultConfig()
	b, err := scorer.Score(cases, bt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := scorer.Score(cases, ct, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := scorer.Compare(b, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cmp
}

func ptr[T any](v T) *T { return &v }

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestRegressionFailsOnlyWhenTheWholeIntervalIsBelowTheMargin(t *testing.T) {
	p, err := Parse([]byte(`{"regression": {"metric": "pass_rate"}}`))
	if err != nil {
		t.Fatal(err)
	}
	// 20 cases × 3 trials, every case drops from 3/3 to 1/3: a real drop.
	cand, cmp := pairedSuites(t, "live", 3, repeat(3, 20), repeat(1, 20))
	r := Evaluate(p, cand, cmp)
	if r.Passed || !strings.Contains(checks(r)["regression"].Detail, "pass rate delta -0.667") {
		t.Errorf("a drop of 0.667 on 20 cases: %+v", r.Checks)
	}
	// Two of 20 cases lose one trial each: within what random trials do.
	b := repeat(2, 20)
	c := append(repeat(2, 18), 1, 1)
	cand, cmp = pairedSuites(t, "live", 3, b, c)
	if r := Evaluate(p, cand, cmp); !r.Passed {
		t.Errorf("two cases losing one of three trials failed the gate: %+v", r.Checks)
	}
	if math.Abs(r.FalseAlarmBound-0.025) > 1e-12 || !strings.Contains(strings.Join(r.FalseAlarmParts, ""), "regression 2.5%") {
		t.Errorf("false-alarm bound %v %v, want 2.5%% from the regression rule", r.FalseAlarmBound, r.FalseAlarmParts)
	}
}

func TestCaseRegressionsAreExactForScriptedRunsAndTestedForRandomOnes(t *testing.T) {
	p, err := Parse([]byte(`{"case_regressions": {"alpha": 0.05, "max": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	b := repeat(3, 10)
	c := append(repeat(3, 9), 2)
	// Scripted: trial 2 of case 10 passed before and fails now; that is a
	// change in the code's behaviour, not noise.
	cand, cmp := pairedSuites(t, "scripted", 3, b, c)
	if r := Evaluate(p, cand, cmp); r.Passed || !strings.Contains(checks(r)["case_regressions"].Detail, "[aj]") {
		t.Errorf("scripted run with a flipped trial: %+v", r.Checks)
	}
	// Live: 3/3 → 2/3 on one case of ten is what random trials do.
	cand, cmp = pairedSuites(t, "live", 3, b, c)
	r := Evaluate(p, cand, cmp)
	if !r.Passed || !strings.Contains(checks(r)["case_regressions"].Detail, "changed within noise [aj]") {
		t.Errorf("live run, one trial lost: %+v", r.Checks)
	}
	// scripted_exact false tests scripted runs like random ones.
	p.ScriptedExact = ptr(false)
	cfg := scorer.DefaultConfig()
	if err := p.Apply(&cfg, Explicit{}); err != nil || cfg.ScriptedExact {
		t.Fatalf("apply: %v, scripted exact %v", err, cfg.ScriptedExact)
	}
}

func TestNonInferioritySaysWhenTheSuiteCannotResolveItsMargin(t *testing.T) {
	p, err := Parse([]byte(`{"non_inferiority": {"metric": "pass_rate", "margin": 0.01}}`))
	if err != nil {
		t.Fatal(err)
	}
	b := []int{3, 2, 1, 3, 0, 2, 3, 1, 2, 3, 3, 2, 1, 0, 3, 2, 2, 3, 1, 2}
	cand, cmp := pairedSuites(t, "live", 3, b, b) // nothing changed
	r := Evaluate(p, cand, cmp)
	d := checks(r)["non_inferiority"].Detail
	if r.Passed || !strings.Contains(d, "cannot resolve this margin") || !strings.Contains(d, "cases at this spread") {
		t.Errorf("a 0.01 margin on 20 cases: %+v", r.Checks)
	}
	if r.FalseAlarmBound != 0 || len(r.Unbounded) != 1 {
		t.Errorf("non-inferiority is not a bounded change test: bound %v unbounded %v", r.FalseAlarmBound, r.Unbounded)
	}
}

func TestPolicyConfidenceConflictingWithAnExplicitFlagIsAnError(t *testing.T) {
	p, err := Parse([]byte(`{"confidence": 0.9}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := scorer.DefaultConfig()
	if err := p.Apply(&cfg, Explicit{Level: true}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "confidence 0.9, --level says 0.95") {
		t.Errorf("explicit --level 0.95 vs policy 0.9: %v", err)
	}
	cfg.Level = 0.9
	if err := p.Apply(&cfg, Explicit{Level: true}); err != nil {
		t.Errorf("agreeing values: %v", err)
	}
	cfg = scorer.DefaultConfig()
	if err := p.Apply(&cfg, Explicit{}); err != nil || cfg.Level != 0.9 {
		t.Errorf("no flag: %v, level %v", err, cfg.Level)
	}
}
