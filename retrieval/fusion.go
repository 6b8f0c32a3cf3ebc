package retrieval

import (
	"math"
	"sort"
)

// Ranked is one entry of a ranking: a document id and the score that ranked
// it (higher is better).
type Ranked struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// DefaultRRFK is the k of Cormack, Clarke and Büttcher (SIGIR 2009).
const DefaultRRFK = 60

// sortRanked orders by score descending, then id ascending so equal scores
// give the same order on every run.
func sortRanked(rs []Ranked) {
	sort.SliceStable(rs, func(i, j int) bool {
		if rs[i].Score != rs[j].Score {
			return rs[i].Score > rs[j].Score
		}
		return rs[i].ID < rs[j].ID
	})
}

// RRF fuses rankings by reciprocal rank: score(d) = Σ_lists 1/(k + rank),
// with rank counted from 1. A document missing from a list adds nothing for
// it. k ≤ 0 means DefaultRRFK. Each list must already be in rank order; a
// duplicate id inside one list counts at its first (best) rank only.
func RRF(k float64, lists ...[]Ranked) []Ranked {
	if k <= 0 {
		k = DefaultRRFK
	}
	score := map[string]float64{}
	for _, l := range lists {
		seen := map[string]bool{}
		for i, r := range l {
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			score[r.ID] += 1 / (k + float64(i+1))
		}
	}
	return fromMap(score)
}

// WeightedFusion fuses rankings by a weighted sum of min-max normalised
// scores (Bruch et al., TOIS 2023, "convex combination"): each list's scores
// are mapped to [0,1] (a list whose scores are all equal maps to 1), a
// document missing from a list gets 0 for it, and weights[i] multiplies list
// i. len(weights) must equal len(lists).
func WeightedFusion(weights []float64, lists ...[]Ranked) []Ranked {
	score := map[string]float64{}
	for li, l := range lists {
		if len(l) == 0 {
			continue
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range l {
			lo = math.Min(lo, r.Score)
			hi = math.Max(hi, r.Score)
		}
		w := 1.0
		if li < len(weights) {
			w = weights[li]
		}
		seen := map[string]bool{}
		for _, r := range l {
			if seen[r.ID] {
				continue
			}
			seen[r.ID] = true
			n := 1.0
			if hi > lo {
				n = (r.Score - lo) / (hi - lo)
			}
			score[r.ID] += w * n
		}
		_ = li
	}
	return fromMap(score)
}

func fromMap(m map[string]float64) []Ranked {
	out := make([]Ranked, 0, len(m))
	for id, s := range m {
		out = append(out, Ranked{ID: id, Score: s})
	}
	sortRanked(out)
	return out
}
