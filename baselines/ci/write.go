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
		return fmt.Sprintf("PASSED: %d replayed run(s) reproduced their journals; %d fresh run(s) gated against %s: passed; "+
			"every fresh and regraded verdict, %d rollup(s) and %d reranker quer(ies) as committed",
			r.Replay.Runs, r.Fresh.Runs, r.Gate.Baseline, r.Rollups.Runs+r.Rollups.Traces, r.Reranker.Queries)
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
		case PartVerdicts:
			parts = append(parts, fmt.Sprintf("verdicts (%d fresh verdict(s) differ from the committed ones: %s)", len(r.Verdicts.Changed), verdictSummary(r.Verdicts.Changed)))
		case PartRescore:
			var what []string
			if n := len(r.Rescore.Verdicts); n > 0 {
				what = append(what, fmt.Sprintf("%d committed verdict(s) regraded differently: %s", n, verdictSummary(r.Rescore.Verdicts)))
			}
			if n := len(r.Rescore.Changed); n > 0 {
				what = append(what, fmt.Sprintf("%d case(s) judged differently from %s", n, r.Rescore.Report))
			}
			parts = append(parts, fmt.Sprintf("rescore (%s)", strings.Join(what, "; ")))
		case PartRollups:
			parts = append(parts, fmt.Sprintf("rollups (%d field(s) differ from %s: %s)", len(r.Rollups.Diffs), r.Rollups.File, rollupSummary(r.Rollups.Diffs)))
		case PartReranker:
			var qs []string
			for _, c := range r.Reranker.Changed {
				qs = append(qs, c.QueryID)
			}
			parts = append(parts, fmt.Sprintf("reranker (%d quer(ies) differ from %s: %s)", len(r.Reranker.Changed), r.Reranker.File, strings.Join(qs, ", ")))
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
	e.printf("verdict %s  %d fresh trial(s) compared with the committed ones, grader by grader (deterministic: any change fails)\n",
		status(r.Verdicts.Passed), r.Verdicts.Compared)
	for _, v := range r.Verdicts.Changed {
		e.printf("  %s\n", v)
	}
	for _, v := range r.Rescore.Verdicts {
		e.printf("  rescore: %s\n", v)
	}
	e.printf("rollups %s  %d fresh run(s) and %d SDK trace(s) rolled up against %s; %d field(s) differ\n",
		status(r.Rollups.Passed), r.Rollups.Runs, r.Rollups.Traces, r.Rollups.File, len(r.Rollups.Diffs))
	for _, d := range r.Rollups.Diffs {
		e.printf("  %s: %s: committed %s, now %s\n", d.where(), d.Field, d.Committed, d.Now)
	}
	e.printf("rerank  %s  the committed reranker on %d gold quer(ies) against %s; %d differ\n",
		status(r.Reranker.Passed), r.Reranker.Queries, r.Reranker.File, len(r.Reranker.Changed))
	for _, c := range r.Reranker.Changed {
		e.printf("  %s\n", c)
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
	e.printf("| fresh verdicts against the committed ones, trial by trial | %s | %d trial(s), %d verdict(s) changed |\n", mark(r.Verdicts.Passed), r.Verdicts.Compared, len(r.Verdicts.Changed))
	e.printf("| committed baseline regraded and rescored against `%s` | %s | %d verdict(s) regraded, %d differ; %d case(s) judged differently |\n",
		r.Rescore.Report, mark(r.Rescore.Passed), r.Rescore.Regraded, len(r.Rescore.Verdicts), len(r.Rescore.Changed))
	e.printf("| rollups against `%s` | %s | %d run(s), %d SDK trace(s), %d field(s) differ |\n", r.Rollups.File, mark(r.Rollups.Passed), r.Rollups.Runs, r.Rollups.Traces, len(r.Rollups.Diffs))
	e.printf("| reranker against `%s` | %s | %d quer(ies), %d differ |\n\n", r.Reranker.File, mark(r.Reranker.Passed), r.Reranker.Queries, len(r.Reranker.Changed))
	if vs := append(append([]VerdictChange{}, r.Verdicts.Changed...), r.Rescore.Verdicts...); len(vs) > 0 {
		e.printf("### Verdicts that changed\n\n| case | trial | grader | direction | passed | score | reason now |\n| --- | ---: | --- | --- | --- | --- | --- |\n")
		for _, v := range vs {
			e.printf("| `%s` | %d | `%s` | %s | %v → %v | %.3f → %.3f | %s |\n", v.CaseID, v.Trial, v.Grader, v.Direction, v.CommittedPassed, v.Passed,
				v.CommittedScore, v.Score, mdEscape(nonEmpty(v.Note, v.Reason)))
		}
		e.printf("\n")
	}
	if len(r.Rollups.Diffs) > 0 {
		e.printf("### Rollups that differ\n\n| run or trace | field | committed | now |\n| --- | --- | --- | --- |\n")
		for _, d := range r.Rollups.Diffs {
			e.printf("| %s | `%s` | %s | %s |\n", mdEscape(d.where()), d.Field, mdEscape(d.Committed), mdEscape(d.Now))
		}
		e.printf("\n")
	}
	if len(r.Reranker.Changed) > 0 {
		e.printf("### Reranker queries that differ\n\n")
		for _, c := range r.Reranker.Changed {
			e.printf("- %s\n", mdEscape(c.String()))
		}
		e.printf("\n")
	}
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

// rollupSummary says "coding-roman trial 0 tokens_in, … (+N more)".
func rollupSummary(ds []RollupDiff) string {
	var parts []string
	for i, d := range ds {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("+%d more", len(ds)-5))
			break
		}
		parts = append(parts, d.where()+" "+d.Field)
	}
	return strings.Join(parts, ", ")
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
