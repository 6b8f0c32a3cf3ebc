package ablation

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation/result"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// tinyConfig is the run every test here shares: the tiny set, all modes,
// the honest variant.
func tinyConfig(svc *retrieval.Service, ds *judged.Dataset) Config {
	return Config{Service: svc, Queries: ds.Queries, Duplicates: ds.Duplicates(), Modes: retrieval.AllModes,
		Variants: []Variant{Excluded}, Seed: 1, Bootstrap: 300, Folds: 2, StatFolds: 4,
		Train: retrieval.TrainConfig{Epochs: 200}, DatasetName: "tiny", QrelsSHA256: ds.QrelsSHA256}
}

// splitQrels writes the judgements of one kind to a file of their own: a
// second judged set over the same corpus.
func splitQrels(t *testing.T, ds *judged.Dataset, kind string) *judged.Dataset {
	t.Helper()
	src, err := os.ReadFile(ds.QrelsPath)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, line := range bytes.Split(src, []byte("\n")) {
		if bytes.Contains(line, []byte(`"kind": "`+kind+`"`)) {
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	p := filepath.Join(t.TempDir(), kind+".jsonl")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	split, err := judged.Load(ds.Dir, p)
	if err != nil {
		t.Fatal(err)
	}
	return split
}

func runsOf(rep *Report, mode string) map[string]result.QueryRun {
	out := map[string]result.QueryRun{}
	for _, r := range rep.Runs {
		if r.Mode == mode {
			out[r.QueryID] = r
		}
	}
	return out
}

func saved(t *testing.T, rep *Report) *retrieval.LogisticModel {
	t.Helper()
	if rep.Reranker == nil || rep.Reranker.GoldModel == nil {
		t.Fatal("no gold model trained")
	}
	m := (*retrieval.LogisticModel)(rep.Reranker.GoldModel)
	// Through the file format, as ablate --out and --reranker do.
	p := filepath.Join(t.TempDir(), "reranker.json")
	if err := m.Save(p); err != nil {
		t.Fatal(err)
	}
	loaded, err := retrieval.LoadLogisticModel(p)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}

// checkSavedEquality trains in one run, scores the gold-fold model with a
// second run (Saved) and compares the gold rows of the given modes, and
// every query's ranking and scores; it returns the modes whose rows
// differed (without failing for those not in want).
func checkSavedEquality(t *testing.T, name string, trainCfg, scoreCfg Config, want []string) (differ []string) {
	t.Helper()
	inRun, err := Run(context.Background(), trainCfg)
	if err != nil {
		t.Fatal(err)
	}
	return checkSavedAgainst(t, name, inRun, scoreCfg, want)
}

// checkSavedAgainst is checkSavedEquality for a training run already made.
func checkSavedAgainst(t *testing.T, name string, inRun *Report, scoreCfg Config, want []string) (differ []string) {
	t.Helper()
	ctx := context.Background()
	scoreCfg.Saved = saved(t, inRun)
	scoreCfg.SavedFile = "reranker.json"
	got, err := Run(ctx, scoreCfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if got.Reranker != nil {
		t.Errorf("%s: scoring a saved reranker trained one", name)
	}
	if got.Queries.Gold != inRun.Queries.Gold || got.Queries.Gold == 0 {
		t.Fatalf("%s: %d gold queries scored, the training run had %d", name, got.Queries.Gold, inRun.Queries.Gold)
	}
	for _, m := range scoreCfg.Modes {
		a, aok := inRun.Row(Excluded, string(m), judged.Gold)
		b, bok := got.Row(Excluded, string(m), judged.Gold)
		same := aok && bok && reflect.DeepEqual(a, b)
		want := runsOf(inRun, string(m))
		for id, r := range runsOf(got, string(m)) {
			w := want[id]
			if !reflect.DeepEqual(r.Top, w.Top) || !reflect.DeepEqual(r.Scores, w.Scores) {
				same = false
			}
			if m == retrieval.ModeRerank && (r.Fold != "saved" || w.Fold != "gold") {
				t.Errorf("%s: %s scored by fold %q, trained-run fold %q", name, id, r.Fold, w.Fold)
			}
		}
		if !same {
			differ = append(differ, string(m))
		}
	}
	for _, m := range want {
		if slices.Contains(differ, m) {
			t.Errorf("%s: %s gold numbers differ between the saved reranker's run and the run that trained it", name, m)
		}
	}
	return differ
}

// The equality a saved reranker keeps: scored with --reranker, the
// gold-fold model (trained on the silver split) gives each query it scores
// the ranking and the scores the run that trained it gave, so the gold
// rows, intervals included, are the same numbers. On the same judged set,
// the queries it was trained on are left out and the gold queries remain,
// on the same held-out statistics (the LSA folds are planned over every
// judged query, the left-out ones included).
func TestASavedRerankerScoresAsTheRunThatTrainedIt(t *testing.T) {
	ds := loadTiny(t)
	cfg := tinyConfig(startService(t, ds, 8, 1), ds)
	checkSavedEquality(t, "tiny, same set", cfg, cfg, names(retrieval.AllModes))
}

// The same on the shipped corpus, where an LSA fit over other documents
// does move the rankings, and on the other split: a judgements file with
// only the gold queries. There the folds are planned over that split's
// queries; with one LSA fit per query (leave one out) a query's statistics
// do not depend on which others are judged, and every mode is equal. With
// fewer folds than queries the fits differ between the two sets: only
// bm25, whose statistics are held out per query, stays equal.
func TestASavedRerankerScoresAsTheRunThatTrainedItOnTheOtherSplit(t *testing.T) {
	testtier.NoRace(t, "TestRunIsDeterministicUnderASeed")
	testtier.Slow(t) // the ablation five times on the shipped corpus
	ds := shippedDataset(t)
	svc := startService(t, ds, 8, 0)
	// The gold queries and eight silver-only ones keep leave-one-out cheap.
	var qs []judged.Query
	silver := 0
	for _, q := range ds.Queries {
		if len(q.Gold) > 0 || silver < 8 {
			qs = append(qs, q)
			if len(q.Gold) == 0 {
				silver++
			}
		}
	}
	// bm25, dense and rerank: rrf and weighted fuse the same two lists.
	base := Config{Service: svc, Queries: qs, Duplicates: ds.Duplicates(), Modes: []retrieval.Mode{retrieval.ModeBM25, retrieval.ModeDense, retrieval.ModeRerank},
		Variants: []Variant{Excluded}, Seed: 1, Bootstrap: 100, Folds: 2, StatFolds: 3,
		Train: retrieval.TrainConfig{Epochs: 300}, DatasetName: "mkdocs-material", QrelsSHA256: ds.QrelsSHA256}
	inRun, err := Run(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	checkSavedAgainst(t, "shipped, same set", inRun, base, names(base.Modes))

	gold := splitQrels(t, ds, judged.Gold)
	other := base
	other.Queries, other.QrelsSHA256 = gold.Queries, gold.QrelsSHA256
	loo, otherLOO := base, other
	loo.StatFolds, otherLOO.StatFolds = len(qs), len(gold.Queries)
	checkSavedEquality(t, "shipped, gold split, leave one out", loo, otherLOO, names(base.Modes))

	differ := checkSavedAgainst(t, "shipped, gold split, 3 folds", inRun, other, []string{"bm25"})
	if len(differ) == 0 {
		t.Error("with 3 folds planned over different query sets every mode still agrees; the leave-one-out case proves nothing")
	}
}

func names(ms []retrieval.Mode) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m))
	}
	return out
}

