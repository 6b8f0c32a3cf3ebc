package ablation

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/loomwork/loomwork/retrieval/judged"
)

// Fold is one reranker training/evaluation split.
type Fold struct {
	Name  string
	Train []judged.Query
	Eval  []judged.Query
}

// PlanRerankFolds splits queries for the learned reranker. Training uses
// silver judgements only, and only of queries that have no gold judgement
// (the pool). Fold "gold" evaluates every query that has a gold judgement
// with a model trained on the whole pool; folds "silver-1".."silver-k"
// partition the pool by issue (shuffled under seed) and evaluate each part
// with a model trained on the other parts. Every query is evaluated in
// exactly one fold, and no fold trains on an evaluated query's issue or on
// an issue marked as its duplicate.
func PlanRerankFolds(qs []judged.Query, k int, seed uint64, dups map[int][]int) ([]Fold, error) {
	if k < 2 {
		return nil, fmt.Errorf("plan rerank folds: need at least 2 folds (got %d)", k)
	}
	group := duplicateGroups(qs, dups)
	var gold, pool []judged.Query
	goldGroups := map[int]bool{}
	for _, q := range qs {
		if len(q.Gold) > 0 {
			gold = append(gold, q)
			goldGroups[group[q.Issue]] = true
		}
	}
	for _, q := range qs {
		if len(q.Gold) == 0 && len(q.Silver) > 0 && !goldGroups[group[q.Issue]] {
			pool = append(pool, q)
		}
	}
	if len(pool) < k {
		return nil, fmt.Errorf("plan rerank folds: %d silver-only queries cannot fill %d folds", len(pool), k)
	}
	var folds []Fold
	if len(gold) > 0 {
		folds = append(folds, Fold{Name: "gold", Train: pool, Eval: gold})
	}
	// Queries whose duplicate group overlaps the gold queries were left out
	// of the pool; evaluate them with the gold model too.
	for _, q := range qs {
		if len(q.Gold) == 0 && len(q.Silver) > 0 && goldGroups[group[q.Issue]] {
			folds[0].Eval = append(folds[0].Eval, q)
		}
	}
	// Assign whole duplicate groups to folds.
	var groups []int
	byGroup := map[int][]judged.Query{}
	for _, q := range pool {
		g := group[q.Issue]
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], q)
	}
	sort.Ints(groups)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rng.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	parts := make([][]judged.Query, k)
	for i, g := range groups {
		parts[i%k] = append(parts[i%k], byGroup[g]...)
	}
	for i := range parts {
		f := Fold{Name: fmt.Sprintf("silver-%d", i+1), Eval: parts[i]}
		for j := range parts {
			if j != i {
				f.Train = append(f.Train, parts[j]...)
			}
		}
		folds = append(folds, f)
	}
	if err := CheckFolds(folds, dups); err != nil {
		return nil, err
	}
	return folds, nil
}

// CheckFolds returns an error if any fold trains on the issue (or a
// duplicate of the issue) of a query it evaluates, trains on a gold
// judgement, or if a query is evaluated twice.
func CheckFolds(folds []Fold, dups map[int][]int) error {
	evaluated := map[int]string{}
	var errs []error
	for _, f := range folds {
		train := map[int]bool{}
		for _, q := range f.Train {
			if len(q.Gold) > 0 {
				errs = append(errs, fmt.Errorf("fold %s trains on query %s, which has gold judgements", f.Name, q.ID))
			}
			train[q.Issue] = true
			for _, d := range dups[q.Issue] {
				train[d] = true
			}
		}
		for _, q := range f.Eval {
			if train[q.Issue] {
				errs = append(errs, fmt.Errorf("fold %s trains on issue %d and evaluates it", f.Name, q.Issue))
			}
			for _, d := range dups[q.Issue] {
				if train[d] {
					errs = append(errs, fmt.Errorf("fold %s trains on issue %d, a duplicate of evaluated issue %d", f.Name, d, q.Issue))
				}
			}
			if prev, ok := evaluated[q.Issue]; ok {
				errs = append(errs, fmt.Errorf("issue %d is evaluated in folds %s and %s", q.Issue, prev, f.Name))
			}
			evaluated[q.Issue] = f.Name
		}
	}
	return errors.Join(errs...)
}

// duplicateGroups maps each query issue to the smallest issue number of its
// duplicate-connected group.
func duplicateGroups(qs []judged.Query, dups map[int][]int) map[int]int {
	adj := map[int][]int{}
	for a, bs := range dups {
		for _, b := range bs {
			adj[a] = append(adj[a], b)
			adj[b] = append(adj[b], a)
		}
	}
	out := map[int]int{}
	for _, q := range qs {
		if _, ok := out[q.Issue]; ok {
			continue
		}
		seen := map[int]bool{q.Issue: true}
		stack := []int{q.Issue}
		minIssue := q.Issue
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			minIssue = min(minIssue, n)
			for _, m := range adj[n] {
				if !seen[m] {
					seen[m] = true
					stack = append(stack, m)
				}
			}
		}
		for n := range seen {
			out[n] = minIssue
		}
	}
	return out
}
