package ablation

import (
	"math"
	"sort"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// Stat is a mean with its bootstrap 95% percentile interval.
type Stat struct {
	Mean float64 `json:"mean"`
	Lo   float64 `json:"ci_lo"`
	Hi   float64 `json:"ci_hi"`
}

// Row holds one mode's metrics on one judgement kind.
type Row struct {
	Variant Variant         `json:"variant"`
	Mode    retrieval.Mode  `json:"mode"`
	Kind    string          `json:"kind"`
	N       int             `json:"queries"`
	Metrics map[string]Stat `json:"metrics"`
}

// LatencyRow is one mode's per-query latency (in-process, wall clock).
type LatencyRow struct {
	Variant Variant        `json:"variant"`
	Mode    retrieval.Mode `json:"mode"`
	N       int            `json:"queries"`
	P50     float64        `json:"p50_ms"`
	P95     float64        `json:"p95_ms"`
	Mean    float64        `json:"mean_ms"`
}

// DeltaRow is a mode's paired nDCG@10 difference to the baseline mode.
type DeltaRow struct {
	Variant  Variant        `json:"variant"`
	Kind     string         `json:"kind"`
	Mode     retrieval.Mode `json:"mode"`
	Baseline retrieval.Mode `json:"baseline"`
	Delta    Stat           `json:"ndcg10_delta"`
}

// WinLossRow counts, over the queries of one kind, how often mode A's
// nDCG@10 beats, loses to or ties mode B's.
type WinLossRow struct {
	Variant Variant        `json:"variant"`
	Kind    string         `json:"kind"`
	A       retrieval.Mode `json:"a"`
	B       retrieval.Mode `json:"b"`
	Wins    int            `json:"a_wins"`
	Losses  int            `json:"a_losses"`
	Ties    int            `json:"ties"`
}

// FailureRow compares which queries two modes fail (no relevant page in
// the top 10): different failure sets are why fusion helps.
type FailureRow struct {
	Variant Variant        `json:"variant"`
	Kind    string         `json:"kind"`
	A       retrieval.Mode `json:"a"`
	B       retrieval.Mode `json:"b"`
	OnlyA   []string       `json:"only_a_fails"`
	OnlyB   []string       `json:"only_b_fails"`
	Both    int            `json:"both_fail"`
	Neither int            `json:"neither_fails"`
}

// LeakRow shows how leaving each query's own issue in changes a mode.
type LeakRow struct {
	Mode retrieval.Mode `json:"mode"`
	Kind string         `json:"kind"`
	// OwnAt1 and OwnAt10 are the shares of queries whose own issue is
	// ranked first / in the top 10 in the leaky run.
	OwnAt1   float64 `json:"own_issue_at_1"`
	OwnAt10  float64 `json:"own_issue_in_top10"`
	Excluded float64 `json:"ndcg10_excluded"`
	Leaky    float64 `json:"ndcg10_leaky"`
	// Credited is the leaky run's nDCG@10 if the question itself counted as
	// a relevant document — the number a judge that accepts "found the
	// question" would report.
	Credited float64 `json:"ndcg10_leaky_own_credited"`
}

// FoldInfo describes one reranker fold.
type FoldInfo struct {
	Name         string  `json:"name"`
	TrainQueries int     `json:"train_queries"`
	EvalQueries  int     `json:"eval_queries"`
	Examples     int     `json:"examples"`
	Positives    int     `json:"positives"`
	FinalLoss    float64 `json:"final_loss"`
}

// RerankInfo describes the learned reranker's training.
type RerankInfo struct {
	Folds       []FoldInfo               `json:"folds"`
	TrainTimeMS float64                  `json:"train_ms"`
	GoldModel   *retrieval.LogisticModel `json:"gold_model,omitempty"`
}

// Report is the ablation's result.
type Report struct {
	Dataset   string           `json:"dataset"`
	Seed      uint64           `json:"seed"`
	Bootstrap int              `json:"bootstrap_resamples"`
	Depth     int              `json:"depth"`
	Modes     []retrieval.Mode `json:"modes"`
	Variants  []Variant        `json:"variants"`
	Queries   struct {
		Gold   int `json:"gold"`
		Silver int `json:"silver"`
		Total  int `json:"total"`
	} `json:"queries"`
	Rows     []Row        `json:"rows"`
	Latency  []LatencyRow `json:"latency"`
	Deltas   []DeltaRow   `json:"deltas"`
	WinLoss  []WinLossRow `json:"wins_losses"`
	Failures []FailureRow `json:"failures"`
	Leakage  []LeakRow    `json:"leakage,omitempty"`
	Reranker *RerankInfo  `json:"reranker,omitempty"`
	// Environment is filled by the caller (machine, Go version, index
	// build times).
	Environment map[string]string `json:"environment,omitempty"`
	Runs        []QueryRun        `json:"runs"`
}

// Row returns the row for (variant, mode, kind).
func (r *Report) Row(v Variant, m retrieval.Mode, kind string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Variant == v && row.Mode == m && row.Kind == kind {
			return row, true
		}
	}
	return Row{}, false
}

var kinds = []string{judged.Gold, judged.Silver}

func summarize(rep *Report, qs []judged.Query, seed uint64) {
	// runs[variant][mode][issue]
	type key struct {
		v Variant
		m retrieval.Mode
	}
	byKey := map[key]map[int]QueryRun{}
	for _, r := range rep.Runs {
		k := key{r.Variant, r.Mode}
		if byKey[k] == nil {
			byKey[k] = map[int]QueryRun{}
		}
		byKey[k][r.Issue] = r
	}
	baseline := rep.Modes[0]
	for _, m := range rep.Modes {
		if m == retrieval.ModeBM25 {
			baseline = m
		}
	}
	for ki, kind := range kinds {
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
				row := Row{Variant: v, Mode: m, Kind: kind, N: len(issues), Metrics: map[string]Stat{}}
				for _, metric := range MetricNames {
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
					rep.Deltas = append(rep.Deltas, DeltaRow{Variant: v, Kind: kind, Mode: m, Baseline: baseline, Delta: bootstrap(d, rs)})
				}
			}
			for i, a := range rep.Modes {
				for _, b := range rep.Modes[i+1:] {
					ra, rb := byKey[key{v, a}], byKey[key{v, b}]
					wl := WinLossRow{Variant: v, Kind: kind, A: a, B: b}
					fr := FailureRow{Variant: v, Kind: kind, A: a, B: b, OnlyA: []string{}, OnlyB: []string{}}
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
		if hasVariant(rep.Variants, Excluded) && hasVariant(rep.Variants, Leaky) {
			for _, m := range rep.Modes {
				lr := LeakRow{Mode: m, Kind: kind}
				ex, lk := byKey[key{Excluded, m}], byKey[key{Leaky, m}]
				for _, is := range issues {
					lr.Excluded += ex[is].Scores[kind]["ndcg@10"]
					lr.Leaky += lk[is].Scores[kind]["ndcg@10"]
					lr.Credited += lk[is].Scores[kind][CreditOwnMetric]
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
			rep.Latency = append(rep.Latency, LatencyRow{Variant: v, Mode: m, N: len(lat),
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
func bootstrap(vals []float64, rs [][]int) Stat {
	st := Stat{Mean: mean(vals)}
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
