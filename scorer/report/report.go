// Package report writes scored suites, baseline comparisons and gate
// verdicts as text (terminals), JSON (machines), Markdown (PR comments) and
// JUnit XML (CI test views, one testcase per case).
package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
)

// Formats.
const (
	Text     = "text"
	JSON     = "json"
	Markdown = "markdown"
	JUnit    = "junit"
)

// Formats lists the accepted format names.
var Formats = []string{Text, JSON, Markdown, JUnit}

// Report is what is written: a suite, optionally its comparison with a
// baseline and a gate verdict.
type Report struct {
	Suite      *scorer.Suite      `json:"candidate"`
	Baseline   *scorer.Suite      `json:"baseline,omitempty"`
	Comparison *scorer.Comparison `json:"comparison,omitempty"`
	Gate       *gate.Result       `json:"gate,omitempty"`
}

// Write writes r in format.
func Write(w io.Writer, format string, r *Report) error {
	switch format {
	case Text:
		return writeText(w, r)
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case Markdown:
		return writeMarkdown(w, r)
	case JUnit:
		return writeJUnit(w, r)
	}
	return fmt.Errorf("write report: unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

func usd(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf("$%.6f", *p)
}

func msStr(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf("%.0f ms", *p)
}

func signedUSD(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf("%+.6f", *p)
}

func pct(p *float64) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprintf("%+.1f%%", *p)
}

func labels(s *scorer.Suite) string {
	var parts []string
	for l, n := range s.ModelLabels {
		parts = append(parts, fmt.Sprintf("%s ×%d", l, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func kvs(kv []scorer.KValue) string {
	var parts []string
	for _, v := range kv {
		parts = append(parts, fmt.Sprintf("k=%d: %.3f", v.K, v.Value))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func writeText(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	s := r.Suite
	ew.printf("Suite %s: %d cases, %d trials (model: %s)\n", nonEmpty(s.Source, "(stdin)"), s.NCases, s.NTrials, labels(s))
	if s.MeanScore != nil {
		ew.printf("  mean score   %.3f  [%.3f, %.3f] %.0f%% %s, %d resamples, seed %d\n", s.MeanScore.Estimate, s.MeanScore.Lower, s.MeanScore.Upper, 100*s.MeanScore.Level, s.MeanScore.Method, s.Resamples, s.Seed)
		ew.printf("  pass rate    %.3f  [%.3f, %.3f]; cases passing every trial: %d/%d\n", s.PassRate.Estimate, s.PassRate.Lower, s.PassRate.Upper, s.CasesPassed, s.NCases)
	}
	ew.printf("  pass@k       %s\n  pass^k       %s\n", kvs(s.PassAtK), kvs(s.PassHatK))
	ew.printf("  cost         total %s (known %s), per successful trial %s\n", usd(s.TotalCostUSD), usd(&s.KnownCostUSD), usd(s.CostPerSuccessUSD))
	for _, n := range s.Notes {
		ew.printf("  note: %s\n", n)
	}
	ew.printf("\n%-28s %6s %7s %6s %12s %10s  %s\n", "CASE", "TRIALS", "PASSED", "SCORE", "COST/TRIAL", "MS/TRIAL", "REASONS (first failing trial)")
	for _, c := range s.Cases {
		ew.printf("%-28s %6d %3d/%-3d %6.3f %12s %10s  %s\n", trunc(c.CaseID, 28), c.Trials, c.Passes, c.Trials, c.MeanScore, usd(c.MeanCostUSD), msStr(c.MeanDurationMS), firstReasons(&c))
	}
	if cmp := r.Comparison; cmp != nil {
		ew.printf("\nAgainst baseline %s: %d paired cases\n", nonEmpty(r.Baseline.Source, "(baseline)"), len(cmp.Pairs))
		ew.printf("  model labels: baseline %s; candidate %s\n", labels(cmp.Baseline), labels(s))
		for _, w := range cmp.Warnings {
			ew.printf("  WARNING: %s\n", w)
		}
		if iv := cmp.MeanDelta; iv != nil {
			ew.printf("  mean score delta %+.4f  [%+.4f, %+.4f] %.0f%% %s\n", iv.Estimate, iv.Lower, iv.Upper, 100*iv.Level, iv.Method)
		}
		ew.printf("  exact McNemar: %d regressed, %d fixed, p = %.4g\n", cmp.McNemar.Regressed, cmp.McNemar.Fixed, cmp.McNemar.PValue)
		ew.printf("  cost/trial %s → %s (%s); duration/trial %s → %s (%s)\n", usd(cmp.BaseMeanCostUSD), usd(cmp.CandMeanCostUSD), pct(cmp.CostChangePct),
			msStr(cmp.BaseMeanDurationMS), msStr(cmp.CandMeanDurationMS), pct(cmp.DurationChangePct))
		ew.printf("  new failures: %s\n  fixed: %s\n  missing from baseline: %s\n  missing from candidate: %s\n",
			list(cmp.NewFailures), list(cmp.Fixed), list(cmp.MissingFromBaseline), list(cmp.MissingFromCandidate))
		ew.printf("\n%-28s %7s %7s %8s  %-14s %12s\n", "CASE", "BASE", "CAND", "DELTA", "CHANGE", "COST DELTA")
		for _, p := range cmp.Pairs {
			ew.printf("%-28s %7.3f %7.3f %+8.3f  %-14s %12s\n", trunc(p.CaseID, 28), p.BaseScore, p.CandScore, p.Delta, p.Change, signedUSD(p.CostDeltaUSD))
		}
	}
	if g := r.Gate; g != nil {
		ew.printf("\nGate: %s\n", map[bool]string{true: "PASS", false: "FAIL"}[g.Passed])
		for _, c := range g.Checks {
			ew.printf("  [%s] %s: %s\n", map[bool]string{true: "ok", false: "FAIL"}[c.Passed], c.Name, c.Detail)
		}
	}
	return ew.err
}

func firstReasons(c *scorer.CaseResult) string {
	for _, t := range c.Results {
		if !t.Passed || len(t.Reasons) > 0 {
			if len(t.Reasons) == 0 {
				return ""
			}
			return fmt.Sprintf("#%d: %s", t.Trial, strings.Join(t.Reasons, "; "))
		}
	}
	return ""
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func trunc(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

func writeMarkdown(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	s := r.Suite
	title := "Loomwork evaluation"
	if g := r.Gate; g != nil {
		title += map[bool]string{true: ": ✅ gate passed", false: ": ❌ gate failed"}[g.Passed]
	}
	ew.printf("## %s\n\n", title)
	ew.printf("**%d cases, %d trials** · model: %s\n\n", s.NCases, s.NTrials, mdEscape(labels(s)))
	ew.printf("| metric | value |\n|---|---|\n")
	if s.MeanScore != nil {
		ew.printf("| mean score | %.3f (%.0f%% CI %.3f – %.3f) |\n", s.MeanScore.Estimate, 100*s.MeanScore.Level, s.MeanScore.Lower, s.MeanScore.Upper)
		ew.printf("| pass rate | %.3f (%.0f%% CI %.3f – %.3f) |\n", s.PassRate.Estimate, 100*s.PassRate.Level, s.PassRate.Lower, s.PassRate.Upper)
	}
	ew.printf("| pass@k | %s |\n| pass^k | %s |\n", kvs(s.PassAtK), kvs(s.PassHatK))
	ew.printf("| total cost | %s |\n| cost per successful trial | %s |\n", usd(s.TotalCostUSD), usd(s.CostPerSuccessUSD))
	if cmp := r.Comparison; cmp != nil {
		if iv := cmp.MeanDelta; iv != nil {
			ew.printf("| mean score delta vs baseline | %+.4f (%.0f%% CI %+.4f – %+.4f, paired bootstrap) |\n", iv.Estimate, 100*iv.Level, iv.Lower, iv.Upper)
		}
		ew.printf("| pass/fail flips | %d regressed, %d fixed (exact McNemar p = %.4g) |\n", cmp.McNemar.Regressed, cmp.McNemar.Fixed, cmp.McNemar.PValue)
		ew.printf("| cost per trial | %s → %s (%s) |\n", usd(cmp.BaseMeanCostUSD), usd(cmp.CandMeanCostUSD), pct(cmp.CostChangePct))
		ew.printf("| duration per trial | %s → %s (%s) |\n", msStr(cmp.BaseMeanDurationMS), msStr(cmp.CandMeanDurationMS), pct(cmp.DurationChangePct))
		ew.printf("| model labels | baseline %s; candidate %s |\n", mdEscape(labels(cmp.Baseline)), mdEscape(labels(s)))
		for _, w := range cmp.Warnings {
			ew.printf("\n> ⚠️ **Warning:** %s\n", mdEscape(w))
		}
	}
	for _, n := range s.Notes {
		ew.printf("\n> %s\n", mdEscape(n))
	}
	if g := r.Gate; g != nil {
		ew.printf("\n### Gate\n\n")
		for _, c := range g.Checks {
			ew.printf("- %s **%s**: %s\n", map[bool]string{true: "✅", false: "❌"}[c.Passed], c.Name, mdEscape(c.Detail))
		}
	}
	if cmp := r.Comparison; cmp != nil {
		if len(cmp.NewFailures) > 0 {
			ew.printf("\n### New failures\n\n")
			for _, id := range cmp.NewFailures {
				ew.printf("- `%s`%s\n", id, reasonFor(s, id))
			}
		}
		if len(cmp.Fixed) > 0 {
			ew.printf("\n### Fixed\n\n%s\n", codeList(cmp.Fixed))
		}
		if len(cmp.MissingFromBaseline) > 0 {
			ew.printf("\n**Missing from baseline** (new cases, not compared): %s\n", codeList(cmp.MissingFromBaseline))
		}
		if len(cmp.MissingFromCandidate) > 0 {
			ew.printf("\n**Missing from candidate** (no trials this run): %s\n", codeList(cmp.MissingFromCandidate))
		}
		ew.printf("\n<details><summary>Per-case deltas (%d)</summary>\n\n| case | base | cand | Δ | change | Δ cost/trial |\n|---|---:|---:|---:|---|---:|\n", len(cmp.Pairs))
		for _, p := range cmp.Pairs {
			ew.printf("| `%s` | %.3f | %.3f | %+.3f | %s | %s |\n", mdEscape(p.CaseID), p.BaseScore, p.CandScore, p.Delta, p.Change, signedUSD(p.CostDeltaUSD))
		}
		ew.printf("\n</details>\n")
	} else {
		ew.printf("\n<details><summary>Cases (%d)</summary>\n\n| case | passed | score | cost/trial | reasons |\n|---|---:|---:|---:|---|\n", len(s.Cases))
		for _, c := range s.Cases {
			ew.printf("| `%s` | %d/%d | %.3f | %s | %s |\n", mdEscape(c.CaseID), c.Passes, c.Trials, c.MeanScore, usd(c.MeanCostUSD), mdEscape(firstReasons(&c)))
		}
		ew.printf("\n</details>\n")
	}
	return ew.err
}

func reasonFor(s *scorer.Suite, id string) string {
	for i := range s.Cases {
		if s.Cases[i].CaseID == id {
			if r := firstReasons(&s.Cases[i]); r != "" {
				return " — " + mdEscape(r)
			}
		}
	}
	return ""
}

func codeList(xs []string) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = "`" + mdEscape(x) + "`"
	}
	return strings.Join(out, ", ")
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

// JUnit XML, in the common Jenkins/Surefire shape most CI systems read.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// writeJUnit writes one testcase per case. Without a baseline a case fails
// when it did not pass. With a baseline only regressions fail (passing
// before, failing now), as do must-pass cases that fail; cases failing in
// both runs pass with a note in system-out, and cases missing from the
// candidate are skipped. A gate verdict adds a "gate" testcase.
func writeJUnit(w io.Writer, r *Report) error {
	s := r.Suite
	js := junitSuite{Name: "loomwork." + nonEmpty(s.Source, "suite"), Properties: []junitProperty{{"model_labels", labels(s)}}}
	if s.MeanScore != nil {
		js.Properties = append(js.Properties, junitProperty{"mean_score", fmt.Sprintf("%.4f [%.4f, %.4f]", s.MeanScore.Estimate, s.MeanScore.Lower, s.MeanScore.Upper)})
	}
	change := map[string]string{}
	if cmp := r.Comparison; cmp != nil {
		for _, p := range cmp.Pairs {
			change[p.CaseID] = p.Change
		}
		if iv := cmp.MeanDelta; iv != nil {
			js.Properties = append(js.Properties, junitProperty{"mean_score_delta", fmt.Sprintf("%+.4f [%+.4f, %+.4f]", iv.Estimate, iv.Lower, iv.Upper)})
		}
		js.Properties = append(js.Properties, junitProperty{"baseline_model_labels", labels(cmp.Baseline)})
		for _, w := range cmp.Warnings {
			js.Properties = append(js.Properties, junitProperty{"warning", w})
		}
	}
	for i := range s.Cases {
		c := &s.Cases[i]
		tc := junitCase{Name: c.CaseID, Classname: "loomwork.case", Time: "0"}
		if c.MeanDurationMS != nil {
			tc.Time = fmt.Sprintf("%.3f", *c.MeanDurationMS/1000)
		}
		out := fmt.Sprintf("score %.3f, %d/%d trials passed, cost/trial %s, model %s", c.MeanScore, c.Passes, c.Trials, usd(c.MeanCostUSD), strings.Join(c.ModelLabels, "+"))
		reasons := firstReasons(c)
		fail := func(msg string) {
			tc.Failure = &junitMessage{Message: msg, Type: "regression", Body: reasons}
			js.Failures++
		}
		switch {
		case r.Comparison == nil:
			if !c.Passed {
				tc.Failure = &junitMessage{Message: fmt.Sprintf("%d/%d trials passed", c.Passes, c.Trials), Type: "failure", Body: reasons}
				js.Failures++
			}
		case change[c.CaseID] == scorer.ChangeRegressed:
			fail("passed in the baseline, fails now")
		case c.MustPass && !c.Passed:
			fail("must-pass case fails")
		case change[c.CaseID] == scorer.ChangeStillFail:
			out += "; also failing in the baseline: " + reasons
		case change[c.CaseID] == "":
			out += "; missing from baseline (new case, not compared)"
		}
		tc.SystemOut = out
		js.Cases = append(js.Cases, tc)
	}
	if cmp := r.Comparison; cmp != nil {
		for _, id := range cmp.MissingFromCandidate {
			js.Cases = append(js.Cases, junitCase{Name: id, Classname: "loomwork.case", Time: "0", Skipped: &junitMessage{Message: "missing from candidate: no trials in this run"}})
			js.Skipped++
		}
	}
	if g := r.Gate; g != nil {
		tc := junitCase{Name: "gate", Classname: "loomwork.gate", Time: "0"}
		var lines []string
		for _, c := range g.Checks {
			lines = append(lines, fmt.Sprintf("[%s] %s: %s", map[bool]string{true: "ok", false: "FAIL"}[c.Passed], c.Name, c.Detail))
		}
		if !g.Passed {
			tc.Failure = &junitMessage{Message: fmt.Sprintf("%d gate checks failed", len(g.Failed())), Type: "gate", Body: strings.Join(lines, "\n")}
			js.Failures++
		} else {
			tc.SystemOut = strings.Join(lines, "\n")
		}
		js.Cases = append(js.Cases, tc)
	}
	js.Tests = len(js.Cases)
	doc := junitSuites{Name: "loomwork", Tests: js.Tests, Failures: js.Failures, Skipped: js.Skipped, Suites: []junitSuite{js}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}
