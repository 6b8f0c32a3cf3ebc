package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Wilson is the Wilson score interval of k successes in n independent
// trials at the given confidence level (e.g. 0.95): the rate intervals of
// the evaluation harnesses whose trials are independent (the injection
// suite, the memory ablation, the interval calibration). It returns 0, 0
// for n = 0, and never leaves [0, 1].
func Wilson(k, n int, level float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 0
	}
	z := distuv.UnitNormal.Quantile(1 - (1-level)/2)
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return math.Max(0, mid-half), math.Min(1, mid+half)
}
