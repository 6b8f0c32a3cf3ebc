package stats

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// binom computes C(n, k) exactly with big integers: the closed form the
// product-form estimators must agree with.
func binom(n, k int) *big.Float {
	if k < 0 || k > n {
		return new(big.Float)
	}
	return new(big.Float).SetInt(new(big.Int).Binomial(int64(n), int64(k)))
}

func closedPassAtK(n, c, k int) float64 {
	r, _ := new(big.Float).Quo(binom(n-c, k), binom(n, k)).Float64()
	return 1 - r
}

func closedPassHatK(n, c, k int) float64 {
	r, _ := new(big.Float).Quo(binom(c, k), binom(n, k)).Float64()
	return r
}

func TestPassAtKAndPassHatKMatchClosedForms(t *testing.T) {
	for n := 1; n <= 30; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				got, err := PassAtK(n, c, k)
				if err != nil {
					t.Fatal(err)
				}
				if want := closedPassAtK(n, c, k); math.Abs(got-want) > 1e-12 {
					t.Fatalf("pass@%d(n=%d,c=%d) = %v, closed form %v", k, n, c, got, want)
				}
				got, _ = PassHatK(n, c, k)
				if want := closedPassHatK(n, c, k); math.Abs(got-want) > 1e-12 {
					t.Fatalf("pass^%d(n=%d,c=%d) = %v, closed form %v", k, n, c, got, want)
				}
			}
		}
	}
}

func TestPassAtKKnownValues(t *testing.T) {
	// n=5, c=2, k=2: 1 − C(3,2)/C(5,2) = 1 − 3/10.
	if got, _ := PassAtK(5, 2, 2); math.Abs(got-0.7) > 1e-15 {
		t.Errorf("pass@2(5,2) = %v, want 0.7", got)
	}
	// pass^2 = C(2,2)/C(5,2) = 1/10.
	if got, _ := PassHatK(5, 2, 2); math.Abs(got-0.1) > 1e-15 {
		t.Errorf("pass^2(5,2) = %v, want 0.1", got)
	}
	// pass@1 and pass^1 are both the pass rate.
	a, _ := PassAtK(8, 3, 1)
	b, _ := PassHatK(8, 3, 1)
	if math.Abs(a-3.0/8) > 1e-15 || math.Abs(b-3.0/8) > 1e-15 {
		t.Errorf("pass@1=%v pass^1=%v, want 0.375", a, b)
	}
	// Large n stays finite (binomials would overflow float64 here).
	if got, err := PassAtK(5000, 10, 2000); err != nil || got <= 0.99 || got > 1 {
		t.Errorf("pass@2000(5000,10) = %v, %v", got, err)
	}
}

func TestPassAtKRejectsBadArguments(t *testing.T) {
	for _, a := range [][3]int{{0, 0, 1}, {3, 4, 1}, {3, -1, 1}, {3, 1, 0}, {3, 1, 4}} {
		if _, err := PassAtK(a[0], a[1], a[2]); err == nil {
			t.Errorf("PassAtK%v: no error", a)
		}
		if _, err := PassHatK(a[0], a[1], a[2]); err == nil {
			t.Errorf("PassHatK%v: no error", a)
		}
	}
}

func TestBootstrapIsDeterministicUnderASeed(t *testing.T) {
	xs := []float64{0.1, 0.9, 0.4, 0.7, 0.3, 1, 0, 0.55}
	run := func(seed uint64) Interval {
		iv, err := BootstrapMean(xs, BootstrapConfig{Resamples: 2000, Level: 0.95, Rand: rand.New(rand.NewPCG(seed, 0))})
		if err != nil {
			t.Fatal(err)
		}
		return iv
	}
	a, b, c := run(42), run(42), run(43)
	if a != b {
		t.Errorf("same seed, different intervals: %+v vs %+v", a, b)
	}
	if a == c {
		t.Errorf("different seeds gave identical intervals %+v (the seed is not used)", a)
	}
	if !(a.Lower < a.Estimate && a.Estimate < a.Upper) {
		t.Errorf("interval %+v does not bracket its estimate", a)
	}
}

