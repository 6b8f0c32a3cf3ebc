package datasets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Grader types. Each decides one thing about a trial; a trial succeeds
// when every required grader of its case passed (docs/scoring.md,
// "Graders").
const (
	// Deterministic graders over a target (the answer by default).
	GraderEquals   = "equals"   // the target equals value (trimmed; ignore_case)
	GraderContains = "contains" // the target contains value (ignore_case)
	GraderRegex    = "regex"    // the target matches pattern (RE2)
	// GraderJSONSchema: the target parses as JSON and validates against
	// schema (JSON Schema draft 2020-12).
	GraderJSONSchema = "json_schema"
	// GraderNumber: a number read from the target is within abs_tol or
	// rel_tol of expected (exact when neither is given). The number is the
	// target itself when it parses as one, else pattern's first capture
	// group, else the last number in the text.
	GraderNumber = "number"
	// GraderEvidenceCited / GraderEvidenceRetrieved: the evidence ids (by
	// default the case's required_evidence) are among the trial's cited /
	// retrieved ids, per match (default the case's evidence_match). An
	// evidence_cited grader also needs the citations to be precise: at
	// least min_precision (default DefaultMinPrecision) of the distinct
	// cited ids are among the evidence ids, so citing everything fails.
	GraderEvidenceCited     = "evidence_cited"
	GraderEvidenceRetrieved = "evidence_retrieved"
	// GraderToolCalled: tool was called (with arguments whose compact JSON
	// matches pattern, when given) at least min and at most max times.
	GraderToolCalled = "tool_called"
	// GraderTrace: a trace measurement (metric) is within [min, max].
	GraderTrace = "trace"
	// GraderCode: a Python function in file (relative to the case file's
	// folder) decides, run in the sandbox with the transcript and outcome.
	GraderCode = "code"
	// GraderModel: a judge model scores the answer against rubric, asked
	// samples times (default DefaultJudgeSamples) in varied presentations;
	// passes only when every sample passes (a split is undecided: fails).
	GraderModel = "model"
	// GraderPairwise: a judge model compares the answer with reference,
	// asked in both orders; passes only when both orders agree the answer
	// wins or ties (orders that disagree are undecided: fails).
	GraderPairwise = "pairwise"
)

// DefaultMinPrecision is an evidence_cited grader's default min_precision:
// at least half of what a trial cites must be evidence the case's
// judgements mark relevant. An honest answer may cite a supporting page
// beside the judged one; an answer citing three unjudged pages for each
// judged one is a spray, not a grounded answer (docs/scoring.md,
// "Citation precision").
const DefaultMinPrecision = 0.5

// DefaultJudgeSamples is a model grader's default samples: two, one with
// the rubric before the answer and one after it, so a judge swayed by the
// order shows as a split verdict rather than as a pass.
const DefaultJudgeSamples = 2

// MaxJudgeSamples bounds samples (each is a paid judge call).
const MaxJudgeSamples = 9

// Trace grader metrics.
const (
	MetricCostUSD           = "cost_usd"            // the trial's cost (unknown cost fails)
	MetricTokens            = "tokens"              // input + output tokens
	MetricDurationMS        = "duration_ms"         // the trial's duration
	MetricSteps             = "steps"               // model calls
	MetricToolCalls         = "tool_calls"          // tool calls
	MetricErrorSpans        = "error_spans"         // spans with status error
	MetricCriticalPathShare = "critical_path_share" // the share of the critical path spent in spans named span
)

// Grader targets.
const (
	TargetAnswer = "answer" // the final answer (default)
	// TargetToolResultPrefix + NAME: the last result of tool NAME.
	TargetToolResultPrefix = "tool_result:"
	// TargetFilePrefix + PATH: a file the run wrote (transcript files).
	TargetFilePrefix = "file:"
)

// GraderTypes lists every grader type.
var GraderTypes = []string{GraderEquals, GraderContains, GraderRegex, GraderJSONSchema, GraderNumber,
	GraderEvidenceCited, GraderEvidenceRetrieved, GraderToolCalled, GraderTrace, GraderCode, GraderModel, GraderPairwise}

