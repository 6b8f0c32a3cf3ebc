package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// What the package's tests build once and share (TestMain makes sharedDir
// and removes it): the binaries they run — loom-eval itself and the test
// agents, each built by `go build` once per test binary instead of once
// per test — and the research index's persisted BM25 cache of the shipped
// dataset, of which each test gets a private copy (a bleve index is opened
// by one process at a time; a copy of a build ranks as the build does, as
// the suite's workers rely on: suite.WorkerIndex).
var sharedDir string

// sharedBuild is one memoized `go build`: every test that needs the binary
// gets the same path, or the same build failure.
type sharedBuild struct {
	once sync.Once
	path string
	err  error
}

var sharedBuilds sync.Map // name → *sharedBuild

// buildShared runs `go build -o SHARED/name pkg` in dir ("" is this
// package's folder) once per test binary and returns the binary's path;
// a failed build fails every test that asks for it.
func buildShared(t testing.TB, name, dir, pkg string) string {
	t.Helper()
	v, _ := sharedBuilds.LoadOrStore(name, &sharedBuild{})
	b := v.(*sharedBuild)
	b.once.Do(func() {
		if sharedDir == "" {
			b.err = fmt.Errorf("no shared folder (TestMain did not run)")
			return
		}
		if dir != "" {
			abs, err := filepath.Abs(dir)
			if err != nil {
				b.err = err
				return
			}
			dir = abs
		}
		bin := filepath.Join(sharedDir, "bin", name)
		// go test puts its own GOROOT/bin first on the PATH of the tests it
		// runs, so "go" is the toolchain running these tests.
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
			return
		}
		b.path = bin
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

var bm25Cache struct {
	once sync.Once
	dir  string
	err  error
}

// constEmbedder stands in for the LSA fit while the shared cache is built:
// the cache holds only the BM25 index (and its corpus hash), which no
// embedder shapes, so the fit (seconds, tens under -race) is skipped.
type constEmbedder struct{}

func (constEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, 0}
	}
	return out, nil
}

// indexCache returns a private copy, in the test's temporary folder, of a
// persisted BM25 index of the shipped dataset built once per test binary:
// what --index-cache reads, so a command opens the index instead of
// building it. The research service still fits its LSA model on start.
func indexCache(t testing.TB) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "index")
	copyIndexCache(t, dst)
	return dst
}

// copyIndexCache copies the shared BM25 cache to dst (made if missing).
func copyIndexCache(t testing.TB, dst string) {
	t.Helper()
	ds := datasettest.ShippedDir(t)
	bm25Cache.once.Do(func() {
		if sharedDir == "" {
			bm25Cache.err = fmt.Errorf("no shared folder (TestMain did not run)")
			return
		}
		dir := filepath.Join(sharedDir, "index")
		set, err := judged.Load(ds, "")
		if err != nil {
			bm25Cache.err = err
			return
		}
		corpus, err := set.Corpus()
		if err != nil {
			bm25Cache.err = err
			return
		}
		svc, err := retrieval.New(retrieval.Config{Corpus: corpus, CacheDir: dir, Duplicates: set.Duplicates(), Embedder: constEmbedder{}})
		if err != nil {
			bm25Cache.err = err
			return
		}
		ctx := context.Background()
		if err := svc.Start(ctx); err != nil {
			bm25Cache.err = err
			return
		}
		if !svc.Info().IndexRebuilt {
			bm25Cache.err = fmt.Errorf("the shared BM25 cache %s was not built fresh", dir)
		}
		if err := svc.Shutdown(ctx); err != nil && bm25Cache.err == nil {
			bm25Cache.err = err
		}
		bm25Cache.dir = dir
	})
	if bm25Cache.err != nil {
		t.Fatalf("build the shared BM25 cache: %v", bm25Cache.err)
	}
	if err := copyTree(bm25Cache.dir, dst); err != nil {
		t.Fatalf("copy the shared BM25 cache: %v", err)
	}
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
