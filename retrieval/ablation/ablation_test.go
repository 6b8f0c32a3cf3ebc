package ablation

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation/result"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// The runner fills the result format: the metrics Scores computes are the
// format's metric names, its judgement kinds are judged's, and the gold
// model it records has the JSON of the model retrieval saves.
func TestTheRunnerSpeaksTheResultFormat(t *testing.T) {
	got := Scores([]string{"a"}, map[string]int{"a": 1})
	if len(got) != len(result.MetricNames) {
		t.Errorf("Scores computes %d metrics, result.MetricNames lists %d", len(got), len(result.MetricNames))
	}
	for _, m := range result.MetricNames {
		if _, ok := got[m]; !ok {
			t.Errorf("Scores lacks %s", m)
		}
	}
	if !reflect.DeepEqual(result.Kinds, []string{judged.Gold, judged.Silver}) {
		t.Errorf("result.Kinds = %v, judged's kinds are %v", result.Kinds, []string{judged.Gold, judged.Silver})
	}
	m := &retrieval.LogisticModel{Version: 1, Features: []string{"f"}, Mean: []float64{0.5}, Std: []float64{1}, Weights: []float64{2},
		Bias: -1, TrainedOnQueries: []string{"q1"}, TrainedOnIssues: []int{3}, Examples: 4, Positives: 1, Epochs: 5, L2: 0.1, LearningRate: 0.2, FinalLoss: 0.3,
		TrainedOn: retrieval.TrainingProvenance{Dataset: "d", CorpusSHA256: "c", QrelsSHA256: "q", Judgements: "silver", Fold: "gold", Seed: 7,
			Embedder: "lsa dims=8", Statistics: "held-out", CandidateDepth: 100, RerankDepth: 50, RRFK: 60}}
	want, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	have, err := json.MarshalIndent((*result.RerankerModel)(m), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != string(want) {
		t.Errorf("the report's gold model encodes differently from reranker.json:\n%s\nwant\n%s", have, want)
	}
	if strings.Contains(string(want), ": 0,") || strings.Contains(string(want), "null") {
		t.Errorf("set every field so a renamed one shows: %s", want)
	}
}

func TestMetricsMatchHandComputedValues(t *testing.T) {
	ranked := []string{"x", "a", "y", "b", "z"}
	rel := map[string]int{"a": 2, "b": 1, "c": 1}
	if got := RecallAt(ranked, rel, 1); got != 0 {
		t.Errorf("recall@1 = %v", got)
	}
	if got := RecallAt(ranked, rel, 5); math.Abs(got-2.0/3) > 1e-12 {
		t.Errorf("recall@5 = %v, want 2/3", got)
	}
	if got := MRRAt(ranked, rel, 10); got != 0.5 {
		t.Errorf("mrr = %v, want 1/2", got)
	}
	if got := MRRAt(ranked, rel, 1); got != 0 {
		t.Errorf("mrr@1 = %v, want 0", got)
	}
	// DCG = 3/log2(3) + 1/log2(5); IDCG = 3/log2(2) + 1/log2(3) + 1/log2(4).
	want := (3/math.Log2(3) + 1/math.Log2(5)) / (3 + 1/math.Log2(3) + 0.5)
	if got := NDCGAt(ranked, rel, 10); math.Abs(got-want) > 1e-12 {
		t.Errorf("ndcg@10 = %v, want %v", got, want)
	}
	if got := Collapse([]string{"p1", "p1", "issue:3", "p2", "p1"}); strings.Join(got, ",") != "p1,issue:3,p2" {
		t.Errorf("collapse = %v", got)
	}
	if got := Percentile([]float64{4, 1, 3, 2}, 0.5); got != 2.5 {
		t.Errorf("median = %v", got)
	}
}

func loadTiny(t *testing.T) *judged.Dataset {
	t.Helper()
	ds, err := judged.Load("../testdata/tiny", "")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// shippedDataset loads the repository's shipped judged set.
func shippedDataset(t *testing.T) *judged.Dataset {
	t.Helper()
	d, err := judged.Load(datasettest.ShippedDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRerankFoldsNeverTrainOnAnEvaluatedIssue(t *testing.T) {
	check := func(name string, ds *judged.Dataset, k int) {
		folds, err := PlanRerankFolds(ds.Queries, k, 42, ds.Duplicates())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		evaluated := 0
		for _, f := range folds {
			train := map[int]bool{}
			for _, q := range f.Train {
				train[q.Issue] = true
				if len(q.Gold) > 0 {
					t.Errorf("%s fold %s trains on gold query %s", name, f.Name, q.ID)
				}
			}
			for _, q := range f.Eval {
				evaluated++
				if train[q.Issue] {
					t.Errorf("%s fold %s trains and evaluates issue %d", name, f.Name, q.Issue)
				}
				for _, d := range ds.Duplicates()[q.Issue] {
					if train[d] {
						t.Errorf("%s fold %s trains on %d, a duplicate of evaluated %d", name, f.Name, d, q.Issue)
					}
				}
			}
		}
		if evaluated != len(ds.Queries) {
			t.Errorf("%s: %d evaluations for %d queries", name, evaluated, len(ds.Queries))
		}
	}
	check("tiny", loadTiny(t), 2)
	check("shipped", shippedDataset(t), 5)
}

func TestCheckFoldsCatchesALeakingFold(t *testing.T) {
	ds := loadTiny(t)
	q := ds.Queries[5]
	err := CheckFolds([]Fold{{Name: "bad", Train: []judged.Query{q}, Eval: []judged.Query{q}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "trains on issue") {
		t.Fatalf("leaking fold accepted: %v", err)
	}
	gold := ds.Queries[0]
	if err := CheckFolds([]Fold{{Name: "g", Train: []judged.Query{gold}}}, nil); err == nil {
		t.Fatal("fold training on a gold query accepted")
	}
}

func startService(t *testing.T, ds *judged.Dataset, dims, minDF int) *retrieval.Service {
	t.Helper()
	c, err := ds.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := retrieval.New(retrieval.Config{Corpus: c, Duplicates: ds.Duplicates(), LSA: retrieval.LSAConfig{Dims: dims, MinDF: minDF, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Shutdown(context.Background()) })
	return svc
}

func TestRunIsDeterministicUnderASeed(t *testing.T) {
	testtier.Slow(t)
	ds := loadTiny(t)
	svc := startService(t, ds, 8, 1)
	run := func(seed uint64) *Report {
		rep, err := Run(context.Background(), Config{Service: svc, Queries: ds.Queries, Duplicates: ds.Duplicates(),
			Modes: retrieval.AllModes, Variants: []Variant{Excluded, Leaky}, Seed: seed, Bootstrap: 300, Folds: 2,
			Train: retrieval.TrainConfig{Epochs: 200}})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	a, b := run(5), run(5)
	if !reflect.DeepEqual(a.Rows, b.Rows) || !reflect.DeepEqual(a.Deltas, b.Deltas) || !reflect.DeepEqual(a.WinLoss, b.WinLoss) {
		t.Error("same seed gave different metrics or intervals")
	}
	for i := range a.Runs {
		if !reflect.DeepEqual(a.Runs[i].Top, b.Runs[i].Top) {
			t.Errorf("run %d: rankings differ", i)
		}
	}
	c := run(6)
	same := true
	for i := range a.Rows {
		for _, m := range result.MetricNames {
			if a.Rows[i].Metrics[m] != c.Rows[i].Metrics[m] {
				same = false
			}
		}
	}
	if same {
		t.Error("a different seed gave identical bootstrap intervals; the seed is not used")
	}
	var sb strings.Builder
	for _, w := range []func() error{func() error { return a.WriteText(&sb) }, func() error { return a.WriteMarkdown(&sb) }, func() error { return a.WriteSVG(&sb) }, func() error { return a.WriteJSON(&sb) }} {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(sb.String(), "<svg") || !strings.Contains(sb.String(), "| rerank |") {
		t.Error("renderers lack the chart or the rerank row")
	}
}

// exclusionQueries are the shipped judged queries the exclusion test runs
// the ablation on: in the long tier all of them; in make test every gold
// query (scored in rerank mode by the gold-fold model, the one
// loom-eval ablate saves) and every fourth silver-only query in issue order
// (scored by the cross-validation folds), so both kinds of rerank fold,
// both LSA folds and every mode are still exercised on the shipped corpus,
// on 30 of its 75 queries. The shipped set declares no duplicate issues,
// so no query kind is left out.
func exclusionQueries(t *testing.T, ds *judged.Dataset) []judged.Query {
	t.Helper()
	if testtier.Long() {
		return ds.Queries
	}
	qs := slices.Clone(ds.Queries)
	slices.SortFunc(qs, func(a, b judged.Query) int { return a.Issue - b.Issue })
	var out []judged.Query
	silver := 0
	for _, q := range qs {
		if len(q.Gold) > 0 {
			out = append(out, q)
			continue
		}
		if silver%4 == 0 {
			out = append(out, q)
		}
		silver++
	}
	if len(ds.Duplicates()) != 0 {
		t.Fatal("the shipped set now declares duplicates: choose queries whose issues have them too")
	}
	return out
}

// TestShippedDatasetExclusionHoldsForEveryMode runs the whole ablation on
// the shipped judgements (exclusionQueries): in the honest variant no mode
// ever returns the query's own issue, every query is ranked by an LSA fit
// that left its issue out, every rerank score comes from a model that never
// saw the query's issue, and the leaky variant does find the question (so
// the exclusion is what keeps it out).
func TestShippedDatasetExclusionHoldsForEveryMode(t *testing.T) {
	testtier.NoRace(t, "TestRunIsDeterministicUnderASeed")
	testtier.Slow(t)
	ds := shippedDataset(t)
	queries := exclusionQueries(t, ds)
	// 32 LSA dimensions: exclusion does not depend on them, and the held-out
	// fits cost a sixteenth of 128's (this runs under -race in make test).
	svc := startService(t, ds, 32, 0)
	rep, err := Run(context.Background(), Config{Service: svc, Queries: queries, Duplicates: ds.Duplicates(),
		Modes: retrieval.AllModes, Variants: []Variant{Excluded, Leaky}, Seed: 1, Bootstrap: 100, Folds: 5, StatFolds: 2,
		Train: retrieval.TrainConfig{Epochs: 500}})
	if err != nil {
		t.Fatal(err)
	}
	gold := map[int]bool{}
	for _, q := range queries {
		if len(q.Gold) > 0 {
			gold[q.Issue] = true
		}
	}
	if len(gold) == 0 || len(gold) == len(queries) {
		t.Fatalf("%d gold of %d queries: the test needs both kinds", len(gold), len(queries))
	}
	foundOwn := map[string]int{}
	for _, r := range rep.Runs {
		switch r.Variant {
		case Excluded:
			if r.OwnRank != 0 {
				t.Errorf("%s/%s: own issue at rank %d", r.QueryID, r.Mode, r.OwnRank)
			}
			if r.LSAFold < 1 || r.LSAFold > rep.Statistics.LSAFolds {
				t.Errorf("%s/%s: ranked by LSA fold %d of %d", r.QueryID, r.Mode, r.LSAFold, rep.Statistics.LSAFolds)
			}
		case Leaky:
			if r.OwnRank > 0 {
				foundOwn[r.Mode]++
			}
		}
		if r.Mode == string(retrieval.ModeRerank) {
			if gold[r.Issue] != (r.Fold == "gold") || r.Fold == "" {
				t.Errorf("%s evaluated by fold %q", r.QueryID, r.Fold)
			}
		}
	}
	for _, m := range []retrieval.Mode{retrieval.ModeBM25, retrieval.ModeDense, retrieval.ModeRRF, retrieval.ModeWeighted} {
		if foundOwn[string(m)] < len(queries)/2 {
			t.Errorf("leaky %s found its own issue for only %d of %d queries", m, foundOwn[string(m)], len(queries))
		}
	}
	if st := rep.Statistics; st == nil || st.BM25 != "per-query" || st.Dense != "lsa-folds" || st.LSAFolds != 2 {
		t.Errorf("statistics = %+v", rep.Statistics)
	}
	if rep.Reranker.GoldModel == nil {
		t.Fatal("no gold model")
	}
	if p := rep.Reranker.GoldModel.TrainedOn; p.Statistics != retrieval.StatisticsHeldOut || p.Fold != "gold" || p.Judgements != "silver" {
		t.Errorf("gold model provenance %+v", p)
	}
	goldModel := (*retrieval.LogisticModel)(rep.Reranker.GoldModel)
	for is := range gold {
		if goldModel.HasSeenIssue(is) {
			t.Errorf("gold model trained on gold issue %d", is)
		}
	}
}
