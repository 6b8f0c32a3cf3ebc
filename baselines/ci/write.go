package ci

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/loomwork/loomwork/scorer/report"
)

// Formats Write accepts; the first is the default.
var Formats = []string{report.Text, report.JSON, report.Markdown}

// Write writes r as text (terminals), JSON (machines: the whole Result,
// with the scored report) or Markdown (a PR comment: the verdict, every
// divergence and worse case, then the score report).
func Write(w io.Writer, format string, r *Result) error {
	switch format {
	case report.Text:
		return writeText(w, r)
	case report.JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(r)
	case report.Markdown:
		return writeMarkdown(w, r)
	}
	return fmt.Errorf("write ci report: unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// Verdict is the one-line outcome, e.g. "FAILED: replay (3 runs diverged:
// LWR1200 ×3); gate (min_delta_lower, max_new_failures)".
func (r *Result) Verdict() string {
	if r.Passed {
		return fmt.Sprintf("PASSED: %d replayed run(s) reproduced their journals; %d fresh run(s) gated against %s: passed",
			r.Replay.Runs, r.Fresh.Runs, r.Gate.Baseline)
	}
	var parts []string
	for _, p := range r.Failed {
		switch p {
		case PartReplay:
			parts = append(parts, fmt.Sprintf("replay (%d of %d runs did not reproduce their journal: %s)",
				len(r.Replay.Divergences), r.Replay.Runs, summary(r.Replay.Divergences)))
		case PartFresh:
			parts = append(parts, fmt.Sprintf("fresh run (%d of %d runs stopped with an error)", len(r.Fresh.Errors), r.Fresh.Runs))
		case PartGate:
			parts = append(parts, fmt.Sprintf("gate (%s)", strings.Join(r.Gate.FailedRule, ", ")))
		case PartRescore:
			parts = append(parts, fmt.Sprintf("rescore (%d case(s) judged differently from %s)", len(r.Rescore.Changed), r.Rescore.Report))
		}
	}
	return "FAILED: " + strings.Join(parts, "; ")
}

func writeText(w io.Writer, r *Result) error {
	e := &errWriter{w: w}
	status := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	e.printf("replay  %s  %d run(s) of %s re-executed with the recorded answers; %d did not reproduce\n",
		status(r.Replay.Passed), r.Replay.Runs, strings.Join(r.Replay.Journals, ", "), len(r.Replay.Divergences))
	for _, d := range r.Replay.Divergences {
		where := d.File
		if d.Line > 0 {
			where = fmt.Sprintf("%s line %d", d.File, d.Line)
		}
		e.printf("  %s trial %d (run %s, %s): %s\n", d.CaseID, d.Trial, d.RunID, where, d.Message)
	}
	e.printf("fresh   %s  %d scripted run(s) on the current code", status(len(r.Fresh.Errors) == 0), r.Fresh.Runs)
	for i, a := range r.Fresh.Agents {
		sep := ": "
		if i > 0 {
			sep = ", "
		}
		e.printf("%s%s %d case(s) × %d trial(s)", sep, a.Agent, a.Cases, a.Trials)
	}
	e.printf("; %d identical to the committed journals, %d changed\n", r.Fresh.Unchanged, len(r.Fresh.Changed))
	for _, x := range r.Fresh.Errors {
		e.printf("  ERROR %s trial %d (run %s): %s\n", x.CaseID, x.Trial, x.RunID, x.Message)
	}
	for _, c := range r.Fresh.Changed {
		e.printf("  changed %s trial %d: first at seq %d (%s): committed %s, now %s\n", c.CaseID, c.Trial, c.Seq, c.Field,
			nonEmpty(c.Recorded, "nothing"), nonEmpty(c.Produced, "nothing"))
	}
	if len(r.Fresh.Skipped) > 0 {
		e.printf("  not run (tagged neither research nor coding): %s\n", strings.Join(r.Fresh.Skipped, ", "))
	}
	e.printf("gate    %s  policy %s, fresh run against %s\n", status(r.Gate.Passed), r.Gate.Policy, r.Gate.Baseline)
	for _, c := range r.Gate.Checks {
		e.printf("  %s %s: %s\n", status(c.Passed), c.Name, c.Detail)
	}
	for _, c := range r.Gate.Worse {
		e.printf("  worse %s: score %.3f → %.3f (%+.3f), trials passed %d/%d → %d/%d, %s%s\n", c.CaseID, c.BaseScore, c.CandScore, c.Delta,
			c.BasePasses, c.BaseTrials, c.CandPasses, c.CandTrials, nonEmpty(c.Verdict, "no verdict"), reasonSuffix(c.Reasons))
	}
	if len(r.Gate.MustPassFailing) > 0 {
		e.printf("  must-pass failing: %s\n", strings.Join(r.Gate.MustPassFailing, ", "))
	}
	e.printf("rescore %s  the committed baseline trials scored by the current scorer against %s; %d case(s) judged differently\n",
		status(r.Rescore.Passed), r.Rescore.Report, len(r.Rescore.Changed))
	for _, c := range r.Rescore.Changed {
		e.printf("  %s: trials passed %d → %d of %d, mean score %.3f → %.3f%s\n", c.CaseID, c.CommittedPasses, c.Passes, c.Trials, c.CommittedScore, c.Score, noteSuffix(c.Note))
	}
	e.printf("ci: %s\n", r.Verdict())
	if names := r.Cases(); len(names) > 0 {
		e.printf("ci: cases named: %s\n", strings.Join(names, ", "))
	}
	return e.err
}

func writeMarkdown(w io.Writer, r *Result) error {
	e := &errWriter{w: w}
	mark := func(ok bool) string {
		if ok {
			return "✅"
		}
		return "❌"
	}
	e.printf("## Loomwork CI recipe: %s\n\n", map[bool]string{true: "passed", false: "failed"}[r.Passed])
	e.printf("%s\n\n", mdEscape(r.Verdict()))
	e.printf("| step | result | detail |\n| --- | --- | --- |\n")
	e.printf("| strict replay of the committed journals | %s | %d run(s), %d did not reproduce |\n", mark(r.Replay.Passed), r.Replay.Runs, len(r.Replay.Divergences))
	e.printf("| fresh scripted run on the current code | %s | %d run(s), %d identical to the committed journals, %d error(s) |\n",
		mark(len(r.Fresh.Errors) == 0), r.Fresh.Runs, r.Fresh.Unchanged, len(r.Fresh.Errors))
	e.printf("| gate (`%s`) against `%s` | %s | %s |\n", r.Gate.Policy, r.Gate.Baseline, mark(r.Gate.Passed),
		mdEscape(nonEmpty(strings.Join(r.Gate.FailedRule, ", "), "every check passed")))
	e.printf("| committed baseline rescored against `%s` | %s | %d case(s) judged differently |\n\n", r.Rescore.Report, mark(r.Rescore.Passed), len(r.Rescore.Changed))
	if len(r.Replay.Divergences) > 0 {
		e.printf("### Replay divergences\n\n| case | trial | run | journal line | divergence |\n| --- | ---: | --- | ---: | --- |\n")
		for _, d := range r.Replay.Divergences {
			e.printf("| `%s` | %d | `%s` | %d | %s |\n", d.CaseID, d.Trial, d.RunID, d.Line, mdEscape(d.Message))
		}
		e.printf("\n")
	}
	if len(r.Fresh.Errors) > 0 {
		e.printf("### Fresh runs that stopped\n\n| case | trial | error |\n| --- | ---: | --- |\n")
		for _, x := range r.Fresh.Errors {
			e.printf("| `%s` | %d | %s |\n", x.CaseID, x.Trial, mdEscape(x.Message))
		}
		e.printf("\n")
	}
	if len(r.Rescore.Changed) > 0 {
		e.printf("### Cases the current scorer judges differently from the committed report\n\n| case | trials passed | mean score | note |\n| --- | --- | --- | --- |\n")
		for _, c := range r.Rescore.Changed {
			e.printf("| `%s` | %d → %d of %d | %.3f → %.3f | %s |\n", c.CaseID, c.CommittedPasses, c.Passes, c.Trials, c.CommittedScore, c.Score, mdEscape(c.Note))
		}
		e.printf("\n")
	}
	if len(r.Gate.Worse) > 0 {
		e.printf("### Cases that got worse\n\n| case | baseline score | fresh score | delta | trials passed | verdict | why |\n| --- | ---: | ---: | ---: | --- | --- | --- |\n")
		for _, c := range r.Gate.Worse {
			e.printf("| `%s` | %.3f | %.3f | %+.3f | %d/%d → %d/%d | %s | %s |\n", c.CaseID, c.BaseScore, c.CandScore, c.Delta,
				c.BasePasses, c.BaseTrials, c.CandPasses, c.CandTrials, c.Verdict, mdEscape(strings.Join(c.Reasons, "; ")))
		}
		e.printf("\n")
	}
	if e.err != nil || r.Report == nil {
		return e.err
	}
	e.printf("### Score report (fresh run against the baseline)\n\n")
	if e.err != nil {
		return e.err
	}
	return report.Write(w, report.Markdown, r.Report)
}

func noteSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

func reasonSuffix(rs []string) string {
	if len(rs) == 0 {
		return ""
	}
	return " — " + strings.Join(rs, "; ")
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
