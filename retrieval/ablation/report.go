package ablation

import (
	"math"
	"slices"
	"sort"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation/result"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// The result format, which Run produces: aliases, so callers of the runner
// need not import both packages.
type (
	Report  = result.Report
	Variant = result.Variant
)

// Variants.
const (
	Excluded  = result.Excluded  // the honest protocol: own issue out of results and statistics
	FullStats = result.FullStats // own issue out of the results, in the fitted statistics
	Leaky     = result.Leaky     // own issue left in the corpus
)

func summarize(rep *Report, qs []judged.Query, seed uint64) {
	// runs[variant][mode][issue]
	type key struct {
		v Variant
		m string
	}
	byKey := map[key]map[int]result.QueryRun{}
	for _, r := range rep.Runs {
		k := key{r.Variant, r.Mode}
		if byKey[k] == nil {
			byKey[k] = map[int]result.QueryRun{}
		}
		byKey[k][r.Issue] = r
	}
	baseline := rep.Modes[0]
	for _, m := range rep.Modes {
		if m == string(retrieval.ModeBM25) {
			baseline = m
		}
	}
	for ki, kind := range result.Kinds {
		var issues []int
		for _, q := range qs {
			if (kind == judged.Gold && len(q.Gold) > 0) || (kind == judged.Silver && len(q.Silver) > 0) {
				issues = append(issues, q.Issue)
			}
		}
		if len(issues) == 0 {
			continue
		}
		// The same resamples for every mode make the intervals paired.
		rs := resamples(seed, uint64(ki+1), rep.Bootstrap, len(issues))
		for _, v := range rep.Variants {
			for _, m := range rep.Modes {
				runs := byKey[key{v, m}]
				row := result.Row{Variant: v, Mode: m, Kind: kind, N: len(issues), Metrics: map[string]result.Stat{}}
				for _, metric := range result.MetricNames {
					vals := make([]float64, len(issues))
					for i, is := range issues {
						vals[i] = runs[is].Scores[kind][metric]
					}
					row.Metrics[metric] = bootstrap(vals, rs)
				}
				rep.Rows = append(rep.Rows, row)
				if m != baseline {
					base := byKey[key{v, baseline}]
					d := make([]float64, len(issues))
					for i, is := range issues {
						d[i] = runs[is].Scores[kind]["ndcg@10"] - base[is].Scores[kind]["ndcg@10"]
					}
					rep.Deltas = append(rep.Deltas, result.DeltaRow{Variant: v, Kind: kind, Mode: m, Baseline: baseline, Delta: bootstrap(d, rs)})
				}
			}
			for i, a := range rep.Modes {
				for _, b := range rep.Modes[i+1:] {
					ra, rb := byKey[key{v, a}], byKey[key{v, b}]
					wl := result.WinLossRow{Variant: v, Kind: kind, A: a, B: b}
					fr := result.FailureRow{Variant: v, Kind: kind, A: a, B: b, OnlyA: []string{}, OnlyB: []string{}}
					for _, is := range issues {
						x, y := ra[is].Scores[kind]["ndcg@10"], rb[is].Scores[kind]["ndcg@10"]
						switch {
						case x > y+1e-12:
							wl.Wins++
						case y > x+1e-12:
							wl.Losses++
						default:
							wl.Ties++
						}
						fa, fb := ra[is].Scores[kind]["recall@10"] == 0, rb[is].Scores[kind]["recall@10"] == 0
						switch {
						case fa && fb:
							fr.Both++
						case fa:
							fr.OnlyA = append(fr.OnlyA, ra[is].QueryID)
						case fb:
							fr.OnlyB = append(fr.OnlyB, rb[is].QueryID)
						default:
							fr.Neither++
						}
					}
					rep.WinLoss = append(rep.WinLoss, wl)
					rep.Failures = append(rep.Failures, fr)
				}
			}
		}
		honest := Excluded
		if !hasVariant(rep.Variants, Excluded) {
			honest = FullStats
		}
		if hasVariant(rep.Variants, Excluded) && hasVariant(rep.Variants, FullStats) {
			for _, m := range rep.Modes {
				ex, fs := byKey[key{Excluded, m}], byKey[key{FullStats, m}]
				row := result.StatsEffectRow{Kind: kind, Mode: m, N: len(issues)}
				d := make([]float64, len(issues))
				for i, is := range issues {
					h, f := ex[is].Scores[kind]["ndcg@10"], fs[is].Scores[kind]["ndcg@10"]
					row.HeldOut += h
					row.Full += f
					d[i] = f - h
					if !slices.Equal(ex[is].Top, fs[is].Top) {
						row.Changed++
					}
				}
				row.HeldOut /= float64(len(issues))
				row.Full /= float64(len(issues))
				row.Delta = bootstrap(d, rs)
				rep.StatsEffect = append(rep.StatsEffect, row)
			}
		}
		if hasVariant(rep.Variants, honest) && hasVariant(rep.Variants, Leaky) {
			for _, m := range rep.Modes {
				lr := result.LeakRow{Mode: m, Kind: kind}
				ex, lk := byKey[key{honest, m}], byKey[key{Leaky, m}]
				for _, is := range issues {
					lr.Excluded += ex[is].Scores[kind]["ndcg@10"]
					lr.Leaky += lk[is].Scores[kind]["ndcg@10"]
					lr.Credited += lk[is].Scores[kind][result.CreditOwnMetric]
					if r := lk[is].OwnRank; r == 1 {
						lr.OwnAt1++
					}
					if r := lk[is].OwnRank; r >= 1 && r <= 10 {
						lr.OwnAt10++
					}
				}
				n := float64(len(issues))
				lr.Excluded /= n
				lr.Leaky /= n
				lr.Credited /= n
				lr.OwnAt1 /= n
				lr.OwnAt10 /= n
				rep.Leakage = append(rep.Leakage, lr)
			}
		}
	}
	for _, v := range rep.Variants {
		for _, m := range rep.Modes {
			var lat []float64
			for _, r := range rep.Runs {
				if r.Variant == v && r.Mode == m {
					lat = append(lat, r.Latency)
				}
			}
			rep.Latency = append(rep.Latency, result.LatencyRow{Variant: v, Mode: m, N: len(lat),
				P50: Percentile(lat, 0.5), P95: Percentile(lat, 0.95), Mean: mean(lat)})
		}
	}
}

func hasVariant(vs []Variant, v Variant) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// bootstrap returns the mean of vals and the 2.5/97.5 percentiles of the
// resampled means.
func bootstrap(vals []float64, rs [][]int) result.Stat {
	st := result.Stat{Mean: mean(vals)}
	if len(rs) == 0 {
		st.Lo, st.Hi = st.Mean, st.Mean
		return st
	}
	means := make([]float64, len(rs))
	for b, idx := range rs {
		s := 0.0
		for _, i := range idx {
			s += vals[i]
		}
		means[b] = s / float64(len(idx))
	}
	sort.Float64s(means)
	st.Lo = Percentile(means, 0.025)
	st.Hi = Percentile(means, 0.975)
	if math.IsNaN(st.Mean) {
		st.Lo, st.Hi = math.NaN(), math.NaN()
	}
	return st
}
