package ablation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
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
	Variants   []Variant
	// Seed drives the bootstrap and the fold assignment.
	Seed uint64
	// Bootstrap is the number of resamples (default 2000).
	Bootstrap int
	// Depth is how many hits each search returns before they are collapsed
	// to pages (default 100).
	Depth int
	// Folds is the number of silver cross-validation folds (default 5).
	Folds int
	Train retrieval.TrainConfig
	// Progress receives one line per finished mode (nil: silent).
	Progress io.Writer
	// Now is the clock used for latencies (default time.Now).
	Now func() time.Time
	// DatasetName labels the report.
	DatasetName string
}

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
		if v != Excluded && v != Leaky {
			errs = append(errs, fmt.Errorf("variants: unknown %q", v))
		}
	}
	if c.Bootstrap < 0 || c.Depth < 0 || c.Folds < 0 {
		errs = append(errs, errors.New("bootstrap, depth and folds must be >= 0"))
	}
	return errors.Join(errs...)
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.Variants) == 0 {
		cfg.Variants = []Variant{Excluded}
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	qs := append([]judged.Query(nil), cfg.Queries...)
	sort.Slice(qs, func(i, j int) bool { return qs[i].Issue < qs[j].Issue })

	rep := &Report{Dataset: cfg.DatasetName, Seed: cfg.Seed, Bootstrap: cfg.Bootstrap, Depth: cfg.Depth,
		Variants: cfg.Variants}
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

	// Reranker models per query, planned so none sees its query's issue.
	modelFor := map[int]*retrieval.LogisticModel{}
	foldOf := map[int]string{}
	if slices.Contains(cfg.Modes, retrieval.ModeRerank) {
		info, err := trainFolds(ctx, cfg, qs, modelFor, foldOf, progress)
		if err != nil {
			return nil, err
		}
		rep.Reranker = info
	}

	for _, v := range cfg.Variants {
		for _, m := range cfg.Modes {
			// One untimed warm-up so the first query does not pay for
			// lazily built caches.
			if _, err := cfg.Service.Search(ctx, retrieval.Query{Text: qs[0].Text, Mode: modeOrRRF(m), K: cfg.Depth}); err != nil && m != retrieval.ModeRerank {
				return nil, fmt.Errorf("warm up %s: %w", m, err)
			}
			var lat []float64
			for i, q := range qs {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("ablation: %w", err)
				}
				svc := cfg.Service
				fold := ""
				if m == retrieval.ModeRerank {
					model := modelFor[q.Issue]
					if model == nil {
						return nil, fmt.Errorf("ablation: no reranker model planned for query %s", q.ID)
					}
					if model.HasSeenIssue(q.Issue) {
						return nil, fmt.Errorf("ablation: reranker for query %s was trained on its own issue %d", q.ID, q.Issue)
					}
					svc = svc.WithReranker(model)
					fold = foldOf[q.Issue]
				}
				sq := retrieval.Query{Text: q.Text, Mode: m, K: cfg.Depth}
				if v == Excluded {
					sq.ExcludeIssues = []int{q.Issue}
				}
				t0 := cfg.Now()
				res, err := svc.Search(ctx, sq)
				el := cfg.Now().Sub(t0)
				if err != nil {
					return nil, fmt.Errorf("ablation: query %s, mode %s: %w", q.ID, m, err)
				}
				lat = append(lat, float64(el)/float64(time.Millisecond))
				units := make([]string, len(res.Hits))
				for i, h := range res.Hits {
					units[i] = retrieval.Document{ID: h.ID, Kind: h.Kind, Page: h.Page}.Unit()
				}
				ranked := Collapse(units)
				run := result.QueryRun{QueryID: q.ID, Issue: q.Issue, Mode: string(m), Variant: v, Latency: lat[len(lat)-1],
					Scores: map[string]map[string]float64{}, Fold: fold}
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
					// What a judge that accepts the question itself as an
					// answer would score: the inflation leakage causes.
					credited := map[string]int{own: maxGrade(rel)}
					for u, g := range rel {
						credited[u] = g
					}
					run.Scores[kind][result.CreditOwnMetric] = NDCGAt(ranked, credited, 10)
				}
				rep.Runs = append(rep.Runs, run)
				if (i+1)%25 == 0 && i+1 < len(qs) {
					fmt.Fprintf(progress, "ablate: %s/%s %d/%d queries\n", v, m, i+1, len(qs))
				}
			}
			fmt.Fprintf(progress, "ablate: %s/%s done: %d queries, latency p50 %.2f ms, p95 %.2f ms\n",
				v, m, len(qs), Percentile(lat, 0.5), Percentile(lat, 0.95))
		}
	}
	summarize(rep, qs, cfg.Seed)
	return rep, nil
}

func maxGrade(rel map[string]int) int {
	g := 0
	for _, x := range rel {
		g = max(g, x)
	}
	return g
}

func modeOrRRF(m retrieval.Mode) retrieval.Mode {
	if m == retrieval.ModeRerank {
		return retrieval.ModeRRF
	}
	return m
}

// trainFolds trains one reranker per fold and records, for each evaluated
// query, the model that may score it.
func trainFolds(ctx context.Context, cfg Config, qs []judged.Query, modelFor map[int]*retrieval.LogisticModel, foldOf map[int]string, progress io.Writer) (*result.RerankInfo, error) {
	folds, err := PlanRerankFolds(qs, cfg.Folds, cfg.Seed, cfg.Duplicates)
	if err != nil {
		return nil, err
	}
	cands := map[int][]retrieval.Candidate{}
	t0 := cfg.Now()
	for _, f := range folds {
		for _, q := range f.Train {
			if _, ok := cands[q.Issue]; ok {
				continue
			}
			// Training candidates are always computed with the query's own
			// issue excluded, whatever variant is evaluated.
			c, err := cfg.Service.Candidates(ctx, q.Text, []int{q.Issue})
			if err != nil {
				return nil, fmt.Errorf("reranker candidates for %s: %w", q.ID, err)
			}
			cands[q.Issue] = c
		}
	}
	info := &result.RerankInfo{}
	for _, f := range folds {
		var ex []retrieval.Example
		for _, q := range f.Train {
			rel := q.Relevant(judged.Silver)
			for _, c := range cands[q.Issue] {
				ex = append(ex, retrieval.Example{QueryID: q.ID, Issue: q.Issue, Features: c.Features, Label: rel[c.Doc.Unit()] > 0})
			}
		}
		model, err := retrieval.TrainLogistic(ex, cfg.Train)
		if err != nil {
			return nil, fmt.Errorf("train reranker fold %s: %w", f.Name, err)
		}
		for _, q := range f.Eval {
			if model.HasSeenIssue(q.Issue) {
				return nil, fmt.Errorf("train reranker fold %s: model saw evaluated issue %d", f.Name, q.Issue)
			}
			modelFor[q.Issue] = model
			foldOf[q.Issue] = f.Name
		}
		info.Folds = append(info.Folds, result.FoldInfo{Name: f.Name, TrainQueries: len(f.Train), EvalQueries: len(f.Eval),
			Examples: model.Examples, Positives: model.Positives, FinalLoss: model.FinalLoss})
		if f.Name == "gold" {
			info.GoldModel = (*result.RerankerModel)(model)
		}
	}
	info.TrainTimeMS = float64(cfg.Now().Sub(t0)) / float64(time.Millisecond)
	fmt.Fprintf(progress, "ablate: trained %d reranker folds in %.0f ms\n", len(folds), info.TrainTimeMS)
	return info, nil
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
