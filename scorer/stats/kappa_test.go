package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The worked example of the Wikipedia article "Cohen's kappa" (50 grant
// proposals read by A and B: both yes 20, A yes B no 5, A no B yes 10,
// both no 15). By hand: p_o = 35/50 = 0.7; A says yes to 25/50, B to 30/50,
// so p_e = 0.5·0.6 + 0.5·0.4 = 0.5 and κ = (0.7 − 0.5)/(1 − 0.5) = 0.4.
//
// The FCE variance by hand (p11 .4, p10 .1, p01 .2, p00 .3; rows .5/.5,
// columns .6/.4; 1 − κ = .6):
//
//	diagonal  .4·(1 − 1.1·.6)² + .3·(1 − .9·.6)² = .04624 + .06348 = .10972
//	off       .6²·(.1·(.6+.5)² + .2·(.4+.5)²)    = .36·.283       = .10188
//	minus     (.4 − .5·.6)²                       = .01
//	Var = (.10972 + .10188 − .01)/(50·.5²) = .2016/12.5 = .016128
func TestKappaWikipediaGrantExample(t *testing.T) {
	k, err := CohenKappa(KappaTable{N11: 20, N10: 5, N01: 10, N00: 15}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if k.Estimate == nil || math.Abs(*k.Estimate-0.4) > 1e-12 {
		t.Fatalf("κ = %v, want 0.4", k.Estimate)
	}
	if math.Abs(k.Observed-0.7) > 1e-12 || math.Abs(k.Chance-0.5) > 1e-12 {
		t.Errorf("p_o = %v, p_e = %v, want 0.7 and 0.5", k.Observed, k.Chance)
	}
	if want := math.Sqrt(0.016128); math.Abs(k.StdErr-want) > 1e-12 {
		t.Errorf("FCE standard error %v, want √0.016128 = %v", k.StdErr, want)
	}
	if k.N != 50 || !(k.Lower < 0.4 && 0.4 < k.Upper) {
		t.Errorf("interval %+v should contain the estimate", k)
	}
}

// A second table by hand, with unequal margins: 100 items, both yes 20,
// first only 5, second only 10, both no 65 (the first table of Table 6.1,
// "Examples of Cohen's kappa statistic", in the textbook Statistics for
// Data Science, chapter 6 "Multiple Random Variables", which gives
// κ ≈ 0.625).
// p_o = .85, rows .25/.75, columns .30/.70, p_e = .075 + .525 = .6,
// κ = .25/.4 = .625.
func TestKappaUnequalMarginsByHand(t *testing.T) {
	k, err := CohenKappa(KappaTable{N11: 20, N10: 5, N01: 10, N00: 65}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if k.Estimate == nil || math.Abs(*k.Estimate-0.625) > 1e-12 || math.Abs(k.Chance-0.6) > 1e-12 {
		t.Fatalf("κ = %v with p_e %v, want 0.625 with 0.6", k.Estimate, k.Chance)
	}
}

// The FCE formula is the delta-method variance of κ̂ under multinomial
// sampling: (Σ p g² − (Σ p g)²)/n with g the gradient of κ in the cell
// proportions. Computed here by finite differences, a different route.
func TestKappaStdErrIsTheDeltaMethodVariance(t *testing.T) {
	kappaOf := func(p [4]float64) float64 {
		s := p[0] + p[1] + p[2] + p[3]
		r1, c1 := (p[0]+p[1])/s, (p[0]+p[2])/s
		po := (p[0] + p[3]) / s
		pe := r1*c1 + (1-r1)*(1-c1)
		return (po - pe) / (1 - pe)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		tab := KappaTable{N11: 1 + rng.IntN(40), N10: rng.IntN(15), N01: rng.IntN(15), N00: 1 + rng.IntN(40)}
		k, err := CohenKappa(tab, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		n := float64(tab.N())
		p := [4]float64{float64(tab.N11) / n, float64(tab.N10) / n, float64(tab.N01) / n, float64(tab.N00) / n}
		var g [4]float64
		const h = 1e-6
		for i := range p {
			up, down := p, p
			up[i] += h
			down[i] -= h
			g[i] = (kappaOf(up) - kappaOf(down)) / (2 * h)
		}
		var m1, m2 float64
		for i := range p {
			m1 += p[i] * g[i]
			m2 += p[i] * g[i] * g[i]
		}
		want := math.Sqrt((m2 - m1*m1) / n)
		if math.Abs(k.StdErr-want) > 1e-6 {
			t.Fatalf("%+v: FCE standard error %v, delta method %v", tab, k.StdErr, want)
		}
	}
}

func TestKappaEdgeTables(t *testing.T) {
	// Perfect agreement: κ̂ = 1 with an FCE error of 0, but 20 agreements
	// do not prove κ = 1: the interval reaches 1 and well below it.
	k, err := CohenKappa(KappaTable{N11: 10, N00: 10}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if *k.Estimate != 1 || k.StdErr != 0 || k.Upper != 1 || !(k.Lower < 0.7) {
		t.Errorf("perfect agreement at n=20: %+v, want κ 1, std err 0, upper 1 and lower < 0.7", k)
	}

	// p_e = 1: every label the same class. κ is 0/0.
	for _, tab := range []KappaTable{{N11: 20}, {N00: 7}} {
		k, err := CohenKappa(tab, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		if k.Estimate != nil || k.Lower != -1 || k.Upper != 1 || !strings.Contains(k.Note, "undefined") || k.Chance != 1 || k.Observed != 1 {
			t.Errorf("%+v: %+v, want no estimate, [-1, 1] and a note", tab, k)
		}
	}

	// One rater always says yes: its labels carry no information, κ = 0.
	k, err = CohenKappa(KappaTable{N11: 15, N10: 5}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(*k.Estimate) > 1e-12 || math.Abs(k.Chance-0.75) > 1e-12 {
		t.Errorf("constant first rater: κ %v, p_e %v; want 0 and 0.75", *k.Estimate, k.Chance)
	}

	// Complete disagreement at balanced margins: κ = −1.
	k, err = CohenKappa(KappaTable{N10: 6, N01: 6}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(*k.Estimate+1) > 1e-12 || k.Lower != -1 || !(k.Upper > -1) {
		t.Errorf("complete disagreement: %+v", k)
	}

	for _, c := range []struct {
		tab   KappaTable
		level float64
		want  string
	}{
		{KappaTable{}, 0.95, "no items"},
		{KappaTable{N11: 1, N10: -1}, 0.95, "negative count"},
		{KappaTable{N11: 3}, 1, "level"},
		{KappaTable{N11: 3}, math.NaN(), "level"},
	} {
		if _, err := CohenKappa(c.tab, c.level); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v at %v: %v, want an error about %s", c.tab, c.level, err, c.want)
		}
	}
}

// Every table up to 40 items: the interval lies in [−1, 1], is never a
// point, contains the plain estimate, and does not depend on which rater
// is first.
func TestKappaIntervalIsWellFormedOnEveryTable(t *testing.T) {
	for n := 1; n <= 40; n++ {
		for a := 0; a <= n; a++ {
			for b := 0; a+b <= n; b++ {
				for c := 0; a+b+c <= n; c++ {
					tab := KappaTable{N11: a, N10: b, N01: c, N00: n - a - b - c}
					k, err := CohenKappa(tab, 0.95)
					if err != nil {
						t.Fatal(err)
					}
					if !(k.Lower >= -1 && k.Upper <= 1 && k.Lower < k.Upper) {
						t.Fatalf("%+v: interval [%v, %v]", tab, k.Lower, k.Upper)
					}
					if k.Estimate != nil && !(k.Lower <= *k.Estimate+1e-12 && *k.Estimate <= k.Upper+1e-12) {
						t.Fatalf("%+v: κ̂ %v outside [%v, %v]", tab, *k.Estimate, k.Lower, k.Upper)
					}
					swapped, _ := CohenKappa(KappaTable{N11: a, N10: c, N01: b, N00: n - a - b - c}, 0.95)
					if math.Abs(swapped.Lower-k.Lower) > 1e-12 || math.Abs(swapped.Upper-k.Upper) > 1e-12 {
						t.Fatalf("%+v: the interval depends on the raters' order", tab)
					}
				}
			}
		}
	}
}

// kappaScenario is a joint distribution of two raters' binary labels: the
// first says yes with probability p1, the second with p2, and their true κ
// is kappa (so P(both yes) = p1·p2 + κ(1 − p_e)/2).
type kappaScenario struct{ p1, p2, kappa float64 }

func (s kappaScenario) cells() [4]float64 {
	pe := s.p1*s.p2 + (1-s.p1)*(1-s.p2)
	p11 := s.p1*s.p2 + s.kappa*(1-pe)/2
	return [4]float64{p11, s.p1 - p11, s.p2 - p11, 1 - s.p1 - s.p2 + p11}
}

// kappaScenarios span what judge–human label sets look like: balanced
// and lenient (mostly passing) graders, judges more lenient than humans,
// rare failures, and agreement from none (and worse) to high.
var kappaScenarios = []kappaScenario{
	{0.5, 0.5, -0.3}, {0.5, 0.5, 0}, {0.5, 0.5, 0.4}, {0.5, 0.5, 0.7}, {0.5, 0.5, 0.9},
	{0.7, 0.7, 0.4}, {0.7, 0.5, 0.6},
	{0.8, 0.8, 0.2}, {0.8, 0.8, 0.5}, {0.8, 0.8, 0.8}, {0.8, 0.8, 0.9}, {0.8, 0.5, 0.3}, {0.8, 0.6, 0.5},
	{0.9, 0.9, 0}, {0.9, 0.9, 0.4}, {0.9, 0.9, 0.7}, {0.9, 0.7, 0.3},
}

// The interval's coverage of the true κ, simulated: 2000 label sets per
// scenario and sample size, drawn with a fixed seed. `go test
// ./scorer/stats/ -run TestKappaIntervalCoverage -v` prints the table,
// with the plain FCE Wald interval's coverage beside it for comparison
// (the numbers quoted in CohenKappa's doc come from it).
func TestKappaIntervalCoverage(t *testing.T) {
	const draws, level = 2000, 0.95
	rng := rand.New(rand.NewPCG(2026, 15))
	z := 1.959963984540054
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s %5s %9s %9s %7s\n", "scenario (p1 p2 κ)", "n", "coverage", "plain FCE", "width")
	for _, n := range []int{20, 50, 200} {
		minCov, minPlain, sumCov := 1.0, 1.0, 0.0
		for _, s := range kappaScenarios {
			p := s.cells()
			for i, x := range p {
				if x < 0 {
					t.Fatalf("scenario %+v: cell %d has probability %v", s, i, x)
				}
			}
			covered, plainCovered, width := 0, 0, 0.0
			for range draws {
				var tab KappaTable
				for range n {
					u := rng.Float64()
					switch {
					case u < p[0]:
						tab.N11++
					case u < p[0]+p[1]:
						tab.N10++
					case u < p[0]+p[1]+p[2]:
						tab.N01++
					default:
						tab.N00++
					}
				}
				k, err := CohenKappa(tab, level)
				if err != nil {
					t.Fatal(err)
				}
				if k.Lower <= s.kappa && s.kappa <= k.Upper {
					covered++
				}
				width += k.Upper - k.Lower
				if k.Estimate == nil || math.Abs(*k.Estimate-s.kappa) <= z*k.StdErr {
					plainCovered++ // undefined: both methods say "anything"
				}
			}
			cov, plain := float64(covered)/draws, float64(plainCovered)/draws
			minCov, minPlain = min(minCov, cov), min(minPlain, plain)
			sumCov += cov
			fmt.Fprintf(&b, "%.1f %.1f %+.1f %12d %9.3f %9.3f %7.2f\n", s.p1, s.p2, s.kappa, n, cov, plain, width/draws)
			switch {
			case n >= 50 && cov < 0.93:
				t.Errorf("n=%d %+v: coverage %.3f < 0.93", n, s, cov)
			case n == 20 && cov < 0.90:
				t.Errorf("n=%d %+v: coverage %.3f < 0.90", n, s, cov)
			}
		}
		fmt.Fprintf(&b, "n=%d: lowest coverage %.3f (plain FCE %.3f), mean %.3f over %d scenarios\n",
			n, minCov, minPlain, sumCov/float64(len(kappaScenarios)), len(kappaScenarios))
	}
	t.Log("\n" + b.String())
}