// TraceMetrics lists every trace grader metric.
var TraceMetrics = []string{MetricCostUSD, MetricTokens, MetricDurationMS, MetricSteps, MetricToolCalls, MetricErrorSpans, MetricCriticalPathShare}

// Grader is one check a case makes of a trial. Which fields apply depends
// on Type; a field that does not apply to the type is an error, so a typo'd
// grader never silently checks less than it says.
type Grader struct {
	Type string `json:"type"`
	// Name identifies the grader in results and reports (default: the
	// type); unique within a case.
	Name string `json:"name,omitempty"`
	// Required: the trial's success needs this grader to pass (default
	// true). An optional grader is reported but decides nothing.
	Required *bool `json:"required,omitempty"`
	// Target is what a deterministic grader reads: "answer" (default),
	// "tool_result:NAME" or "file:PATH".
	Target string `json:"target,omitempty"`

	Value      *string         `json:"value,omitempty"`       // equals, contains
	IgnoreCase bool            `json:"ignore_case,omitempty"` // equals, contains, regex
	Pattern    string          `json:"pattern,omitempty"`     // regex; number (capture group 1); tool_called (over the arguments' JSON)
	Schema     json.RawMessage `json:"schema,omitempty"`      // json_schema
	Expected   *float64        `json:"expected,omitempty"`    // number
	AbsTol     *float64        `json:"abs_tol,omitempty"`     // number
	RelTol     *float64        `json:"rel_tol,omitempty"`     // number

	Evidence []string `json:"evidence,omitempty"` // evidence_*: default the case's required_evidence
	Match    string   `json:"match,omitempty"`    // evidence_*: "all" or "any" (default the case's evidence_match)
	// MinPrecision (evidence_cited) is the share of the distinct cited ids
	// that must be evidence ids (default DefaultMinPrecision; 0 turns the
	// precision rule off).
	MinPrecision *float64 `json:"min_precision,omitempty"`

	Tool string   `json:"tool,omitempty"` // tool_called
	Min  *float64 `json:"min,omitempty"`  // tool_called (count, default 1), trace
	Max  *float64 `json:"max,omitempty"`  // tool_called (count), trace

	Metric string `json:"metric,omitempty"` // trace
	Span   string `json:"span,omitempty"`   // trace, metric critical_path_share

	File string `json:"file,omitempty"` // code: Python file, relative to the case file's folder

	Rubric    string `json:"rubric,omitempty"`    // model, pairwise
	Reference string `json:"reference,omitempty"` // pairwise: the answer to compare with
	Model     string `json:"model,omitempty"`     // model, pairwise: the judge model (default: the judge's)
	// Samples (model) is how many times the judge is asked, alternating
	// the rubric before and after the answer (default
	// DefaultJudgeSamples, at most MaxJudgeSamples).
	Samples *int `json:"samples,omitempty"`

	// Threshold is the score a code or model grader needs to pass
	// (default 1 for code, 0.5 for model).
	Threshold *float64 `json:"threshold,omitempty"`

	// Source is the code grader's file content, read by LoadCases; not
	// part of the format.
	Source []byte `json:"-"`
}

// Graders is a case's grader list. It decodes each grader strictly, so an
// unknown field is reported with the grader's index.
type Graders []Grader

// UnmarshalJSON implements json.Unmarshaler.
func (gs *Graders) UnmarshalJSON(b []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return err
	}
	out := make(Graders, len(raws))
	for i, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[i]); err != nil {
			err = describe(err)
			var fe *fieldError
			if errors.As(err, &fe) {
				return fieldErr(fmt.Sprintf("graders[%d].%s", i, fe.field), fe.err)
			}
			return fieldErr(fmt.Sprintf("graders[%d]", i), err)
		}
	}
	*gs = out
	return nil
}

