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
	"github.com/loomwork/loomwork/scorer/stats"
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
		parts = append(parts, fmt.Sprintf("k=%d: %.3f (%d cases)", v.K, v.Value, v.Cases))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// iv prints an interval as "0.719 [0.526, 0.895]"; signed for deltas.
func iv(v *stats.Interval, signed bool) string {
	if v == nil {
		return "-"
	}
	if signed {
		return fmt.Sprintf("%+.3f [%+.3f, %+.3f]", v.Estimate, v.Lower, v.Upper)
	}
	return fmt.Sprintf("%.3f [%.3f, %.3f]", v.Estimate, v.Lower, v.Upper)
}

func num(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *p)
}

// mde prints a minimum detectable drop; above 1 no drop on a [0, 1]
// metric can be detected, and it says so.
func mde(p *float64) string {
	if p != nil && *p > 1 {
		return fmt.Sprintf("none (%.3f > 1: too few cases)", *p)
	}
	return num(p)
}

// adjP is a pair's corrected p-value, or "-" when the runs are
// deterministic and no test was made.
func adjP(cmp *scorer.Comparison, p scorer.CaseDelta) string {
	if cmp.Deterministic {
		return "-"
	}
	return fmt.Sprintf("%.3f", p.AdjustedP)
}

// rateRows are the named rates of r in display order (nil rows skipped).
func rateRows(r *scorer.Rates) []struct {
	name string
	v    *stats.Interval
} {
	rows := []struct {
		name string
		v    *stats.Interval
	}{{"pass rate", r.PassRate}, {"mean score", r.MeanScore}}
	if r.EvidenceCases > 0 {
		rows = append(rows, struct {
			name string
			v    *stats.Interval
		}{"evidence retrieved", r.EvidenceRetrieved}, struct {
			name string
			v    *stats.Interval
		}{"evidence cited", r.EvidenceCited}, struct {
			name string
			v    *stats.Interval
		}{"retrieved, not cited", r.RetrievedNotCited})
	}
	if r.CitationPrecision != nil {
		rows = append(rows, struct {
			name string
			v    *stats.Interval
		}{"citation precision", r.CitationPrecision})
	}
	return rows
}

func gateBound(g *gate.Result) string {
	s := fmt.Sprintf("false alarms when nothing changed ≤ %.1f%%", 100*g.FalseAlarmBound)
	if len(g.FalseAlarmParts) > 0 {
		s += " (" + strings.Join(g.FalseAlarmParts, " + ") + ")"
	}
	if len(g.Unbounded) > 0 {
		s += "; not bounded: " + strings.Join(g.Unbounded, "; ")
	}
	return s
}

func pairPasses(p scorer.CaseDelta) string {
	return fmt.Sprintf("%d/%d → %d/%d", p.BasePasses, p.BaseTrials, p.CandPasses, p.CandTrials)
}

