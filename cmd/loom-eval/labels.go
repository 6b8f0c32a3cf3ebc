package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/grade"
)

const (
	labelsAddUsage       = "labels add --labels FILE --case ID --trial N --grader NAME (--pass | --fail) [--labeler NAME] [--note TEXT] [--trials TRIALS.jsonl]"
	labelsAgreementUsage = "labels agreement --labels FILE TRIALS.jsonl [--level 0.95] [--format text|json]"
)

// runLabels adds human labels and reports how graders agree with them.
func (m *Main) runLabels(_ context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("labels: want a subcommand: %s | %s", labelsAddUsage, labelsAgreementUsage)
	}
	switch args[0] {
	case "add":
		return m.runLabelsAdd(args[1:])
	case "agreement":
		return m.runLabelsAgreement(args[1:])
	case "-h", "--help", "help":
		fmt.Fprintf(m.Stderr, "Usage: loom-eval %s\n       loom-eval %s\n", labelsAddUsage, labelsAgreementUsage)
		fmt.Fprintln(m.Stderr, "A labels file is JSONL (datasets/schema/label.schema.json): one person's pass/fail verdict on one grader of one trial per line.")
		return nil
	}
	return usageError("labels: unknown subcommand %q (want add or agreement)", args[0])
}

func (m *Main) runLabelsAdd(args []string) error {
	fs := m.newFlagSet("labels add", labelsAddUsage)
	path := fs.String("labels", "", "labels JSONL `file` to append to (created if missing)")
	caseID := fs.String("case", "", "the case id of the labelled trial")
	trial := fs.Int("trial", -1, "the trial index within the case")
	grader := fs.String("grader", "", "the grader's name on the case (its type when it has no name)")
	pass := fs.Bool("pass", false, "the trial should pass this grader")
	fail := fs.Bool("fail", false, "the trial should fail this grader")
	labeler := fs.String("labeler", "", "who labels (default: anonymous); one label per labeler and grade")
	note := fs.String("note", "", "why, in a sentence")
	trialsPath := fs.String("trials", "", "graded trials JSONL: refuse a label whose trial has no grade of that name there")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("labels add: unexpected argument %q", fs.Arg(0))
	}
	switch {
	case *path == "":
		return usageError("labels add: --labels FILE is required")
	case *caseID == "":
		return usageError("labels add: --case ID is required")
	case !flagSet(fs, "trial"):
		return usageError("labels add: --trial N is required")
	case *trial < 0:
		return usageError("labels add: --trial must be non-negative (got %d)", *trial)
	case *grader == "":
		return usageError("labels add: --grader NAME is required")
	case *pass == *fail:
		return usageError("labels add: give exactly one of --pass and --fail")
	}
	l := datasets.Label{CaseID: *caseID, Trial: *trial, Grader: *grader, Passed: *pass, Labeler: *labeler, Note: *note}
	if err := l.Validate(); err != nil {
		return usageError("labels add: %v", err)
	}
	if *trialsPath != "" {
		trials, err := datasets.LoadTrials(*trialsPath)
		if err != nil {
			return inputError("labels add: --trials", err)
		}
		if _, err := grade.Agreement([]datasets.Label{l}, trials, 0.95); err != nil {
			return usageError("labels add: --trials %s: %v", *trialsPath, err)
		}
	}
	line, err := datasets.AppendLabel(*path, l)
	if err != nil {
		var de *datasets.DuplicateLabelError
		var le *datasets.LineError
		if errors.As(err, &de) || errors.As(err, &le) {
			return usageError("labels add: %v", err)
		}
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("labels add: %w", err)}
	}
	verdict := "fail"
	if l.Passed {
		verdict = "pass"
	}
	fmt.Fprintf(m.Stdout, "%s:%d: %s: %s\n", *path, line, l.Key(), verdict)
	return nil
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// inputError maps a failure to read an input file: a missing or
// unreadable file is the caller's mistake (exit 2) like a malformed one.
func inputError(what string, err error) error {
	var le *datasets.LineError
	if errors.As(err, &le) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return usageError("%s: %v", what, err)
	}
	return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("%s: %w", what, err)}
}

