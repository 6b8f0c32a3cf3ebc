package calibration

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/loomwork/loomwork/datasets"
)

// CorrelatedDesigns is the grid of correlated runs docs/scoring.md
// reports: within-case correlation ICC 0, 0.25, 0.5 and 1 × 3 and 10
// trials × 20 and 100 cases with no change, a drop of 0.15 at 100 cases
// for each ICC at 10 trials (detection), and cases sharing per-run shocks
// in 10 groups (100 cases × 3 trials, shock SD 0.5 on the logit scale) with
// no change and with a drop of 0.15, plus the same groups without a shock
// (the cluster-robust interval must not cost coverage or false alarms
// when groups share nothing).
func CorrelatedDesigns() []Design {
	var ds []Design
	for _, icc := range []float64{0, 0.25, 0.5, 1} {
		for _, t := range []int{3, 10} {
			for _, n := range []int{20, 100} {
				if icc == 0 && t == 3 {
					continue // in DefaultDesigns
				}
				ds = append(ds, Design{Cases: n, Trials: t, ICC: icc})
			}
		}
		ds = append(ds, Design{Cases: 100, Trials: 10, ICC: icc, Effect: -0.15})
	}
	return append(ds,
		Design{Cases: 100, Trials: 3, Groups: 10, ShockSD: 0.5},
		Design{Cases: 100, Trials: 3, Groups: 10, ShockSD: 0.5, Effect: -0.15},
		Design{Cases: 100, Trials: 3, Groups: 10})
}

// label names a design in tables and errors.
func (d Design) label() string {
	s := fmt.Sprintf("%d cases × %d trials, effect %+.2f", d.Cases, d.Trials, d.Effect)
	if d.ICC > 0 {
		s += fmt.Sprintf(", ICC %g", d.ICC)
	}
	if d.Groups > 0 {
		s += fmt.Sprintf(", %d groups", d.Groups)
		if d.ShockSD > 0 {
			s += fmt.Sprintf(" shock SD %g", d.ShockSD)
		}
	}
	return s
}

// drawModel is how one run's trials are drawn.
type drawModel struct {
	trials  int
	icc     float64
	groups  int
	shockSD float64
}

// runProbs draws one run's per-case pass probabilities: the case's
// probability p moved by its group's shock for this run (on the logit
// scale), then, with ICC ρ > 0, the run's own draw from a Beta with mean
// p and intra-class correlation ρ (α = p(1−ρ)/ρ, β = (1−p)(1−ρ)/ρ; ρ = 1
// makes every trial of the case in this run the same).
func (m drawModel) runProbs(ps []float64, rng *rand.Rand) []float64 {
	shocks := make([]float64, max(m.groups, 1))
	if m.shockSD > 0 {
		for g := range shocks {
			shocks[g] = m.shockSD * rng.NormFloat64()
		}
	}
	out := make([]float64, len(ps))
	for i, p := range ps {
		if m.shockSD > 0 {
			p = shift(p, shocks[groupOf(i, m.groups)])
		}
		switch {
		case m.icc >= 1:
			out[i] = 0
			if rng.Float64() < p {
				out[i] = 1
			}
		case m.icc > 0 && p > 0 && p < 1:
			k := (1 - m.icc) / m.icc
			out[i] = distuv.Beta{Alpha: p * k, Beta: (1 - p) * k, Src: rng}.Rand()
		default:
			out[i] = p
		}
	}
	return out
}

// groupOf spreads cases over groups round-robin; 0 groups: none.
func groupOf(i, groups int) int {
	if groups <= 0 {
		return 0
	}
	return i % groups
}

func groupName(i, groups int) string {
	if groups <= 0 {
		return ""
	}
	return "g" + strconv.Itoa(groupOf(i, groups))
}

// shift moves p by s on the logit scale.
func shift(p, s float64) float64 {
	switch {
	case p <= 0:
		return 0
	case p >= 1:
		return 1
	}
	return 1 / (1 + math.Exp(-(math.Log(p/(1-p)) + s)))
}

// populationMeans are the expected pass rates of a case drawn from
// U(lo, hi) in a run of the baseline and of the candidate, over the
// shocks (a Beta draw keeps the mean): the truths intervals are checked
// against. Without a shock they are the midpoint and the midpoint plus
// the effect; with one, the logit shift bends them slightly, so they are
// integrated on a fixed grid (deterministic, no seed).
func populationMeans(d Design, lo, hi float64) (base, cand float64) {
	if d.ShockSD == 0 {
		mid := (lo + hi) / 2
		return mid, mid + d.Effect
	}
	const np, ns = 400, 400
	nd := distuv.UnitNormal
	for i := range np {
		p := lo + (hi-lo)*(float64(i)+0.5)/np
		for j := range ns {
			s := d.ShockSD * nd.Quantile((float64(j)+0.5)/ns)
			base += shift(p, s)
			cand += shift(p+d.Effect, s)
		}
	}
	return base / (np * ns), cand / (np * ns)
}

// simulateRuns draws a baseline and a candidate run of the cases (pass
// probabilities base[i], cand[i] before the run's shocks and case
// effects); trial k of case i cites the required evidence (the outcome)
// with the run's probability. Cases carry their group when the design has
// groups, so the comparison takes the cluster-robust path.
func simulateRuns(base, cand []float64, m drawModel, rng *rand.Rand) *sim {
	s := &sim{}
	yes := true
	bp, cp := m.runProbs(base, rng), m.runProbs(cand, rng)
	for i := range base {
		id := "case-" + strconv.Itoa(i)
		ev := "doc:" + strconv.Itoa(i)
		s.cases = append(s.cases, datasets.Case{ID: id, Task: "simulated", RequiredEvidence: []string{ev}, Group: groupName(i, m.groups)})
		for k := range m.trials {
			for _, side := range []struct {
				out *[]datasets.Trial
				p   float64
			}{{&s.base, bp[i]}, {&s.cand, cp[i]}} {
				t := datasets.Trial{CaseID: id, Trial: k, ModelLabel: datasets.LabelLive, Model: "simulated", TraceID: "sim", Success: &yes}
				if rng.Float64() < side.p {
					t.EvidenceCited = []string{ev}
				}
				*side.out = append(*side.out, t)
			}
		}
	}
	return s
}

// Grid is every combination of cases × trials × effects × ICCs, each with
// the same groups and shock.
func Grid(cases, trials []int, effects, iccs []float64, groups int, shockSD float64) []Design {
	var ds []Design
	for _, n := range cases {
		for _, t := range trials {
			for _, icc := range iccs {
				for _, e := range effects {
					ds = append(ds, Design{Cases: n, Trials: t, Effect: e, ICC: icc, Groups: groups, ShockSD: shockSD})
				}
			}
		}
	}
	return ds
}