func writeText(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	s := r.Suite
	ew.printf("Suite %s: %d cases, %d trials (model: %s)\n", nonEmpty(s.Source, "(stdin)"), s.NCases, s.NTrials, labels(s))
	if s.PassRate != nil {
		ew.printf("  %.0f%% intervals over cases (%s), %.1f trials per case\n", 100*s.Level, s.PassRate.Method, s.TrialsPerCase)
		for _, row := range rateRows(&s.Rates) {
			ew.printf("  %-22s %s\n", row.name, iv(row.v, false))
		}
		if s.EvidenceCases > 0 {
			ew.printf("  (evidence rates over the %d cases that require evidence; citation precision over the %d whose trials cited anything)\n", s.EvidenceCases, s.PrecisionCases)
		}
		ew.printf("  cases passing every trial: %d/%d; trials finished: %d/%d, outcome met: %d/%d\n", s.CasesPassed, s.NCases, s.Finished, s.NTrials, s.Successes, s.NTrials)
	}
	for _, a := range s.Agents {
		ew.printf("  agent %s: %d cases, %d trials: pass rate %s", a.Agent, a.Cases, a.Trials, iv(a.PassRate, false))
		if a.EvidenceCases > 0 {
			ew.printf("; retrieved %s, cited %s, retrieved not cited %s", iv(a.EvidenceRetrieved, false), iv(a.EvidenceCited, false), iv(a.RetrievedNotCited, false))
		}
		if a.CitationPrecision != nil {
			ew.printf(", citation precision %s", iv(a.CitationPrecision, false))
		}
		ew.printf("\n")
	}
	for _, g := range s.Graders {
		ew.printf("  grader %s (%s%s): %d/%d trials over %d cases, pass rate %s%s\n", g.Name, g.Type, requiredText(g), g.Passed, g.Trials, g.Cases, iv(g.PassRate, false), errorsText(g))
	}
	ew.printf("  pass@k       %s\n  pass^k       %s\n", kvs(s.PassAtK), kvs(s.PassHatK))
	ew.printf("  flaky cases  %s\n", list(s.FlakyCases))
	ew.printf("  cost         total %s (known %s), per successful trial %s\n", usd(s.TotalCostUSD), usd(&s.KnownCostUSD), usd(s.CostPerSuccessUSD))
	if j := s.Judge; j != nil {
		ew.printf("  judge        %s (not in the agent's cost)\n", judgeText(j))
		for _, l := range JudgeConsistencyLines(j.PositionBias, j.SelfDisagreement) {
			ew.printf("  judge        %s\n", l)
		}
	}
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
		if cmp.PassRateDelta != nil {
			ew.printf("  pass rate delta  %s %.0f%% %s; detects a drop of %s with %.0f%% power\n", iv(cmp.PassRateDelta, true), 100*cmp.PassRateDelta.Level, cmp.PassRateDelta.Method, mde(cmp.PassRateMDE), 100*cmp.Power)
			ew.printf("  mean score delta %s; detects a drop of %s\n", iv(cmp.MeanDelta, true), mde(cmp.ScoreMDE))
		}
		ew.printf("  per case: %s\n", cmp.CaseTest)
		ew.printf("    regressed: %s\n    improved: %s\n    changed within noise: %s\n    flaky in the baseline: %s\n",
			list(cmp.Regressed), list(cmp.Improved), list(cmp.WithinNoise), list(cmp.BaseFlaky))
		ew.printf("  all-trials flips: %d new failures %s, %d fixed %s; exact McNemar p = %.4g\n",
			len(cmp.NewFailures), brackets(cmp.NewFailures), len(cmp.Fixed), brackets(cmp.Fixed), cmp.McNemar.PValue)
		ew.printf("  cost/trial %s → %s (%s); duration/trial %s → %s (%s)\n", usd(cmp.BaseMeanCostUSD), usd(cmp.CandMeanCostUSD), pct(cmp.CostChangePct),
			msStr(cmp.BaseMeanDurationMS), msStr(cmp.CandMeanDurationMS), pct(cmp.DurationChangePct))
		ew.printf("  missing from baseline: %s\n  missing from candidate: %s\n", list(cmp.MissingFromBaseline), list(cmp.MissingFromCandidate))
		ew.printf("\n%-28s %-13s %7s %7s %8s  %-20s %7s %12s\n", "CASE", "PASSES", "BASE", "CAND", "DELTA", "VERDICT", "ADJ P", "COST DELTA")
		for _, p := range cmp.Pairs {
			ew.printf("%-28s %-13s %7.3f %7.3f %+8.3f  %-20s %7s %12s\n", trunc(p.CaseID, 28), pairPasses(p), p.BaseScore, p.CandScore, p.Delta, verdictLabel(p), adjP(cmp, p), signedUSD(p.CostDeltaUSD))
		}
	}
	if g := r.Gate; g != nil {
		ew.printf("\nGate: %s (%s)\n", map[bool]string{true: "PASS", false: "FAIL"}[g.Passed], gateBound(g))
		for _, c := range g.Checks {
			ew.printf("  [%s] %s: %s\n", map[bool]string{true: "ok", false: "FAIL"}[c.Passed], c.Name, c.Detail)
		}
	}
	return ew.err
}

