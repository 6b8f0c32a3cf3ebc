package ablation

import (
	"math"
	"sort"
)

// Collapse turns a ranking of document units (pages and issues, possibly
// repeated because several sections of one page matched) into a ranking of
// distinct units, keeping each at its best rank.
func Collapse(units []string) []string {
	seen := make(map[string]bool, len(units))
	out := make([]string, 0, len(units))
	for _, u := range units {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// RecallAt is the share of relevant units found in the top k.
func RecallAt(ranked []string, rel map[string]int, k int) float64 {
	if len(rel) == 0 {
		return 0
	}
	hit := 0
	for i, u := range ranked {
		if i >= k {
			break
		}
		if rel[u] > 0 {
			hit++
		}
	}
	return float64(hit) / float64(len(rel))
}

// MRRAt is 1/rank of the first relevant unit within the top k (0 if none).
func MRRAt(ranked []string, rel map[string]int, k int) float64 {
	for i, u := range ranked {
		if i >= k {
			break
		}
		if rel[u] > 0 {
			return 1 / float64(i+1)
		}
	}
	return 0
}

// NDCGAt is DCG@k / ideal DCG@k with gain 2^grade − 1 and discount
// log2(rank + 1).
func NDCGAt(ranked []string, rel map[string]int, k int) float64 {
	dcg := 0.0
	for i, u := range ranked {
		if i >= k {
			break
		}
		if g := rel[u]; g > 0 {
			dcg += (math.Pow(2, float64(g)) - 1) / math.Log2(float64(i+2))
		}
	}
	grades := make([]int, 0, len(rel))
	for _, g := range rel {
		if g > 0 {
			grades = append(grades, g)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(grades)))
	idcg := 0.0
	for i, g := range grades {
		if i >= k {
			break
		}
		idcg += (math.Pow(2, float64(g)) - 1) / math.Log2(float64(i+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

// Scores computes every metric of result.MetricNames for one ranking.
func Scores(ranked []string, rel map[string]int) map[string]float64 {
	return map[string]float64{
		"recall@1":  RecallAt(ranked, rel, 1),
		"recall@5":  RecallAt(ranked, rel, 5),
		"recall@10": RecallAt(ranked, rel, 10),
		"mrr@10":    MRRAt(ranked, rel, 10),
		"ndcg@10":   NDCGAt(ranked, rel, 10),
	}
}

// Percentile is the p-quantile (0..1) of xs by linear interpolation between
// closest ranks; xs need not be sorted (it is copied).
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 1 {
		return s[0]
	}
	pos := p * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
