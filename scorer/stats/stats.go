// Package stats holds the estimators the scorer reports: pass@k and pass^k
// over repeated trials, percentile bootstrap confidence intervals (plain and
// paired), and the exact McNemar test on pass/fail flips.
//
// Randomness is always passed in (a *rand.Rand from math/rand/v2), so a
// report is reproducible from its seed.
package stats

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
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

// Interval is a two-sided confidence interval around a point estimate.
type Interval struct {
	Estimate   float64 `json:"estimate"`
	Lower      float64 `json:"lower"`
	Upper      float64 `json:"upper"`
	Level      float64 `json:"level"`     // e.g. 0.95
	Resamples  int     `json:"resamples"` // bootstrap resamples drawn
	SampleSize int     `json:"n"`         // observations (cases) resampled
	Method     string  `json:"method"`    // "percentile bootstrap"
}

// BootstrapConfig controls a bootstrap. Resamples ≥ 100; 0 < Level < 1.
type BootstrapConfig struct {
	Resamples int
	Level     float64
	Rand      *rand.Rand
}

// Validate reports a configuration error.
func (c BootstrapConfig) Validate() error {
	var errs []error
	if c.Resamples < 100 {
		errs = append(errs, fmt.Errorf("resamples = %d, need at least 100", c.Resamples))
	}
	if !(c.Level > 0 && c.Level < 1) {
		errs = append(errs, fmt.Errorf("level = %v, need 0 < level < 1", c.Level))
	}
	if c.Rand == nil {
		errs = append(errs, errors.New("rand: nil source (pass a seeded *rand.Rand)"))
	}
	return errors.Join(errs...)
}

// BootstrapMean returns the percentile bootstrap interval of the mean of xs:
// resample xs with replacement, take each resample's mean, and read the
// (1−level)/2 and (1+level)/2 quantiles of those means. The unit resampled
// is whatever xs holds (the scorer passes one value per case, since trials
// of one case are not independent of each other).
func BootstrapMean(xs []float64, cfg BootstrapConfig) (Interval, error) {
	if err := cfg.Validate(); err != nil {
		return Interval{}, fmt.Errorf("bootstrap: %w", err)
	}
	if len(xs) == 0 {
		return Interval{}, errors.New("bootstrap: no observations")
	}
	iv := Interval{Estimate: stat.Mean(xs, nil), Level: cfg.Level, Resamples: cfg.Resamples, SampleSize: len(xs), Method: "percentile bootstrap"}
	means := make([]float64, cfg.Resamples)
	n := len(xs)
	for b := range means {
		sum := 0.0
		for range n {
			sum += xs[cfg.Rand.IntN(n)]
		}
		means[b] = sum / float64(n)
	}
	slices.Sort(means)
	alpha := (1 - cfg.Level) / 2
	iv.Lower = stat.Quantile(alpha, stat.Empirical, means, nil)
	iv.Upper = stat.Quantile(1-alpha, stat.Empirical, means, nil)
	return iv, nil
}

// PairedBootstrapMeanDelta is the bootstrap interval of mean(cand − base)
// over paired observations: pairs are resampled together, so the case-to-
// case variation both runs share cancels out.
func PairedBootstrapMeanDelta(base, cand []float64, cfg BootstrapConfig) (Interval, error) {
	if len(base) != len(cand) {
		return Interval{}, fmt.Errorf("paired bootstrap: %d baseline values but %d candidate values", len(base), len(cand))
	}
	d := make([]float64, len(base))
	for i := range d {
		d[i] = cand[i] - base[i]
	}
	iv, err := BootstrapMean(d, cfg)
	if err != nil {
		return Interval{}, fmt.Errorf("paired %w", err)
	}
	iv.Method = "paired percentile bootstrap"
	return iv, nil
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
	// Sum binomial terms in log space: C(n,i)/2^n without forming C(n,i).
	lnHalfN := float64(n) * math.Ln2
	lgN, _ := math.Lgamma(float64(n + 1))
	tail := 0.0
	for i := 0; i <= lo; i++ {
		lgI, _ := math.Lgamma(float64(i + 1))
		lgNI, _ := math.Lgamma(float64(n - i + 1))
		tail += math.Exp(lgN - lgI - lgNI - lnHalfN)
	}
	m.PValue = math.Min(1, 2*tail)
	return m, nil
}
