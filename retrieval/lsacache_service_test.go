package retrieval_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/retrieval"
)

// A service started on a model cache fits once; the next start on the same
// corpus and settings reads the model, says so, and searches exactly as a
// service that fitted its own; HeldOut's fold models are cached the same
// way.
func TestServiceReadsItsLSAModelFromTheCacheOnRestart(t *testing.T) {
	ctx := context.Background()
	ds := loadTinyDataset(t)
	c, err := ds.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	var issues []int
	for _, q := range ds.Queries {
		issues = append(issues, q.Issue)
	}
	cacheDir := filepath.Join(t.TempDir(), "lsa")
	var logs bytes.Buffer
	cfg := retrieval.Config{Corpus: c, Duplicates: ds.Duplicates(), LSA: retrieval.LSAConfig{Dims: 4, MinDF: 1, Seed: 3},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	type run struct {
		info    retrieval.BuildInfo
		hoInfo  retrieval.HoldOutInfo
		results []*retrieval.Result
	}
	start := func(cacheDir string) run {
		t.Helper()
		cfg := cfg
		cfg.ModelCacheDir = cacheDir
		svc := startSvc(t, cfg)
		ho, err := svc.HoldOut(ctx, retrieval.HoldOutConfig{Issues: issues, Folds: 3, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer ho.Close()
		r := run{info: svc.Info(), hoInfo: ho.Info()}
		for _, q := range ds.Queries {
			for _, mode := range []retrieval.Mode{retrieval.ModeDense, retrieval.ModeRRF} {
				rq := retrieval.Query{Text: q.Text, Mode: mode, K: 20, ExcludeIssues: []int{q.Issue}}
				res, err := svc.Search(ctx, rq)
				if err != nil {
					t.Fatal(err)
				}
				view, err := ho.Without(ctx, []int{q.Issue})
				if err != nil {
					t.Fatal(err)
				}
				held, err := view.Search(ctx, rq)
				if err != nil {
					t.Fatal(err)
				}
				res.Took, held.Took = 0, 0
				r.results = append(r.results, res, held)
			}
		}
		return r
	}
	uncached := start("")
	first := start(cacheDir)
	second := start(cacheDir)
	if uncached.info.EmbedderSource != retrieval.EmbedderFitted || uncached.info.EmbedderCacheFile != "" {
		t.Errorf("without a cache: %+v", uncached.info)
	}
	if first.info.EmbedderSource != retrieval.EmbedderFitted || first.info.EmbedderCacheFile == "" || first.hoInfo.FoldsCached != 0 {
		t.Errorf("first start on the cache: %+v %+v, want a fit written to it", first.info, first.hoInfo)
	}
	if second.info.EmbedderSource != retrieval.EmbedderCached || second.info.EmbedderCacheFile != first.info.EmbedderCacheFile ||
		second.hoInfo.FoldsCached != 3 || second.hoInfo.Folds != 3 {
		t.Errorf("second start on the cache: %+v %+v, want the model and the 3 fold models read from it", second.info, second.hoInfo)
	}
	for name, r := range map[string]run{"first": first, "second": second} {
		if !reflect.DeepEqual(r.results, uncached.results) {
			t.Errorf("%s start on the cache: searches differ from a service without one", name)
		}
	}
	files, _ := filepath.Glob(filepath.Join(cacheDir, "*.lsa"))
	if len(files) != 4 {
		t.Errorf("cache holds %d models, want 4 (the service's and 3 folds'): %v", len(files), files)
	}
	if !strings.Contains(logs.String(), "source=fitted") || !strings.Contains(logs.String(), "source=cache") {
		t.Errorf("the service did not log where its model came from:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "WARN") {
		t.Errorf("warnings:\n%s", logs.String())
	}
}

func TestServiceRefusesANegativeModelCacheSize(t *testing.T) {
	c := loadTinyCorpus(t)
	if _, err := retrieval.New(retrieval.Config{Corpus: c, ModelCacheDir: t.TempDir(), ModelCacheFiles: -1}); err == nil ||
		!strings.Contains(err.Error(), "model_cache_files") {
		t.Fatalf("err = %v, want one naming model_cache_files", err)
	}
}

func loadTinyCorpus(t *testing.T) *retrieval.Corpus {
	t.Helper()
	c, err := loadTinyDataset(t).Corpus()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDefaultModelCacheDirFollowsTheEnvironment(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("LOOMWORK_CACHE", "")
	t.Setenv("LOOMWORK_LSA_CACHE", "")
	want := filepath.Join(xdg, "loomwork", "lsa")
	if d, err := os.UserCacheDir(); err == nil {
		want = filepath.Join(d, "loomwork", "lsa") // not $XDG_CACHE_HOME outside Linux and the BSDs
	}
	if got := retrieval.DefaultModelCacheDir(); got != want {
		t.Errorf("default = %q, want %q", got, want)
	}
	t.Setenv("LOOMWORK_CACHE", "/srv/loomwork-cache")
	if got := retrieval.DefaultModelCacheDir(); got != filepath.Join("/srv/loomwork-cache", "lsa") {
		t.Errorf("with LOOMWORK_CACHE: %q", got)
	}
	t.Setenv("LOOMWORK_LSA_CACHE", "/tmp/models")
	if got := retrieval.DefaultModelCacheDir(); got != "/tmp/models" {
		t.Errorf("with LOOMWORK_LSA_CACHE: %q", got)
	}
	t.Setenv("LOOMWORK_LSA_CACHE", "off")
	if got := retrieval.DefaultModelCacheDir(); got != "" {
		t.Errorf("with LOOMWORK_LSA_CACHE=off: %q, want no cache", got)
	}
}
