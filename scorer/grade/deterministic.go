package grade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
)

// target returns the text a deterministic grader reads and a name for it
// in reasons; ok false (with the reason in why) when it does not exist.
func target(g *datasets.Grader, in Input) (text, what string, ok bool, why string) {
	tr := in.Transcript
	if tr == nil {
		return "", "", false, "no transcript: the trial carries none, and neither a journal nor spans gave one"
	}
	switch {
	case g.Target == "" || g.Target == datasets.TargetAnswer:
		return tr.Answer, "the answer", true, ""
	case strings.HasPrefix(g.Target, datasets.TargetToolResultPrefix):
		name := strings.TrimPrefix(g.Target, datasets.TargetToolResultPrefix)
		for i := len(tr.ToolCalls) - 1; i >= 0; i-- {
			if tr.ToolCalls[i].Name == name {
				return tr.ToolCalls[i].Result, fmt.Sprintf("the last %s result", name), true, ""
			}
		}
		return "", "", false, fmt.Sprintf("tool %s was never called", name)
	default:
		p := strings.TrimPrefix(g.Target, datasets.TargetFilePrefix)
		if c, ok := tr.Files[p]; ok {
			return c, "file " + p, true, ""
		}
		return "", "", false, fmt.Sprintf("the run wrote no file %s", p)
	}
}

// quote shortens a value for a reason.
func quote(s string) string {
	const max = 120
	if r := []rune(s); len(r) > max {
		s = string(r[:max]) + "…"
	}
	return strconv.Quote(s)
}

func textGrader(g *datasets.Grader, in Input, gr *datasets.Grade) {
	text, what, ok, why := target(g, in)
	if !ok {
		gr.Reason = why
		return
	}
	pass := false
	switch g.Type {
	case datasets.GraderEquals:
		a, b := strings.TrimSpace(text), strings.TrimSpace(*g.Value)
		pass = a == b || (g.IgnoreCase && strings.EqualFold(a, b))
		gr.Reason = fmt.Sprintf("%s %s %s %s", what, quote(a), verb(pass, "equals", "does not equal"), quote(b))
	case datasets.GraderContains:
		a, b := text, *g.Value
		if g.IgnoreCase {
			a, b = strings.ToLower(a), strings.ToLower(b)
		}
		pass = strings.Contains(a, b)
		gr.Reason = fmt.Sprintf("%s %s %s", what, verb(pass, "contains", "does not contain"), quote(*g.Value))
	case datasets.GraderRegex:
		p := g.Pattern
		if g.IgnoreCase {
			p = "(?i)" + p
		}
		re, err := regexp.Compile(p)
		if err != nil {
			gr.Error = fmt.Sprintf("pattern: %v", err)
			return
		}
		pass = re.MatchString(text)
		gr.Reason = fmt.Sprintf("%s %s /%s/", what, verb(pass, "matches", "does not match"), g.Pattern)
	case datasets.GraderJSONSchema:
		jsonSchemaGrader(g, text, what, gr)
		return
	case datasets.GraderNumber:
		numberGrader(g, text, what, gr)
		return
	}
	gr.Passed, gr.Score = pass, b2f(pass)
}

func verb(pass bool, yes, no string) string {
	if pass {
		return yes
	}
	return no
}

func jsonSchemaGrader(g *datasets.Grader, text, what string, gr *datasets.Grade) {
	schema, err := jsonschema.UnmarshalJSON(bytes.NewReader(g.Schema))
	if err != nil {
		gr.Error = fmt.Sprintf("schema: %v", err)
		return
	}
	c := jsonschema.NewCompiler()
	// A grader's schema stands alone: a $ref to a file or a URL is refused
	// rather than read (the scorer does no I/O; the library's default
	// loader would read local files). The draft meta-schemas are built in.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource("grader.json", schema); err != nil {
		gr.Error = fmt.Sprintf("schema: %v", err)
		return
	}
	sch, err := c.Compile("grader.json")
	if err != nil {
		gr.Error = fmt.Sprintf("schema: %v", err)
		return
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(strings.TrimSpace(text)))
	if err != nil {
		gr.Reason = fmt.Sprintf("%s is not JSON: %v", what, err)
		return
	}
	if err := sch.Validate(v); err != nil {
		gr.Reason = fmt.Sprintf("%s does not validate: %s", what, oneLine(err.Error()))
		return
	}
	gr.Passed, gr.Score, gr.Reason = true, 1, what+" validates against the schema"
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// numberRE finds numbers in text: an optional sign, digits with optional
// thousands separators, a fraction and an exponent.
var numberRE = regexp.MustCompile(`[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+(?:[eE][-+]?\d+)?`)

