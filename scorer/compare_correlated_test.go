package scorer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
)

// suitePair scores a baseline and a candidate of live trials: case i
// passes base[i] and cand[i] of its trials; groups[i] is its group.
func suitePair(t *testing.T, trials int, base, cand []int, groups []string) *Comparison {
	t.Helper()
	var cases []datasets.Case
	var bt, ct []datasets.Trial
	for i := range base {
		id := fmt.Sprintf("c%02d", i)
		c := datasets.Case{ID: id, Task: "t"}
		if groups != nil {
			c.Group = groups[i]
		}
		cases = append(cases, c)
		for k := range trials {
			bt = append(bt, datasets.Trial{CaseID: id, Trial: k, ModelLabel: "live", TraceID: "x", Success: bp(k < base[i])})
			ct = append(ct, datasets.Trial{CaseID: id, Trial: k, ModelLabel: "live", TraceID: "x", Success: bp(k < cand[i])})
		}
	}
	b, err := Score(cases, bt, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Score(cases, ct, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := Compare(b, c, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cmp
}

// Trials that agree within a run (each case all passed or all failed)
// carry one trial's worth of information: the per-case test says it cannot
// fire instead of declaring the flips regressions.
func TestCompareSaysWhenTheCaseTestCannotFire(t *testing.T) {
	base := make([]int, 20)
	cand := make([]int, 20)
	for i := range base {
		if i%2 == 0 {
			base[i] = 10
		}
		if i%3 != 0 {
			cand[i] = 10
		}
	}
	cmp := suitePair(t, 10, base, cand, nil)
	if cmp.CaseTestCanFire || !strings.Contains(cmp.CaseTest, "cannot fire at 10 trials per case") {
		t.Errorf("can fire %v: %s", cmp.CaseTestCanFire, cmp.CaseTest)
	}
	if len(cmp.Regressed) != 0 {
		t.Errorf("regressed %v", cmp.Regressed)
	}
	if cmp.CaseDispersion == nil || cmp.CaseDispersion.Estimate < 9 {
		t.Errorf("design effect %+v, want ≈ 10 or more (ICC 1 at 10 trials)", cmp.CaseDispersion)
	}
	if cmp.IntervalTrials != 1 {
		t.Errorf("interval pseudo-weight %v trials, want 1", cmp.IntervalTrials)
	}
}

// Independent-looking counts: the test can fire, and a case that went
// from 10/10 to 0/10 among unremarkable ones is declared regressed.
func TestCompareFindsARealRegressionAmongVaryingCases(t *testing.T) {
	base := []int{5, 6, 4, 7, 5, 3, 6, 5, 4, 6, 5, 7, 4, 5, 6, 5, 4, 6, 5, 10}
	cand := []int{6, 5, 5, 6, 4, 4, 5, 6, 5, 5, 6, 6, 5, 4, 5, 6, 5, 5, 4, 0}
	cmp := suitePair(t, 10, base, cand, nil)
	if !cmp.CaseTestCanFire || strings.Contains(cmp.CaseTest, "cannot fire") {
		t.Errorf("can fire %v: %s", cmp.CaseTestCanFire, cmp.CaseTest)
	}
	if len(cmp.Regressed) != 1 || cmp.Regressed[0] != "c19" {
		t.Errorf("regressed %v (%s)", cmp.Regressed, cmp.CaseTest)
	}
	if cmp.PassRateDelta.Clusters != 0 {
		t.Errorf("no groups, but %d clusters", cmp.PassRateDelta.Clusters)
	}
}

// Declared groups make the suite interval cluster-robust and say so; one
// group only falls back with a warning.
func TestCompareUsesGroupsForTheSuiteInterval(t *testing.T) {
	base := []int{3, 3, 2, 3, 1, 2, 3, 3}
	cand := []int{2, 3, 2, 3, 1, 1, 3, 2}
	groups := []string{"tool:a", "tool:a", "tool:b", "tool:b", "tool:c", "tool:c", "tool:d", "tool:d"}
	cmp := suitePair(t, 3, base, cand, groups)
	iv := cmp.PassRateDelta
	if iv.Clusters != 4 || !strings.Contains(iv.Method, "cluster-robust (CR2) over 4 groups") || cmp.MeanDelta.Clusters != 4 {
		t.Errorf("clusters %d method %q", iv.Clusters, iv.Method)
	}
	if cmp.Pairs[0].Group != "tool:a" {
		t.Errorf("pair group %q", cmp.Pairs[0].Group)
	}
	one := suitePair(t, 3, base, cand, []string{"x", "x", "x", "x", "x", "x", "x", "x"})
	if one.PassRateDelta.Clusters != 0 || len(one.Warnings) == 0 || !strings.Contains(one.Warnings[0], "at least 2 groups") {
		t.Errorf("one group: clusters %d warnings %v", one.PassRateDelta.Clusters, one.Warnings)
	}
}
