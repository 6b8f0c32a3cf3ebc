// Package datasettest gives tests the repository's copy of the shipped
// judged set (datasets/mkdocs-material), so every test reads the same
// in-module folder (and Go's test cache sees when it changes).
package datasettest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
)

// ShippedDir returns the absolute path of datasets/mkdocs-material in this
// checkout. It fails the test (never skips) when the folder is missing: the
// set ships with the repository.
func ShippedDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(testtier.ModuleRoot(t), "datasets", datasets.ShippedName)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "qrels.jsonl")); err != nil {
		t.Fatalf("the shipped dataset is missing from the repository: %v", err)
	}
	return abs
}
