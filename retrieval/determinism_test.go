package retrieval_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/datasets/judged"
	"github.com/loomwork/loomwork/retrieval"
)

func shippedDataset(t *testing.T) *judged.Dataset {
	t.Helper()
	dir, _ := os.Getwd()
	for filepath.Dir(dir) != dir {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	ds, err := judged.Load(filepath.Join(dir, "..", "shared", "datasets", "mkdocs-material"), "")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("shipped dataset: %v", err)
		}
		t.Skipf("shipped dataset not available: %v", err)
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
