package stats

import (
	"math"
	"math/big"
	"testing"
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

// TestMcNemarMatchesTheExactSum checks the p-value (gonum's binomial CDF)
// against 2·Σ_{i≤min(b,c)} C(n,i)/2ⁿ summed exactly in rationals.
func TestMcNemarMatchesTheExactSum(t *testing.T) {
	for n := 1; n <= 200; n += 7 {
		for b := 0; b <= n; b += 3 {
			tail := new(big.Int)
			for i := 0; i <= min(b, n-b); i++ {
				tail.Add(tail, new(big.Int).Binomial(int64(n), int64(i)))
			}
			exact, _ := new(big.Rat).SetFrac(tail.Lsh(tail, 1), new(big.Int).Lsh(big.NewInt(1), uint(n))).Float64()
			want := math.Min(1, exact)
			m, _ := McNemarExact(b, n-b)
			if math.Abs(m.PValue-want) > 1e-12 {
				t.Fatalf("McNemar(%d,%d) = %v, exact %v", b, n-b, m.PValue, want)
			}
		}
	}
}
