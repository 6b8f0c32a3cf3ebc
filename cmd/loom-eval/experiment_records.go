package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/loomwork/loomwork/baselines/experiment"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/report"
)

// runExperimentList lists the experiments kept under --experiments-dir,
// or in --store.
func (m *Main) runExperimentList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("experiment list", "experiment list [--experiments-dir DIR | --store URL] [--json]")
	root := fs.String("experiments-dir", experiment.DefaultRoot, "where experiments are kept")
	url := fs.String("store", "", "list the experiments kept in this trace store instead of folders")
	asJSON := fs.Bool("json", false, "print the records as a JSON array")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *url != "" {
		return m.listStoredExperiments(ctx, *url, *asJSON)
	}
	recs, dirs, errs := experiment.List(*root)
	for _, err := range errs {
		fmt.Fprintln(m.Stderr, "loom-eval: experiment list:", err)
	}
	if *asJSON {
		if recs == nil {
			recs = []*datasets.Experiment{}
		}
		return printJSON(m.Stdout, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintf(m.Stdout, "No experiments in %s.\n", *root)
		return nil
	}
	printExperimentTable(m.Stdout, recs, func(i int) string { return dirs[i] })
	return nil
}

// printJSON writes v as indented JSON; a write error is a runtime error.
func printJSON(w io.Writer, v any) error {
	if err := writeJSON(w, v); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return nil
}

// runExperimentShow prints one experiment's record and its report.
func (m *Main) runExperimentShow(ctx context.Context, args []string) error {
	fs := m.newFlagSet("experiment show", "experiment show ID|DIR [--experiments-dir DIR | --store URL] [--json]")
	root := fs.String("experiments-dir", experiment.DefaultRoot, "where experiments are kept")
	url := fs.String("store", "", "read the experiment (by id) from this trace store instead of a folder")
	asJSON := fs.Bool("json", false, "print the record and the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("experiment show: want one experiment id or folder, got %d arguments", fs.NArg())
	}
	sides, done, err := loadSides(ctx, "experiment show", *url, *root, fs.Args())
	if err != nil {
		return err
	}
	defer done()
	side, dir := sides[0], sides[0].Dir
	if dir == "" {
		dir = *url
	}
	rep, err := scoreSide(ctx, side, nil, nil)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(m.Stdout, map[string]any{"experiment": side.Record, "dir": dir, "report": rep})
	}
	e := side.Record
	fmt.Fprintf(m.Stdout, "Experiment %s%s (%s), created %s, in %s\n", e.ID, nameSuffix(e.Name), e.Status, e.Created.Format("2006-01-02 15:04:05Z07:00"), dir)
	fmt.Fprintf(m.Stdout, "  dataset  %s (sha256 %.12s…, %d grader files)\n", e.Dataset.Path, e.Dataset.SHA256, len(e.Dataset.Files))
	fmt.Fprintf(m.Stdout, "  target   %s: %s\n", e.Target.Kind, e.Target.Description)
	fmt.Fprintf(m.Stdout, "  agent    label %s, commit %s%s, params %v\n", orDash(e.Agent.Label), orDash(e.Agent.GitCommit), map[bool]string{true: " (dirty)"}[e.Agent.GitDirty], e.Agent.Params)
	fmt.Fprintf(m.Stdout, "  trials   %d cases × %d: %d recorded, %d passed, %d agent failures; model label %s; traces in %s\n\n",
		e.Cases, e.Trials, e.Summary.Recorded, e.Summary.Passed, e.Summary.AgentFailures, orDash(e.ModelLabel), e.Store)
	return report.Write(m.Stdout, report.Text, rep)
}

func nameSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " " + fmt.Sprintf("%q", n)
}

// scoreSide scores an experiment (against base, under policy) on its own
// case file.
func scoreSide(ctx context.Context, side, base *experiment.Side, policy *gate.Policy) (*report.Report, error) {
	cases, err := experiment.CasesOf(side)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	cfg, err := experimentScoreConfig("")
	if err != nil {
		return nil, err
	}
	rep, err := experiment.Evaluate(ctx, cfg, cases, side.Record.Dataset.Path, side, base, policy, report.Inputs{})
	if err != nil {
		return nil, evaluateError(err)
	}
	return rep, nil
}

