package ci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// RerankFile is the committed result of the reranker check.
const RerankFile = "rerank.json"

// RerankerModel is the committed reranker the check scores (the gold-fold
// model `loom-eval ablate --out baselines/ablation` trained), relative to
// the baselines folder.
const RerankerModel = "ablation/reranker.json"

// rerankTolerance is how far a recomputed nDCG@10 may be from the
// committed one: the service is deterministic (retrieval's determinism
// tests), so this only absorbs float formatting.
const rerankTolerance = 1e-9

// RetrievalService gives the retrieval service the reranker check searches
// (the research agent's index; research.DatasetIndex implements it).
type RetrievalService interface {
	Service(ctx context.Context) (*retrieval.Service, error)
}

// RerankCommitted is rerank.json: per gold query of the judged set,
// nDCG@10 (gold judgements, the query's own issue excluded, as the
// ablation scores it) of BM25 and of the committed reranker, and the
// reranker's top ten judged units.
type RerankCommitted struct {
	Reranker string        `json:"reranker"`
	Dataset  string        `json:"dataset"`
	Queries  []RerankQuery `json:"queries"`
	// MeanBM25 and MeanRerank are the means over Queries (for reading; the
	// check compares query by query).
	MeanBM25   float64 `json:"mean_bm25_ndcg_at_10"`
	MeanRerank float64 `json:"mean_rerank_ndcg_at_10"`
}

// RerankQuery is one query's numbers.
type RerankQuery struct {
	ID         string   `json:"id"`
	Issue      int      `json:"issue"`
	BM25NDCG   float64  `json:"bm25_ndcg_at_10"`
	RerankNDCG float64  `json:"rerank_ndcg_at_10"`
	RerankTop  []string `json:"rerank_top"`
}

// RerankResult is the reranker step: the committed reranker scored again
// on the judged set's gold queries and compared with rerank.json. No
// reference agent searches in rerank mode, so no other step would see a
// reranker regression.
type RerankResult struct {
	Passed  bool   `json:"passed"`
	File    string `json:"file"`
	Queries int    `json:"queries"`
	// Changed are the queries whose numbers or top ten differ.
	Changed    []RerankChange `json:"changed"`
	DurationMS float64        `json:"duration_ms"`
}

// RerankChange is one query whose numbers differ from the committed ones.
type RerankChange struct {
	QueryID             string  `json:"query_id"`
	Issue               int     `json:"issue"`
	CommittedBM25NDCG   float64 `json:"committed_bm25_ndcg_at_10"`
	BM25NDCG            float64 `json:"bm25_ndcg_at_10"`
	CommittedRerankNDCG float64 `json:"committed_rerank_ndcg_at_10"`
	RerankNDCG          float64 `json:"rerank_ndcg_at_10"`
	TopChanged          bool    `json:"top_changed"`
	Note                string  `json:"note,omitempty"`
}