// applies lists, per type, the optional fields it reads (type, name and
// required apply to every grader).
var applies = map[string][]string{
	GraderEquals:            {"target", "value", "ignore_case"},
	GraderContains:          {"target", "value", "ignore_case"},
	GraderRegex:             {"target", "pattern", "ignore_case"},
	GraderJSONSchema:        {"target", "schema"},
	GraderNumber:            {"target", "expected", "abs_tol", "rel_tol", "pattern"},
	GraderEvidenceCited:     {"evidence", "match", "min_precision"},
	GraderEvidenceRetrieved: {"evidence", "match"},
	GraderToolCalled:        {"tool", "pattern", "min", "max"},
	GraderTrace:             {"metric", "span", "min", "max"},
	GraderCode:              {"file", "threshold"},
	GraderModel:             {"rubric", "model", "threshold", "samples"},
	GraderPairwise:          {"rubric", "reference", "model"},
}

// MinCitationPrecision is the min_precision an evidence_cited grader
// holds citations to.
func (g *Grader) MinCitationPrecision() float64 {
	if g.MinPrecision != nil {
		return *g.MinPrecision
	}
	return DefaultMinPrecision
}

// JudgeSamples is how many times a model grader asks its judge.
func (g *Grader) JudgeSamples() int {
	if g.Samples != nil {
		return *g.Samples
	}
	return DefaultJudgeSamples
}

// IsRequired reports whether the grader decides the trial's success.
func (g *Grader) IsRequired() bool { return g.Required == nil || *g.Required }

// DisplayName is the grader's name, or its type when it has none.
func (g *Grader) DisplayName() string {
	if g.Name != "" {
		return g.Name
	}
	return g.Type
}