// ReadNumber reads the number a number grader compares: the whole text
// when it is one, else pattern's first capture group, else the last number
// in the text (an answer usually ends with its result).
func ReadNumber(text, pattern string) (float64, string, error) {
	t := strings.TrimSpace(text)
	if v, err := strconv.ParseFloat(strings.ReplaceAll(t, ",", ""), 64); err == nil && t != "" {
		return v, t, nil
	}
	if pattern != "" {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return 0, "", err
		}
		m := re.FindStringSubmatch(text)
		if len(m) < 2 {
			return 0, "", fmt.Errorf("pattern /%s/ does not match", pattern)
		}
		s := strings.TrimSpace(m[1])
		v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
		if err != nil {
			return 0, "", fmt.Errorf("pattern /%s/ captured %q, not a number", pattern, s)
		}
		return v, s, nil
	}
	all := numberRE.FindAllString(text, -1)
	if len(all) == 0 {
		return 0, "", fmt.Errorf("no number in it")
	}
	s := all[len(all)-1]
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		return 0, "", fmt.Errorf("%q is not a number", s)
	}
	return v, s, nil
}

func numberGrader(g *datasets.Grader, text, what string, gr *datasets.Grade) {
	got, lit, err := ReadNumber(text, g.Pattern)
	if err != nil {
		gr.Reason = fmt.Sprintf("%s: %v", what, err)
		return
	}
	exp := *g.Expected
	diff := math.Abs(got - exp)
	var pass bool
	var rule string
	switch {
	case g.AbsTol == nil && g.RelTol == nil:
		pass, rule = got == exp, "exact comparison (no tolerance given)"
	default:
		var parts []string
		if g.AbsTol != nil {
			pass = pass || diff <= *g.AbsTol
			parts = append(parts, fmt.Sprintf("abs_tol %g", *g.AbsTol))
		}
		if g.RelTol != nil {
			pass = pass || diff <= *g.RelTol*math.Abs(exp)
			parts = append(parts, fmt.Sprintf("rel_tol %g (%g)", *g.RelTol, *g.RelTol*math.Abs(exp)))
		}
		rule = strings.Join(parts, " or ")
	}
	gr.Passed, gr.Score = pass, b2f(pass)
	gr.Reason = fmt.Sprintf("read %s from %s; |%g - %g| = %.6g %s %s", lit, what, got, exp, diff, verb(pass, "within", "outside"), rule)
}

func evidenceGrader(g *datasets.Grader, in Input, gr *datasets.Grade) {
	ids := g.Evidence
	if len(ids) == 0 {
		ids = in.Case.RequiredEvidence
	}
	match := g.Match
	if match == "" {
		match = in.Case.EvidenceMatch
	}
	if match == "" {
		match = datasets.EvidenceAll
	}
	have, what := in.Facts.EvidenceCited, "cited"
	if g.Type == datasets.GraderEvidenceRetrieved {
		have, what = in.Facts.EvidenceRetrieved, "retrieved"
	}
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	var found, missing []string
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if set[id] {
			found = append(found, id)
		} else {
			missing = append(missing, id)
		}
	}
	n := len(found) + len(missing)
	need := n
	if match == datasets.EvidenceAny {
		need = 1
	}
	gr.Passed = len(found) >= need
	switch {
	case match == datasets.EvidenceAny:
		gr.Score = b2f(len(found) > 0)
	default:
		gr.Score = float64(len(found)) / float64(n)
	}
	gr.Reason = fmt.Sprintf("%s %d of %d evidence ids (need %s)", what, len(found), n, map[bool]string{true: "any", false: "all"}[match == datasets.EvidenceAny])
	if len(missing) > 0 && !gr.Passed {
		gr.Reason += "; missing " + strings.Join(missing, ", ")
	}
	if g.Type == datasets.GraderEvidenceCited && gr.Passed {
		citationPrecision(g, ids, have, gr)
	}
}

// citationPrecision holds an evidence_cited grade to its min_precision: a
// trial that cites the required page among many others has not shown which
// page its answer rests on, so a spray of citations fails (and scores 0)
// however complete it is. The precision is scorer.CitationPrecision over
// the grader's evidence ids: an unjudged citation counts as not relevant.
func citationPrecision(g *datasets.Grader, relevant, cited []string, gr *datasets.Grade) {
	bar := g.MinCitationPrecision()
	p, hits, n := scorer.CitationPrecision(relevant, cited)
	gr.Reason += fmt.Sprintf("; precision %d/%d = %.3f (need %g)", hits, n, p, bar)
	if p < bar {
		gr.Passed, gr.Score = false, 0
		gr.Reason += ": too many citations the judgements do not mark relevant"
	}
}

