package stats

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Pair is one case's pass counts in a baseline run and a candidate run.
type Pair struct {
	BasePass, BaseN, CandPass, CandN int
}

func (p Pair) check() error {
	if p.BaseN < 1 || p.CandN < 1 || p.BasePass < 0 || p.BasePass > p.BaseN || p.CandPass < 0 || p.CandPass > p.CandN {
		return fmt.Errorf("counts %d/%d and %d/%d", p.BasePass, p.BaseN, p.CandPass, p.CandN)
	}
	return nil
}

// informative: the pair's pooled passes are neither none nor all, so its
// 2×2 table has a Pearson statistic (a case that passed, or failed, every
// trial in both runs says nothing about the run-to-run spread).
func (p Pair) informative() bool {
	k := p.BasePass + p.CandPass
	return k > 0 && k < p.BaseN+p.CandN
}

// dispersionStat is (N−1)/N times the Pearson X² of the pair's 2×2 table
// when the baseline passed x times: under independent trials and no
// change, its expectation given the table's margins is exactly 1 (the
// hypergeometric variance), whatever the case's pass probability.
func dispersionStat(x, n, m, k int) float64 {
	N := float64(n + m)
	num := N*float64(x) - float64(n)*float64(k)
	return (N - 1) * num * num / (float64(n) * float64(m) * float64(k) * float64(n+m-k))
}

// DispersionCap is where one case's contribution to the dispersion
// estimate is capped, in units of the estimate: χ²₁'s 95% point, so a few
// real regressions (whose Pearson statistics are huge) cannot inflate the
// run-to-run spread every other case is tested against.
const DispersionCap = 3.841458820694124

// DispersionUpperQuantile sets how conservative the design effect used by
// the per-case test is: the estimate's 75% upper bound (the estimate is a
// mean of about one χ²₁ per informative case, so its uncertainty at 20
// cases is large, and a per-case test reads the far tail).
const DispersionUpperQuantile = 0.75

// Dispersion is the run-to-run overdispersion of per-case pass counts,
// estimated across the paired cases of one baseline and one candidate run.
type Dispersion struct {
	// Estimate is the design effect φ: how many times the variance of a
	// case's pass-count difference exceeds what independent trials give
	// (1 + (t−1)·ICC for t trials per run with intra-class correlation
	// ICC). Upper is its one-sided DispersionUpperQuantile bound, at least
	// 1; the per-case test uses Upper.
	Estimate float64 `json:"estimate"`
	Upper    float64 `json:"upper"`
	// Cases is the number of informative pairs the estimate rests on.
	Cases int `json:"cases"`
}

