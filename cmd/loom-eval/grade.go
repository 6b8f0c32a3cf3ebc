package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/report"
)

// runGrade runs a case file's graders on a trials file and writes the
// trials with their verdicts: the costly verdicts (sandboxed code, judge
// calls) are paid for once, recorded, and reused by score and gate, and
// human labels (loom-eval labels) are compared with them.
func (m *Main) runGrade(ctx context.Context, args []string) error {
	fs := m.newFlagSet("grade", "grade TRIALS.jsonl --cases CASES.jsonl [--out FILE] [--judge scripted] [--regrade] [--store URL]")
	casesPath := fs.String("cases", "", "cases JSONL whose graders to run (required)")
	out := fs.String("out", "", "write the graded trials here (default: stdout); never the input file")
	storeURL := fs.String("store", "", "trace store URL: load the trace of every trial that has a trace_id but no inline spans (trace graders, transcripts)")
	pricesPath := fs.String("prices", "", "price table JSON overriding the built-in one (trace graders on cost)")
	var g gradingFlags
	g.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("grade: want exactly one trials FILE, got %d arguments", fs.NArg())
	}
	if *casesPath == "" {
		return usageError("grade: --cases is required (the graders live on the cases)")
	}
	in := fs.Arg(0)
	if *out != "" && sameFile(in, *out) {
		return usageError("grade: --out %s is the input file; write the graded trials elsewhere", *out)
	}
	cases, err := loadCasesFlag(*casesPath)
	if err != nil {
		return err
	}
	trials, err := datasets.LoadTrials(in)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	// Transcripts the trials file carried are kept in the output;
	// transcripts read from a journal or a trace are not copied in (the
	// journal or trace stays the authority).
	inline, spans := make([]bool, len(trials)), make([]bool, len(trials))
	for i := range trials {
		inline[i], spans[i] = trials[i].Transcript != nil, len(trials[i].Spans) > 0
	}
	if _, err := journal.CheckProvenance(in, trials, journal.SearchDirs(in)); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("provenance: %w", err)}
	}
	prices := pricing.Default()
	if *pricesPath != "" {
		if prices, err = scorerLoadPrices(*pricesPath); err != nil {
			return err
		}
	}
	if *storeURL != "" {
		st, err := m.tracesOpenStore(ctx, *storeURL)
		if err != nil {
			return err
		}
		defer st.Shutdown(context.WithoutCancel(ctx))
		if err := scorer.ResolveTraces(ctx, st, trials); err != nil {
			code := ExitRuntimeErr
			if errors.Is(err, scorer.ErrTraceMissing) {
				code = ExitUsage
			}
			return &ExitError{Code: code, Err: err}
		}
	}
	env, stop, err := g.env(ctx, m.Stderr, m.Getenv, cases)
	if err != nil {
		return err
	}
	defer stop()
	env.Prices = prices
	sum, err := grade.Trials(ctx, env, cases, trials)
	if err != nil {
		code := ExitRuntimeErr
		if errors.Is(err, grade.ErrNoBackend) {
			code = ExitUsage
		}
		return &ExitError{Code: code, Err: err}
	}
	var w io.Writer = m.Stdout
	var fh *os.File
	if *out != "" {
		if fh, err = os.Create(*out); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("grade: %w", err)}
		}
		w = fh
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	passed, failed := 0, 0
	var all []datasets.Grade
	for i := range trials {
		t := trials[i]
		if !inline[i] {
			t.Transcript = nil
		}
		if !spans[i] {
			t.Spans = nil // loaded from the store: the trace_id already points at them
		}
		all = append(all, t.Grades...)
		for _, gr := range t.Grades {
			if gr.Passed {
				passed++
			} else {
				failed++
			}
		}
		if err := enc.Encode(t); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("grade: write: %w", err)}
		}
	}
	if err := bw.Flush(); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("grade: write: %w", err)}
	}
	if fh != nil {
		if err := fh.Close(); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("grade: %w", err)}
		}
	}
	fmt.Fprintf(m.Stderr, "graded %d trials: %d verdicts reached now, %d kept as recorded (%d of them decided again from their recorded judge replies); %d passed, %d failed\n",
		sum.Trials, sum.Graded, sum.Recorded, sum.Redecided, passed, failed)
	for _, l := range report.JudgeConsistencyLines(scorer.JudgeConsistency(all, scorer.DefaultConfig().Level)) {
		fmt.Fprintln(m.Stderr, "judge:", l)
	}
	for _, n := range sum.Notes {
		fmt.Fprintln(m.Stderr, "note:", n)
	}
	return nil
}

// sameFile reports whether a and b name one existing file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