func toolGrader(g *datasets.Grader, in Input, gr *datasets.Grade) {
	var re *regexp.Regexp
	if g.Pattern != "" {
		var err error
		if re, err = regexp.Compile(g.Pattern); err != nil {
			gr.Error = fmt.Sprintf("pattern: %v", err)
			return
		}
	}
	count, from := 0, ""
	switch {
	case in.Transcript != nil && len(in.Transcript.ToolCalls) > 0:
		from = "transcript"
		for _, tc := range in.Transcript.ToolCalls {
			if tc.Name != g.Tool {
				continue
			}
			if re != nil && !re.MatchString(compactJSON(tc.Arguments)) {
				continue
			}
			count++
		}
	case re != nil:
		gr.Error = "the arguments pattern needs a transcript with tool arguments, and the trial has none (only tool names)"
		return
	default:
		from = "tools called"
		for _, name := range in.Facts.ToolsCalled {
			if name == g.Tool {
				count++
			}
		}
	}
	min := 1.0
	if g.Min != nil {
		min = *g.Min
	}
	pass := float64(count) >= min && (g.Max == nil || float64(count) <= *g.Max)
	gr.Passed, gr.Score = pass, b2f(pass)
	desc := g.Tool
	if re != nil {
		desc += " with arguments matching /" + g.Pattern + "/"
	}
	bound := fmt.Sprintf("at least %g", min)
	if g.Max != nil {
		bound = fmt.Sprintf("%g to %g", min, *g.Max)
	}
	gr.Reason = fmt.Sprintf("%s called %d times (want %s; from the %s)", desc, count, bound, from)
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func traceGrader(g *datasets.Grader, in Input, gr *datasets.Grade) {
	f := in.Facts
	var v *float64
	unknown := ""
	switch g.Metric {
	case datasets.MetricCostUSD:
		v, unknown = f.CostUSD, "cost unknown (an unpriced model, or no cost recorded)"
	case datasets.MetricTokens:
		if f.Tokens != nil {
			v = fp(float64(*f.Tokens))
		}
		unknown = "token count not recorded"
	case datasets.MetricDurationMS:
		v, unknown = f.DurationMS, "duration not recorded"
	case datasets.MetricSteps:
		switch {
		case f.Rollup != nil:
			v = fp(float64(f.Rollup.ModelCalls))
		case in.Transcript != nil && in.Transcript.Steps > 0:
			v = fp(float64(in.Transcript.Steps))
		}
		unknown = "model calls unknown (no trace and no journal)"
	case datasets.MetricToolCalls:
		switch {
		case f.Rollup != nil:
			v = fp(float64(f.Rollup.ToolCalls))
		case f.ToolsCalled != nil:
			v = fp(float64(len(f.ToolsCalled)))
		case in.Transcript != nil:
			v = fp(float64(len(in.Transcript.ToolCalls)))
		}
		unknown = "tool calls unknown"
	case datasets.MetricErrorSpans:
		if f.Rollup != nil {
			v = fp(float64(f.Rollup.ErrorCount))
		}
		unknown = "error spans need the trace (inline spans, or --store)"
	case datasets.MetricCriticalPathShare:
		if r := f.Rollup; r != nil && r.CriticalPathMS > 0 {
			var self float64
			for _, e := range r.CriticalPath {
				if e.Name == g.Span {
					self += e.SelfMS
				}
			}
			v = fp(self / r.CriticalPathMS)
		}
		unknown = "the critical path needs the trace (inline spans, or --store)"
	}
	if v == nil {
		gr.Reason = fmt.Sprintf("%s: %s, so the bound cannot be shown to hold", g.Metric, unknown)
		return
	}
	pass := (g.Min == nil || *v >= *g.Min) && (g.Max == nil || *v <= *g.Max)
	gr.Passed, gr.Score = pass, b2f(pass)
	name := g.Metric
	if g.Metric == datasets.MetricCriticalPathShare {
		name = fmt.Sprintf("critical-path share of %q", g.Span)
	}
	gr.Reason = fmt.Sprintf("%s = %.6g (want %s)", name, *v, rangeText(g.Min, g.Max))
}

func rangeText(min, max *float64) string {
	switch {
	case min != nil && max != nil:
		return fmt.Sprintf("%g to %g", *min, *max)
	case min != nil:
		return fmt.Sprintf("at least %g", *min)
	default:
		return fmt.Sprintf("at most %g", *max)
	}
}

func fp(v float64) *float64 { return &v }
