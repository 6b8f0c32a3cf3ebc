package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// independentPairs draws n cases' pass counts over t trials a side with no
// change and independent trials.
func independentPairs(rng *rand.Rand, n, t int) []Pair {
	ps := make([]Pair, n)
	for i := range ps {
		p := 0.2 + 0.7*rng.Float64()
		ps[i] = Pair{BaseN: t, CandN: t}
		for range t {
			if rng.Float64() < p {
				ps[i].BasePass++
			}
			if rng.Float64() < p {
				ps[i].CandPass++
			}
		}
	}
	return ps
}

func TestDispersionNearOneForIndependentTrials(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var sum float64
	const reps = 200
	for range reps {
		d, err := EstimateDispersion(independentPairs(rng, 100, 10))
		if err != nil {
			t.Fatal(err)
		}
		if d.Upper < 1 || d.Upper < d.Estimate {
			t.Fatalf("upper %v below 1 or the estimate %v", d.Upper, d.Estimate)
		}
		sum += d.Estimate
	}
	if m := sum / reps; math.Abs(m-1) > 0.08 {
		t.Errorf("mean estimate %.3f over %d draws of independent trials, want ≈ 1", m, reps)
	}
}

// With every trial of a case in a run agreeing (ICC 1), 10 trials are one:
// the design effect is about 10 or more, and no case can be declared.
func TestFullyCorrelatedTrialsCannotFire(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var pairs []Pair
	for range 100 {
		p := 0.2 + 0.7*rng.Float64()
		b, c := 0, 0
		if rng.Float64() < p {
			b = 10
		}
		if rng.Float64() < p {
			c = 10
		}
		pairs = append(pairs, Pair{BasePass: b, BaseN: 10, CandPass: c, CandN: 10})
	}
	d, err := EstimateDispersion(pairs)
	if err != nil {
		t.Fatal(err)
	}
	if d.Upper < 9 {
		t.Errorf("design effect upper bound %.2f with ICC 1 at 10 trials, want ≥ 9", d.Upper)
	}
	s, err := SmallestAdjusted(pairs, d.Upper, Holm)
	if err != nil {
		t.Fatal(err)
	}
	if s < 0.05 {
		t.Errorf("smallest Holm-adjusted p %.3g: the test could fire", s)
	}
	p, err := OverdispersedFisher(Pair{BasePass: 10, BaseN: 10, CandPass: 0, CandN: 10}, d.Upper)
	if err != nil {
		t.Fatal(err)
	}
	if p < 0.5 {
		t.Errorf("10/10 → 0/10 at design effect %.1f: p = %.3g, want ≥ 0.5 (one effective trial a side)", d.Upper, p)
	}
}

// At design effect 1 the test is Fisher's.
func TestOverdispersedFisherAtOneIsFisher(t *testing.T) {
	for _, p := range []Pair{{10, 10, 0, 10}, {7, 10, 3, 10}, {3, 3, 0, 3}, {2, 5, 4, 5}} {
		want, err := FisherOneSided(p.BasePass, p.BaseN, p.CandPass, p.CandN)
		if err != nil {
			t.Fatal(err)
		}
		got, err := OverdispersedFisher(p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%v: %v, Fisher %v", p, got, want)
		}
	}
	// Deflation: 10 trials at design effect 2.5 count as 4.
	e := Pair{BasePass: 10, BaseN: 10, CandPass: 5, CandN: 10}.Effective(2.5)
	if e != (Pair{BasePass: 4, BaseN: 4, CandPass: 2, CandN: 4}) {
		t.Errorf("effective %+v", e)
	}
	if _, err := OverdispersedFisher(Pair{BasePass: 1, BaseN: 1, CandPass: 0, CandN: 1}, 0.5); err == nil {
		t.Error("design effect below 1 accepted")
	}
}

// A few large real regressions among many unchanged cases barely move
// the (winsorized) estimate, and are still found after Holm.
func TestRealRegressionsAmongManyAreFound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pairs := independentPairs(rng, 100, 10)
	for i := range 3 {
		pairs[i] = Pair{BasePass: 10, BaseN: 10, CandPass: 0, CandN: 10}
	}
	d, err := EstimateDispersion(pairs)
	if err != nil {
		t.Fatal(err)
	}
	if d.Estimate > 1.3 {
		t.Errorf("3 regressions of 100 cases pushed the estimate to %.2f", d.Estimate)
	}
	ps := make([]float64, len(pairs))
	for i, p := range pairs {
		if ps[i], err = OverdispersedFisher(p, d.Upper); err != nil {
			t.Fatal(err)
		}
	}
	adj, err := Adjust(ps, Holm)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if adj[i] >= 0.025 {
			t.Errorf("regression %d: Holm-adjusted p %.3g at design effect %.2f, not found", i, adj[i], d.Upper)
		}
	}
	for i := 3; i < len(adj); i++ {
		if adj[i] < 0.025 {
			t.Errorf("unchanged case %d %+v declared (p %.3g)", i, pairs[i], adj[i])
		}
	}
}

