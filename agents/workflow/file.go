package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// File is a workflow declared in a JSON file (docs/workflow.md "Write your
// own workflow"; the schema is agents/workflow/schema/workflow.schema.json).
// DecodeFile reads one strictly; Compile turns it into a Workflow.
type File struct {
	// Name names the workflow (journaled; a run resumes only under the
	// same name and steps).
	Name        string     `json:"name"`
	Description string     `json:"description,omitempty"`
	Steps       []FileStep `json:"steps"`
}

// FileStep is one step of a File. Which fields a step may set depends on
// its kind (see DecodeFile).
type FileStep struct {
	// ID names the step: letters, digits and underscores, starting with a
	// letter, so a template reads its output as {{.Steps.ID.Output}}.
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Needs are the steps that must succeed first.
	Needs []string `json:"needs,omitempty"`
	// Retries after a failed attempt (0..MaxFileRetries), waiting Backoff
	// before the first and twice as long before each further one.
	Retries int      `json:"retries,omitempty"`
	Backoff Duration `json:"backoff,omitempty"`
	// Timeout bounds one attempt (0: none).
	Timeout Duration `json:"timeout,omitempty"`
	// Input is a text/template (see TemplateData) rendered when the step
	// runs: an agent's task, a peer's message, a tool's input.
	Input string `json:"input,omitempty"`
	// Agent (kind agent) is the reference agent: research or coding.
	Agent   string        `json:"agent,omitempty"`
	Options *AgentOptions `json:"options,omitempty"`
	// URL (kind a2a) is the peer's base URL (its Agent Card is at
	// URL/.well-known/agent-card.json).
	URL string `json:"url,omitempty"`
	// Tool (kind tool) is a tool of FileTools.
	Tool string `json:"tool,omitempty"`
	// Prompt (kind approval) is a template: what the human is asked.
	Prompt string `json:"prompt,omitempty"`
}

