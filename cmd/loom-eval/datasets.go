package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/retrieval/judged"
)

// runDatasets builds and checks judged query sets, and lists, shows and
// commits versions of case datasets (datasets.Registry, the folder serve
// --datasets shows and grows from traces).
func (m *Main) runDatasets(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval datasets mine --docs DIR --docs-url-prefix URL --maintainers FILE --issues FILE.jsonl --out DIR [--aliases FILE] [--skip PREFIX,...] [--id-prefix NAME]")
		fmt.Fprintln(m.Stderr, "       loom-eval datasets check [--dataset DIR] --docs-url-prefix URL [--aliases FILE] [--qrels FILE]")
		fmt.Fprintf(m.Stderr, "       loom-eval %s\n       loom-eval %s\n       loom-eval %s\n", datasetsListUsage, datasetsShowUsage, datasetsCommitUsage)
		fmt.Fprintln(m.Stderr, "mine and check build judged query sets (retrieval). list, show and commit keep versioned case datasets: DIR/NAME/vNNNN/cases.jsonl with its record, version.json; versions never change. Run one with experiment run --cases DIR/NAME/vNNNN/cases.jsonl.")
		if len(args) == 0 {
			return usageError("datasets: missing subcommand (mine, check, list, show or commit)")
		}
		return nil
	}
	switch args[0] {
	case "mine":
		return m.runDatasetsMine(ctx, args[1:])
	case "check":
		return m.runDatasetsCheck(ctx, args[1:])
	case "list":
		return m.runDatasetsList(args[1:])
	case "show":
		return m.runDatasetsShow(args[1:])
	case "commit":
		return m.runDatasetsCommit(args[1:])
	}
	return usageError("datasets: unknown subcommand %q (want mine, check, list, show or commit)", args[0])
}

func (m *Main) runDatasetsMine(_ context.Context, args []string) error {
	fs := m.newFlagSet("datasets mine", "datasets mine --docs DIR --docs-url-prefix URL --maintainers FILE --issues FILE.jsonl --out DIR")
	docs := fs.String("docs", "", "the project's Markdown documentation folder")
	prefix := fs.String("docs-url-prefix", "", "where the docs are published, e.g. https://squidfunk.github.io/mkdocs-material/")
	maintainers := fs.String("maintainers", "", "file with one maintainer login per line (their links are gold)")
	issues := fs.String("issues", "", "issue export: JSONL, one closed issue per line with \"issue\", \"title\", \"body\", \"author\" and \"comments\":[{\"author\",\"body\"}]")
	out := fs.String("out", "", "output dataset folder (qrels.jsonl, issues.jsonl, docs/)")
	aliases := fs.String("aliases", "", "optional aliases.tsv mapping old URLs to current files")
	skip := fs.String("skip", "", "comma-separated URL path prefixes never used as judgements, e.g. contributing/,blog/")
	idPrefix := fs.String("id-prefix", "q", "query id prefix (<prefix>-<issue>)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var missing []string
	for name, v := range map[string]string{"--docs": *docs, "--docs-url-prefix": *prefix, "--maintainers": *maintainers, "--issues": *issues, "--out": *out} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return usageError("datasets mine: missing %s", strings.Join(datasetsSorted(missing), ", "))
	}
	is, err := judged.ReadIssues(*issues)
	if err != nil {
		return usageError("datasets mine: %v", err)
	}
	ms, err := judged.ReadMaintainers(*maintainers)
	if err != nil {
		return usageError("datasets mine: %v", err)
	}
	var as []judged.Alias
	if *aliases != "" {
		if as, err = judged.ReadAliases(*aliases); err != nil {
			return usageError("datasets mine: %v", err)
		}
	}
	var sk []string
	for _, s := range strings.Split(*skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sk = append(sk, s)
		}
	}
	res, err := judged.Mine(judged.MineConfig{DocsDir: *docs, DocsURLPrefix: *prefix, Maintainers: ms, Issues: is, Aliases: as, Skip: sk, IDPrefix: *idPrefix})
	if err != nil {
		return usageError("datasets %v", err)
	}
	if err := res.WriteDataset(*out, *docs); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("datasets mine: %w", err)}
	}
	fmt.Fprintf(m.Stdout, "mined %d judgements (%d gold, %d silver) over %d query issues from %d issues; %d links not usable\n",
		res.Gold+res.Silver, res.Gold, res.Silver, res.QueryIssues, len(res.Issues), len(res.Unresolved))
	for _, u := range res.Unresolved {
		fmt.Fprintf(m.Stdout, "  issue %d: %s (%s)\n", u.Issue, u.Link, u.Reason)
	}
	fmt.Fprintf(m.Stdout, "wrote %s, %s and %s\nnext: loom-eval ablate --dataset %s\n",
		filepath.Join(*out, "qrels.jsonl"), filepath.Join(*out, "issues.jsonl"), filepath.Join(*out, "docs"), *out)
	return nil
}

func (m *Main) runDatasetsCheck(_ context.Context, args []string) error {
	fs := m.newFlagSet("datasets check", "datasets check [--dataset DIR] --docs-url-prefix URL [--aliases FILE] [--qrels FILE]")
	dataset := fs.String("dataset", "", "judged dataset `folder` (default "+datasets.DescribeDefault()+")")
	prefix := fs.String("docs-url-prefix", "", "where the docs are published")
	aliases := fs.String("aliases", "", "aliases.tsv (default DATASET/aliases.tsv when present)")
	qrels := fs.String("qrels", "", "judgements file (default DATASET/qrels.jsonl)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *prefix == "" {
		return usageError("datasets check: --docs-url-prefix is required")
	}
	dir, err := m.judgedDataset(*dataset)
	if err != nil {
		return err
	}
	*dataset = dir
	ds, err := judged.Load(*dataset, *qrels)
	if err != nil {
		return usageError("datasets check: %v", err)
	}
	ap := *aliases
	if ap == "" {
		if p := filepath.Join(*dataset, "aliases.tsv"); datasetsFileExists(p) {
			ap = p
		}
	}
	var as []judged.Alias
	if ap != "" {
		if as, err = judged.ReadAliases(ap); err != nil {
			return usageError("datasets check: %v", err)
		}
	}
	c, err := ds.Corpus()
	if err != nil {
		return usageError("datasets check: %v", err)
	}
	r, err := judged.NewResolver(*prefix, c.Docs(), as, nil)
	if err != nil {
		return usageError("datasets check: %v", err)
	}
	agree, diffs := judged.ResolveCheck(r, ds.Qrels)
	fmt.Fprintf(m.Stdout, "%s: %d issues, %d judged queries, %d judgements; %d of %d reproduced by re-resolving their links\n",
		*dataset, len(ds.Issues), len(ds.Queries), len(ds.Qrels), agree, len(ds.Qrels))
	for _, d := range diffs {
		fmt.Fprintln(m.Stdout, "  "+d)
	}
	if len(diffs) > 0 {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("datasets check: %d judgements differ from their links", len(diffs))}
	}
	return nil
}

func datasetsFileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func datasetsSorted(xs []string) []string {
	sort.Strings(xs)
	return xs
}