// Under a per-run case effect (ICC 0.25, 10 trials) the corrected test
// keeps its family-wise error, where Fisher on raw counts does not.
func TestFamilyWiseErrorUnderICC(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const reps, icc = 300, 0.25
	var ours, fisher int
	draw := func(p float64) int {
		a, b := p*(1-icc)/icc, (1-p)*(1-icc)/icc
		x, y := gammaDraw(rng, a), gammaDraw(rng, b)
		q := x / (x + y)
		k := 0
		for range 10 {
			if rng.Float64() < q {
				k++
			}
		}
		return k
	}
	for range reps {
		var pairs []Pair
		for range 100 {
			p := 0.2 + 0.7*rng.Float64()
			pairs = append(pairs, Pair{BasePass: draw(p), BaseN: 10, CandPass: draw(p), CandN: 10})
		}
		d, err := EstimateDispersion(pairs)
		if err != nil {
			t.Fatal(err)
		}
		var po, pf []float64
		for _, p := range pairs {
			v, _ := OverdispersedFisher(p, d.Upper)
			w, _ := FisherOneSided(p.BasePass, p.BaseN, p.CandPass, p.CandN)
			po, pf = append(po, v), append(pf, w)
		}
		ao, _ := Adjust(po, Holm)
		af, _ := Adjust(pf, Holm)
		if minOf(ao) < 0.025 {
			ours++
		}
		if minOf(af) < 0.025 {
			fisher++
		}
	}
	if r := float64(ours) / reps; r > 0.025+0.025 {
		t.Errorf("design-effect test: family-wise false alarms %.3f at ICC %g", r, icc)
	}
	if r := float64(fisher) / reps; r < 0.15 {
		t.Errorf("Fisher on raw counts false-alarmed only %.3f; the simulation shows nothing", r)
	}
	t.Logf("family-wise false alarms at ICC %g, 100 cases × 10 trials: design effect %d/%d, raw Fisher %d/%d", icc, ours, reps, fisher, reps)
}

func minOf(xs []float64) float64 {
	m := 1.0
	for _, x := range xs {
		m = math.Min(m, x)
	}
	return m
}

// gammaDraw is a Gamma(a, 1) draw (Marsaglia & Tsang), for the test's
// Beta draws.
func gammaDraw(rng *rand.Rand, a float64) float64 {
	if a < 1 {
		return gammaDraw(rng, a+1) * math.Pow(rng.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

func TestDispersionRejectsBadCounts(t *testing.T) {
	if _, err := EstimateDispersion([]Pair{{BasePass: 4, BaseN: 3, CandN: 3}}); err == nil {
		t.Error("4/3 accepted")
	}
	d, err := EstimateDispersion([]Pair{{BasePass: 3, BaseN: 3, CandPass: 3, CandN: 3}})
	if err != nil || d.Cases != 0 || d.Upper != 1 {
		t.Errorf("nothing varies: %+v, %v", d, err)
	}
}

// The cluster-robust interval against a hand computation: 4 cases in 2
// groups, 1 trial each.
func TestClusteredIntervalByHand(t *testing.T) {
	base := []float64{1, 1, 0, 1}
	cand := []float64{0, 1, 0, 0}
	groups := []string{"a", "a", "b", "b"}
	iv, err := ClusteredPairedDeltaInterval(base, cand, groups, 1, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	// d = −1, 0, 0, −1; one pseudo-trial at −1 and +1: W = 6,
	// center c = (−2 − 1 + 1)/6 = −1/3. Residuals d − c: −2/3, 1/3, 1/3,
	// −2/3; group sums S_a = S_b = −1/3, leverage 2/6, so each group adds
	// (1/9)/(2/3) = 1/6; the pseudo terms add (−1+1/3)² + (1+1/3)² = 4/9 +
	// 16/9 = 20/9. se = √(1/6 + 1/6 + 20/9)/6; t with 1 df.
	c := -1.0 / 3
	se := math.Sqrt(1.0/6+1.0/6+20.0/9) / 6
	q := 12.706204736174707 // t_{0.975, 1}
	if math.Abs(iv.Center-c) > 1e-12 || math.Abs(iv.StdErr-se) > 1e-12 || math.Abs(iv.Quantile-q) > 1e-9 {
		t.Errorf("center %v se %v q %v, want %v %v %v", iv.Center, iv.StdErr, iv.Quantile, c, se, q)
	}
	if iv.Clusters != 2 || iv.Lower != -1 || iv.Upper != 1 {
		t.Errorf("clusters %d, interval [%v, %v]", iv.Clusters, iv.Lower, iv.Upper)
	}
	// One group: no between-group variance; the independent interval.
	one, err := ClusteredPairedDeltaInterval(base, cand, []string{"a", "a", "a", "a"}, 1, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := PairedDeltaInterval(base, cand, 1, 0.95)
	if one.Clusters != 0 || one != plain {
		t.Errorf("one group: %+v, want the plain interval %+v", one, plain)
	}
	// Ungrouped cases are groups of their own: all empty = 4 clusters.
	each, _ := ClusteredPairedDeltaInterval(base, cand, []string{"", "", "", ""}, 1, 0.95)
	if each.Clusters != 4 {
		t.Errorf("ungrouped cases: %d clusters, want 4", each.Clusters)
	}
	if _, err := ClusteredPairedDeltaInterval(base, cand, groups[:3], 1, 0.95); err == nil {
		t.Error("3 groups for 4 cases accepted")
	}
}