func TestBootstrapCoversTheTrueMeanAtRoughlyItsLevel(t *testing.T) {
	// 400 samples of size 40 from Bernoulli(0.3): a 90% interval should
	// cover 0.3 in roughly 90% of them (percentile bootstrap under-covers a
	// little at this size; accept 80–97%).
	rng := rand.New(rand.NewPCG(1, 1))
	covered := 0
	for range 400 {
		xs := make([]float64, 40)
		for i := range xs {
			if rng.Float64() < 0.3 {
				xs[i] = 1
			}
		}
		iv, _ := BootstrapMean(xs, BootstrapConfig{Resamples: 500, Level: 0.9, Rand: rng})
		if iv.Lower <= 0.3 && 0.3 <= iv.Upper {
			covered++
		}
	}
	if covered < 320 || covered > 388 {
		t.Errorf("90%% interval covered the true mean %d/400 times", covered)
	}
}

func TestPairedBootstrapSeesAShiftHiddenByCaseVariance(t *testing.T) {
	// Cases vary widely; every candidate is exactly 0.05 better. Paired, the
	// interval is a point at 0.05; unpaired it would straddle 0.
	base := []float64{0.1, 0.9, 0.3, 0.7, 0.5, 0.2, 0.8}
	cand := make([]float64, len(base))
	for i := range base {
		cand[i] = base[i] + 0.05
	}
	iv, err := PairedBootstrapMeanDelta(base, cand, BootstrapConfig{Resamples: 1000, Level: 0.95, Rand: rand.New(rand.NewPCG(3, 3))})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(iv.Lower-0.05) > 1e-9 || math.Abs(iv.Upper-0.05) > 1e-9 {
		t.Errorf("paired interval = [%v, %v], want [0.05, 0.05]", iv.Lower, iv.Upper)
	}
	if _, err := PairedBootstrapMeanDelta(base, cand[:3], BootstrapConfig{Resamples: 1000, Level: 0.95, Rand: rand.New(rand.NewPCG(3, 3))}); err == nil {
		t.Error("mismatched lengths: no error")
	}
}

func TestBootstrapRejectsBadConfig(t *testing.T) {
	if _, err := BootstrapMean([]float64{1}, BootstrapConfig{Resamples: 10, Level: 0.95}); err == nil {
		t.Error("no error for 10 resamples and a nil source")
	}
	if _, err := BootstrapMean(nil, BootstrapConfig{Resamples: 100, Level: 0.95, Rand: rand.New(rand.NewPCG(1, 1))}); err == nil {
		t.Error("no error for zero observations")
	}
}

func TestMcNemarExactHandComputed(t *testing.T) {
	cases := []struct {
		b, c int
		want float64
	}{
		{0, 0, 1},
		{1, 0, 1},               // 2·(1/2) = 1
		{5, 0, 2.0 / 32},        // 2·(1/32)
		{0, 5, 2.0 / 32},        // symmetric
		{1, 6, 2 * 8.0 / 128},   // 2·(1+7)/128
		{2, 8, 2 * 56.0 / 1024}, // 2·(1+10+45)/1024
		{3, 3, 1},
		{10, 0, 2.0 / 1024},
	}
	for _, c := range cases {
		m, err := McNemarExact(c.b, c.c)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(m.PValue-c.want) > 1e-12 {
			t.Errorf("McNemar(b=%d,c=%d) p = %v, want %v", c.b, c.c, m.PValue, c.want)
		}
	}
}

func TestMcNemarAgreesWithGonumBinomial(t *testing.T) {
	for n := 1; n <= 200; n += 7 {
		for b := 0; b <= n; b += 3 {
			m, _ := McNemarExact(b, n-b)
			want := math.Min(1, 2*distuv.Binomial{N: float64(n), P: 0.5}.CDF(float64(min(b, n-b))))
			if math.Abs(m.PValue-want) > 1e-9 {
				t.Fatalf("McNemar(%d,%d) = %v, gonum binomial gives %v", b, n-b, m.PValue, want)
			}
		}
	}
}