// runExperimentCompare prints A (the baseline) and B side by side, case by
// case, with the gate's decision; exit 1 when the gate fails. It is
// experiment.Compare, the path the UI's compare page takes.
func (m *Main) runExperimentCompare(ctx context.Context, args []string) error {
	fs := m.newFlagSet("experiment compare", "experiment compare A B [--policy FILE] [--experiments-dir DIR | --store URL] [--json]")
	root := fs.String("experiments-dir", experiment.DefaultRoot, "where experiments are kept")
	url := fs.String("store", "", "read the experiments (by id) from this trace store instead of folders")
	policyPath := fs.String("policy", "", "gate policy JSON (default: the calibrated policy of baselines/policy.json)")
	asJSON := fs.Bool("json", false, "print the rows, the comparison and the gate as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("experiment compare: want two experiments (A, the baseline, then B), got %d arguments", fs.NArg())
	}
	sides, done, err := loadSides(ctx, "experiment compare", *url, *root, fs.Args())
	if err != nil {
		return err
	}
	defer done()
	f := experimentRunFlags{policy: *policyPath}
	policy, err := f.gatePolicy()
	if err != nil {
		return err
	}
	cfg, err := experimentScoreConfig("")
	if err != nil {
		return err
	}
	cmp, err := experiment.Compare(ctx, cfg, sides, policy)
	if err != nil {
		return evaluateError(err)
	}
	rep := cmp.Report
	if *asJSON {
		if err := printJSON(m.Stdout, map[string]any{"a": sides[0].Record.ID, "b": sides[1].Record.ID, "cases": cmp.Rows, "comparison": rep.Comparison, "gate": rep.Gate}); err != nil {
			return err
		}
		return gateError(rep)
	}
	m.printCompare(sides[0].Record, sides[1].Record, cmp.Rows, rep)
	return gateError(rep)
}

func (m *Main) printCompare(a, b *datasets.Experiment, rows []experiment.CaseRow, rep *report.Report) {
	fmt.Fprintf(m.Stdout, "A %s (%s)  vs  B %s (%s)\n", a.ID, orDash(a.Agent.Label), b.ID, orDash(b.Agent.Label))
	if sd := experiment.SameDataset(a.Dataset, b.Dataset); sd != "" {
		fmt.Fprintf(m.Stdout, "WARNING: %s between A and B\n", sd)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tCHANGE\tA PASS\tB PASS\tA SCORE\tB SCORE\tA COST\tB COST\tA MS\tB MS\tA TRACE\tB TRACE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d/%d\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\n", r.CaseID, r.Change, r.A.Passes, r.A.Trials, r.B.Passes, r.B.Trials,
			r.A.Score, r.B.Score, money(r.A.MeanCostUSD), money(r.B.MeanCostUSD), millis(r.A.MeanDurationMS), millis(r.B.MeanDurationMS), firstID(r.A.TraceIDs), firstID(r.B.TraceIDs))
	}
	tw.Flush()
	c := rep.Comparison
	if len(c.Regressed) > 0 {
		fmt.Fprintf(m.Stdout, "regressed: %s\n", strings.Join(c.Regressed, ", "))
	}
	if c.PassRateDelta != nil {
		mde := "none (too few cases)"
		if c.PassRateMDE != nil && *c.PassRateMDE <= 1 {
			mde = fmt.Sprintf("%.3f", *c.PassRateMDE)
		}
		fmt.Fprintf(m.Stdout, "pass rate delta %+.3f [%+.3f, %+.3f]; smallest drop detected with 80%% power: %s\n", c.PassRateDelta.Estimate, c.PassRateDelta.Lower, c.PassRateDelta.Upper, mde)
	}
	if rep.Gate != nil {
		verdict := "PASS"
		if !rep.Gate.Passed {
			verdict = "FAIL"
		}
		fmt.Fprintf(m.Stdout, "Gate: %s\n", verdict)
		for _, ck := range rep.Gate.Checks {
			mark := "ok"
			if !ck.Passed {
				mark = "FAIL"
			}
			fmt.Fprintf(m.Stdout, "  [%s] %s: %s\n", mark, ck.Name, ck.Detail)
		}
	}
}

func money(v *float64) string {
	if v == nil {
		return "?"
	}
	return fmt.Sprintf("$%.6f", *v)
}

func millis(v *float64) string {
	if v == nil {
		return "?"
	}
	return fmt.Sprintf("%.0f", *v)
}

func firstID(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	if len(ids) == 1 {
		return ids[0]
	}
	return fmt.Sprintf("%s +%d", ids[0], len(ids)-1)
}

// splitArgs splits a command line the way a POSIX shell splits words:
// whitespace separates, single quotes keep everything, double quotes keep
// all but \" and \\, a backslash outside quotes escapes the next byte. No
// expansion happens.
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			if c == '"' {
				quote = 0
			} else if c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
				i++
				cur.WriteByte(s[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("%q: unterminated %c quote", s, quote)
	}
	if in {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("empty command")
	}
	return out, nil
}
