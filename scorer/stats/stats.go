// Package stats holds the estimators and tests the scorer reports and the
// gate decides on: pass@k and pass^k over repeated trials; confidence
// intervals for a suite's rates and for paired deltas whose coverage holds
// at 5–20 cases (adjusted t and paired adjusted Wald, both analytic, so a
// report needs no seed); the minimum detectable drop of a comparison;
// Fisher's exact test for one case's pass counts, deflated by the
// run-to-run design effect estimated across cases (trials of a case in
// one run are correlated), with Holm and Benjamini–Hochberg corrections
// across cases; a cluster-robust (CR2) paired interval for cases that
// declare groups; and the exact McNemar test on pass/fail flips.
//
// Every method's error rate is measured by the seeded simulation in
// scorer/calibration (docs/scoring.md).
package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/combin"
	"gonum.org/v1/gonum/stat/distuv"
)

// PassAtK is the unbiased estimator of the probability that at least one of
// k trials drawn without replacement from n (c of them passing) passes:
// 1 − C(n−c, k)/C(n, k) (Chen et al. 2021). It is computed as the product
// 1 − Π_{i=n−c+1..n} (1 − k/i), which never forms a binomial coefficient and
// so stays exact to floating point for any n.
func PassAtK(n, c, k int) (float64, error) {
	if err := checkNCK(n, c, k); err != nil {
		return 0, err
	}
	if n-c < k {
		return 1, nil // every k-subset contains a pass
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod, nil
}

// PassHatK is the probability that all of k trials drawn without
// replacement from n (c passing) pass: C(c, k)/C(n, k), as τ-bench defines
// pass^k. Computed as Π_{i=0..k−1} (c−i)/(n−i).
func PassHatK(n, c, k int) (float64, error) {
	if err := checkNCK(n, c, k); err != nil {
		return 0, err
	}
	if c < k {
		return 0, nil
	}
	prod := 1.0
	for i := 0; i < k; i++ {
		prod *= float64(c-i) / float64(n-i)
	}
	return prod, nil
}

func checkNCK(n, c, k int) error {
	switch {
	case n <= 0:
		return fmt.Errorf("pass@k: n = %d trials, need at least 1", n)
	case c < 0 || c > n:
		return fmt.Errorf("pass@k: c = %d passes out of n = %d", c, n)
	case k < 1 || k > n:
		return fmt.Errorf("pass@k: k = %d must be in 1..n = %d", k, n)
	}
	return nil
}

// McNemar is the exact (binomial) McNemar test on paired pass/fail outcomes.
// Only discordant pairs carry information: Regressed counts pairs that passed
// in the baseline and fail in the candidate, Fixed the reverse. Under the
// null hypothesis of no change each discordant pair is a fair coin, so the
// two-sided p-value is 2·P(X ≤ min(b, c)) for X ~ Binomial(b+c, 1/2),
// capped at 1 (and 1 when there are no discordant pairs).
type McNemar struct {
	Regressed int     `json:"regressed"` // b: pass → fail
	Fixed     int     `json:"fixed"`     // c: fail → pass
	PValue    float64 `json:"p_value"`
}

// McNemarExact runs the test.
func McNemarExact(regressed, fixed int) (McNemar, error) {
	if regressed < 0 || fixed < 0 {
		return McNemar{}, fmt.Errorf("mcnemar: negative counts %d, %d", regressed, fixed)
	}
	m := McNemar{Regressed: regressed, Fixed: fixed, PValue: 1}
	n := regressed + fixed
	if n == 0 {
		return m, nil
	}
	lo := min(regressed, fixed)
	tail := distuv.Binomial{N: float64(n), P: 0.5}.CDF(float64(lo))
	m.PValue = math.Min(1, 2*tail)
	return m, nil
}

// lnChoose is ln C(n, r) by log-gamma, finite for any n (0 ≤ r ≤ n).
func lnChoose(n, r int) float64 { return combin.LogGeneralizedBinomial(float64(n), float64(r)) }