// Validate checks one grader; c is its case (for evidence defaults).
func (g *Grader) Validate(c *Case) error {
	allowed, ok := applies[g.Type]
	if !ok {
		return fmt.Errorf("type %q is not a grader type (want one of %s)", g.Type, strings.Join(GraderTypes, ", "))
	}
	set, err := setFields(g)
	if err != nil {
		return err
	}
	for _, f := range set {
		if f == "type" || f == "name" || f == "required" {
			continue
		}
		if !slices.Contains(allowed, f) {
			return fieldErr(f, fmt.Errorf("does not apply to a %s grader (it reads %s)", g.Type, strings.Join(allowed, ", ")))
		}
	}
	if g.Target != "" && g.Target != TargetAnswer {
		name, isTool := strings.CutPrefix(g.Target, TargetToolResultPrefix)
		file, isFile := strings.CutPrefix(g.Target, TargetFilePrefix)
		switch {
		case isTool && name != "":
		case isFile && file != "":
		default:
			return fieldErr("target", fmt.Errorf("%q: want %q, %q or %q", g.Target, TargetAnswer, TargetToolResultPrefix+"NAME", TargetFilePrefix+"PATH"))
		}
	}
	need := func(field string, ok bool) error {
		if !ok {
			return fieldErr(field, fmt.Errorf("required for a %s grader", g.Type))
		}
		return nil
	}
	switch g.Type {
	case GraderEquals, GraderContains:
		return need("value", g.Value != nil)
	case GraderRegex:
		if err := need("pattern", g.Pattern != ""); err != nil {
			return err
		}
		if _, err := regexp.Compile(g.Pattern); err != nil {
			return fieldErr("pattern", err)
		}
	case GraderJSONSchema:
		if err := need("schema", len(g.Schema) > 0); err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(g.Schema, &v); err != nil {
			return fieldErr("schema", err)
		}
		if _, ok := v.(map[string]any); !ok {
			if _, ok := v.(bool); !ok {
				return fieldErr("schema", errors.New("a JSON Schema is an object or a boolean"))
			}
		}
	case GraderNumber:
		if err := need("expected", g.Expected != nil); err != nil {
			return err
		}
		if !finite(*g.Expected) {
			return fieldErr("expected", errors.New("must be a finite number"))
		}
		for name, v := range map[string]*float64{"abs_tol": g.AbsTol, "rel_tol": g.RelTol} {
			if v != nil && !(finite(*v) && *v >= 0) {
				return fieldErr(name, fmt.Errorf("must be a non-negative number, got %v", *v))
			}
		}
		if g.Pattern != "" {
			re, err := regexp.Compile(g.Pattern)
			if err != nil {
				return fieldErr("pattern", err)
			}
			if re.NumSubexp() < 1 {
				return fieldErr("pattern", errors.New("needs a capture group around the number"))
			}
		}
	case GraderEvidenceCited, GraderEvidenceRetrieved:
		if len(g.Evidence) == 0 && len(c.RequiredEvidence) == 0 {
			return fieldErr("evidence", errors.New("required when the case lists no required_evidence"))
		}
		if err := noEmpty("evidence", g.Evidence); err != nil {
			return err
		}
		switch g.Match {
		case "", EvidenceAll, EvidenceAny:
		default:
			return fieldErr("match", fmt.Errorf("must be %q or %q, got %q", EvidenceAll, EvidenceAny, g.Match))
		}
		if p := g.MinPrecision; p != nil && !(*p >= 0 && *p <= 1) {
			return fieldErr("min_precision", fmt.Errorf("must be in [0, 1], got %v", *p))
		}
	case GraderToolCalled:
		if err := need("tool", g.Tool != ""); err != nil {
			return err
		}
		if g.Pattern != "" {
			if _, err := regexp.Compile(g.Pattern); err != nil {
				return fieldErr("pattern", err)
			}
		}
		if err := bounds(g, true); err != nil {
			return err
		}
	case GraderTrace:
		if !slices.Contains(TraceMetrics, g.Metric) {
			return fieldErr("metric", fmt.Errorf("%q: want one of %s", g.Metric, strings.Join(TraceMetrics, ", ")))
		}
		if (g.Metric == MetricCriticalPathShare) != (g.Span != "") {
			return fieldErr("span", errors.New("required with metric critical_path_share, and only with it"))
		}
		if g.Min == nil && g.Max == nil {
			return fieldErr("max", errors.New("a trace grader needs min, max or both"))
		}
		if err := bounds(g, false); err != nil {
			return err
		}
	case GraderCode:
		if err := need("file", g.File != ""); err != nil {
			return err
		}
		if clean := path.Clean(g.File); path.IsAbs(g.File) || clean != g.File || strings.HasPrefix(clean, "../") || clean == ".." {
			return fieldErr("file", fmt.Errorf("%q: want a clean path inside the case file's folder (e.g. graders/check.py)", g.File))
		}
		if !strings.HasSuffix(g.File, ".py") {
			return fieldErr("file", fmt.Errorf("%q: a code grader is a Python file (.py)", g.File))
		}
	case GraderModel:
		if err := need("rubric", strings.TrimSpace(g.Rubric) != ""); err != nil {
			return err
		}
		if n := g.Samples; n != nil && (*n < 1 || *n > MaxJudgeSamples) {
			return fieldErr("samples", fmt.Errorf("must be 1 to %d, got %d", MaxJudgeSamples, *n))
		}
	case GraderPairwise:
		if err := need("rubric", strings.TrimSpace(g.Rubric) != ""); err != nil {
			return err
		}
		if err := need("reference", strings.TrimSpace(g.Reference) != ""); err != nil {
			return err
		}
	}
	if t := g.Threshold; t != nil && !(*t >= 0 && *t <= 1) {
		return fieldErr("threshold", fmt.Errorf("must be in [0, 1], got %v", *t))
	}
	return nil
}

func bounds(g *Grader, count bool) error {
	for name, v := range map[string]*float64{"min": g.Min, "max": g.Max} {
		if v == nil {
			continue
		}
		if !finite(*v) || *v < 0 {
			return fieldErr(name, fmt.Errorf("must be a non-negative number, got %v", *v))
		}
		if count && *v != math.Trunc(*v) {
			return fieldErr(name, fmt.Errorf("is a call count, got %v", *v))
		}
	}
	if g.Min != nil && g.Max != nil && *g.Min > *g.Max {
		return fieldErr("min", fmt.Errorf("%v is above max %v", *g.Min, *g.Max))
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// setFields lists the JSON fields a grader sets, by marshalling it (every
// optional field is omitempty).
func setFields(g *Grader) ([]string, error) {
	b, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, nil
}

func validateGraders(c *Case) error {
	seen := map[string]int{}
	for i := range c.Graders {
		g := &c.Graders[i]
		if err := g.Validate(c); err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return fieldErr(fmt.Sprintf("graders[%d].%s", i, fe.field), fe.err)
			}
			return fieldErr(fmt.Sprintf("graders[%d]", i), err)
		}
		name := g.DisplayName()
		if prev, dup := seen[name]; dup {
			return fieldErr(fmt.Sprintf("graders[%d].name", i), fmt.Errorf("%q is also graders[%d]'s name: give each grader of a case its own name", name, prev))
		}
		seen[name] = i
	}
	return nil
}

