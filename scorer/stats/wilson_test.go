package stats

import (
	"math"
	"testing"
)

// Published values (Newcombe 1998, Table I; Agresti & Coull 1998) and the
// edges: 0 of n and n of n stay inside [0, 1] and are not points.
func TestWilsonMatchesPublishedIntervals(t *testing.T) {
	for _, c := range []struct {
		k, n   int
		lo, hi float64
	}{
		{81, 263, 0.2553, 0.3662}, // Newcombe 1998, example (a)
		{15, 148, 0.0624, 0.1605}, // example (b)
		{0, 20, 0, 0.1611},        // example (c)
		{1, 29, 0.0061, 0.1718},   // example (d)
		{28, 28, 0.8794, 1},       // all succeeded: the upper end is 1, the lower is not
		{0, 48, 0, 0.0741},        // the injection suite's 0 of 48 row (docs/policy.md)
	} {
		lo, hi := Wilson(c.k, c.n, 0.95)
		if math.Abs(lo-c.lo) > 5e-4 || math.Abs(hi-c.hi) > 5e-4 {
			t.Errorf("Wilson(%d, %d) = [%.4f, %.4f], want [%.4f, %.4f]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	if lo, hi := Wilson(3, 0, 0.95); lo != 0 || hi != 0 {
		t.Errorf("n = 0: [%v, %v], want [0, 0]", lo, hi)
	}
	// A higher level is a wider interval.
	l95, h95 := Wilson(10, 40, 0.95)
	l99, h99 := Wilson(10, 40, 0.99)
	if !(l99 < l95 && h99 > h95) {
		t.Errorf("99%% [%v, %v] is not wider than 95%% [%v, %v]", l99, h99, l95, h95)
	}
}
