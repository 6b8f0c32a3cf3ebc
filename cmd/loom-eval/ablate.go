package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/openai"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/retrieval/ablation"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// ablateFlags are `loom-eval ablate`'s flags.
type ablateFlags struct {
	dataset, qrels, modes, out, cache, statistics, savedReranker, embedURL, embedModel *string
	seed                                                                               *uint64
	noExclude, withLeaky, keepTrained                                                  *bool
	statFolds, bootstrap, folds, depth, lsaDims                                        *int
	set                                                                                map[string]bool // the flags given
}

func (f *ablateFlags) register(fs *flag.FlagSet) {
	f.dataset = fs.String("dataset", "", "judged dataset `folder` (docs/, issues.jsonl, qrels.jsonl; default "+datasets.DescribeDefault()+")")
	f.qrels = fs.String("qrels", "", "judgements file (default DATASET/qrels.jsonl)")
	f.modes = fs.String("modes", "bm25,dense,rrf,weighted,rerank", "comma-separated retrieval modes")
	f.seed = fs.Uint64("seed", 1, "seed for LSA, bootstrap resamples and reranker folds")
	f.out = fs.String("out", ".loomwork/ablation", "folder for report.json, report.md, ndcg.svg and reranker.json (empty: write none)")
	f.cache = fs.String("cache", ".loomwork/index", "folder for the persisted BM25 index (rebuilt only when the corpus changes)")
	f.noExclude = fs.Bool("no-exclude-own", false, "leaky variant only: leave each query's own issue in the corpus")
	f.withLeaky = fs.Bool("with-leaky", false, "run the honest and the leaky variant side by side")
	f.statistics = fs.String("statistics", "held-out", "fitted corpus statistics (BM25, LSA) for the honest variant: held-out (without each query's own issue), full (whole corpus, own issue included: the cheaper, leakier protocol), or both side by side with the difference")
	f.statFolds = fs.Int("stat-folds", 5, "held-out statistics: LSA refits, one per fold of the judged queries' issues (at the number of queries or more: one per query, leave one out)")
	f.savedReranker = fs.String("reranker", "", "score this saved reranker (a reranker.json written by ablate --out) in rerank mode instead of training one; queries it was trained on are excluded")
	f.keepTrained = fs.Bool("keep-trained", false, "with --reranker: keep the queries it was trained on (their rerank numbers are leaky; the report says so)")
	f.bootstrap = fs.Int("bootstrap", 2000, "bootstrap resamples for confidence intervals")
	f.folds = fs.Int("folds", 5, "silver cross-validation folds for the learned reranker")
	f.depth = fs.Int("depth", 100, "hits retrieved per query before collapsing sections to pages")
	f.lsaDims = fs.Int("lsa-dims", 128, "LSA latent dimensions")
	f.embedURL = fs.String("embed-url", "", "OpenAI-compatible API root for dense mode instead of LSA, e.g. http://127.0.0.1:8000/v1 (key from $LOOMWORK_EMBED_API_KEY)")
	f.embedModel = fs.String("embed-model", "", "embedding model name for --embed-url")
}

// variants checks the variant flags and returns the variants to run.
func (f *ablateFlags) variants() ([]ablation.Variant, error) {
	if *f.noExclude && *f.withLeaky {
		return nil, usageError("ablate: --no-exclude-own and --with-leaky exclude each other")
	}
	if *f.noExclude && (f.set["statistics"] || f.set["stat-folds"]) {
		return nil, usageError("ablate: --no-exclude-own runs only the leaky variant, which has no held-out statistics; drop --statistics/--stat-folds")
	}
	var variants []ablation.Variant
	switch *f.statistics {
	case "held-out":
		variants = []ablation.Variant{ablation.Excluded}
	case "full":
		variants = []ablation.Variant{ablation.FullStats}
		if f.set["stat-folds"] {
			return nil, usageError("ablate: --stat-folds sets the held-out LSA fits; --statistics full has none")
		}
	case "both":
		variants = []ablation.Variant{ablation.Excluded, ablation.FullStats}
	default:
		return nil, usageError("ablate: --statistics must be held-out, full or both (got %q)", *f.statistics)
	}
	if *f.noExclude {
		variants = []ablation.Variant{ablation.Leaky}
	} else if *f.withLeaky {
		variants = append(variants, ablation.Leaky)
	}
	if *f.statFolds < 2 {
		return nil, usageError("ablate: --stat-folds must be >= 2 (got %d)", *f.statFolds)
	}
	if f.set["stat-folds"] && *f.embedURL != "" {
		return nil, usageError("ablate: --stat-folds sets the LSA refits; an --embed-url embedder is not fitted on the corpus, so there are none")
	}
	if *f.keepTrained && *f.savedReranker == "" {
		return nil, usageError("ablate: --keep-trained only applies with --reranker FILE")
	}
	return variants, nil
}

// retrievalModes parses --modes and checks the numeric flags.
func (f *ablateFlags) retrievalModes() ([]retrieval.Mode, error) {
	var ms []retrieval.Mode
	for _, s := range strings.Split(*f.modes, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		md, err := retrieval.ParseMode(s)
		if err != nil {
			return nil, usageError("ablate: --modes: %v", err)
		}
		ms = append(ms, md)
	}
	if len(ms) == 0 {
		return nil, usageError("ablate: --modes lists no mode")
	}
	if *f.bootstrap < 1 || *f.folds < 2 || *f.depth < 10 || *f.lsaDims < 2 {
		return nil, usageError("ablate: need --bootstrap >= 1, --folds >= 2, --depth >= 10, --lsa-dims >= 2")
	}
	return ms, nil
}