// The queries a saved reranker was trained on are left out of every mode
// and counted in every format; kept knowingly, they are scored and flagged;
// a set with nothing else is refused.
func TestASavedRerankersTrainingQueriesAreLeftOutAndSaidSo(t *testing.T) {
	testtier.Slow(t)
	ctx := context.Background()
	ds := loadTiny(t)
	svc := startService(t, ds, 8, 1)
	cfg := tinyConfig(svc, ds)
	inRun, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	model := saved(t, inRun)
	trained := map[string]bool{}
	for _, id := range model.TrainedOnQueries {
		trained[id] = true
	}
	if len(trained) == 0 || len(trained) >= len(ds.Queries) {
		t.Fatalf("gold model trained on %d of %d queries", len(trained), len(ds.Queries))
	}

	cfg.Saved, cfg.SavedFile = model, "/models/reranker.json"
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sr := rep.SavedReranker
	if sr == nil || len(sr.Overlap) != len(trained) || sr.JudgedQueries != len(ds.Queries) || sr.KeptOverlap {
		t.Fatalf("saved reranker info = %+v, want %d overlapping of %d", sr, len(trained), len(ds.Queries))
	}
	for _, o := range sr.Overlap {
		if !trained[o.QueryID] || o.Reason != "query id" {
			t.Errorf("overlap %+v", o)
		}
	}
	if rep.Queries.Total != len(ds.Queries)-len(trained) {
		t.Errorf("%d queries scored, want %d", rep.Queries.Total, len(ds.Queries)-len(trained))
	}
	for _, r := range rep.Runs {
		if trained[r.QueryID] {
			t.Errorf("%s/%s: a query the reranker was trained on was scored", r.QueryID, r.Mode)
		}
	}
	n := len(trained)
	for name, w := range map[string]func(*bytes.Buffer) error{
		"text":     func(b *bytes.Buffer) error { return rep.WriteText(b) },
		"markdown": func(b *bytes.Buffer) error { return rep.WriteMarkdown(b) },
		"svg":      func(b *bytes.Buffer) error { return rep.WriteSVG(b) },
		"json":     func(b *bytes.Buffer) error { return rep.WriteJSON(b) },
	} {
		var b bytes.Buffer
		if err := w(&b); err != nil {
			t.Fatal(err)
		}
		want := []string{"of this set's 10 judged queries were in its training set and are excluded from every mode's metrics"}
		switch name {
		case "svg":
			want = []string{"saved reranker reranker.json: 7 of 10 judged queries were in its training set, excluded"}
		case "json":
			want = []string{`"saved_reranker"`, `"kept_overlap": false`, `"reason": "query id"`}
		}
		if n != 7 {
			t.Fatalf("the tiny set's gold model trains on %d queries; the expectations say 7", n)
		}
		for _, s := range want {
			if !strings.Contains(b.String(), s) {
				t.Errorf("%s output lacks %q", name, s)
			}
		}
	}

	// Kept knowingly: scored, and flagged as leaky.
	keep := cfg
	keep.KeepOverlap = true
	rep, err = Run(ctx, keep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Queries.Total != len(ds.Queries) || !rep.SavedReranker.KeptOverlap {
		t.Errorf("kept overlap: %d queries scored", rep.Queries.Total)
	}
	for id, r := range runsOf(rep, "rerank") {
		if want := map[bool]string{true: "saved, trained on", false: "saved"}[trained[id]]; r.Fold != want {
			t.Errorf("%s: fold %q, want %q", id, r.Fold, want)
		}
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "are INCLUDED (--keep-trained): the rerank numbers are leaky") {
		t.Errorf("text report does not flag the kept overlap:\n%.600s", b.String())
	}

	// Another set over the same issues, with other query ids: the overlap
	// is found by issue. Issue numbers of another project mean nothing.
	renamed := *model
	renamed.TrainedOnQueries = []string{"elsewhere-1"}
	cfg.Saved = &renamed
	rep, err = Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.SavedReranker.Overlap) != n || rep.SavedReranker.Overlap[0].Reason != "issue" {
		t.Errorf("same project, other ids: overlap %+v", rep.SavedReranker.Overlap)
	}
	foreign := renamed
	foreign.TrainedOn.Dataset, foreign.TrainedOn.CorpusSHA256 = "another-project", strings.Repeat("0", 64)
	cfg.Saved = &foreign
	if rep, err = Run(ctx, cfg); err != nil {
		t.Fatal(err)
	} else if len(rep.SavedReranker.Overlap) != 0 {
		t.Errorf("another project's issue numbers counted as overlap: %+v", rep.SavedReranker.Overlap)
	}

	// Only the training queries judged: nothing to score honestly.
	silver := splitQrels(t, ds, judged.Silver)
	only := tinyConfig(svc, silver)
	var kept []judged.Query
	for _, q := range silver.Queries {
		if trained[q.ID] {
			kept = append(kept, q)
		}
	}
	only.Queries, only.Saved = kept, model
	if _, err := Run(ctx, only); !errors.Is(err, ErrNothingLeft) {
		t.Errorf("a set of training queries only was scored: %v", err)
	}
}