// Grade is one grader's verdict on one trial.
type Grade struct {
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Required bool    `json:"required"`
	Passed   bool    `json:"passed"`
	Score    float64 `json:"score"`
	Reason   string  `json:"reason"`
	// Error says the grader could not reach a verdict (a code grader that
	// crashed on load, a judge whose answer did not parse); the grade then
	// fails.
	Error string `json:"error,omitempty"`
	// Output is what a code grader printed (stdout, then stderr; capped).
	Output string `json:"output,omitempty"`
	// Sandbox is the code grader's sandbox account: how its process ended
	// and the kernel's evidence of limits reached.
	Sandbox *GraderSandbox `json:"sandbox,omitempty"`
	// Judge is a model grader's account of its judge: its model, label,
	// tokens and cost (the judge's, never the agent's).
	Judge *JudgeUsage `json:"judge,omitempty"`
}

// GraderSandbox is how a code grader's sandboxed process ended.
type GraderSandbox struct {
	Reason   string   `json:"reason"` // the sandbox's end reason (exit, timeout, memory, ...)
	ExitCode int      `json:"exit_code"`
	Evidence []string `json:"evidence,omitempty"`
}

// JudgeUsage is what a model grader spent.
type JudgeUsage struct {
	ModelLabel   string   `json:"model_label"` // "scripted" for the scripted judge, "live" for a provider
	Provider     string   `json:"provider,omitempty"`
	Model        string   `json:"model,omitempty"`
	Calls        int      `json:"calls"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd"` // nil: unknown (an unpriced judge model)
	// Orders are a pairwise judgment's verdicts per order ("answer first:
	// A", "reference first: B"), so a position-biased judge is visible.
	Orders []string `json:"orders,omitempty"`
	// Replies are every judge call's raw reply with what produced it, in
	// the order asked: a rescore re-decides the grade from them (the
	// undecided and agreement rules) without calling a model.
	Replies []JudgeCall `json:"replies,omitempty"`
	// Disagreed: the pairwise orders, or the model grader's samples, did
	// not agree (the grade is undecided and fails); nil when the grade
	// records no decision (a judge error, or a grade from before replies
	// were recorded).
	Disagreed *bool `json:"disagreed,omitempty"`
}

// JudgeCall is one judge call of a grade: how the material was presented,
// the prompt's SHA-256 (the prompt itself is rebuilt from the case), the
// reply as received, and its account.
type JudgeCall struct {
	// Presentation names the order asked: "answer first" / "reference
	// first" (pairwise), "rubric first" / "answer first" (model).
	Presentation string   `json:"presentation"`
	PromptSHA256 string   `json:"prompt_sha256"`
	ModelLabel   string   `json:"model_label"`
	Model        string   `json:"model,omitempty"`
	Reply        string   `json:"reply"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	CostUSD      *float64 `json:"cost_usd"`
}

// Transcript is what a run did, as graders see it: the task, the final
// answer, each tool call with its result, and the files it wrote. It comes
// from the trial itself, its journal or its trace.
type Transcript struct {
	Task      string     `json:"task,omitempty"`
	Answer    string     `json:"answer"`
	Citations []string   `json:"citations,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Files the run wrote into its workspace (path → content; the last
	// write wins), e.g. the coding agent's write_file calls.
	Files map[string]string `json:"files,omitempty"`
	// Steps counts the run's model calls (0: unknown).
	Steps int `json:"steps,omitempty"`
	// Source says where the transcript came from ("trial", "journal
	// FILE run ID", "trace ID").
	Source string `json:"source,omitempty"`
}

// ToolCall is one tool call in a transcript.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Result    string          `json:"result"`
	IsError   bool            `json:"is_error,omitempty"`
}
