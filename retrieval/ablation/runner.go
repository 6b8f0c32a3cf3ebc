package ablation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation/result"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// Config configures Run.
type Config struct {
	Service *retrieval.Service
	Queries []judged.Query
	// Duplicates is the duplicate relation the service excludes with; folds
	// keep duplicate groups together.
	Duplicates map[int][]int
	Modes      []retrieval.Mode
	// Variants to run (default: Excluded).
	Variants []Variant
	// Seed drives the bootstrap, the reranker folds and the held-out LSA
	// folds.
	Seed uint64
	// Bootstrap is the number of resamples (default 2000).
	Bootstrap int
	// Depth is how many hits each search returns before they are collapsed
	// to pages (default 100).
	Depth int
	// Folds is the number of silver cross-validation folds (default 5).
	Folds int
	// StatFolds is the number of LSA folds the Excluded variant's
	// held-out statistics are fitted in (default 5; see retrieval.HeldOut).
	StatFolds int
	Train     retrieval.TrainConfig
	// Progress receives one line per finished mode (nil: silent).
	Progress io.Writer
	// Now is the clock used for latencies (default time.Now).
	Now func() time.Time
	// DatasetName labels the report and the trained models' provenance.
	DatasetName string
	// QrelsSHA256 is the judgements file's hash, recorded in the trained
	// models' provenance.
	QrelsSHA256 string

	// Saved, when set, is a reranker trained elsewhere (a reranker.json)
	// that rerank mode scores every query with; nothing is trained. Queries
	// it was trained on are left out of every mode (see SavedOverlap)
	// unless KeepOverlap. SavedFile names it in the report.
	Saved       *retrieval.LogisticModel
	SavedFile   string
	KeepOverlap bool

	// overlap is SavedOverlap's query ids, set by Run.
	overlap map[string]bool
}

// ErrNothingLeft is returned when every judged query was in the saved
// reranker's training set: there is nothing it can be scored on honestly.
var ErrNothingLeft = errors.New("every judged query was in the saved reranker's training set")

// Validate reports a configuration Run cannot use.
func (c Config) Validate() error {
	var errs []error
	if c.Service == nil {
		errs = append(errs, errors.New("service: must be set"))
	}
	if len(c.Queries) == 0 {
		errs = append(errs, errors.New("queries: none"))
	}
	if len(c.Modes) == 0 {
		errs = append(errs, errors.New("modes: none"))
	}
	for _, v := range c.Variants {
		if v != Excluded && v != FullStats && v != Leaky {
			errs = append(errs, fmt.Errorf("variants: unknown %q", v))
		}
	}
	if c.Bootstrap < 0 || c.Depth < 0 || c.Folds < 0 || c.StatFolds < 0 {
		errs = append(errs, errors.New("bootstrap, depth, folds and stat folds must be >= 0"))
	}
	if c.Saved != nil && !slices.Contains(c.Modes, retrieval.ModeRerank) {
		errs = append(errs, errors.New("saved: a saved reranker needs the rerank mode"))
	}
	if c.KeepOverlap && c.Saved == nil {
		errs = append(errs, errors.New("keep overlap: only means something with a saved reranker"))
	}
	return errors.Join(errs...)
}

// statistics says which corpus statistics a variant's searches (and the
// rerankers that score them) use.
func statistics(v Variant) string {
	if v == Excluded {
		return retrieval.StatisticsHeldOut
	}
	return retrieval.StatisticsFull
}

// models are the rerankers of one statistics kind: per evaluated issue,
// the model that may score it and its fold's name.
type models struct {
	modelFor map[int]*retrieval.LogisticModel
	foldOf   map[int]string
	info     *result.RerankInfo
}

