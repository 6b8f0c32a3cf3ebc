package repotest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the checkout this test runs in.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", root, err)
	}
	return root
}

// trackedFiles lists the files git tracks (what a clone has).
func trackedFiles(t testing.TB, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v (this test needs the git checkout)", err)
	}
	var files []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			files = append(files, string(f))
		}
	}
	return files
}

// Users have no shared folder beside their clone (CI does, so a green CI would
// hide a file that reads it): no tracked file may name it.
func TestNoTrackedFileReadsOutsideTheRepository(t *testing.T) {
	root := repoRoot(t)
	// Built from parts so this file does not match itself.
	needles := []string{".." + "/shared", "shared" + "/datasets", "shared" + "/seeds"}
	files := trackedFiles(t, root)
	if len(files) < 100 {
		t.Fatalf("git ls-files listed only %d files", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet committed
			}
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, n := range needles {
				if strings.Contains(line, n) {
					t.Errorf("%s:%d names %q: the repository must not read outside itself: %s", f, i+1, n, strings.TrimSpace(line))
				}
			}
		}
	}
}

// The judged set ships inside the repository with its licence and source
// note (it is MIT-licensed documentation of mkdocs-material).
func TestTheJudgedDatasetShipsWithItsLicenceAndSource(t *testing.T) {
	root := repoRoot(t)
	for _, f := range []string{"LICENSE", "SOURCE.md", "issues.jsonl", "qrels.jsonl", "aliases.tsv", "docs/index.md"} {
		p := filepath.Join(root, "datasets", "mkdocs-material", f)
		st, err := os.Stat(p)
		if err != nil || st.Size() == 0 {
			t.Errorf("datasets/mkdocs-material/%s missing or empty: %v", f, err)
		}
	}
	lic, _ := os.ReadFile(filepath.Join(root, "datasets", "mkdocs-material", "LICENSE"))
	if !bytes.Contains(lic, []byte("MIT")) && !bytes.Contains(lic, []byte("Permission is hereby granted")) {
		t.Errorf("datasets/mkdocs-material/LICENSE is not the MIT licence")
	}
}
