package gate

import (
	"math"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/stats"
)

// The gate's details say when the suite interval is cluster-robust and
// when the per-case test cannot fire.
func TestGateDetailNamesGroupsAndACaseTestThatCannotFire(t *testing.T) {
	p, err := Parse([]byte(`{"regression": {}, "case_regressions": {"alpha": 0.025, "max": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	iv := &stats.Interval{Estimate: -0.01, Lower: -0.05, Upper: 0.03, Level: 0.95, SampleSize: 100, Center: -0.01, StdErr: 0.02, Quantile: 2.26, Shrink: 0.99, Clusters: 10}
	cmp := &scorer.Comparison{PassRateDelta: iv, MeanDelta: iv, Power: 0.8, Regressed: []string{},
		CaseTest: "the per-case test cannot fire at 3 trials per case (…)"}
	r := Evaluate(p, &scorer.Suite{Level: 0.95}, cmp)
	var reg, cs string
	for _, c := range r.Checks {
		switch c.Name {
		case "regression":
			reg = c.Detail
		case "case_regressions":
			cs = c.Detail
		}
	}
	if !strings.Contains(reg, "cluster-robust over 10 groups") {
		t.Errorf("regression detail: %s", reg)
	}
	if !strings.Contains(cs, "cannot fire at 3 trials per case") {
		t.Errorf("case detail: %s", cs)
	}
	if b := p.CheckBounds(0.95); math.Abs(b["regression"]-0.025) > 1e-12 || b["case_regressions"] != 0.025 {
		t.Errorf("check bounds %v", b)
	}
}
