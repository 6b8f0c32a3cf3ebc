package retrieval

import (
	"math"
	"testing"
)

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func checkRanking(t *testing.T, got []Ranked, want []Ranked) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || !approx(got[i].Score, want[i].Score) {
			t.Errorf("rank %d: got %s=%.15f, want %s=%.15f", i+1, got[i].ID, got[i].Score, want[i].ID, want[i].Score)
		}
	}
}

func TestRRFMatchesHandComputedScores(t *testing.T) {
	bm25 := []Ranked{{"a", 9}, {"b", 7}, {"c", 3}, {"d", 1}}
	dense := []Ranked{{"d", .9}, {"e", .8}, {"b", .7}}
	// k = 60: a = 1/61; b = 1/62 + 1/63; c = 1/63; d = 1/64 + 1/61; e = 1/62.
	checkRanking(t, RRF(60, bm25, dense), []Ranked{
		{"d", 1.0/64 + 1.0/61}, {"b", 1.0/62 + 1.0/63}, {"a", 1.0 / 61}, {"e", 1.0 / 62}, {"c", 1.0 / 63},
	})
	// k = 1 changes the order: a = 1/2; b = 1/3 + 1/4; c = 1/4; d = 1/5 + 1/2; e = 1/3.
	checkRanking(t, RRF(1, bm25, dense), []Ranked{
		{"d", 0.7}, {"b", 1.0/3 + 1.0/4}, {"a", 0.5}, {"e", 1.0 / 3}, {"c", 0.25},
	})
	// k <= 0 means the default 60.
	checkRanking(t, RRF(0, bm25, dense), RRF(60, bm25, dense))
}

func TestRRFCountsADuplicateOnlyAtItsBestRank(t *testing.T) {
	checkRanking(t, RRF(60, []Ranked{{"a", 3}, {"b", 2}, {"a", 1}}), []Ranked{{"a", 1.0 / 61}, {"b", 1.0 / 62}})
}

func TestRRFBreaksTiesByID(t *testing.T) {
	checkRanking(t, RRF(60, []Ranked{{"z", 1}}, []Ranked{{"a", 1}}), []Ranked{{"a", 1.0 / 61}, {"z", 1.0 / 61}})
}

func TestWeightedFusionMatchesHandComputedScores(t *testing.T) {
	bm25 := []Ranked{{"a", 10}, {"b", 6}, {"c", 2}}    // normalised: a 1, b 0.5, c 0
	dense := []Ranked{{"c", .9}, {"a", .5}, {"d", .1}} // normalised: c 1, a 0.5, d 0
	checkRanking(t, WeightedFusion([]float64{0.7, 0.3}, bm25, dense), []Ranked{
		{"a", 0.7*1 + 0.3*0.5}, {"b", 0.7 * 0.5}, {"c", 0.3 * 1}, {"d", 0},
	})
	// With the dense list weighted up, c overtakes: a 0.2+0.4, b 0.1, c 0.8.
	checkRanking(t, WeightedFusion([]float64{0.2, 0.8}, bm25, dense), []Ranked{
		{"c", 0.8}, {"a", 0.2 + 0.8*0.5}, {"b", 0.2 * 0.5}, {"d", 0},
	})
}

func TestWeightedFusionMapsAListOfEqualScoresToOne(t *testing.T) {
	checkRanking(t, WeightedFusion([]float64{0.5, 0.5}, []Ranked{{"a", 3}, {"b", 3}}, nil), []Ranked{{"a", 0.5}, {"b", 0.5}})
}
