package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/baselines/ci"
	"github.com/loomwork/loomwork/datasets"
)

// runCI is the CI recipe (baselines/ci): strict replay of the committed
// journals, a fresh scripted run of the current code over the baseline
// cases, and the gate of that run against the committed baseline.
// Exit 0: all passed; 1: replay or the gate failed (the report says which);
// 2: bad input.
func (m *Main) runCI(ctx context.Context, args []string) error {
	fs := m.newFlagSet("ci", "ci [--baselines DIR] [--policy FILE] [--out DIR] [--format text|json|markdown]")
	dir := fs.String("baselines", "baselines", "baselines `folder`: cases.jsonl, baseline.trials.jsonl, journals/*.jsonl")
	policyPath := fs.String("policy", "", "gate policy `file` (default: policy.json in the baselines folder, i.e. baselines/policy.json)")
	out := fs.String("out", "", "keep what the recipe writes in this `folder` (replay and fresh trial records, fresh journals); default: a temporary folder, removed")
	dataset := fs.String("dataset", "", "the research agent's judged dataset `folder` (default "+datasets.DescribeDefault()+")")
	indexCache := fs.String("index-cache", ".loomwork/index", "folder for the persisted BM25 index")
	outFmt := m.addOutputFlags(fs, ci.Formats...)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("ci: unexpected argument %q", fs.Arg(0))
	}
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		return usageError("ci: --baselines %s: not a folder", *dir)
	}
	if *policyPath == "" {
		*policyPath = filepath.Join(*dir, ci.PolicyFile)
	}
	policy, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	ds, err := m.judgedDataset(*dataset)
	if err != nil {
		return err
	}
	idx := &research.DatasetIndex{Dir: ds, CacheDir: *indexCache}
	defer idx.Close(context.WithoutCancel(ctx))
	sb, stopSandbox := lazySandbox(ctx)
	defer func() { _ = stopSandbox() }()
	res, err := ci.Run(ctx, ci.Config{Dir: *dir, Policy: policy, PolicyName: *policyPath, Index: idx, Sandbox: sb,
		WorkDir: *out, Progress: m.Stderr})
	if err != nil {
		code := ExitRuntimeErr
		if errors.Is(err, ci.ErrBadInput) {
			code = ExitUsage
		}
		return &ExitError{Code: code, Err: err}
	}
	if err := ci.Write(m.Stdout, format, res); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	if !res.Passed {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("ci: %s", res.Verdict())}
	}
	return nil
}
