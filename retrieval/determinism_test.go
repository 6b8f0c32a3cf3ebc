package retrieval_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loomwork/loomwork/datasets/datasettest"

	"github.com/loomwork/loomwork/internal/testtier"
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
	testtier.NoRace(t, "TestIndexIsRebuiltOnlyWhenTheCorpusChanges")
	testtier.Slow(t) // two indexes of the shipped corpus, every query searched
	t.Parallel()
	ds := shippedDataset(t)
	c, err := ds.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// lists searches the queries for which keep says yes (nil: all) and
	// returns each one's ids and whether two of its hits tie in score.
	type list struct {
		ids  string
		tied bool
	}
	lists := func(cacheDir string, keep map[string]bool) map[string]list {
		svc, err := retrieval.New(retrieval.Config{Corpus: c, CacheDir: cacheDir, Embedder: constEmbedder{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer svc.Shutdown(context.Background())
		out := map[string]list{}
		for _, q := range ds.Queries {
			if keep != nil && !keep[q.ID] {
				continue
			}
			res, err := svc.Search(context.Background(), retrieval.Query{Text: q.Text, Mode: retrieval.ModeBM25, K: 20, ExcludeIssues: []int{q.Issue}})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			tied := false
			for i, h := range res.Hits {
				ids = append(ids, h.ID)
				tied = tied || i > 0 && h.Score == res.Hits[i-1].Score
			}
			out[q.ID] = list{ids: fmt.Sprint(ids), tied: tied}
		}
		return out
	}
	fresh := lists(dir, nil)
	// The reopened and in-memory indexes are searched with every query
	// whose fresh list has a tie in score (the order this test pins down:
	// 7 of the 75 shipped questions) and, in the suite, every fifth other
	// question; in the long tier, with every question.
	var keep map[string]bool
	if !testtier.Long() {
		keep = map[string]bool{}
		tied := 0
		for i, q := range ds.Queries {
			if fresh[q.ID].tied {
				tied++
			}
			keep[q.ID] = fresh[q.ID].tied || i%5 == 0
		}
		if tied == 0 {
			t.Fatal("no shipped question has a tie in its BM25 list: the test no longer checks how ties are broken")
		}
	}
	reopened := lists(dir, keep)
	memory := lists("", keep)
	if len(reopened) == 0 || len(reopened) != len(memory) {
		t.Fatalf("compared %d reopened and %d in-memory lists", len(reopened), len(memory))
	}
	for id, got := range reopened {
		if want := fresh[id].ids; got.ids != want {
			t.Errorf("query %s: reopened index ranks differently:\n fresh    %s\n reopened %s", id, want, got.ids)
		}
	}
	for id, got := range memory {
		if want := fresh[id].ids; got.ids != want {
			t.Errorf("query %s: in-memory index ranks differently:\n fresh  %s\n memory %s", id, want, got.ids)
		}
	}
}