// Run runs the ablation.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ablation config: %w", err)
	}
	if cfg.Bootstrap == 0 {
		cfg.Bootstrap = 2000
	}
	if cfg.Depth == 0 {
		cfg.Depth = 100
	}
	if cfg.Folds == 0 {
		cfg.Folds = 5
	}
	if cfg.StatFolds == 0 {
		cfg.StatFolds = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// Variants in report order, each once.
	var vs []Variant
	for _, v := range []Variant{Excluded, FullStats, Leaky} {
		if slices.Contains(cfg.Variants, v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		vs = []Variant{Excluded}
	}
	cfg.Variants = vs
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	qs := append([]judged.Query(nil), cfg.Queries...)
	sort.Slice(qs, func(i, j int) bool { return qs[i].Issue < qs[j].Issue })

	rep := &Report{Dataset: cfg.DatasetName, Seed: cfg.Seed, Bootstrap: cfg.Bootstrap, Depth: cfg.Depth,
		Variants: cfg.Variants}
	if cfg.Saved != nil {
		if err := CheckSaved(cfg.Saved, cfg.Service); err != nil {
			return nil, fmt.Errorf("saved reranker %s: %w", cfg.SavedFile, err)
		}
		overlap := SavedOverlap(cfg.Saved, qs, cfg.DatasetName, cfg.Service.Corpus().Hash(), cfg.Duplicates)
		rep.SavedReranker = &result.SavedRerankerInfo{File: cfg.SavedFile, TrainedOn: cfg.Saved.TrainedOn,
			TrainedQueries: len(cfg.Saved.TrainedOnQueries), Overlap: overlap, KeptOverlap: cfg.KeepOverlap, JudgedQueries: len(qs)}
		cfg.overlap = map[string]bool{}
		for _, o := range overlap {
			cfg.overlap[o.QueryID] = true
		}
		if !cfg.KeepOverlap {
			qs = slices.DeleteFunc(qs, func(q judged.Query) bool { return cfg.overlap[q.ID] })
			if len(qs) == 0 {
				return nil, fmt.Errorf("saved reranker %s: %w (all %d of them): score it on another judged set, or keep them knowingly (KeepOverlap, --keep-trained)", cfg.SavedFile, ErrNothingLeft, len(overlap))
			}
		}
		fmt.Fprintf(progress, "ablate: saved reranker %s: %d of %d judged queries were in its training set (%s)\n",
			cfg.SavedFile, len(overlap), rep.SavedReranker.JudgedQueries, map[bool]string{true: "kept", false: "excluded"}[cfg.KeepOverlap])
	}
	for _, m := range cfg.Modes {
		rep.Modes = append(rep.Modes, string(m))
	}
	for _, q := range qs {
		if len(q.Gold) > 0 {
			rep.Queries.Gold++
		}
		if len(q.Silver) > 0 {
			rep.Queries.Silver++
		}
	}
	rep.Queries.Total = len(qs)

	var ho *retrieval.HeldOut
	var holdOut time.Duration
	if slices.Contains(cfg.Variants, Excluded) {
		// Folds over every judged query's issue, the ones a saved
		// reranker's overlap left out included: which LSA fit scores a
		// query then does not depend on that overlap.
		var issues []int
		for _, q := range cfg.Queries {
			issues = append(issues, q.Issue)
		}
		var err error
		ho, err = cfg.Service.HoldOut(ctx, retrieval.HoldOutConfig{Issues: issues, Folds: cfg.StatFolds, Seed: cfg.Seed})
		if err != nil {
			return nil, fmt.Errorf("ablation: %w", err)
		}
		defer ho.Close()
		info := ho.Info()
		rep.Statistics = &result.StatisticsInfo{BM25: "per-query", Dense: "lsa-folds", LSAFolds: info.Folds, LSAFoldIssues: info.FoldIssues,
			IndexMS: ms(info.IndexTime), FitMS: ms(info.FitTime)}
		if info.Folds == 0 {
			rep.Statistics.Dense = "not-fitted"
		}
		cached := ""
		if info.FoldsCached > 0 {
			cached = fmt.Sprintf(" (%d read from the model cache)", info.FoldsCached)
		}
		fmt.Fprintf(progress, "ablate: held-out statistics: private bm25 index in %s, %d LSA fold fits in %s%s\n",
			info.IndexTime.Round(time.Millisecond), info.Folds, info.FitTime.Round(time.Millisecond), cached)
	}
	// view is the service a query of variant v is searched on.
	view := func(v Variant, q judged.Query) (*retrieval.Service, error) {
		if v != Excluded {
			return cfg.Service, nil
		}
		t0 := cfg.Now()
		s, err := ho.Without(ctx, []int{q.Issue})
		holdOut += cfg.Now().Sub(t0)
		return s, err
	}

	// Reranker models per statistics kind, planned so none sees its
	// query's issue.
	trained := map[string]*models{}
	if slices.Contains(cfg.Modes, retrieval.ModeRerank) && cfg.Saved == nil {
		for _, v := range cfg.Variants {
			kind := statistics(v)
			if trained[kind] != nil {
				continue
			}
			ms, err := trainFolds(ctx, cfg, qs, kind, func(q judged.Query) (*retrieval.Service, error) { return view(v, q) }, progress)
			if err != nil {
				return nil, err
			}
			trained[kind] = ms
		}
		rep.Reranker = trained[statistics(cfg.Variants[0])].info
		if full := trained[retrieval.StatisticsFull]; cfg.Variants[0] == Excluded && full != nil {
			rep.RerankerFullStats = full.info
		}
	}

	for _, v := range cfg.Variants {
		if err := evaluate(ctx, cfg, rep, qs, v, view, trained[statistics(v)], ho, progress); err != nil {
			return nil, err
		}
	}
	if rep.Statistics != nil {
		rep.Statistics.HoldOutMS = ms(holdOut)
	}
	summarize(rep, qs, cfg.Seed)
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// evaluate runs every mode of variant v on every query, query by query
// (a held-out view is made once per query), and appends the runs mode by
// mode.
func evaluate(ctx context.Context, cfg Config, rep *Report, qs []judged.Query, v Variant,
	view func(Variant, judged.Query) (*retrieval.Service, error), trained *models, ho *retrieval.HeldOut, progress io.Writer) error {
	runs := make([][]result.QueryRun, len(cfg.Modes))
	lat := make([][]float64, len(cfg.Modes))
	for i, q := range qs {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("ablation: %w", err)
		}
		base, err := view(v, q)
		if err != nil {
			return fmt.Errorf("ablation: query %s: %w", q.ID, err)
		}
		lsaFold := 0
		if v == Excluded {
			lsaFold = ho.Fold(q.Issue)
		}
		for mi, m := range cfg.Modes {
			svc, timed := base, cfg.Service
			fold := ""
			if m == retrieval.ModeRerank {
				var model *retrieval.LogisticModel
				model, fold, err = rerankerFor(cfg, trained, q)
				if err != nil {
					return err
				}
				svc, timed = svc.WithReranker(model), timed.WithReranker(model)
			}
			sq := retrieval.Query{Text: q.Text, Mode: m, K: cfg.Depth}
			if v != Leaky {
				sq.ExcludeIssues = []int{q.Issue}
			}
			if i == 0 {
				// One untimed warm-up per mode so the first query does not
				// pay for lazily built caches.
				if _, err := timed.Search(ctx, sq); err != nil {
					return fmt.Errorf("warm up %s: %w", m, err)
				}
			}
			var res *retrieval.Result
			if v == Excluded {
				// The result comes from the held-out view, the latency
				// from the same search on the service itself: latency is
				// the runtime's, and the view's private index, which
				// restores a document per query in new segments, searches
				// up to twice as slowly.
				if res, err = svc.Search(ctx, sq); err != nil {
					return fmt.Errorf("ablation: query %s, mode %s: %w", q.ID, m, err)
				}
			}
			t0 := cfg.Now()
			r, err := timed.Search(ctx, sq)
			el := cfg.Now().Sub(t0)
			if err != nil {
				return fmt.Errorf("ablation: query %s, mode %s: %w", q.ID, m, err)
			}
			if res == nil {
				res = r
			}
			lat[mi] = append(lat[mi], ms(el))
			runs[mi] = append(runs[mi], scoreRun(q, v, m, res, ms(el), fold, lsaFold))
		}
		if (i+1)%25 == 0 && i+1 < len(qs) {
			fmt.Fprintf(progress, "ablate: %s %d/%d queries\n", v, i+1, len(qs))
		}
	}
	for mi, m := range cfg.Modes {
		rep.Runs = append(rep.Runs, runs[mi]...)
		fmt.Fprintf(progress, "ablate: %s/%s done: %d queries, latency p50 %.2f ms, p95 %.2f ms\n",
			v, m, len(qs), Percentile(lat[mi], 0.5), Percentile(lat[mi], 0.95))
	}
	return nil
}

// rerankerFor is the model that scores q in rerank mode and its fold's
// name. A trained model that has seen q's issue is an error, never a
// number; so is a saved one, unless the overlap was kept knowingly (its
// fold is then "saved, trained on").
func rerankerFor(cfg Config, trained *models, q judged.Query) (*retrieval.LogisticModel, string, error) {
	if cfg.Saved != nil {
		if cfg.overlap[q.ID] {
			if !cfg.KeepOverlap {
				return nil, "", fmt.Errorf("ablation: saved reranker was trained on query %s (issue %d), which the overlap check let through", q.ID, q.Issue)
			}
			return cfg.Saved, "saved, trained on", nil
		}
		return cfg.Saved, "saved", nil
	}
	model := trained.modelFor[q.Issue]
	if model == nil {
		return nil, "", fmt.Errorf("ablation: no reranker model planned for query %s", q.ID)
	}
	if model.HasSeenIssue(q.Issue) {
		return nil, "", fmt.Errorf("ablation: reranker for query %s was trained on its own issue %d", q.ID, q.Issue)
	}
	return model, trained.foldOf[q.Issue], nil
}

// scoreRun collapses a result to judged units and scores it.
func scoreRun(q judged.Query, v Variant, m retrieval.Mode, res *retrieval.Result, latency float64, fold string, lsaFold int) result.QueryRun {
	units := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		units[i] = retrieval.Document{ID: h.ID, Kind: h.Kind, Page: h.Page}.Unit()
	}
	ranked := Collapse(units)
	run := result.QueryRun{QueryID: q.ID, Issue: q.Issue, Mode: string(m), Variant: v, Latency: latency,
		Scores: map[string]map[string]float64{}, Fold: fold, LSAFold: lsaFold}
	run.Top = ranked[:min(10, len(ranked))]
	own := retrieval.IssueID(q.Issue)
	for r, u := range ranked {
		if u == own {
			run.OwnRank = r + 1
			break
		}
	}
	for _, kind := range result.Kinds {
		rel := q.Relevant(kind)
		if len(rel) == 0 {
			continue
		}
		run.Scores[kind] = Scores(ranked, rel)
		// What a judge that accepts the question itself as an answer
		// would score: the inflation leakage causes.
		credited := map[string]int{own: maxGrade(rel)}
		for u, g := range rel {
			credited[u] = g
		}
		run.Scores[kind][result.CreditOwnMetric] = NDCGAt(ranked, credited, 10)
	}
	return run
}

