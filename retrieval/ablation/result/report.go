package result

// Variant says whether each query's own issue was excluded.
type Variant string

// Variants.
const (
	// Excluded is the honest protocol: each query's own issue (and its
	// duplicates) is left out of the results and out of the fitted corpus
	// statistics (BM25's document frequencies and lengths, the LSA fit).
	Excluded Variant = "excluded"
	// FullStats leaves the own issue out of the results only; the
	// statistics are fitted on the whole corpus, own issue included (the
	// protocol before held-out statistics).
	FullStats Variant = "full-stats"
	// Leaky leaves the own issue in the corpus.
	Leaky Variant = "leaky"
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
	// Statistics is how the training candidates' corpus statistics were
	// fitted: "held-out" (without the training query's issue) or "full".
	Statistics  string         `json:"statistics"`
	Folds       []FoldInfo     `json:"folds"`
	TrainTimeMS float64        `json:"train_ms"`
	GoldModel   *RerankerModel `json:"gold_model,omitempty"`
}

// StatisticsInfo says how the Excluded variant's corpus statistics were
// fitted without each query's issue.
type StatisticsInfo struct {
	// BM25 is "per-query": each query is scored on the index with its
	// issue and duplicates deleted (exactly a fresh index without them).
	BM25 string `json:"bm25"`
	// Dense is "lsa-folds" (the LSA model refitted once per fold of the
	// corpus's issues, each query embedded by the fit without its fold) or
	// "not-fitted" (a hosted embedder learns nothing from the corpus).
	Dense string `json:"dense"`
	// LSAFolds and LSAFoldIssues: how many fits, how many issue documents
	// each left out.
	LSAFolds      int   `json:"lsa_folds"`
	LSAFoldIssues []int `json:"lsa_fold_issues,omitempty"`
	// Build times, wall clock: the private index, all fold fits with
	// their corpus embeddings, and every query's switch of held-out issues.
	IndexMS   float64 `json:"index_ms"`
	FitMS     float64 `json:"fit_ms"`
	HoldOutMS float64 `json:"hold_out_ms"`
}

// StatsEffectRow is how fitting the statistics on the whole corpus (the
// query's own issue included) moves a mode against held-out statistics,
// both with the own issue excluded from the results: FullStats − Excluded.
type StatsEffectRow struct {
	Kind    string  `json:"kind"`
	Mode    string  `json:"mode"`
	N       int     `json:"queries"`
	HeldOut float64 `json:"ndcg10_held_out"`
	Full    float64 `json:"ndcg10_full_stats"`
	// Delta is Full − HeldOut with its paired bootstrap interval.
	Delta Stat `json:"ndcg10_delta"`
	// Changed counts the queries whose top 10 differ between the two.
	Changed int `json:"top10_changed"`
}

// SavedRerankerInfo describes a run that scored a saved reranker
// (`loom-eval ablate --reranker FILE`) instead of training one.
type SavedRerankerInfo struct {
	File      string             `json:"file"`
	TrainedOn RerankerProvenance `json:"trained_on"`
	// TrainedQueries is how many queries the model was trained on.
	TrainedQueries int `json:"trained_queries"`
	// Overlap lists this set's judged queries that were in the model's
	// training set. Scoring them would be leakage, so they are left out of
	// every mode's metrics, unless KeptOverlap (then the rerank numbers
	// include queries the model was trained on).
	Overlap     []OverlapQuery `json:"overlap"`
	KeptOverlap bool           `json:"kept_overlap"`
	// JudgedQueries is how many judged queries the set has before the
	// overlap is taken out.
	JudgedQueries int `json:"judged_queries"`
}

// OverlapQuery is a judged query the saved reranker was trained on.
type OverlapQuery struct {
	QueryID string `json:"query_id"`
	Issue   int    `json:"issue"`
	// Reason is "query id" (the id is in trained_on_queries) or "issue"
	// (the issue, or a duplicate of it, is in trained_on_issues, and the
	// model was trained on the same project's issues).
	Reason string `json:"reason"`
}

// RerankerProvenance is retrieval.TrainingProvenance (an alias of the same
// unnamed struct type, so the two are one type).
type RerankerProvenance = struct {
	Dataset        string  `json:"dataset"`
	CorpusSHA256   string  `json:"corpus_sha256"`
	QrelsSHA256    string  `json:"qrels_sha256"`
	Judgements     string  `json:"judgements"`
	Fold           string  `json:"fold"`
	Seed           uint64  `json:"seed"`
	Embedder       string  `json:"embedder"`
	Statistics     string  `json:"statistics"`
	CandidateDepth int     `json:"candidate_depth"`
	RerankDepth    int     `json:"rerank_depth"`
	RRFK           float64 `json:"rrf_k"`
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
	TrainedOnQueries []string           `json:"trained_on_queries"`
	TrainedOnIssues  []int              `json:"trained_on_issues"`
	TrainedOn        RerankerProvenance `json:"trained_on"`
	Examples         int                `json:"examples"`
	Positives        int                `json:"positives"`
	Epochs           int                `json:"epochs"`
	L2               float64            `json:"l2"`
	LearningRate     float64            `json:"learning_rate"`
	FinalLoss        float64            `json:"final_loss"`
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
	// LSAFold is the held-out LSA fold the query was ranked with (Excluded
	// variant; 0: the service's own model).
	LSAFold int `json:"lsa_fold,omitempty"`
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
	// Statistics is set when the Excluded variant ran.
	Statistics *StatisticsInfo `json:"statistics,omitempty"`
	// StatsEffect is set when both Excluded and FullStats ran.
	StatsEffect []StatsEffectRow `json:"statistics_effect,omitempty"`
	Reranker    *RerankInfo      `json:"reranker,omitempty"`
	// RerankerFullStats is the full-statistics rerankers' training when
	// both kinds were trained (Reranker is then the held-out one).
	RerankerFullStats *RerankInfo `json:"reranker_full_stats,omitempty"`
	// SavedReranker is set when a saved reranker was scored.
	SavedReranker *SavedRerankerInfo `json:"saved_reranker,omitempty"`
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
