package judged

import (
	"os"
	"path/filepath"
	"testing"
)

// shippedDir finds ../shared/datasets/mkdocs-material beside the repo root;
// it skips without it unless CI is set.
func shippedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("repository root (go.mod) not found")
		}
		dir = filepath.Dir(dir)
	}
	ds := filepath.Join(dir, "..", "shared", "datasets", "mkdocs-material")
	if _, err := os.Stat(filepath.Join(ds, "qrels.jsonl")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but the shipped dataset is missing at %s", ds)
		}
		t.Skipf("shipped dataset not found at %s", ds)
	}
	return ds
}

func TestResolverReproducesTheShippedJudgementsFromTheirLinks(t *testing.T) {
	dir := shippedDir(t)
	ds, err := Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	aliases, err := ReadAliases(filepath.Join(dir, "aliases.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewResolver("https://squidfunk.github.io/mkdocs-material/", ds.docs, aliases, nil)
	if err != nil {
		t.Fatal(err)
	}
	agree, diffs := ResolveCheck(r, ds.Qrels)
	t.Logf("%d of %d shipped judgements reproduced from their links", agree, len(ds.Qrels))
	for _, d := range diffs {
		t.Log(d)
	}
	if agree != len(ds.Qrels) {
		t.Errorf("%d judgements not reproduced", len(diffs))
	}
}
