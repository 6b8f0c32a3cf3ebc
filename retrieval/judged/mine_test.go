package judged

import (
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/datasets/datasettest"
)

// shippedDir is the repository's shipped judged set.
func shippedDir(t *testing.T) string { return datasettest.ShippedDir(t) }

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
