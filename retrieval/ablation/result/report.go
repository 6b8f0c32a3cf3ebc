package result

// Variant says whether each query's own issue was excluded.
type Variant string

// Variants.
const (
	Excluded Variant = "excluded" // the honest protocol
	Leaky    Variant = "leaky"    // own issue left in the corpus
)

// MetricNames are the per-query metrics a Row holds, in report order.
var MetricNames = []string{"recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10"}

// CreditOwnMetric is nDCG@10 computed as if the query's own issue were a
// relevant document (with the query's best grade). QueryRun.Scores holds
// it beside MetricNames; it feeds LeakRow.Credited.
const CreditOwnMetric = "ndcg@10_own_credited"

// Kinds are the judgement kinds a report has rows for, in report order:
// the qrels kinds of retrieval/judged (judged.Gold, judged.Silver).
var Kinds = []string{"gold", "silver"}

// Stat is a mean with its bootstrap 95% percentile interval.
type Stat struct {
	Mean float64 `json:"mean"`
	Lo   float64 `json:"ci_lo"`
	Hi   float64 `json:"ci_hi"`
}

// Row holds one mode's metrics on one judgement kind.
type Row struct {
	Variant Variant         `json:"variant"`
	Mode    string          `json:"mode"`
	Kind    string          `json:"kind"`
	N       int             `json:"queries"`
	Metrics map[string]Stat `json:"metrics"`
}

// LatencyRow is one mode's per-query latency (in-process, wall clock).
type LatencyRow struct {
	Variant Variant `json:"variant"`
	Mode    string  `json:"mode"`
	N       int     `json:"queries"`
	P50     float64 `json:"p50_ms"`
	P95     float64 `json:"p95_ms"`
	Mean    float64 `json:"mean_ms"`
}

// DeltaRow is a mode's paired nDCG@10 difference to the baseline mode.
type DeltaRow struct {
	Variant  Variant `json:"variant"`
	Kind     string  `json:"kind"`
	Mode     string  `json:"mode"`
	Baseline string  `json:"baseline"`
	Delta    Stat    `json:"ndcg10_delta"`
}

// WinLossRow counts, over the queries of one kind, how often mode A's
// nDCG@10 beats, loses to or ties mode B's.
type WinLossRow struct {
	Variant Variant `json:"variant"`
	Kind    string  `json:"kind"`
	A       string  `json:"a"`
	B       string  `json:"b"`
	Wins    int     `json:"a_wins"`
	Losses  int     `json:"a_losses"`
	Ties    int     `json:"ties"`
}

// FailureRow compares which queries two modes fail (no relevant page in
// the top 10): different failure sets are why fusion helps.
type FailureRow struct {
	Variant Variant  `json:"variant"`
	Kind    string   `json:"kind"`
	A       string   `json:"a"`
	B       string   `json:"b"`
	OnlyA   []string `json:"only_a_fails"`
	OnlyB   []string `json:"only_b_fails"`
	Both    int      `json:"both_fail"`
	Neither int      `json:"neither_fails"`
}

// LeakRow shows how leaving each query's own issue in changes a mode.
type LeakRow struct {
	Mode string `json:"mode"`
	Kind string `json:"kind"`
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
	Folds       []FoldInfo     `json:"folds"`
	TrainTimeMS float64        `json:"train_ms"`
	GoldModel   *RerankerModel `json:"gold_model,omitempty"`
}

// RerankerModel is the learned reranker the gold queries were scored with,
// as the report records it: the fields of retrieval.LogisticModel (the
// same JSON as the reranker.json `loom-eval ablate --out` saves). The two
// types convert into each other, (*retrieval.LogisticModel)(m), so a field
// added to one alone fails to compile where the runner converts; scoring
// and saving are retrieval's.
type RerankerModel struct {
	Version  int       `json:"version"`
	Features []string  `json:"features"`
	Mean     []float64 `json:"mean"`
	Std      []float64 `json:"std"`
	Weights  []float64 `json:"weights"`
	Bias     float64   `json:"bias"`
	// Training provenance: which judged queries (and so which issues) the
	// model has seen.
	TrainedOnQueries []string `json:"trained_on_queries"`
	TrainedOnIssues  []int    `json:"trained_on_issues"`
	Examples         int      `json:"examples"`
	Positives        int      `json:"positives"`
	Epochs           int      `json:"epochs"`
	L2               float64  `json:"l2"`
	LearningRate     float64  `json:"learning_rate"`
	FinalLoss        float64  `json:"final_loss"`
}

// QueryRun is one query under one mode and variant.
type QueryRun struct {
	QueryID string                        `json:"query_id"`
	Issue   int                           `json:"issue"`
	Mode    string                        `json:"mode"`
	Variant Variant                       `json:"variant"`
	Top     []string                      `json:"top10"`
	Latency float64                       `json:"latency_ms"`
	OwnRank int                           `json:"own_issue_rank,omitempty"`
	Scores  map[string]map[string]float64 `json:"scores"` // kind → metric → value
	Fold    string                        `json:"rerank_fold,omitempty"`
}

// Report is the ablation's result.
type Report struct {
	Dataset   string    `json:"dataset"`
	Seed      uint64    `json:"seed"`
	Bootstrap int       `json:"bootstrap_resamples"`
	Depth     int       `json:"depth"`
	Modes     []string  `json:"modes"` // retrieval mode names, in run order
	Variants  []Variant `json:"variants"`
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
func (r *Report) Row(v Variant, mode, kind string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Variant == v && row.Mode == mode && row.Kind == kind {
			return row, true
		}
	}
	return Row{}, false
}