func maxGrade(rel map[string]int) int {
	g := 0
	for _, x := range rel {
		g = max(g, x)
	}
	return g
}

// trainFolds trains one reranker per fold, on candidates computed with
// the given statistics kind (svcFor gives the service a training query's
// candidates come from), and records for each evaluated query the model
// that may score it.
func trainFolds(ctx context.Context, cfg Config, qs []judged.Query, kind string, svcFor func(judged.Query) (*retrieval.Service, error), progress io.Writer) (*models, error) {
	folds, err := PlanRerankFolds(qs, cfg.Folds, cfg.Seed, cfg.Duplicates)
	if err != nil {
		return nil, err
	}
	t0 := cfg.Now()
	// Training candidates are always computed with the query's own issue
	// excluded, whatever variant is evaluated; with held-out statistics,
	// on the statistics without it.
	var train []judged.Query
	seen := map[int]bool{}
	for _, f := range folds {
		for _, q := range f.Train {
			if !seen[q.Issue] {
				seen[q.Issue] = true
				train = append(train, q)
			}
		}
	}
	sort.Slice(train, func(i, j int) bool { return train[i].Issue < train[j].Issue })
	cands := map[int][]retrieval.Candidate{}
	for _, q := range train {
		svc, err := svcFor(q)
		if err != nil {
			return nil, fmt.Errorf("reranker candidates for %s: %w", q.ID, err)
		}
		c, err := svc.Candidates(ctx, q.Text, []int{q.Issue})
		if err != nil {
			return nil, fmt.Errorf("reranker candidates for %s: %w", q.ID, err)
		}
		cands[q.Issue] = c
	}
	settings := cfg.Service.CandidateSettings()
	prov := retrieval.TrainingProvenance{Dataset: cfg.DatasetName, CorpusSHA256: cfg.Service.Corpus().Hash(), QrelsSHA256: cfg.QrelsSHA256,
		Judgements: judged.Silver, Seed: cfg.Seed, Embedder: cfg.Service.EmbedderName(), Statistics: kind,
		CandidateDepth: settings.CandidateDepth, RerankDepth: settings.RerankDepth, RRFK: settings.RRFK}
	// Folds are independent: train them on two cores. Each model is a
	// deterministic function of its examples, so the order does not matter.
	trainedModels := make([]*retrieval.LogisticModel, len(folds))
	errs := make([]error, len(folds))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, f := range folds {
		var ex []retrieval.Example
		for _, q := range f.Train {
			rel := q.Relevant(judged.Silver)
			for _, c := range cands[q.Issue] {
				ex = append(ex, retrieval.Example{QueryID: q.ID, Issue: q.Issue, Features: c.Features, Label: rel[c.Doc.Unit()] > 0})
			}
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			m, err := retrieval.TrainLogistic(ex, cfg.Train)
			if err != nil {
				errs[i] = fmt.Errorf("train reranker fold %s: %w", f.Name, err)
				return
			}
			m.TrainedOn = prov
			m.TrainedOn.Fold = f.Name
			trainedModels[i] = m
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := &models{modelFor: map[int]*retrieval.LogisticModel{}, foldOf: map[int]string{}, info: &result.RerankInfo{Statistics: kind}}
	for i, f := range folds {
		model := trainedModels[i]
		for _, q := range f.Eval {
			if model.HasSeenIssue(q.Issue) {
				return nil, fmt.Errorf("train reranker fold %s: model saw evaluated issue %d", f.Name, q.Issue)
			}
			out.modelFor[q.Issue] = model
			out.foldOf[q.Issue] = f.Name
		}
		out.info.Folds = append(out.info.Folds, result.FoldInfo{Name: f.Name, TrainQueries: len(f.Train), EvalQueries: len(f.Eval),
			Examples: model.Examples, Positives: model.Positives, FinalLoss: model.FinalLoss})
		if f.Name == "gold" {
			out.info.GoldModel = (*result.RerankerModel)(model)
		}
	}
	out.info.TrainTimeMS = ms(cfg.Now().Sub(t0))
	fmt.Fprintf(progress, "ablate: trained %d reranker folds (%s statistics) in %.0f ms\n", len(folds), kind, out.info.TrainTimeMS)
	return out, nil
}

// CheckSaved reports why a saved reranker cannot be scored with svc: its
// features would not mean what it learned. Errors name the provenance
// field.
func CheckSaved(m *retrieval.LogisticModel, svc *retrieval.Service) error {
	if err := m.Validate(); err != nil {
		return err
	}
	var errs []error
	if got := svc.EmbedderName(); m.TrainedOn.Embedder != got {
		errs = append(errs, fmt.Errorf(`field "trained_on.embedder": the model's dense_cosine feature came from %q, this run's from %q (use the same --lsa-dims, or --embed-url/--embed-model)`, m.TrainedOn.Embedder, got))
	}
	s := svc.CandidateSettings()
	if m.TrainedOn.CandidateDepth != s.CandidateDepth || m.TrainedOn.RerankDepth != s.RerankDepth || m.TrainedOn.RRFK != s.RRFK {
		errs = append(errs, fmt.Errorf(`fields "trained_on.candidate_depth", "rerank_depth", "rrf_k": the model was trained on candidates %d/%d/%g, this service makes %d/%d/%g`,
			m.TrainedOn.CandidateDepth, m.TrainedOn.RerankDepth, m.TrainedOn.RRFK, s.CandidateDepth, s.RerankDepth, s.RRFK))
	}
	return errors.Join(errs...)
}

// SavedOverlap lists the judged queries a saved reranker was trained on:
// a query whose id is in its trained_on_queries, or — when the model was
// trained on the same project's issues (the same dataset name or the same
// corpus) — whose issue, or an issue marked as its duplicate, is in its
// trained_on_issues. Issue numbers of another project's tracker mean
// nothing, so they are compared only then.
func SavedOverlap(m *retrieval.LogisticModel, qs []judged.Query, dataset, corpusHash string, dups map[int][]int) []result.OverlapQuery {
	ids := map[string]bool{}
	for _, id := range m.TrainedOnQueries {
		ids[id] = true
	}
	sameIssues := m.TrainedOn.Dataset == dataset || m.TrainedOn.CorpusSHA256 == corpusHash
	group := duplicateGroups(qs, dups)
	seenGroup := map[int]bool{}
	if sameIssues {
		// Mark every duplicate group that holds a trained issue.
		for _, is := range m.TrainedOnIssues {
			if g, ok := group[is]; ok {
				seenGroup[g] = true
			}
		}
	}
	out := []result.OverlapQuery{}
	for _, q := range qs {
		switch {
		case ids[q.ID]:
			out = append(out, result.OverlapQuery{QueryID: q.ID, Issue: q.Issue, Reason: "query id"})
		case sameIssues && (m.HasSeenIssue(q.Issue) || seenGroup[group[q.Issue]]):
			out = append(out, result.OverlapQuery{QueryID: q.ID, Issue: q.Issue, Reason: "issue"})
		}
	}
	return out
}

// resamples draws n bootstrap index sets over m items.
func resamples(seed uint64, stream uint64, n, m int) [][]int {
	rng := rand.New(rand.NewPCG(seed, stream))
	out := make([][]int, n)
	for b := range out {
		idx := make([]int, m)
		for i := range idx {
			idx[i] = rng.IntN(m)
		}
		out[b] = idx
	}
	return out
}