// computeRerank scores the committed reranker and BM25 on the judged set's
// gold queries.
func computeRerank(ctx context.Context, dir, dataset string, rs RetrievalService) (RerankCommitted, error) {
	out := RerankCommitted{Reranker: RerankerModel, Dataset: datasets.JudgedName(dataset), Queries: []RerankQuery{}}
	model, err := retrieval.LoadLogisticModel(filepath.Join(dir, filepath.FromSlash(RerankerModel)))
	if err != nil {
		return out, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	ds, err := judged.Load(dataset, "")
	if err != nil {
		return out, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	svc, err := rs.Service(ctx)
	if err != nil {
		return out, fmt.Errorf("ci: reranker check: %w", err)
	}
	if err := ablation.CheckSaved(model, svc); err != nil {
		return out, fmt.Errorf("%w: %s: %w", ErrBadInput, RerankerModel, err)
	}
	rr := svc.WithReranker(model)
	for _, q := range ds.Queries {
		rel := q.Relevant(judged.Gold)
		if len(rel) == 0 {
			continue
		}
		rq := RerankQuery{ID: q.ID, Issue: q.Issue}
		for _, m := range []retrieval.Mode{retrieval.ModeBM25, retrieval.ModeRerank} {
			res, err := rr.Search(ctx, retrieval.Query{Text: q.Text, Mode: m, K: 10, ExcludeIssues: []int{q.Issue}})
			if err != nil {
				return out, fmt.Errorf("ci: reranker check: query %s, mode %s: %w", q.ID, m, err)
			}
			units := make([]string, len(res.Hits))
			for i, h := range res.Hits {
				units[i] = retrieval.Document{ID: h.ID, Kind: h.Kind, Page: h.Page}.Unit()
			}
			ranked := ablation.Collapse(units)
			n := ablation.NDCGAt(ranked, rel, 10)
			if m == retrieval.ModeBM25 {
				rq.BM25NDCG = n
			} else {
				rq.RerankNDCG, rq.RerankTop = n, ranked[:min(10, len(ranked))]
			}
		}
		out.Queries = append(out.Queries, rq)
		out.MeanBM25 += rq.BM25NDCG
		out.MeanRerank += rq.RerankNDCG
	}
	if n := float64(len(out.Queries)); n > 0 {
		out.MeanBM25 /= n
		out.MeanRerank /= n
	}
	return out, nil
}

func readRerank(path string) (RerankCommitted, error) {
	var c RerankCommitted
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("%w: %w (regenerate it with scripts/baselines.sh record)", ErrBadInput, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%w: %s: %w", ErrBadInput, path, err)
	}
	return c, nil
}

func writeRerank(path string, c RerankCommitted) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// compareRerank names the queries whose numbers differ.
func compareRerank(committed, now RerankCommitted) []RerankChange {
	out := []RerankChange{}
	byID := map[string]RerankQuery{}
	for _, q := range now.Queries {
		byID[q.ID] = q
	}
	seen := map[string]bool{}
	for _, c := range committed.Queries {
		seen[c.ID] = true
		n, ok := byID[c.ID]
		if !ok {
			out = append(out, RerankChange{QueryID: c.ID, Issue: c.Issue, CommittedBM25NDCG: c.BM25NDCG, CommittedRerankNDCG: c.RerankNDCG,
				Note: "no longer a gold query"})
			continue
		}
		top := !slices.Equal(c.RerankTop, n.RerankTop)
		if top || math.Abs(c.BM25NDCG-n.BM25NDCG) > rerankTolerance || math.Abs(c.RerankNDCG-n.RerankNDCG) > rerankTolerance {
			out = append(out, RerankChange{QueryID: c.ID, Issue: c.Issue, CommittedBM25NDCG: c.BM25NDCG, BM25NDCG: n.BM25NDCG,
				CommittedRerankNDCG: c.RerankNDCG, RerankNDCG: n.RerankNDCG, TopChanged: top})
		}
	}
	for _, n := range now.Queries {
		if !seen[n.ID] {
			out = append(out, RerankChange{QueryID: n.ID, Issue: n.Issue, BM25NDCG: n.BM25NDCG, RerankNDCG: n.RerankNDCG, Note: "not in the committed file"})
		}
	}
	return out
}

func (c RerankChange) String() string {
	var parts []string
	if c.Note != "" {
		parts = append(parts, c.Note)
	}
	if c.CommittedBM25NDCG != c.BM25NDCG {
		parts = append(parts, fmt.Sprintf("bm25 nDCG@10 %.4f → %.4f", c.CommittedBM25NDCG, c.BM25NDCG))
	}
	if c.CommittedRerankNDCG != c.RerankNDCG {
		parts = append(parts, fmt.Sprintf("rerank nDCG@10 %.4f → %.4f", c.CommittedRerankNDCG, c.RerankNDCG))
	}
	if c.TopChanged {
		parts = append(parts, "rerank top ten changed")
	}
	return fmt.Sprintf("query %s (issue %d): %s", c.QueryID, c.Issue, strings.Join(parts, ", "))
}

var errNoRetrieval = errors.New("ci: a retrieval service must be set (the reranker check searches it)")
