package gate

import (
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
	cfg.Resamples = 1000
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
	if c["max_new_failures"].Passed || !strings.Contains(c["max_new_failures"].Detail, "cite-docs") {
		t.Errorf("max_new_failures: %+v", c["max_new_failures"])
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
	p, _ := Parse([]byte(`{"max_new_failures": 1, "min_delta_lower": -0.5, "max_cost_increase_pct": 10}`))
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
		`{"max_new_failure": 0}`:                `unknown field "max_new_failure"`,
		`{"max_new_failures": "0"}`:             "max_new_failures: wrong type",
		`{"min_delta_lower": -3}`:               "min_delta_lower",
		`{"mcnemar_alpha": 1.5}`:                "mcnemar_alpha",
		`{"must_pass": [""]}`:                   "must_pass[0]",
		`{"resamples": 5}`:                      "resamples",
		``:                                      "empty policy",
		`{} {}`:                                 "trailing",
		`{"min_pass_rate": 2, "confidence": 1}`: "confidence",
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
	cfg.Resamples = 200
	s, err := scorer.Score(cases, tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := Evaluate(&Policy{}, s, nil)
	if r.Passed || !strings.Contains(r.Failed()[0].Detail, "no trials: critical") {
		t.Fatalf("result %+v", r)
	}
}