// AgentOptions are an agent step's options.
type AgentOptions struct {
	// MaxSteps is the run's step limit (0: the runtime's default).
	MaxSteps int `json:"max_steps,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("1.5s",
// "2m").
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &durationError{errors.New(`want a duration string such as "2s" or "1m30s"`)}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &durationError{fmt.Errorf(`want a duration such as "2s" or "1m30s": %w`, err)}
	}
	*d = Duration(v)
	return nil
}

// durationError is a Duration that does not decode; the step's decoder
// finds which field it was.
type durationError struct{ err error }

func (e *durationError) Error() string { return e.err.Error() }
func (e *durationError) Unwrap() error { return e.err }

// durationField names the duration field of raw (a step) that does not
// decode.
func durationField(raw []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	for _, f := range []string{"backoff", "timeout"} {
		if v, ok := m[f]; ok {
			var d Duration
			if d.UnmarshalJSON(v) != nil {
				return f
			}
		}
	}
	return ""
}

// Reference agents an agent step may name.
const (
	AgentResearch = "research"
	AgentCoding   = "coding"
)

// FileTools are the tools a tool step may name. Each takes the rendered
// input as its one text argument: echo returns it (to assemble a report
// from earlier outputs); search_docs searches the research agent's index
// (the input is the query; the output the hits as JSON); read_doc reads
// one document of it by id (an unknown id fails the attempt).
var FileTools = []string{"echo", "search_docs", "read_doc"}

// Limits of a workflow file.
const (
	MaxFileBytes    = 1 << 20
	MaxFileSteps    = 256
	MaxFileRetries  = 10
	MaxFileBackoff  = maxBackoff
	MaxFileTimeout  = 24 * time.Hour
	MaxTemplateSize = 64 << 10
	MaxRenderBytes  = 1 << 20 // a rendered template
	MaxAgentSteps   = 50
)

var (
	stepIDRE       = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)
	workflowNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
)

// FileError is one problem with a workflow file: the file, the step (its
// id, or "steps[I]" before it has one; "" for the workflow's own fields)
// and the field.
type FileError struct {
	File, Step, Field string
	Err               error
}

func (e *FileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workflow file %s", e.File)
	if e.Step != "" {
		fmt.Fprintf(&b, ": step %s", e.Step)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// ReadFile reads and decodes the workflow file at path.
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workflow file %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("workflow file %s: %w", path, err)
	}
	return DecodeFile(path, b)
}

// DecodeFile decodes a workflow file strictly; name is the file's name in
// errors. Unknown fields, a field its kind does not take, a missing
// required field, a duplicate id, an unknown or cyclic dependency, a bad
// template or one that reads a step it does not need (directly or not)
// are errors (*FileError, joined), each naming the step and the field.
func DecodeFile(name string, b []byte) (*File, error) {
	ferr := func(step, field string, err error) error {
		return &FileError{File: name, Step: step, Field: field, Err: err}
	}
	if len(b) > MaxFileBytes {
		return nil, ferr("", "", fmt.Errorf("larger than %d bytes", MaxFileBytes))
	}
	var top struct {
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Steps       []json.RawMessage `json:"steps"`
	}
	if err := strictDecode(b, &top); err != nil {
		return nil, ferr("", fieldOf(err), err)
	}
	f := &File{Name: top.Name, Description: top.Description}
	var errs []error
	if !workflowNameRE.MatchString(f.Name) {
		errs = append(errs, ferr("", "name", fmt.Errorf("want letters, digits, '_', '.', '-' (1..128, starting with a letter or digit), got %q", f.Name)))
	}
	if len(top.Steps) == 0 {
		errs = append(errs, ferr("", "steps", errors.New("want at least one step")))
	}
	if len(top.Steps) > MaxFileSteps {
		return nil, ferr("", "steps", fmt.Errorf("%d steps, at most %d", len(top.Steps), MaxFileSteps))
	}
	for i, raw := range top.Steps {
		var s FileStep
		if err := strictDecode(raw, &s); err != nil {
			var peek struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(raw, &peek)
			field := fieldOf(err)
			var de *durationError
			if errors.As(err, &de) {
				field = durationField(raw)
			}
			errs = append(errs, ferr(stepLabel(i, peek.ID), field, err))
			continue
		}
		if len(s.Needs) == 0 {
			s.Needs = nil
		}
		f.Steps = append(f.Steps, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := f.validate(name); err != nil {
		return nil, err
	}
	return f, nil
}

func stepLabel(i int, id string) string {
	if id != "" && stepIDRE.MatchString(id) {
		return fmt.Sprintf("%q", id)
	}
	return fmt.Sprintf("steps[%d]", i)
}

// strictDecode decodes one JSON value into v: unknown fields and trailing
// data are errors.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSON(err)
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// fieldError is a JSON error that names its field.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func describeJSON(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &fieldError{field: te.Field, err: fmt.Errorf("want %s, got %s", te.Type, te.Value)}
	}
	const unknown = "json: unknown field "
	if msg := err.Error(); strings.HasPrefix(msg, unknown) {
		f := strings.Trim(strings.TrimPrefix(msg, unknown), `"`)
		return &fieldError{field: f, err: errors.New("unknown field")}
	}
	// A json.Unmarshaler's error (Duration) names no field in the
	// standard library's message; the step's decoder wraps it.
	return err
}

func fieldOf(err error) string {
	var fe *fieldError
	if errors.As(err, &fe) {
		return fe.field
	}
	return ""
}

