package retrieval_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// benchDataset loads the shipped dataset or skips.
func benchDataset(b *testing.B) *judged.Dataset {
	b.Helper()
	dir, _ := os.Getwd()
	for filepath.Dir(dir) != dir {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	ds, err := judged.Load(filepath.Join(dir, "..", "shared", "datasets", "mkdocs-material"), "")
	if err != nil {
		b.Skipf("shipped dataset not available: %v", err)
	}
	return ds
}

// BenchmarkIndexBuild measures building the on-disk BM25 index from
// scratch (a changed corpus); BenchmarkIndexReopen measures the start-up
// path when the corpus hash matches.
func BenchmarkIndexBuild(b *testing.B) {
	ds := benchDataset(b)
	c, _ := ds.Corpus()
	for b.Loop() {
		dir := b.TempDir()
		svc, _ := retrieval.New(retrieval.Config{Corpus: c, CacheDir: dir, Embedder: constEmbedder{}})
		if err := svc.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		svc.Shutdown(context.Background())
	}
}

func BenchmarkIndexReopen(b *testing.B) {
	ds := benchDataset(b)
	c, _ := ds.Corpus()
	dir := b.TempDir()
	start := func() {
		svc, _ := retrieval.New(retrieval.Config{Corpus: c, CacheDir: dir, Embedder: constEmbedder{}})
		if err := svc.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		svc.Shutdown(context.Background())
	}
	start()
	b.ResetTimer()
	for b.Loop() {
		start()
	}
}

// constEmbedder keeps the index benchmarks free of LSA cost.
type constEmbedder struct{}

func (constEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = []float32{1, 0}
	}
	return out, nil
}

func BenchmarkLSAFit(b *testing.B) {
	ds := benchDataset(b)
	c, _ := ds.Corpus()
	texts := make([]string, c.Len())
	for i, d := range c.Docs() {
		texts[i] = d.Text()
	}
	for b.Loop() {
		if _, err := retrieval.FitLSA(context.Background(), texts, retrieval.LSAConfig{Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearch measures one query per mode over the judged queries in
// turn (own issue excluded), and reports the heap the started service holds.
func BenchmarkSearch(b *testing.B) {
	ds := benchDataset(b)
	c, _ := ds.Corpus()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	svc, _ := retrieval.New(retrieval.Config{Corpus: c, CacheDir: b.TempDir(), LSA: retrieval.LSAConfig{Seed: 1}})
	ctx := context.Background()
	if err := svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer svc.Shutdown(ctx)
	runtime.GC()
	runtime.ReadMemStats(&after)
	heapMB := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	var ex []retrieval.Example
	for _, q := range ds.Queries {
		if len(q.Gold) > 0 {
			continue
		}
		cands, err := svc.Candidates(ctx, q.Text, []int{q.Issue})
		if err != nil {
			b.Fatal(err)
		}
		rel := q.Relevant(judged.Silver)
		for _, cd := range cands {
			ex = append(ex, retrieval.Example{QueryID: q.ID, Issue: q.Issue, Features: cd.Features, Label: rel[cd.Doc.Unit()] > 0})
		}
	}
	model, err := retrieval.TrainLogistic(ex, retrieval.TrainConfig{})
	if err != nil {
		b.Fatal(err)
	}
	rs := svc.WithReranker(model)
	for _, m := range retrieval.AllModes {
		b.Run(string(m), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q := ds.Queries[i%len(ds.Queries)]
				i++
				if _, err := rs.Search(ctx, retrieval.Query{Text: q.Text, Mode: m, K: 10, ExcludeIssues: []int{q.Issue}}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(heapMB, "service-heap-MB")
		})
	}
}