// labelsAgreementReport is what `labels agreement --json` prints.
type labelsAgreementReport struct {
	Labels  string                  `json:"labels"`
	Trials  string                  `json:"trials"`
	Level   float64                 `json:"level"`
	NLabels int                     `json:"n_labels"`
	Graders []grade.GraderAgreement `json:"graders"`
}

func (m *Main) runLabelsAgreement(args []string) error {
	fs := m.newFlagSet("labels agreement", labelsAgreementUsage)
	path := fs.String("labels", "", "labels JSONL `file`")
	level := fs.Float64("level", 0.95, "confidence level of the κ intervals")
	out := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := out.Format()
	if err != nil {
		return err
	}
	switch {
	case *path == "":
		return usageError("labels agreement: --labels FILE is required")
	case fs.NArg() != 1:
		return usageError("labels agreement: want one graded trials file (got %d arguments)", fs.NArg())
	case !(*level > 0 && *level < 1):
		return usageError("labels agreement: --level must be in (0, 1) (got %v)", *level)
	}
	trialsPath := fs.Arg(0)
	labels, err := datasets.LoadLabels(*path)
	if err != nil {
		return inputError("labels agreement: --labels", err)
	}
	if len(labels) == 0 {
		return usageError("labels agreement: %s holds no labels (add some with loom-eval labels add)", *path)
	}
	trials, err := datasets.LoadTrials(trialsPath)
	if err != nil {
		return inputError("labels agreement", err)
	}
	rows, err := grade.Agreement(labels, trials, *level)
	if err != nil {
		return usageError("labels agreement: %s against %s: %v", *path, trialsPath, err)
	}
	rep := labelsAgreementReport{Labels: *path, Trials: trialsPath, Level: *level, NLabels: len(labels), Graders: rows}
	if format == "json" {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(rep)
	}
	printAgreement(m.Stdout, rep)
	return nil
}

func printAgreement(w io.Writer, rep labelsAgreementReport) {
	fmt.Fprintf(w, "grader–human agreement: %d labels in %s against the grades in %s\n\n", rep.NLabels, rep.Labels, rep.Trials)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "grader\ttype\tn\ttrials\tagree\tκ\t%g%% interval\tboth pass\tgrader only\thuman only\tboth fail\tjudge\n", rep.Level*100)
	row := func(indent string, g grade.GraderAgreement) {
		judge := g.Judge
		switch {
		case judge == "" && len(g.ByJudge) > 0:
			judge = fmt.Sprintf("%d judges, below", len(g.ByJudge))
		case judge == "" && indent != "":
			judge = "(no judge call)"
		case judge == "":
			judge = "-"
		}
		kappa, interval, agree := "-", "-", "-"
		if g.N > 0 {
			agree = fmt.Sprintf("%.2f", g.Agreement)
			interval = fmt.Sprintf("[%.2f, %.2f]", g.Kappa.Lower, g.Kappa.Upper)
			kappa = "undefined"
			if g.Kappa.Estimate != nil {
				kappa = fmt.Sprintf("%.2f", *g.Kappa.Estimate)
			}
		}
		c := g.Confusion
		fmt.Fprintf(tw, "%s%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", indent, g.Grader, strings.Join(g.Types, ","), g.N, g.Trials,
			agree, kappa, interval, c.BothPass, c.GraderOnly, c.HumanOnly, c.BothFail, judge)
	}
	var notes []string
	for _, g := range rep.Graders {
		row("", g)
		for _, j := range g.ByJudge {
			row("  ", j)
		}
		if g.Errored > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d labelled grades have no verdict (the grader errored) and are not counted", g.Grader, g.Errored))
		}
		if g.Kappa != nil && g.Kappa.Note != "" {
			notes = append(notes, g.Grader+": "+g.Kappa.Note)
		}
		if g.N > 0 && g.N < 20 {
			notes = append(notes, fmt.Sprintf("%s: %d labels: κ's interval is wide below about 20 and its coverage was not measured there", g.Grader, g.N))
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintln(w, "note: "+n)
	}
	fmt.Fprintln(w, "agree is the share of labels the grader matched; κ corrects it for the agreement two raters with these pass rates reach by chance.")
	fmt.Fprintln(w, "κ interval: the Fleiss–Cohen–Everitt variance on the table with one pseudo-observation per cell (scorer/stats.CohenKappa).")
}