// EstimateDispersion estimates the design effect across pairs.
//
// Why across cases: trials of one case in one run share that run's state
// of the case (a per-run case effect), so they are not independent draws,
// and with one run per side the only information about how much a case's
// pass rate moves between runs of an unchanged agent is the ensemble of
// cases. Method: each informative pair gives c = (N−1)/N·X², whose
// expectation is 1 under independent trials (exactly, given the margins)
// and about φ under overdispersion. The estimate is the Huber-type
// winsorized mean: the root of Σ min(cᵢ, Cap·φ) = φ·Σ κᵢ, where κᵢ is
// E[min(c, Cap)] under the pair's own hypergeometric null (so the cap's
// bias is corrected exactly, discreteness included). Upper divides by the
// χ²_K quantile: φ·K/χ²_K(1 − DispersionUpperQuantile).
func EstimateDispersion(pairs []Pair) (Dispersion, error) {
	var cs, ks []float64
	for i, p := range pairs {
		if err := p.check(); err != nil {
			return Dispersion{}, fmt.Errorf("dispersion: pair %d: %w", i, err)
		}
		if !p.informative() {
			continue
		}
		n, m, k := p.BaseN, p.CandN, p.BasePass+p.CandPass
		cs = append(cs, dispersionStat(p.BasePass, n, m, k))
		ks = append(ks, cappedNullMean(n, m, k, DispersionCap))
	}
	d := Dispersion{Estimate: 1, Upper: 1, Cases: len(cs)}
	if len(cs) == 0 {
		return d, nil // nothing varies: no case can be tested either
	}
	var sumK, hi float64
	for i := range cs {
		sumK += ks[i]
		hi += cs[i]
	}
	hi /= sumK // g(hi) ≤ 0: the root is in (0, hi]
	g := func(phi float64) float64 {
		var s float64
		for _, c := range cs {
			s += math.Min(c, DispersionCap*phi)
		}
		return s - phi*sumK
	}
	lo := 0.0
	if hi > 0 {
		for range 100 {
			mid := (lo + hi) / 2
			if g(mid) > 0 {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	phi := (lo + hi) / 2
	q := distuv.ChiSquared{K: float64(len(cs))}.Quantile(1 - DispersionUpperQuantile)
	d.Estimate = phi
	d.Upper = math.Max(1, phi*float64(len(cs))/q)
	return d, nil
}

// cappedNullMean is E[min(c, cap)] when the baseline's passes are
// hypergeometric given k passes among n + m trials.
func cappedNullMean(n, m, k int, cap float64) float64 {
	den := lnChoose(n+m, k)
	var s float64
	for x := max(0, k-m); x <= min(n, k); x++ {
		s += math.Exp(lnChoose(n, x)+lnChoose(m, k-x)-den) * math.Min(dispersionStat(x, n, m, k), cap)
	}
	return s
}

// Effective is a pair's counts deflated by a design effect (Rao & Scott's
// first-order correction: divide the counts by the design effect and apply
// the test for independent trials): trials become ⌊n/φ⌋ (at least 1) and
// passes keep their share, rounded.
func (p Pair) Effective(phi float64) Pair {
	if !(phi > 1) {
		return p
	}
	eff := func(pass, n int) (int, int) {
		ne := max(1, int(math.Floor(float64(n)/phi+1e-9)))
		return int(math.Round(float64(pass) * float64(ne) / float64(n))), ne
	}
	var q Pair
	q.BasePass, q.BaseN = eff(p.BasePass, p.BaseN)
	q.CandPass, q.CandN = eff(p.CandPass, p.CandN)
	return q
}

// OverdispersedFisher is the one-sided p-value that the candidate passes
// less often than the baseline, with trials correlated within a run by the
// design effect phi: Fisher's exact test on the counts deflated by phi
// (Pair.Effective). phi = 1 is Fisher's test; phi ≥ the trials per run
// leaves one effective trial a side, and the test cannot reach p < 1/2.
func OverdispersedFisher(p Pair, phi float64) (float64, error) {
	if err := p.check(); err != nil {
		return 0, fmt.Errorf("fisher: %w", err)
	}
	if math.IsNaN(phi) || phi < 1 {
		return 0, fmt.Errorf("fisher: design effect %v, need ≥ 1", phi)
	}
	e := p.Effective(phi)
	return FisherOneSided(e.BasePass, e.BaseN, e.CandPass, e.CandN)
}

// MostExtremeP is the smallest p-value OverdispersedFisher can give the
// pair's trial counts: every baseline trial passed, every candidate trial
// failed.
func MostExtremeP(p Pair, phi float64) (float64, error) {
	return OverdispersedFisher(Pair{BasePass: p.BaseN, BaseN: p.BaseN, CandPass: 0, CandN: p.CandN}, phi)
}

// ErrNoPairs is returned when a per-case check has no cases.
var ErrNoPairs = errors.New("no paired cases")

// SmallestAdjusted is the smallest corrected p-value the per-case test can
// reach at these trial counts and design effect, i.e. when every case is
// as extreme as it can be: if it is not below alpha, no case can be
// declared regressed whatever the candidate does.
func SmallestAdjusted(pairs []Pair, phi float64, method string) (float64, error) {
	if len(pairs) == 0 {
		return 1, ErrNoPairs
	}
	ps := make([]float64, len(pairs))
	for i, p := range pairs {
		v, err := MostExtremeP(p, phi)
		if err != nil {
			return 0, fmt.Errorf("pair %d: %w", i, err)
		}
		ps[i] = v
	}
	adj, err := Adjust(ps, method)
	if err != nil {
		return 0, err
	}
	m := 1.0
	for _, v := range adj {
		m = math.Min(m, v)
	}
	return m, nil
}
