package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/baselines/experiment"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/report"
)

// scoreFlags are shared by score and gate.
type scoreFlags struct {
	cases, prices, ks, junit, markdown, store string
	out                                       *outputFlags
	format                                    string
	level                                     float64
	caseAlpha                                 float64
	correction                                string
	grading                                   gradingFlags
	fs                                        *flag.FlagSet
	// findCases (score): without --cases, find the trials' own or refuse,
	// unless noCases (--no-cases); see findScoreCases.
	findCases, noCases bool
}

func (f *scoreFlags) register(m *Main, fs *flag.FlagSet) {
	fs.StringVar(&f.cases, "cases", "", "cases JSONL (expected tools, required evidence, budgets, graders); score finds the trials' own when it is not given (see above), gate scores on each trial's own account of success without it")
	fs.StringVar(&f.prices, "prices", "", "price table JSON overriding the built-in one, for trials with inline spans")
	f.out = m.addOutputFlags(fs, report.Formats...)
	fs.StringVar(&f.ks, "k", "1,3,5", "comma-separated k values for pass@k and pass^k")
	f.fs = fs
	fs.Float64Var(&f.level, "level", 0.95, "confidence level of every interval (a policy's confidence must agree)")
	fs.Float64Var(&f.caseAlpha, "case-alpha", 0.05, "per-case test level, after the correction across cases")
	fs.StringVar(&f.correction, "case-correction", "holm", "per-case multiple-testing correction: holm (family-wise) or bh (false discovery rate)")
	fs.StringVar(&f.junit, "junit", "", "also write JUnit XML to this file")
	fs.StringVar(&f.markdown, "markdown", "", "also write Markdown to this file")
	fs.StringVar(&f.store, "store", "", "trace store URL: load the trace of every trial that has a trace_id but no inline spans, and derive the fields it leaves out")
	f.grading.register(fs)
}

// refuseRemoved registers the flags the bootstrap needed, so an old
// script's --seed or --resamples gets a reason instead of "flag provided
// but not defined" (score and gate only).
func refuseRemoved(fs *flag.FlagSet) {
	fs.Func("seed", "removed: intervals are analytic, nothing is resampled", func(string) error {
		return errors.New("intervals are analytic now (adjusted t / paired adjusted Wald, docs/scoring.md): nothing is resampled, so there is no seed; remove the flag")
	})
	fs.Func("resamples", "removed: intervals are analytic, nothing is resampled", func(string) error {
		return errors.New("intervals are analytic now (docs/scoring.md): nothing is resampled; remove the flag")
	})
}

func (f *scoreFlags) config() (scorer.Config, error) {
	cfg := scorer.DefaultConfig()
	prices, err := scorerLoadPrices(f.prices)
	if err != nil {
		return cfg, err
	}
	cfg.Prices, cfg.Level, cfg.CaseAlpha, cfg.CaseCorrection = prices, f.level, f.caseAlpha, f.correction
	cfg.Ks = nil
	for _, s := range strings.Split(f.ks, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k < 1 {
			return cfg, usageError("-k: %q is not a positive integer", s)
		}
		cfg.Ks = append(cfg.Ks, k)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError("%v", err)
	}
	if f.format, err = f.out.Format(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// explicit says which statistical settings the user gave as flags, so a
// policy that contradicts one is refused rather than silently winning.
func (f *scoreFlags) explicit() gate.Explicit {
	var ex gate.Explicit
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "level":
			ex.Level = true
		case "case-alpha":
			ex.CaseAlpha = true
		case "case-correction":
			ex.CaseCorrection = true
		}
	})
	return ex
}

// loadTrialsFlag decodes one trials file (strictly; errors name the line)
// and checks every journal-backed trial's label and model against its
// journal (journal.CheckProvenance), filling in labels the file leaves out.
func loadTrialsFlag(path string) (report.Trials, error) {
	trials, err := datasets.LoadTrials(path)
	if err != nil {
		return report.Trials{}, &ExitError{Code: ExitUsage, Err: err}
	}
	if _, err := journal.CheckProvenance(path, trials, journal.SearchDirs(path)); err != nil {
		return report.Trials{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("provenance: %w", err)}
	}
	return report.Trials{Source: path, Trials: trials}, nil
}

func loadCasesFlag(path string) ([]datasets.Case, error) {
	if path == "" {
		return nil, nil
	}
	cs, err := datasets.LoadCases(path)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	if cs == nil {
		cs = []datasets.Case{} // an empty case file still means "cases given"
	}
	return cs, nil
}

// evaluate reads the files, runs report.Evaluate and writes the report. It
// returns an ExitFailure error when the gate fails.
func (m *Main) evaluate(ctx context.Context, f *scoreFlags, cfg scorer.Config, candPath, basePath string, policy *gate.Policy) error {
	r, err := m.evaluateReport(ctx, f, cfg, candPath, basePath, policy)
	if err != nil {
		return err
	}
	return m.writeEvaluation(f, r)
}