// savedModel loads --reranker (nil without it).
func (f *ablateFlags) savedModel(ms []retrieval.Mode) (*retrieval.LogisticModel, error) {
	if *f.savedReranker == "" {
		return nil, nil
	}
	if !slices.Contains(ms, retrieval.ModeRerank) {
		return nil, usageError("ablate: --reranker is scored in rerank mode, which --modes leaves out")
	}
	if f.set["folds"] {
		return nil, usageError("ablate: --folds plans reranker training; --reranker scores a saved one and trains nothing")
	}
	saved, err := retrieval.LoadLogisticModel(*f.savedReranker)
	if err != nil {
		return nil, usageError("ablate: --reranker: %v", err)
	}
	return saved, nil
}

// ablateService configures the service over the judged corpus and says
// which embedder it uses.
func (m *Main) ablateService(f *ablateFlags, ds *judged.Dataset, corpus *retrieval.Corpus) (*retrieval.Service, string, error) {
	cfg := retrieval.Config{
		Corpus: corpus, CacheDir: *f.cache, Duplicates: ds.Duplicates(), ModelCacheDir: retrieval.DefaultModelCacheDir(),
		LSA:          retrieval.LSAConfig{Dims: *f.lsaDims, Seed: *f.seed},
		DataSourceID: datasets.JudgedName(*f.dataset),
		Logger:       slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	embedderName := fmt.Sprintf("LSA (TF-IDF + randomized SVD, %d dims, seed %d)", *f.lsaDims, *f.seed)
	if *f.embedURL != "" {
		e, err := openai.NewEmbeddings(openai.EmbeddingsConfig{BaseURL: *f.embedURL, Model: *f.embedModel, APIKey: gateway.NewSecret(m.Getenv("LOOMWORK_EMBED_API_KEY"))})
		if err != nil {
			return nil, "", usageError("ablate: %v", err)
		}
		cfg.Embedder = e
		cfg.EmbedderName = "openai-compatible model=" + *f.embedModel
		embedderName = fmt.Sprintf("%s at %s", *f.embedModel, *f.embedURL)
	}
	svc, err := retrieval.New(cfg)
	if err != nil {
		return nil, "", usageError("ablate: %v", err)
	}
	return svc, embedderName, nil
}

// runAblate runs the retrieval ablation on a judged dataset.
func (m *Main) runAblate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("ablate", "ablate [--dataset DIR] [--qrels FILE] [--modes bm25,dense,rrf,weighted,rerank] [--format text|json|markdown] [--json] [--seed N] [--out DIR] [--statistics held-out|full|both] [--no-exclude-own | --with-leaky] [--reranker FILE [--keep-trained]]")
	var f ablateFlags
	f.register(fs)
	outFmt := m.addOutputFlags(fs, "text", "json", "markdown")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("ablate: unexpected argument %q", fs.Arg(0))
	}
	dir, err := m.judgedDataset(*f.dataset)
	if err != nil {
		return err
	}
	*f.dataset = dir
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	variants, err := f.variants()
	if err != nil {
		return err
	}
	ms, err := f.retrievalModes()
	if err != nil {
		return err
	}
	saved, err := f.savedModel(ms)
	if err != nil {
		return err
	}
	loadAtStart := ablation.LoadAverage()
	ds, err := judged.Load(*f.dataset, *f.qrels)
	if err != nil {
		return usageError("ablate: %v", err)
	}
	corpus, err := ds.Corpus()
	if err != nil {
		return usageError("ablate: %v", err)
	}
	svc, embedderName, err := m.ablateService(&f, ds, corpus)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "ablate: %d documents (%d issues), %d judged queries; building index and dense model\n", corpus.Len(), len(ds.Issues), len(ds.Queries))
	t0 := time.Now()
	if err := svc.Start(ctx); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("ablate: %w", err)}
	}
	defer svc.Shutdown(context.Background())
	info := svc.Info()
	fmt.Fprintf(m.Stderr, "ablate: service ready in %s (bm25 index %s: %s; embedder %s; embedding %s)\n",
		time.Since(t0).Round(time.Millisecond), map[bool]string{true: "built", false: "reused"}[info.IndexRebuilt],
		info.IndexTime.Round(time.Millisecond), info.EmbedderSummary(), info.EmbedTime.Round(time.Millisecond))
	if saved != nil {
		if err := ablation.CheckSaved(saved, svc); err != nil {
			return usageError("ablate: --reranker %s: %v", *f.savedReranker, err)
		}
	}
	rep, err := ablation.Run(ctx, ablation.Config{
		Service: svc, Queries: ds.Queries, Duplicates: ds.Duplicates(), Modes: ms, Variants: variants,
		Seed: *f.seed, Bootstrap: *f.bootstrap, Depth: *f.depth, Folds: *f.folds, StatFolds: *f.statFolds, Progress: m.Stderr,
		DatasetName: datasets.JudgedName(*f.dataset), QrelsSHA256: ds.QrelsSHA256,
		Saved: saved, SavedFile: *f.savedReranker, KeepOverlap: *f.keepTrained,
	})
	if errors.Is(err, ablation.ErrNothingLeft) {
		return usageError("ablate: %v", err)
	}
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("ablate: %w", err)}
	}
	rep.Environment = ablation.Environment(loadAtStart, embedderName, ds, corpus, info)
	return m.writeAblation(rep, *f.out, format)
}

// writeAblation writes the report's files into out (unless empty) and the
// report in format to stdout.
func (m *Main) writeAblation(rep *ablation.Report, out, format string) error {
	if out != "" {
		written, err := ablation.WriteFiles(out, rep)
		if err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("ablate: %w", err)}
		}
		fmt.Fprintf(m.Stderr, "ablate: wrote %s\n", strings.Join(written, ", "))
	}
	var err error
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
