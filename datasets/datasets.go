// Package datasets defines Loomwork's evaluation data formats: cases (what a
// task must achieve) and trials (what one attempt did), each one JSON object
// per line, with JSON Schema files in schema/. Decoding is strict: an unknown
// field, a missing required field, a wrong type, a truncated line or a
// duplicate id is an error that names the file, the line and the field, and
// nothing after a bad line is half-accepted.
//
// It also holds the judged retrieval set Loomwork ships (mkdocs-material/,
// embedded; see ShippedFS). The package is formats only: reading facts out of
// a trace (scorer.DeriveFromTrace) is the scorer's, and judged query sets
// are retrieval's (retrieval/judged).
package datasets

import (
	"errors"
	"fmt"
	"strings"

	"github.com/loomwork/loomwork/store"
)

// Case is one evaluation task.
type Case struct {
	ID   string `json:"id"`
	Task string `json:"task"`
	// ExpectedTools are tool names a good run uses; tool precision and
	// recall are measured against them. Empty: tools are not scored.
	ExpectedTools []string `json:"expected_tools,omitempty"`
	// RequiredEvidence are evidence ids (document ids, URLs) the answer
	// must rest on. Empty: evidence is not scored.
	RequiredEvidence []string `json:"required_evidence,omitempty"`
	// EvidenceMatch is "all" (default: every required id must be cited to
	// pass) or "any" (one is enough, e.g. several pages answer it).
	EvidenceMatch string  `json:"evidence_match,omitempty"`
	Budgets       Budgets `json:"budgets,omitzero"`
	// MustPass marks a case a gate fails on whenever it does not pass.
	MustPass bool     `json:"must_pass,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	// Group names what the case shares with other cases that can fail
	// together in one run (a tool, a data source, a topic), e.g.
	// "tool:search". Comparisons then treat a group, not a case, as the
	// unit of the suite interval (cluster-robust variance). Empty: the
	// case is a group of its own.
	Group string `json:"group,omitempty"`
	// Graders decide the outcome: a trial succeeds when every required
	// grader passed (and the run finished). A case without graders keeps
	// the evidence rule: the required evidence cited, per evidence_match
	// (an implicit evidence_cited grader).
	Graders Graders `json:"graders,omitempty"`

	// Line is where the decoder read the case (0 if not from a file).
	Line int `json:"-"`
}

// Budgets are per-trial limits; nil means no limit.
type Budgets struct {
	MS     *float64 `json:"ms,omitempty"`
	USD    *float64 `json:"usd,omitempty"`
	Tokens *int64   `json:"tokens,omitempty"`
}

// Evidence match modes.
const (
	EvidenceAll = "all"
	EvidenceAny = "any"
)

// Trial is one attempt at a case.
type Trial struct {
	CaseID string `json:"case_id"`
	Trial  int    `json:"trial"`
	// ModelLabel says what produced the run: "live" for a real provider,
	// "scripted" for a scripted model, "replayed" for a journal replay.
	// Reports always show it. It may be left out when the provenance says
	// it (a journal reference or inline spans): it is then derived, and a
	// label that contradicts the provenance is refused either way.
	ModelLabel string `json:"model_label,omitempty"`
	Model      string `json:"model,omitempty"`
	// Agent names the agent that ran the trial (e.g. "research",
	// "coding"); reports break their rates down by it.
	Agent string `json:"agent,omitempty"`

	// Provenance: at least one of these.
	TraceID string       `json:"trace_id,omitempty"`
	Spans   []store.Span `json:"spans,omitempty"`
	Journal *JournalRef  `json:"journal,omitempty"`

	// Success is whether the task was accomplished. When absent it is
	// derived from the trace (inline spans, or the stored trace of TraceID
	// when the scorer is given a store); a trial with neither is invalid.
	Success *bool `json:"success,omitempty"`

	// Divergence, set by a replay, says the run did not reproduce its
	// journal (a divergence code and message, e.g. "tool_result_mismatch:
	// step 3 …"). Such a trial fails whatever else it claims: its
	// evidence and answer are not what the journal recorded.
	Divergence string `json:"divergence,omitempty"`

	ToolsCalled       []string `json:"tools_called,omitempty"`
	EvidenceRetrieved []string `json:"evidence_retrieved,omitempty"`
	EvidenceCited     []string `json:"evidence_cited,omitempty"`

	// Transcript is what the run did, for graders. When absent it comes
	// from the journal (a journal reference) or the trace (spans).
	Transcript *Transcript `json:"transcript,omitempty"`
	// Grades are the graders' verdicts, written by grading (loom-eval
	// grade, or score, which grades what is not graded yet).
	Grades []Grade `json:"grades,omitempty"`

	// Measurements. DurationMS and Tokens nil: unknown. CostUSD nil: unknown
	// (never read as zero).
	DurationMS *float64 `json:"duration_ms,omitempty"`
	CostUSD    *float64 `json:"cost_usd,omitempty"`
	Tokens     *int64   `json:"tokens,omitempty"`

	// Line is where the decoder read the trial (0 if not from a file).
	Line int `json:"-"`
}

// JournalRef points at a run in a replay journal.
type JournalRef struct {
	Path  string `json:"path"`
	RunID string `json:"run_id"`
}

// Model labels.
const (
	LabelLive     = "live"
	LabelScripted = "scripted"
	LabelReplayed = "replayed"
)

// LineError locates a problem in a JSONL file.
type LineError struct {
	File  string
	Line  int
	Field string // JSON path of the offending field; "" for the whole line
	Err   error
}

func (e *LineError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s:%d: field %q: %v", e.File, e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Validate checks a case's own fields. It returns a *LineError-free error
// naming the field; decoders wrap it with the position.
func (c *Case) Validate() error {
	if c.ID == "" {
		return fieldErr("id", errors.New("required, must be non-empty"))
	}
	if c.Task == "" {
		return fieldErr("task", errors.New("required, must be non-empty"))
	}
	switch c.EvidenceMatch {
	case "", EvidenceAll, EvidenceAny:
	default:
		return fieldErr("evidence_match", fmt.Errorf("must be %q or %q, got %q", EvidenceAll, EvidenceAny, c.EvidenceMatch))
	}
	if err := validateGroup(c.Group); err != nil {
		return err
	}
	if err := noEmpty("expected_tools", c.ExpectedTools); err != nil {
		return err
	}
	if err := noEmpty("required_evidence", c.RequiredEvidence); err != nil {
		return err
	}
	if b := c.Budgets.MS; b != nil && !(*b > 0) {
		return fieldErr("budgets.ms", fmt.Errorf("must be positive, got %v", *b))
	}
	if b := c.Budgets.USD; b != nil && !(*b >= 0) {
		return fieldErr("budgets.usd", fmt.Errorf("must be non-negative, got %v", *b))
	}
	if b := c.Budgets.Tokens; b != nil && *b <= 0 {
		return fieldErr("budgets.tokens", fmt.Errorf("must be positive, got %v", *b))
	}
	return validateGraders(c)
}

// Validate checks a trial's own fields.
func (t *Trial) Validate() error {
	if t.CaseID == "" {
		return fieldErr("case_id", errors.New("required, must be non-empty"))
	}
	if t.Trial < 0 {
		return fieldErr("trial", fmt.Errorf("must be non-negative, got %d", t.Trial))
	}
	if t.ModelLabel == "" && t.Journal == nil && len(t.Spans) == 0 {
		return fieldErr("model_label", errors.New(`required unless a journal reference or inline spans give it (e.g. "live", "scripted", "replayed")`))
	}
	if t.TraceID == "" && len(t.Spans) == 0 && t.Journal == nil {
		return fieldErr("trace_id", errors.New("a trial needs a trace_id, inline spans or a journal reference"))
	}
	if t.Journal != nil && (t.Journal.Path == "" || t.Journal.RunID == "") {
		return fieldErr("journal", errors.New("needs both path and run_id"))
	}
	if t.Success == nil && len(t.Spans) == 0 && t.TraceID == "" {
		return fieldErr("success", errors.New("required unless the trace is given (inline spans, or a trace_id to load from a store)"))
	}
	if t.TraceID != "" {
		for i, s := range t.Spans {
			if s.TraceID != t.TraceID {
				return fieldErr(fmt.Sprintf("spans[%d].trace_id", i), fmt.Errorf("%q differs from the trial's trace_id %q", s.TraceID, t.TraceID))
			}
		}
	}
	if d := t.DurationMS; d != nil && *d < 0 {
		return fieldErr("duration_ms", fmt.Errorf("must be non-negative, got %v", *d))
	}
	if c := t.CostUSD; c != nil && *c < 0 {
		return fieldErr("cost_usd", fmt.Errorf("must be non-negative, got %v", *c))
	}
	if n := t.Tokens; n != nil && *n < 0 {
		return fieldErr("tokens", fmt.Errorf("must be non-negative, got %d", *n))
	}
	seen := map[string]int{}
	for i, g := range t.Grades {
		switch {
		case g.Name == "":
			return fieldErr(fmt.Sprintf("grades[%d].name", i), errors.New("required, must be non-empty"))
		case !(g.Score >= 0 && g.Score <= 1):
			return fieldErr(fmt.Sprintf("grades[%d].score", i), fmt.Errorf("must be in [0, 1], got %v", g.Score))
		}
		if prev, dup := seen[g.Name]; dup {
			return fieldErr(fmt.Sprintf("grades[%d].name", i), fmt.Errorf("%q is also grades[%d]'s name", g.Name, prev))
		}
		seen[g.Name] = i
	}
	for _, f := range []struct {
		name string
		v    []string
	}{{"tools_called", t.ToolsCalled}, {"evidence_retrieved", t.EvidenceRetrieved}, {"evidence_cited", t.EvidenceCited}} {
		if err := noEmpty(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// MaxGroupLen bounds a case group's name.
const MaxGroupLen = 100

// validateGroup: a group is a short printable name (letters, digits and
// "_.:/@+-", starting with a letter or digit), so that a typo such as a
// trailing space does not silently split one group into two.
func validateGroup(g string) error {
	if g == "" {
		return nil
	}
	if len(g) > MaxGroupLen {
		return fieldErr("group", fmt.Errorf("%d bytes, at most %d", len(g), MaxGroupLen))
	}
	for i, r := range g {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if i > 0 && strings.ContainsRune("_.:/@+-", r) {
			ok = true
		}
		if !ok {
			return fieldErr("group", fmt.Errorf("%q: character %q at byte %d; a group is letters, digits and _.:/@+- (starting with a letter or digit), e.g. \"tool:search\"", g, r, i))
		}
	}
	return nil
}

type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return fmt.Sprintf("field %q: %v", e.field, e.err) }
func (e *fieldError) Unwrap() error { return e.err }

func fieldErr(field string, err error) error { return &fieldError{field: field, err: err} }

func noEmpty(field string, v []string) error {
	for i, s := range v {
		if s == "" {
			return fieldErr(fmt.Sprintf("%s[%d]", field, i), errors.New("empty string"))
		}
	}
	return nil
}
