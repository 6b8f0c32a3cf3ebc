package retrieval_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loomwork/loomwork/datasets/datasettest"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// shippedDataset loads the repository's shipped judged set.
func shippedDataset(t *testing.T) *judged.Dataset {
	t.Helper()
	ds, err := judged.Load(datasettest.ShippedDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// The same query must give the same BM25 list from a fresh on-disk index,
// a reopened one and an in-memory one: ties in score are broken by id, not
// by bleve's internal document numbers (which differ between them). The
// research agent's committed journals depend on it.
func TestBM25RankingIsTheSameInMemoryFreshAndReopened(t *testing.T) {
	ds := shippedDataset(t)
	c, err := ds.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lists := func(cacheDir string) map[string]string {
		svc, err := retrieval.New(retrieval.Config{Corpus: c, CacheDir: cacheDir, Embedder: constEmbedder{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer svc.Shutdown(context.Background())
		out := map[string]string{}
		for _, q := range ds.Queries {
			res, err := svc.Search(context.Background(), retrieval.Query{Text: q.Text, Mode: retrieval.ModeBM25, K: 20, ExcludeIssues: []int{q.Issue}})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, h := range res.Hits {
				ids = append(ids, h.ID)
			}
			out[q.ID] = fmt.Sprint(ids)
		}
		return out
	}
	fresh := lists(dir)
	reopened := lists(dir)
	memory := lists("")
	for id, want := range fresh {
		if reopened[id] != want {
			t.Errorf("query %s: reopened index ranks differently:\n fresh    %s\n reopened %s", id, want, reopened[id])
		}
		if memory[id] != want {
			t.Errorf("query %s: in-memory index ranks differently:\n fresh  %s\n memory %s", id, want, memory[id])
		}
	}
}