// validate checks the decoded file's steps and graph.
func (f *File) validate(name string) error {
	var errs []error
	add := func(s *FileStep, field string, format string, a ...any) {
		errs = append(errs, &FileError{File: name, Step: fmt.Sprintf("%q", s.ID), Field: field, Err: fmt.Errorf(format, a...)})
	}
	ids := map[string]int{}
	for i := range f.Steps {
		s := &f.Steps[i]
		if !stepIDRE.MatchString(s.ID) {
			errs = append(errs, &FileError{File: name, Step: fmt.Sprintf("steps[%d]", i), Field: "id",
				Err: fmt.Errorf("want a letter then letters, digits or '_' (at most 64), got %q", s.ID)})
			continue
		}
		if _, dup := ids[s.ID]; dup {
			add(s, "id", "declared twice (steps[%d] and steps[%d])", ids[s.ID], i)
			continue
		}
		ids[s.ID] = i
		f.Steps[i].validateKind(add)
	}
	for i := range f.Steps {
		s := &f.Steps[i]
		seen := map[string]bool{}
		for _, n := range s.Needs {
			switch _, ok := ids[n]; {
			case n == s.ID:
				add(s, "needs", "needs itself")
			case !ok:
				add(s, "needs", "needs unknown step %q", n)
			case seen[n]:
				add(s, "needs", "lists %q twice", n)
			}
			seen[n] = true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	steps := make([]Step, len(f.Steps))
	for i, s := range f.Steps {
		steps[i] = Step{Name: s.ID, Requires: s.Needs}
	}
	if _, err := topo(steps); err != nil {
		var ce *CycleError
		first := ""
		if errors.As(err, &ce) && len(ce.Steps) > 0 {
			first = fmt.Sprintf("%q", ce.Steps[0])
		}
		return &FileError{File: name, Step: first, Field: "needs", Err: err}
	}
	anc := ancestors(f.Steps)
	for i := range f.Steps {
		s := &f.Steps[i]
		for _, field := range []string{"input", "prompt"} {
			text := s.Input
			if field == "prompt" {
				text = s.Prompt
			}
			if text == "" {
				continue
			}
			if _, err := parseTemplate(s.ID, field, text, anc[s.ID]); err != nil {
				add(s, field, "%v", err)
			}
		}
	}
	return errors.Join(errs...)
}

// validateKind checks the fields s's kind requires and forbids.
func (s *FileStep) validateKind(add func(s *FileStep, field, format string, a ...any)) {
	set := map[string]bool{"input": s.Input != "", "agent": s.Agent != "", "options": s.Options != nil,
		"url": s.URL != "", "tool": s.Tool != "", "prompt": s.Prompt != ""}
	allowed := map[Kind][]string{
		KindAgent:    {"input", "agent", "options"},
		KindA2A:      {"input", "url"},
		KindTool:     {"input", "tool"},
		KindApproval: {"prompt"},
	}
	fields, ok := allowed[s.Kind]
	if !ok {
		add(s, "kind", "unknown kind %q (want agent, a2a, tool or approval)", s.Kind)
		return
	}
	for _, f := range []string{"input", "agent", "options", "url", "tool", "prompt"} {
		switch {
		case set[f] && !slices.Contains(fields, f):
			add(s, f, "a %s step does not take %s", s.Kind, f)
		case !set[f] && slices.Contains(fields, f) && f != "options":
			add(s, f, "a %s step requires %s", s.Kind, f)
		}
	}
	switch {
	case s.Retries < 0 || s.Retries > MaxFileRetries:
		add(s, "retries", "want 0..%d, got %d", MaxFileRetries, s.Retries)
	case s.Backoff < 0 || time.Duration(s.Backoff) > MaxFileBackoff:
		add(s, "backoff", "want 0..%s, got %s", MaxFileBackoff, time.Duration(s.Backoff))
	case s.Timeout < 0 || time.Duration(s.Timeout) > MaxFileTimeout:
		add(s, "timeout", "want 0..%s, got %s", MaxFileTimeout, time.Duration(s.Timeout))
	case s.Kind == KindApproval && (s.Retries != 0 || s.Backoff != 0 || s.Timeout != 0):
		add(s, "retries", "an approval step takes no retries, backoff or timeout (it waits for a human)")
	}
	switch s.Kind {
	case KindAgent:
		if s.Agent != "" && s.Agent != AgentResearch && s.Agent != AgentCoding {
			add(s, "agent", "unknown reference agent %q (want research or coding)", s.Agent)
		}
		if s.Options != nil && (s.Options.MaxSteps < 0 || s.Options.MaxSteps > MaxAgentSteps) {
			add(s, "options.max_steps", "want 0..%d, got %d", MaxAgentSteps, s.Options.MaxSteps)
		}
	case KindA2A:
		if s.URL != "" {
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
				add(s, "url", "want an absolute http or https base URL without credentials, got %q", s.URL)
			}
		}
	case KindTool:
		if s.Tool != "" && !slices.Contains(FileTools, s.Tool) {
			add(s, "tool", "unknown tool %q (want one of %s)", s.Tool, strings.Join(FileTools, ", "))
		}
	}
}

// ancestors maps each step to the steps it needs directly or indirectly.
func ancestors(steps []FileStep) map[string]map[string]bool {
	needs := map[string][]string{}
	for _, s := range steps {
		needs[s.ID] = s.Needs
	}
	out := map[string]map[string]bool{}
	var visit func(id string) map[string]bool
	visit = func(id string) map[string]bool {
		if a, ok := out[id]; ok {
			return a
		}
		a := map[string]bool{}
		out[id] = a // the graph is acyclic: no step reaches itself
		for _, n := range needs[id] {
			a[n] = true
			for k := range visit(n) {
				a[k] = true
			}
		}
		return a
	}
	for _, s := range steps {
		visit(s.ID)
	}
	return out
}

// TemplateData is what an input or prompt template sees: the workflow's
// input (--input), the run id, and the output of each step the step needs
// directly or indirectly ({{.Steps.ID.Output}}). Templates are Go
// text/template with no functions beyond the package's built-ins; a
// template may read only these fields.
type TemplateData struct {
	Input string
	RunID string
	Steps map[string]StepData
}

// StepData is an earlier step's output as a template sees it.
type StepData struct {
	Output string
}

// stepTemplate is a parsed template and the steps it reads.
type stepTemplate struct {
	tmpl *template.Template
	// reads are the steps the template names ({{.Steps.ID.Output}});
	// readsAll is set when it uses .Steps (or the whole data) another
	// way, so it may read every step it needs.
	reads    []string
	readsAll bool
}

// parseTemplate parses a step's template and checks the fields it reads:
// .Input, .RunID and .Steps.ID.Output with ID among anc.
func parseTemplate(step, field, text string, anc map[string]bool) (*stepTemplate, error) {
	if len(text) > MaxTemplateSize {
		return nil, fmt.Errorf("template of %d bytes, at most %d", len(text), MaxTemplateSize)
	}
	t, err := template.New(step + "." + field).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	st := &stepTemplate{tmpl: t}
	var problems []string
	check := func(idents []string) {
		switch {
		case len(idents) == 0:
			st.readsAll = true
		case idents[0] == "Input" || idents[0] == "RunID":
			if len(idents) > 1 {
				problems = append(problems, fmt.Sprintf(".%s has no field %s", idents[0], idents[1]))
			}
		case idents[0] == "Steps":
			switch {
			case len(idents) == 1:
				st.readsAll = true
			case !anc[idents[1]]:
				problems = append(problems, fmt.Sprintf("reads step %q, which is not among the steps it needs (directly or through them)", idents[1]))
			case len(idents) == 2:
				st.readsAll = true // the step's data as a whole
				st.reads = append(st.reads, idents[1])
			case idents[2] != "Output" || len(idents) > 3:
				problems = append(problems, fmt.Sprintf(".Steps.%s.%s: a step's data has only .Output", idents[1], strings.Join(idents[2:], ".")))
			default:
				st.reads = append(st.reads, idents[1])
			}
		case idents[0] == "range over a number":
			problems = append(problems, "range over a number is not allowed (a template renders text from its fields; it does not loop)")
		default:
			problems = append(problems, fmt.Sprintf("unknown field .%s (want .Input, .RunID or .Steps.ID.Output)", strings.Join(idents, ".")))
		}
	}
	for _, tree := range t.Templates() {
		if tree.Tree != nil {
			walkTemplate(tree.Tree.Root, check)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("template: %s", strings.Join(problems, "; "))
	}
	return st, nil
}

// walkTemplate calls check with the identifiers of every field chain
// rooted at the data (.A.B, $.A.B) and with none for a bare dot.
func walkTemplate(n parse.Node, check func([]string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkTemplate(c, check)
		}
	case *parse.ActionNode:
		walkTemplate(n.Pipe, check)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkTemplate(c, check)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkTemplate(a, check)
		}
	case *parse.FieldNode:
		check(n.Ident)
	case *parse.VariableNode:
		if len(n.Ident) > 0 && n.Ident[0] == "$" {
			check(n.Ident[1:])
		}
	case *parse.DotNode:
		check(nil)
	case *parse.ChainNode:
		walkTemplate(n.Node, check)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, check)
	case *parse.RangeNode:
		if n.Pipe != nil && len(n.Pipe.Cmds) == 1 && len(n.Pipe.Cmds[0].Args) == 1 {
			if _, isNumber := n.Pipe.Cmds[0].Args[0].(*parse.NumberNode); isNumber {
				check([]string{"range over a number"})
			}
		}
		walkBranch(&n.BranchNode, check)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, check)
	case *parse.TemplateNode:
		walkTemplate(n.Pipe, check)
	}
}

func walkBranch(b *parse.BranchNode, check func([]string)) {
	walkTemplate(b.Pipe, check)
	walkTemplate(b.List, check)
	walkTemplate(b.ElseList, check)
}