// A saved reranker whose features would mean something else here (another
// embedder) is refused, naming the provenance field.
func TestASavedRerankerFromAnotherEmbedderIsRefused(t *testing.T) {
	ctx := context.Background()
	ds := loadTiny(t)
	svc := startService(t, ds, 8, 1)
	inRun, err := Run(ctx, tinyConfig(svc, ds))
	if err != nil {
		t.Fatal(err)
	}
	model := saved(t, inRun)
	other := startService(t, ds, 6, 1)
	err = CheckSaved(model, other)
	if err == nil || !strings.Contains(err.Error(), `field "trained_on.embedder"`) || !strings.Contains(err.Error(), "lsa dims=6") {
		t.Errorf("embedder mismatch: %v", err)
	}
	cfg := tinyConfig(other, ds)
	cfg.Saved = model
	if _, err := Run(ctx, cfg); err == nil {
		t.Error("Run scored a reranker from another embedder")
	}
	if err := CheckSaved(model, svc); err != nil {
		t.Errorf("the model's own service: %v", err)
	}
}

// With both statistics, the effect rows are the two variants' own numbers:
// the full-statistics variant is what a run of it alone gives, and each
// row's Δ is its full minus its held-out mean.
func TestTheStatisticsEffectComparesTheTwoVariants(t *testing.T) {
	ctx := context.Background()
	ds := loadTiny(t)
	svc := startService(t, ds, 8, 1)
	cfg := tinyConfig(svc, ds)
	cfg.Variants = []Variant{FullStats, Excluded}
	both, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(both.Variants, []Variant{Excluded, FullStats}) {
		t.Errorf("variants in order %v", both.Variants)
	}
	if both.Reranker.Statistics != retrieval.StatisticsHeldOut || both.RerankerFullStats == nil || both.RerankerFullStats.Statistics != retrieval.StatisticsFull {
		t.Errorf("reranker trainings: %+v / %+v", both.Reranker, both.RerankerFullStats)
	}
	cfg.Variants = []Variant{FullStats}
	alone, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if alone.Statistics != nil {
		t.Error("a full-statistics run reports held-out statistics")
	}
	if len(both.StatsEffect) != 2*len(retrieval.AllModes) {
		t.Fatalf("%d effect rows", len(both.StatsEffect))
	}
	changed := 0
	for _, e := range both.StatsEffect {
		full, _ := alone.Row(FullStats, e.Mode, e.Kind)
		held, _ := both.Row(Excluded, e.Mode, e.Kind)
		if full.Metrics["ndcg@10"].Mean != e.Full || held.Metrics["ndcg@10"].Mean != e.HeldOut {
			t.Errorf("%s/%s: effect row %+v, rows full %v held out %v", e.Kind, e.Mode, e, full.Metrics["ndcg@10"], held.Metrics["ndcg@10"])
		}
		if d := e.Full - e.HeldOut; d-e.Delta.Mean > 1e-12 || e.Delta.Mean-d > 1e-12 || e.Delta.Lo > e.Delta.Mean || e.Delta.Hi < e.Delta.Mean {
			t.Errorf("%s/%s: Δ %+v for %.4f − %.4f", e.Kind, e.Mode, e.Delta, e.Full, e.HeldOut)
		}
		changed += e.Changed
	}
	if changed == 0 {
		t.Error("holding the statistics out changed no top 10")
	}
	for _, r := range both.Runs {
		if (r.Variant == Excluded) != (r.LSAFold != 0) {
			t.Errorf("%s/%s/%s: LSA fold %d", r.Variant, r.Mode, r.QueryID, r.LSAFold)
		}
	}
}
