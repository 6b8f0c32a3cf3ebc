package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/baselines/ci"
	"github.com/loomwork/loomwork/datasets"
)

// runCI is the CI recipe (baselines/ci): strict replay of the committed
// journals, a fresh scripted run of the current code over the baseline
// cases, the gate of that run against the committed baseline, its
// verdicts against the committed ones, the committed baseline regraded
// and rescored, the rollups of the fresh run's traces and the reranker
// check. Exit 0: all passed; 1: a step failed (the report says which);
// 2: bad input. --record writes the derived baselines instead
// (rollups.jsonl, rerank.json, judge.jsonl; scripts/baselines.sh record).
func (m *Main) runCI(ctx context.Context, args []string) error {
	fs := m.newFlagSet("ci", "ci [--baselines DIR] [--policy FILE] [--tool-policy default|FILE|none [--audit LOG]] [--out DIR] [--format text|json|markdown] [--record]")
	dir := fs.String("baselines", "baselines", "baselines `folder`: cases.jsonl, baseline.trials.jsonl, journals/*.jsonl")
	policyPath := fs.String("policy", "", "gate policy `file` (default: policy.json in the baselines folder, i.e. baselines/policy.json)")
	out := fs.String("out", "", "keep what the recipe writes in this `folder` (replay and fresh trial records, fresh journals); default: a temporary folder, removed")
	dataset := fs.String("dataset", "", "the research agent's judged dataset `folder` (default "+datasets.DescribeDefault()+")")
	indexCache := fs.String("index-cache", ".loomwork/index", "folder for the persisted BM25 index")
	toolPolicy := fs.String("tool-policy", policy.DefaultName, policyUsage("the fresh runs' tool calls")+" (--policy here is the gate policy). The committed journals are recorded under the default; the replay step re-decides with the policy each journal records")
	auditPath := fs.String("audit", defaultAuditFile, "append every fresh decision to this hash-chained audit `log` (loom-eval audit verify checks it); empty: none")
	record := fs.Bool("record", false, "write the recipe's derived baselines into the baselines folder from the current code (rollups.jsonl, rerank.json, judge.jsonl) instead of checking")
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
	ds, err := m.judgedDataset(*dataset)
	if err != nil {
		return err
	}
	idx := &research.DatasetIndex{Dir: ds, CacheDir: *indexCache}
	defer idx.Close(context.WithoutCancel(ctx))
	sb, stopSandbox := lazySandbox(ctx)
	defer func() { _ = stopSandbox() }()
	cfg := ci.Config{Dir: *dir, Index: idx, Sandbox: sb, Retrieval: idx, Dataset: ds, WorkDir: *out, Progress: m.Stderr}
	if err := ciToolPolicy(&cfg, *toolPolicy, *auditPath); err != nil {
		return err
	}
	if *record {
		return m.recordCI(ctx, cfg)
	}
	if *policyPath == "" {
		*policyPath = filepath.Join(*dir, ci.PolicyFile)
	}
	if cfg.Policy, err = loadPolicy(*policyPath); err != nil {
		return err
	}
	cfg.PolicyName = *policyPath
	res, err := ci.Run(ctx, cfg)
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

// recordCI writes the recipe's derived baselines (ci.Record).
func (m *Main) recordCI(ctx context.Context, cfg ci.Config) error {
	rec, err := ci.Record(ctx, cfg)
	if err != nil {
		code := ExitRuntimeErr
		if errors.Is(err, ci.ErrBadInput) {
			code = ExitUsage
		}
		return &ExitError{Code: code, Err: err}
	}
	fmt.Fprintf(m.Stdout, "ci: recorded %s (%d run(s), %d SDK trace(s)), %s (%d gold quer(ies)), %s (%d judge verdict(s))\n",
		rec.Rollups, rec.Runs, rec.Traces, rec.Rerank, rec.Queries, rec.Judge, rec.Verdicts)
	return nil
}

// ciToolPolicy sets the fresh runs' authorization: --tool-policy's rules
// (none: nothing) and --audit's log.
func ciToolPolicy(cfg *ci.Config, flagValue, auditPath string) error {
	r, ok, err := policy.RulesNamed(flagValue)
	if err != nil {
		return usageError("ci: --tool-policy: %v", err)
	}
	if !ok {
		return nil
	}
	if flagValue == "" {
		flagValue = policy.DefaultName
	}
	cfg.ToolPolicy, cfg.ToolPolicyName = &r, flagValue
	if auditPath == "" {
		return nil
	}
	cfg.Audit, err = openAuditFlag(auditPath)
	return err
}
