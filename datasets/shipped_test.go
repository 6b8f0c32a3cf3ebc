package datasets_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/datasets/datasettest"
)

// The embedded copy is byte-for-byte the folder in the repository, and a
// materialised copy is byte-for-byte the embedded one.
func TestShippedSetIsEmbeddedAndMaterialisedWhole(t *testing.T) {
	repo := datasettest.ShippedDir(t)
	cache := t.TempDir()
	dir, err := datasets.MaterializeShipped(cache)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		want, _ := os.ReadFile(p)
		emb, err := fs.ReadFile(datasets.ShippedFS(), filepath.ToSlash(rel))
		if err != nil || string(emb) != string(want) {
			t.Errorf("embedded %s differs from the repository's (%v)", rel, err)
		}
		got, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil || string(got) != string(want) {
			t.Errorf("materialised %s differs from the repository's (%v)", rel, err)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 80 {
		t.Fatalf("only %d files in the shipped set", n)
	}
	for _, must := range []string{"LICENSE", "SOURCE.md", "issues.jsonl", "qrels.jsonl", "aliases.tsv"} {
		if _, err := os.Stat(filepath.Join(dir, must)); err != nil {
			t.Errorf("materialised set lacks %s: %v", must, err)
		}
	}
	// A second call reuses the copy.
	again, err := datasets.MaterializeShipped(cache)
	if err != nil || again != dir {
		t.Fatalf("second materialise: %q, %v; want %q", again, err, dir)
	}
}

func TestResolveJudgedPrefersFlagThenEnvironmentThenShipped(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if d, err := datasets.ResolveJudged("/from/flag", getenv); err != nil || d != "/from/flag" {
		t.Fatalf("flag: %q %v", d, err)
	}
	env[datasets.DatasetEnv] = "/from/env"
	if d, err := datasets.ResolveJudged("", getenv); err != nil || d != "/from/env" {
		t.Fatalf("env: %q %v", d, err)
	}
	delete(env, datasets.DatasetEnv)
	env["LOOMWORK_CACHE"] = t.TempDir()
	d, err := datasets.ResolveJudged("", getenv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "qrels.jsonl")); err != nil {
		t.Fatalf("default %s is not the shipped set: %v", d, err)
	}
	if filepath.Dir(filepath.Dir(d)) != env["LOOMWORK_CACHE"] {
		t.Fatalf("default %s is not under LOOMWORK_CACHE", d)
	}
}
