package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/loomwork/loomwork/agents/memablate"
	"github.com/loomwork/loomwork/datasets"
)

// Markers of the memory-ablation section of docs/context.md: memory-ablate
// rewrites what is between them, and `context --format markdown --out`
// keeps it when it regenerates the rest of the page.
const (
	memSectionBegin = "<!-- memory-ablate:begin -->"
	memSectionEnd   = "<!-- memory-ablate:end -->"
)

const memoryAblateCommand = "loom-eval memory-ablate --doc docs/context.md"

// runMemoryAblate runs the memory ablation (memory off / on / stale).
func (m *Main) runMemoryAblate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("memory-ablate", "memory-ablate [--dataset DIR] [--workdir DIR] [--doc docs/context.md] [--limit N] [--json]")
	dataset := fs.String("dataset", "", "judged dataset `folder` (default "+datasets.DescribeDefault()+")")
	workdir := fs.String("workdir", ".loomwork/memory-ablate", "folder for each arm's journal and memory store (rewritten)")
	indexCache := fs.String("index-cache", ".loomwork/index", "folder for the persisted BM25 index")
	doc := fs.String("doc", "", "rewrite the memory section of this Markdown `file` (docs/context.md) instead of printing a table")
	limit := fs.Int("limit", 0, "run only the first N tasks (a quick look; 0: all of them, as --doc records)")
	outFmt := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	if *limit < 0 || (*limit > 0 && *doc != "") {
		return usageError("memory-ablate: --limit must be a positive number of tasks, and --doc records the whole set (got --limit %d)", *limit)
	}
	dir, err := datasets.ResolveJudged(*dataset, m.Getenv)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("memory-ablate: --dataset: %w", err)}
	}
	rep, err := memablate.Run(ctx, memablate.Config{Dataset: dir, Name: datasets.JudgedName(dir), IndexCache: *indexCache, Workdir: *workdir,
		Limit: *limit, Progress: m.Stderr})
	if err != nil {
		return err
	}
	if *doc != "" {
		var sec bytes.Buffer
		if err := memablate.WriteMarkdown(&sec, rep, memoryAblateCommand); err != nil {
			return err
		}
		if err := replaceSection(*doc, sec.String()); err != nil {
			return err
		}
	}
	if format == "json" {
		return writeJSON(m.Stdout, rep)
	}
	w := termSafe(m.Stdout)
	fmt.Fprintf(w, "%d tasks on %d pages (%s), scripted research policy\n", len(rep.Tasks), rep.Pages, rep.Dataset)
	fmt.Fprintf(w, "%-34s %-24s %-24s %10s %10s %7s\n", "ARM", "SUCCESS", "FOLLOW-UP SUCCESS", "TOKENS", "FU TOKENS", "RECALLS")
	for _, a := range rep.Arms {
		fmt.Fprintf(w, "%-34s %-24s %-24s %10d %10d %7d\n", a.Name, a.Success, a.FollowUpSuccess, a.Tokens, a.FollowUpTokens, a.Recalls)
	}
	if *doc != "" {
		fmt.Fprintf(w, "wrote the memory section of %s\n", *doc)
	}
	return nil
}

// replaceSection writes section between the markers of file, appending the
// marked section when the file has none.
func replaceSection(file, section string) error {
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	block := memSectionBegin + "\n" + section + memSectionEnd + "\n"
	s := string(old)
	i, j := strings.Index(s, memSectionBegin), strings.Index(s, memSectionEnd)
	switch {
	case i >= 0 && j > i:
		s = s[:i] + block + strings.TrimPrefix(s[j+len(memSectionEnd):], "\n")
	case i >= 0 || j >= 0:
		return fmt.Errorf("%s: one memory-ablate marker without the other", file)
	default:
		if s != "" && !strings.HasSuffix(s, "\n\n") {
			s = strings.TrimRight(s, "\n") + "\n\n"
		}
		s += block
	}
	return os.WriteFile(file, []byte(s), 0o644)
}

// keptSection is the marked memory section of file ("" if none), which
// `context --out` carries over when it regenerates the page.
func keptSection(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	s := string(b)
	i, j := strings.Index(s, memSectionBegin), strings.Index(s, memSectionEnd)
	if i < 0 || j < i {
		return ""
	}
	return s[i : j+len(memSectionEnd)]
}
