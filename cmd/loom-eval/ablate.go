package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/openai"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// runAblate runs every retrieval mode on a judged dataset and reports the
// table, a chart and the trained reranker.
func (m *Main) runAblate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("ablate", "ablate [--dataset DIR] [--qrels FILE] [--modes bm25,dense,rrf,weighted,rerank] [--format text|json|markdown] [--json] [--seed N] [--out DIR] [--no-exclude-own | --with-leaky]")
	dataset := fs.String("dataset", "", "judged dataset `folder` (docs/, issues.jsonl, qrels.jsonl; default "+datasets.DescribeDefault()+")")
	qrels := fs.String("qrels", "", "judgements file (default DATASET/qrels.jsonl)")
	modes := fs.String("modes", "bm25,dense,rrf,weighted,rerank", "comma-separated retrieval modes")
	outFmt := m.addOutputFlags(fs, "text", "json", "markdown")
	seed := fs.Uint64("seed", 1, "seed for LSA, bootstrap resamples and reranker folds")
	out := fs.String("out", ".loomwork/ablation", "folder for report.json, report.md, ndcg.svg and reranker.json (empty: write none)")
	cache := fs.String("cache", ".loomwork/index", "folder for the persisted BM25 index (rebuilt only when the corpus changes)")
	noExclude := fs.Bool("no-exclude-own", false, "leaky variant only: leave each query's own issue in the corpus")
	withLeaky := fs.Bool("with-leaky", false, "run the honest and the leaky variant side by side")
	bootstrap := fs.Int("bootstrap", 2000, "bootstrap resamples for confidence intervals")
	folds := fs.Int("folds", 5, "silver cross-validation folds for the learned reranker")
	depth := fs.Int("depth", 100, "hits retrieved per query before collapsing sections to pages")
	lsaDims := fs.Int("lsa-dims", 128, "LSA latent dimensions")
	embedURL := fs.String("embed-url", "", "OpenAI-compatible API root for dense mode instead of LSA, e.g. http://127.0.0.1:8000/v1 (key from $LOOMWORK_EMBED_API_KEY)")
	embedModel := fs.String("embed-model", "", "embedding model name for --embed-url")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("ablate: unexpected argument %q", fs.Arg(0))
	}
	dir, err := m.judgedDataset(*dataset)
	if err != nil {
		return err
	}
	*dataset = dir
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	if *noExclude && *withLeaky {
		return usageError("ablate: --no-exclude-own and --with-leaky exclude each other")
	}
	var ms []retrieval.Mode
	for _, s := range strings.Split(*modes, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		md, err := retrieval.ParseMode(s)
		if err != nil {
			return usageError("ablate: --modes: %v", err)
		}
		ms = append(ms, md)
	}
	if len(ms) == 0 {
		return usageError("ablate: --modes lists no mode")
	}
	if *bootstrap < 1 || *folds < 2 || *depth < 10 || *lsaDims < 2 {
		return usageError("ablate: need --bootstrap >= 1, --folds >= 2, --depth >= 10, --lsa-dims >= 2")
	}
	variants := []ablation.Variant{ablation.Excluded}
	if *noExclude {
		variants = []ablation.Variant{ablation.Leaky}
	} else if *withLeaky {
		variants = append(variants, ablation.Leaky)
	}

	// Latencies are wall clock: record how busy the machine was.
	loadAtStart := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			loadAtStart = "load average " + strings.Join(f[:3], " ") + " at start"
		}
	}
	ds, err := judged.Load(*dataset, *qrels)
	if err != nil {
		return usageError("ablate: %v", err)
	}
	corpus, err := ds.Corpus()
	if err != nil {
		return usageError("ablate: %v", err)
	}
	cfg := retrieval.Config{
		Corpus: corpus, CacheDir: *cache, Duplicates: ds.Duplicates(),
		LSA:          retrieval.LSAConfig{Dims: *lsaDims, Seed: *seed},
		DataSourceID: datasets.JudgedName(*dataset),
		Logger:       slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	embedderName := fmt.Sprintf("LSA (TF-IDF + randomized SVD, %d dims, seed %d)", *lsaDims, *seed)
	if *embedURL != "" {
		e, err := openai.NewEmbeddings(openai.EmbeddingsConfig{BaseURL: *embedURL, Model: *embedModel, APIKey: gateway.NewSecret(m.Getenv("LOOMWORK_EMBED_API_KEY"))})
		if err != nil {
			return usageError("ablate: %v", err)
		}
		cfg.Embedder = e
		embedderName = fmt.Sprintf("%s at %s", *embedModel, *embedURL)
	}
	svc, err := retrieval.New(cfg)
	if err != nil {
		return usageError("ablate: %v", err)
	}
	fmt.Fprintf(m.Stderr, "ablate: %d documents (%d issues), %d judged queries; building index and dense model\n", corpus.Len(), len(ds.Issues), len(ds.Queries))
	t0 := time.Now()
	if err := svc.Start(ctx); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("ablate: %w", err)}
	}
	defer svc.Shutdown(context.Background())
	info := svc.Info()
	fmt.Fprintf(m.Stderr, "ablate: service ready in %s (bm25 index %s: %s; embedder fit %s; embedding %s)\n",
		time.Since(t0).Round(time.Millisecond), map[bool]string{true: "built", false: "reused"}[info.IndexRebuilt],
		info.IndexTime.Round(time.Millisecond), info.EmbedderFit.Round(time.Millisecond), info.EmbedTime.Round(time.Millisecond))

	rep, err := ablation.Run(ctx, ablation.Config{
		Service: svc, Queries: ds.Queries, Duplicates: ds.Duplicates(), Modes: ms, Variants: variants,
		Seed: *seed, Bootstrap: *bootstrap, Depth: *depth, Folds: *folds, Progress: m.Stderr,
		DatasetName: datasets.JudgedName(*dataset),
	})
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("ablate: %w", err)}
	}
	rep.Environment = map[string]string{
		"machine":   machineDescription(),
		"go":        runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"load":      loadAtStart,
		"corpus":    fmt.Sprintf("%d documents (%d doc sections, %d issues), sha256 %s…", corpus.Len(), corpus.Len()-len(ds.Issues), len(ds.Issues), corpus.Hash()[:12]),
		"embedder":  embedderName,
		"bm25":      fmt.Sprintf("bleve v2.6.3, scoring model bm25, index %s in %s", map[bool]string{true: "built", false: "reused"}[info.IndexRebuilt], info.IndexTime.Round(time.Millisecond)),
		"dense fit": fmt.Sprintf("fit %s, embed corpus %s", info.EmbedderFit.Round(time.Millisecond), info.EmbedTime.Round(time.Millisecond)),
	}
	if *out != "" {
		if err := writeAblationFiles(*out, rep); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("ablate: %w", err)}
		}
		fmt.Fprintf(m.Stderr, "ablate: wrote %s\n", strings.Join([]string{
			filepath.Join(*out, "report.json"), filepath.Join(*out, "report.md"), filepath.Join(*out, "ndcg.svg"), filepath.Join(*out, "reranker.json")}, ", "))
	}
	switch format {
	case "json":
		err = rep.WriteJSON(m.Stdout)
	case "markdown":
		err = rep.WriteMarkdown(m.Stdout)
	default:
		err = rep.WriteText(m.Stdout)
	}
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("ablate: write report: %w", err)}
	}
	return nil
}

func writeAblationFiles(dir string, rep *ablation.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	write := func(name string, fn func(*os.File) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", name, err)
		}
		return f.Close()
	}
	if err := write("report.json", func(f *os.File) error { return rep.WriteJSON(f) }); err != nil {
		return err
	}
	if err := write("report.md", func(f *os.File) error { return rep.WriteMarkdown(f) }); err != nil {
		return err
	}
	if err := write("ndcg.svg", func(f *os.File) error { return rep.WriteSVG(f) }); err != nil {
		return err
	}
	if rep.Reranker != nil && rep.Reranker.GoldModel != nil {
		if err := (*retrieval.LogisticModel)(rep.Reranker.GoldModel).Save(filepath.Join(dir, "reranker.json")); err != nil {
			return err
		}
	}
	return nil
}

// machineDescription names the CPU and core count (Linux; elsewhere just
// the core count).
func machineDescription() string {
	model := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				if kb, err := strconv.Atoi(strings.Fields(line)[1]); err == nil {
					mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
				}
			}
		}
	}
	if model == "" {
		model = "unknown CPU"
	}
	return fmt.Sprintf("%s, %d cores%s", model, runtime.NumCPU(), mem)
}
