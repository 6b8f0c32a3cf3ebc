package stats

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// bonettPrice is the closed form of Bonett & Price (2012) for paired binary
// outcomes, written from the paper's formulas (n12: pass→fail, n21:
// fail→pass), independently of adjusted().
func bonettPrice(n12, n21, n int, z float64) (lo, hi float64) {
	p12 := float64(n12+1) / float64(n+2)
	p21 := float64(n21+1) / float64(n+2)
	d := p21 - p12 // candidate minus baseline
	se := math.Sqrt((p12 + p21 - (p21-p12)*(p21-p12)) / float64(n+2))
	return d - z*se, d + z*se
}

func TestPairedIntervalIsBonettPriceForOneTrialPerCase(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 200 {
		n := 2 + rng.IntN(60)
		base, cand := make([]float64, n), make([]float64, n)
		n12, n21 := 0, 0
		for i := range base {
			base[i], cand[i] = float64(rng.IntN(2)), float64(rng.IntN(2))
			switch {
			case base[i] == 1 && cand[i] == 0:
				n12++
			case base[i] == 0 && cand[i] == 1:
				n21++
			}
		}
		iv, err := PairedDeltaInterval(base, cand, 1, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := bonettPrice(n12, n21, n, 1.959963984540054)
		if math.Abs(iv.Lower-math.Max(-1, lo)) > 1e-12 || math.Abs(iv.Upper-math.Min(1, hi)) > 1e-12 {
			t.Fatalf("n=%d n12=%d n21=%d: interval [%v, %v], Bonett–Price [%v, %v]", n, n12, n21, iv.Lower, iv.Upper, lo, hi)
		}
		if want := float64(n21-n12) / float64(n); math.Abs(iv.Estimate-want) > 1e-12 {
			t.Fatalf("estimate %v, want the plain mean delta %v", iv.Estimate, want)
		}
	}
}

func TestIntervalsAreNeverAPointAndStayInRange(t *testing.T) {
	// Five cases, all passed three times: the old percentile bootstrap said
	// [1, 1]. Five cases prove no such thing.
	iv, err := MeanInterval([]float64{1, 1, 1, 1, 1}, 3, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if iv.Estimate != 1 || iv.Upper != 1 || !(iv.Lower < 0.97) {
		t.Errorf("all-pass interval %+v: want estimate 1, upper 1 and a lower bound well below 1", iv)
	}
	d, err := PairedDeltaInterval([]float64{1, 0, 1, 1}, []float64{1, 0, 1, 1}, 3, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if d.Estimate != 0 || !(d.Lower < 0 && d.Upper > 0) {
		t.Errorf("identical runs: %+v, want estimate 0 strictly inside the interval", d)
	}
	one, _ := MeanInterval([]float64{0.5}, 1, 0.95)
	if one.Lower != 0 || one.Upper != 1 {
		t.Errorf("one case: [%v, %v], want the whole range", one.Lower, one.Upper)
	}
}

func TestIntervalsRejectBadInput(t *testing.T) {
	for name, f := range map[string]func() error{
		"no observations": func() error { _, err := MeanInterval(nil, 1, 0.95); return err },
		"value above 1":   func() error { _, err := MeanInterval([]float64{0.5, 1.5}, 1, 0.95); return err },
		"NaN":             func() error { _, err := MeanInterval([]float64{math.NaN()}, 1, 0.95); return err },
		"level 1":         func() error { _, err := MeanInterval([]float64{0.5}, 1, 1); return err },
		"trials 0":        func() error { _, err := MeanInterval([]float64{0.5}, 0, 0.95); return err },
		"length mismatch": func() error { _, err := PairedDeltaInterval([]float64{1}, []float64{1, 0}, 1, 0.95); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestMinDetectableDropShrinksWithCasesAndTrials(t *testing.T) {
	// Same per-case spread, more cases: a smaller drop is detectable, about
	// 1/sqrt(n).
	mk := func(n int) Interval {
		base, cand := make([]float64, n), make([]float64, n)
		for i := range base {
			base[i] = float64(i%2) * 2 / 3
			cand[i] = float64((i+1)%2) * 2 / 3
		}
		iv, err := PairedDeltaInterval(base, cand, 3, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		return iv
	}
	m20, m80 := mk(20).MinDetectableDrop(0, 0.8), mk(80).MinDetectableDrop(0, 0.8)
	if !(m80 < m20) || math.Abs(m20/m80-2) > 0.25 {
		t.Errorf("MDE at 20 cases %v, at 80 cases %v: want about half", m20, m80)
	}
	if m := mk(20).MinDetectableDrop(0.05, 0.8); math.Abs(m-(m20+0.05/mk(20).Shrink)) > 1e-12 {
		t.Errorf("a 0.05 margin adds 0.05/shrink to the MDE: %v vs %v", m, m20)
	}
}

// fisherBrute enumerates the hypergeometric tail with exact big rationals.
func fisherBrute(a, n1, c, n2 int) float64 {
	k, N := a+c, n1+n2
	bin := func(n, r int) *big.Int {
		if r < 0 || r > n {
			return big.NewInt(0)
		}
		return new(big.Int).Binomial(int64(n), int64(r))
	}
	num := new(big.Int)
	for x := a; x <= n1; x++ {
		num.Add(num, new(big.Int).Mul(bin(n1, x), bin(n2, k-x)))
	}
	r, _ := new(big.Rat).SetFrac(num, bin(N, k)).Float64()
	return r
}

func TestFisherOneSidedMatchesExactEnumeration(t *testing.T) {
	if p, _ := FisherOneSided(3, 3, 0, 3); math.Abs(p-0.05) > 1e-12 {
		t.Errorf("3/3 → 0/3: p = %v, want 1/20", p)
	}
	if p, _ := FisherOneSided(0, 3, 3, 3); math.Abs(p-1) > 1e-12 {
		t.Errorf("0/3 → 3/3 (better): p = %v, want 1", p)
	}
	for n1 := 1; n1 <= 12; n1++ {
		for n2 := 1; n2 <= 12; n2 += 3 {
			for a := 0; a <= n1; a++ {
				for c := 0; c <= n2; c++ {
					got, err := FisherOneSided(a, n1, c, n2)
					if err != nil {
						t.Fatal(err)
					}
					if want := fisherBrute(a, n1, c, n2); math.Abs(got-want) > 1e-9 {
						t.Fatalf("fisher(%d/%d, %d/%d) = %v, exact %v", a, n1, c, n2, got, want)
					}
				}
			}
		}
	}
	if _, err := FisherOneSided(4, 3, 0, 3); err == nil {
		t.Error("4 passes of 3: no error")
	}
}

func TestAdjustHolmAndBH(t *testing.T) {
	ps := []float64{0.01, 0.04, 0.03, 0.005}
	holm, _ := Adjust(ps, Holm)
	bh, _ := Adjust(ps, BenjaminiHochberg)
	// Hand-computed (and what R's p.adjust gives for this vector).
	wantHolm := []float64{0.03, 0.06, 0.06, 0.02}
	wantBH := []float64{0.02, 0.04, 0.04, 0.02}
	for i := range ps {
		if math.Abs(holm[i]-wantHolm[i]) > 1e-12 || math.Abs(bh[i]-wantBH[i]) > 1e-12 {
			t.Fatalf("adjusted: holm %v (want %v), bh %v (want %v)", holm, wantHolm, bh, wantBH)
		}
	}
	if _, err := Adjust(ps, "bonferroni-ish"); err == nil {
		t.Error("unknown method: no error")
	}
	if _, err := Adjust([]float64{1.2}, Holm); err == nil {
		t.Error("p = 1.2: no error")
	}
}
