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
	trials, carried, err := loadGradeTrials(in)
	if err != nil {
		return err
	}
	prices := pricing.Default()
	if *pricesPath != "" {
		if prices, err = scorerLoadPrices(*pricesPath); err != nil {
			return err
		}
	}
	closeStore, err := m.resolveGradeTraces(ctx, *storeURL, trials)
	if err != nil {
		return err
	}
	defer closeStore()
	env, stop, err := g.env(ctx, m.Stderr, m.Getenv, cases)
	if err != nil {
		return err
	}
	defer stop()
	env.Prices, env.Progress = prices, m.Stderr
	sum, err := grade.Trials(ctx, env, cases, trials)
	if err != nil {
		code := ExitRuntimeErr
		if errors.Is(err, grade.ErrNoBackend) {
			code = ExitUsage
		}
		return &ExitError{Code: code, Err: err}
	}
	tally, err := m.writeGraded(*out, trials, carried)
	if err != nil {
		return err
	}
	m.printGradeSummary(sum, tally)
	return nil
}

// gradeCarried says, per trial, what the trials file itself carried:
// transcripts it carried are kept in the output; transcripts read from a
// journal or a trace are not copied in (the journal or trace stays the
// authority), nor are spans loaded from the store.
type gradeCarried struct{ inline, spans []bool }

// loadGradeTrials reads the trials file in, notes what it carries and
// checks its provenance.
func loadGradeTrials(in string) ([]datasets.Trial, gradeCarried, error) {
	trials, err := datasets.LoadTrials(in)
	if err != nil {
		return nil, gradeCarried{}, &ExitError{Code: ExitUsage, Err: err}
	}
	c := gradeCarried{inline: make([]bool, len(trials)), spans: make([]bool, len(trials))}
	for i := range trials {
		c.inline[i], c.spans[i] = trials[i].Transcript != nil, len(trials[i].Spans) > 0
	}
	if _, err := journal.CheckProvenance(in, trials, journal.SearchDirs(in)); err != nil {
		return nil, gradeCarried{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("provenance: %w", err)}
	}
	return trials, c, nil
}

// resolveGradeTraces loads, from the store at storeURL (none when empty),
// the trace of every trial that has a trace_id but no inline spans, and
// returns the function that closes the store.
func (m *Main) resolveGradeTraces(ctx context.Context, storeURL string, trials []datasets.Trial) (func(), error) {
	if storeURL == "" {
		return func() {}, nil
	}
	st, err := m.tracesOpenStore(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	closeStore := func() { st.Shutdown(context.WithoutCancel(ctx)) }
	if err := scorer.ResolveTraces(ctx, st, trials); err != nil {
		closeStore()
		code := ExitRuntimeErr
		if errors.Is(err, scorer.ErrTraceMissing) {
			code = ExitUsage
		}
		return nil, &ExitError{Code: code, Err: err}
	}
	return closeStore, nil
}

// gradeTally counts the verdicts written.
type gradeTally struct {
	passed, failed int
	all            []datasets.Grade
}

// writeGraded writes the graded trials as JSONL to out (stdout when empty)
// and counts their verdicts.
func (m *Main) writeGraded(out string, trials []datasets.Trial, carried gradeCarried) (gradeTally, error) {
	var tally gradeTally
	var w io.Writer = m.Stdout
	var fh *os.File
	if out != "" {
		var err error
		if fh, err = os.Create(out); err != nil {
			return tally, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("grade: --out: %w", err)}
		}
		defer func() {
			if fh != nil { // an error on the way: close it all the same
				fh.Close()
			}
		}()
		w = fh
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range trials {
		t := trials[i]
		if !carried.inline[i] {
			t.Transcript = nil
		}
		if !carried.spans[i] {
			t.Spans = nil // loaded from the store: the trace_id already points at them
		}
		tally.all = append(tally.all, t.Grades...)
		for _, gr := range t.Grades {
			if gr.Passed {
				tally.passed++
			} else {
				tally.failed++
			}
		}
		if err := enc.Encode(t); err != nil {
			return tally, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("grade: write: %w", err)}
		}
	}
	if err := bw.Flush(); err != nil {
		return tally, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("grade: write: %w", err)}
	}
	if fh != nil {
		err := fh.Close()
		fh = nil
		if err != nil {
			return tally, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("grade: --out: %w", err)}
		}
	}
	return tally, nil
}

// printGradeSummary says on stderr what grading did.
func (m *Main) printGradeSummary(sum grade.Summary, tally gradeTally) {
	fmt.Fprintf(m.Stderr, "graded %d trials: %d verdicts reached now, %d kept as recorded (%d of them decided again from their recorded judge replies); %d passed, %d failed\n",
		sum.Trials, sum.Graded, sum.Recorded, sum.Redecided, tally.passed, tally.failed)
	for _, l := range report.JudgeConsistencyLines(scorer.JudgeConsistency(tally.all, scorer.DefaultConfig().Level)) {
		fmt.Fprintln(m.Stderr, "judge:", l)
	}
	for _, n := range sum.Notes {
		fmt.Fprintln(m.Stderr, "note:", n)
	}
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
