package stats

import (
	"fmt"
	"math"
	"sort"
)

// FisherOneSided is the exact one-sided p-value that the candidate's pass
// probability is lower than the baseline's, from basePass of baseN and
// candPass of candN trials (Fisher's exact test: conditional on the total
// passes, the baseline's share is hypergeometric; p = P(X ≥ basePass)).
// With 3 trials a side the smallest possible p is 1/20 = 0.05 (3/3 → 0/3),
// so a single case can never be significant at 0.05 after correction:
// that is what 3 random trials can say, and the report says so.
func FisherOneSided(basePass, baseN, candPass, candN int) (float64, error) {
	if baseN < 1 || candN < 1 || basePass < 0 || basePass > baseN || candPass < 0 || candPass > candN {
		return 0, fmt.Errorf("fisher: counts %d/%d and %d/%d", basePass, baseN, candPass, candN)
	}
	k := basePass + candPass // total passes
	N := baseN + candN
	// P(X = x) = C(baseN, x) C(candN, k−x) / C(N, k)
	lc := lnChoose
	den := lc(N, k)
	p := 0.0
	for x := basePass; x <= min(baseN, k); x++ {
		if k-x > candN {
			continue
		}
		p += math.Exp(lc(baseN, x) + lc(candN, k-x) - den)
	}
	return math.Min(1, p), nil
}

// Multiple-testing corrections.
const (
	Holm              = "holm" // family-wise error rate (Holm 1979)
	BenjaminiHochberg = "bh"   // false discovery rate (Benjamini & Hochberg 1995)
)

// Adjust returns adjusted p-values in the input order: compare each with
// alpha. Holm controls the chance of any false "regressed" among the cases;
// BH the expected share of false ones among those declared.
func Adjust(ps []float64, method string) ([]float64, error) {
	n := len(ps)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
		if math.IsNaN(ps[i]) || ps[i] < 0 || ps[i] > 1 {
			return nil, fmt.Errorf("adjust: p-value %d = %v is not in [0, 1]", i, ps[i])
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return ps[idx[a]] < ps[idx[b]] })
	out := make([]float64, n)
	switch method {
	case Holm:
		run := 0.0
		for r, i := range idx {
			v := math.Min(1, float64(n-r)*ps[i])
			run = math.Max(run, v) // step-down: adjusted values never decrease
			out[i] = run
		}
	case BenjaminiHochberg:
		run := 1.0
		for r := n - 1; r >= 0; r-- {
			i := idx[r]
			v := math.Min(1, float64(n)*ps[i]/float64(r+1))
			run = math.Min(run, v) // step-up
			out[i] = run
		}
	default:
		return nil, fmt.Errorf("adjust: unknown correction %q (want %q or %q)", method, Holm, BenjaminiHochberg)
	}
	return out, nil
}