func verdictLabel(p scorer.CaseDelta) string {
	v := p.Verdict
	if p.BaseFlaky {
		v += " (flaky)"
	}
	if p.CandDiverged > 0 {
		v += " (diverged)"
	}
	return v
}

func brackets(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return "[" + strings.Join(xs, ", ") + "]"
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
	if s.PassRate != nil {
		for _, row := range rateRows(&s.Rates) {
			ew.printf("| %s | %.3f (%.0f%% CI %.3f – %.3f) |\n", row.name, row.v.Estimate, 100*row.v.Level, row.v.Lower, row.v.Upper)
		}
	}
	ew.printf("| pass@k | %s |\n| pass^k | %s |\n", kvs(s.PassAtK), kvs(s.PassHatK))
	ew.printf("| flaky cases | %d |\n", len(s.FlakyCases))
	ew.printf("| total cost | %s |\n| cost per successful trial | %s |\n", usd(s.TotalCostUSD), usd(s.CostPerSuccessUSD))
	if cmp := r.Comparison; cmp != nil {
		if cmp.PassRateDelta != nil {
			ew.printf("| pass rate delta vs baseline | %s (%.0f%% CI; detects a drop of %s with %.0f%% power) |\n", iv(cmp.PassRateDelta, true), 100*cmp.PassRateDelta.Level, mde(cmp.PassRateMDE), 100*cmp.Power)
			ew.printf("| mean score delta vs baseline | %s (detects a drop of %s) |\n", iv(cmp.MeanDelta, true), mde(cmp.ScoreMDE))
		}
		ew.printf("| cases regressed / improved / within noise | %d / %d / %d |\n", len(cmp.Regressed), len(cmp.Improved), len(cmp.WithinNoise))
		ew.printf("| all-trials flips | %d regressed, %d fixed (exact McNemar p = %.4g) |\n", cmp.McNemar.Regressed, cmp.McNemar.Fixed, cmp.McNemar.PValue)
		ew.printf("| cost per trial | %s → %s (%s) |\n", usd(cmp.BaseMeanCostUSD), usd(cmp.CandMeanCostUSD), pct(cmp.CostChangePct))
		ew.printf("| duration per trial | %s → %s (%s) |\n", msStr(cmp.BaseMeanDurationMS), msStr(cmp.CandMeanDurationMS), pct(cmp.DurationChangePct))
		ew.printf("| model labels | baseline %s; candidate %s |\n", mdEscape(labels(cmp.Baseline)), mdEscape(labels(s)))
		for _, w := range cmp.Warnings {
			ew.printf("\n> ⚠️ **Warning:** %s\n", mdEscape(w))
		}
	}
	if s.PassRate != nil {
		ew.printf("\nIntervals: %.0f%% %s, over cases, %.1f trials per case", 100*s.Level, s.PassRate.Method, s.TrialsPerCase)
		if s.EvidenceCases > 0 {
			ew.printf("; evidence rates over the %d cases that require evidence (citation precision over the %d whose trials cited anything)", s.EvidenceCases, s.PrecisionCases)
		}
		ew.printf(".\n")
	}
	if len(s.Agents) > 0 {
		ew.printf("\n| agent | cases | trials | pass rate | evidence retrieved | evidence cited | retrieved, not cited | citation precision |\n|---|---:|---:|---|---|---|---|---|\n")
		for _, a := range s.Agents {
			ew.printf("| %s | %d | %d | %s | %s | %s | %s | %s |\n", mdEscape(a.Agent), a.Cases, a.Trials, iv(a.PassRate, false), iv(a.EvidenceRetrieved, false), iv(a.EvidenceCited, false), iv(a.RetrievedNotCited, false), iv(a.CitationPrecision, false))
		}
	}
	if len(s.Graders) > 0 {
		ew.printf("\n| grader | type | required | cases | trials passed | pass rate | errors |\n|---|---|---|---:|---:|---|---:|\n")
		for _, g := range s.Graders {
			ew.printf("| %s | %s | %s | %d | %d/%d | %s | %d |\n", mdEscape(g.Name), g.Type, strings.TrimPrefix(requiredText(g), ", "), g.Cases, g.Passed, g.Trials, iv(g.PassRate, false), g.Errors)
		}
	}
	if j := s.Judge; j != nil {
		ew.printf("\nJudge: %s (not in the agent's cost).\n", mdEscape(judgeText(j)))
		for _, l := range JudgeConsistencyLines(j.PositionBias, j.SelfDisagreement) {
			ew.printf("\nJudge %s.\n", mdEscape(l))
		}
	}
	for _, n := range s.Notes {
		ew.printf("\n> %s\n", mdEscape(n))
	}
	if g := r.Gate; g != nil {
		ew.printf("\n### Gate\n\n%s.\n\n", mdEscape(strings.ToUpper(gateBound(g)[:1])+gateBound(g)[1:]))
		for _, c := range g.Checks {
			ew.printf("- %s **%s**: %s\n", map[bool]string{true: "✅", false: "❌"}[c.Passed], c.Name, mdEscape(c.Detail))
		}
	}
	if cmp := r.Comparison; cmp != nil {
		ew.printf("\nPer case: %s.\n", mdEscape(cmp.CaseTest))
		if len(cmp.Regressed) > 0 {
			ew.printf("\n### Regressed\n\n")
			for _, id := range cmp.Regressed {
				ew.printf("- `%s`%s\n", id, reasonFor(s, id))
			}
		}
		if len(cmp.Improved) > 0 {
			ew.printf("\n### Improved\n\n%s\n", codeList(cmp.Improved))
		}
		if len(cmp.WithinNoise) > 0 {
			ew.printf("\n**Changed within noise**: %s\n", codeList(cmp.WithinNoise))
		}
		if len(cmp.BaseFlaky) > 0 {
			ew.printf("\n**Flaky in the baseline**: %s\n", codeList(cmp.BaseFlaky))
		}
		if len(cmp.MissingFromBaseline) > 0 {
			ew.printf("\n**Missing from baseline** (new cases, not compared): %s\n", codeList(cmp.MissingFromBaseline))
		}
		if len(cmp.MissingFromCandidate) > 0 {
			ew.printf("\n**Missing from candidate** (no trials this run): %s\n", codeList(cmp.MissingFromCandidate))
		}
		ew.printf("\n<details><summary>Per-case deltas (%d)</summary>\n\n| case | passes | base | cand | Δ | verdict | adj. p | Δ cost/trial |\n|---|---|---:|---:|---:|---|---:|---:|\n", len(cmp.Pairs))
		for _, p := range cmp.Pairs {
			ew.printf("| `%s` | %s | %.3f | %.3f | %+.3f | %s | %s | %s |\n", mdEscape(p.CaseID), pairPasses(p), p.BaseScore, p.CandScore, p.Delta, verdictLabel(p), adjP(cmp, p), signedUSD(p.CostDeltaUSD))
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
	prop := func(name, value string) { js.Properties = append(js.Properties, junitProperty{name, value}) }
	key := func(n string) string { return strings.ReplaceAll(strings.ReplaceAll(n, ", ", "_"), " ", "_") }
	if s.PassRate != nil {
		prop("interval", fmt.Sprintf("%.0f%% %s", 100*s.Level, s.PassRate.Method))
		for _, row := range rateRows(&s.Rates) {
			prop(key(row.name), iv(row.v, false))
		}
	}
	for _, a := range s.Agents {
		for _, row := range rateRows(&a.Rates) {
			prop("agent."+a.Agent+"."+key(row.name), iv(row.v, false))
		}
	}
	for _, g := range s.Graders {
		prop("grader."+g.Name+".pass_rate", iv(g.PassRate, false))
	}
	if j := s.Judge; j != nil {
		prop("judge", judgeText(j))
		for _, l := range JudgeConsistencyLines(j.PositionBias, j.SelfDisagreement) {
			prop("judge_consistency", l)
		}
	}
	prop("pass_at_k", kvs(s.PassAtK))
	prop("pass_hat_k", kvs(s.PassHatK))
	verdict := map[string]scorer.CaseDelta{}
	if cmp := r.Comparison; cmp != nil {
		for _, p := range cmp.Pairs {
			verdict[p.CaseID] = p
		}
		prop("baseline_model_labels", labels(r.Baseline))
		if cmp.PassRateDelta != nil {
			prop("pass_rate_delta", iv(cmp.PassRateDelta, true))
			prop("pass_rate_min_detectable_drop", num(cmp.PassRateMDE))
			prop("mean_score_delta", iv(cmp.MeanDelta, true))
			prop("mean_score_min_detectable_drop", num(cmp.ScoreMDE))
		}
		prop("case_test", cmp.CaseTest)
		for _, w := range cmp.Warnings {
			prop("warning", w)
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
		p, paired := verdict[c.CaseID]
		switch {
		case r.Comparison == nil:
			if !c.Passed {
				tc.Failure = &junitMessage{Message: fmt.Sprintf("%d/%d trials passed", c.Passes, c.Trials), Type: "failure", Body: reasons}
				js.Failures++
			}
		case paired && p.Verdict == scorer.VerdictRegressed:
			fail(fmt.Sprintf("regressed: %s trials passed (%s)", pairPasses(p), r.Comparison.CaseTest))
		case c.MustPass && !c.Passed:
			fail("must-pass case fails")
		case !paired:
			out += "; missing from baseline (new case, not compared)"
		case p.Verdict == scorer.VerdictWithinNoise:
			out += fmt.Sprintf("; changed within noise: %s trials passed, adjusted p %.3f", pairPasses(p), p.AdjustedP)
		case p.Change == scorer.ChangeStillFail:
			out += "; also failing in the baseline: " + reasons
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
		lines := []string{gateBound(g)}
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

func requiredText(g scorer.GraderRates) string {
	switch {
	case g.Required:
		return ", required"
	case g.RequiredIn == 0:
		return ", optional"
	default:
		return fmt.Sprintf(", required in %d of %d cases", g.RequiredIn, g.Cases)
	}
}

func errorsText(g scorer.GraderRates) string {
	if g.Errors == 0 {
		return ""
	}
	return fmt.Sprintf("; %d grader errors (no verdict)", g.Errors)
}

// JudgeConsistencyLines say how far a suite's judge agreed with itself:
// the pairwise grades whose two orders disagreed (position bias) and the
// model grades whose samples split (self-disagreement), each with its
// Wilson interval; both fail closed. No line for a rate with no grades.
func JudgeConsistencyLines(positionBias, selfDisagreement *scorer.WilsonRate) []string {
	var out []string
	if r := positionBias; r != nil {
		out = append(out, fmt.Sprintf("position bias: the two orders disagreed on %d of %d pairwise grades, %s (undecided: failed)", r.K, r.N, wilsonText(r)))
	}
	if r := selfDisagreement; r != nil {
		out = append(out, fmt.Sprintf("self-consistency: the samples split on %d of %d model grades, %s (undecided: failed)", r.K, r.N, wilsonText(r)))
	}
	return out
}

func wilsonText(r *scorer.WilsonRate) string {
	return fmt.Sprintf("%.3f [%.3f, %.3f] (%.0f%% Wilson)", r.Rate, r.Lower, r.Upper, 100*r.Level)
}

func judgeText(j *scorer.JudgeTotals) string {
	var ls []string
	for l, n := range j.Labels {
		ls = append(ls, fmt.Sprintf("%s %d", l, n))
	}
	sort.Strings(ls)
	return fmt.Sprintf("%d calls, %d input + %d output tokens, cost %s; models %s; grades by label: %s",
		j.Calls, j.InputTokens, j.OutputTokens, usd(j.CostUSD), strings.Join(j.Models, ", "), strings.Join(ls, ", "))
}