// evaluateReport reads the files and runs report.Evaluate.
func (m *Main) evaluateReport(ctx context.Context, f *scoreFlags, cfg scorer.Config, candPath, basePath string, policy *gate.Policy) (*report.Report, error) {
	in := report.Inputs{Policy: policy, Explicit: f.explicit()}
	var err error
	if in.Candidate, err = loadTrialsFlag(candPath); err != nil {
		return nil, err
	}
	if f.findCases {
		if err := m.findScoreCases(f, candPath, f.noCases); err != nil {
			return nil, err
		}
	}
	if in.Cases, err = loadCasesFlag(f.cases); err != nil {
		return nil, err
	}
	in.CasesFile = f.cases
	if basePath != "" {
		if in.Baseline, err = loadTrialsFlag(basePath); err != nil {
			return nil, err
		}
	}
	env, stop, err := f.grading.env(ctx, m.Stderr, m.Getenv, in.Cases)
	if err != nil {
		return nil, err
	}
	defer stop()
	// Grading that runs code or a judge says so on stderr, trial by
	// trial, as ablate and ci report their steps.
	env.Progress = m.Stderr
	in.Grading = env
	if f.store != "" {
		st, err := m.tracesOpenStore(ctx, f.store)
		if err != nil {
			return nil, err
		}
		defer st.Shutdown(context.WithoutCancel(ctx))
		in.Traces = st
	}
	r, err := report.Evaluate(ctx, cfg, in)
	if err != nil {
		code := ExitRuntimeErr
		if errors.Is(err, report.ErrBadInput) {
			code = ExitUsage
		}
		return nil, &ExitError{Code: code, Err: err}
	}
	return r, nil
}

// writeEvaluation writes the report in the chosen format (and the extra
// JUnit/Markdown files); a failed gate is ExitFailure.
func (m *Main) writeEvaluation(f *scoreFlags, r *report.Report) error {
	if err := report.Write(m.Stdout, f.format, r); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	for _, extra := range []struct{ path, format string }{{f.junit, report.JUnit}, {f.markdown, report.Markdown}} {
		if extra.path == "" {
			continue
		}
		if err := writeReportFile(extra.path, extra.format, r); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: err}
		}
	}
	if r.Gate != nil && !r.Gate.Passed {
		var names []string
		for _, c := range r.Gate.Failed() {
			names = append(names, c.Name)
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("gate failed: %s", strings.Join(names, ", "))}
	}
	return nil
}

func writeReportFile(path, format string, r *report.Report) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s report: %w", format, err)
	}
	if err := report.Write(fh, format, r); err != nil {
		fh.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// findScoreCases sets --cases when it was not given to the case file the
// trials attempt (experiment.FindCases), saying so on stderr; without one,
// a pass rate would be each trial's own account of finishing, so score
// refuses unless --no-cases asks for exactly that.
func (m *Main) findScoreCases(f *scoreFlags, trials string, noCases bool) error {
	switch {
	case f.cases != "" && noCases:
		return usageError("score: --cases and --no-cases: give one")
	case f.cases != "" || noCases:
		return nil
	}
	path, how, err := experiment.FindCases(trials)
	if err != nil {
		return usageError("score: %s: %v", trials, err)
	}
	if path == "" {
		return usageError("score: %s: no case file: --cases is not given, and the trials file has neither an experiment record nor a %s beside it. "+
			"Without the cases, the pass rate would be each trial's own account of finishing, not its outcome: give the cases the trials attempt with --cases CASES.jsonl, "+
			"or score their own account knowingly with --no-cases", trials, experiment.CasesFile)
	}
	f.cases = path
	fmt.Fprintf(m.Stderr, "score: cases from %s (%s; --cases names another)\n", path, how)
	return nil
}

// runScore scores a trials file, optionally against a baseline and a gate.
func (m *Main) runScore(ctx context.Context, args []string) error {
	fs := m.newFlagSet("score", "score FILE.jsonl [--cases CASES.jsonl | --no-cases] [--against BASE.jsonl] [--format text|json|markdown|junit] [--gate POLICY]\n\n"+
		"Without --cases, the cases are the experiment's when FILE is an experiment folder's trials, else the cases.jsonl beside FILE;\n"+
		"with neither, score refuses rather than print a pass rate that is not outcome-based (--no-cases scores each trial's own account)")
	var f scoreFlags
	f.register(m, fs)
	refuseRemoved(fs)
	against := fs.String("against", "", "baseline trials JSONL to compare with, case by case")
	policyPath := fs.String("gate", "", "gate policy JSON; exit 1 when it fails (see docs/scoring.md)")
	noCases := fs.Bool("no-cases", false, "score without a case file: success is then each trial's own account of finishing, not its outcome (the report says so)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 1 {
		return usageError("score: want exactly one trials FILE, got %d arguments", len(pos))
	}
	f.findCases, f.noCases = true, *noCases
	cfg, err := f.config()
	if err != nil {
		return err
	}
	var policy *gate.Policy
	if *policyPath != "" {
		if policy, err = loadPolicy(*policyPath); err != nil {
			return err
		}
	}
	return m.evaluate(ctx, &f, cfg, pos[0], *against, policy)
}
