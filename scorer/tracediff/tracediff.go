// Package tracediff compares two traces step by step: it reads each
// trace's steps (its model calls, tool calls and retrievals) from its spans
// and aligns them with internal/stepdiff, so a page can show the two runs
// side by side, the first step where they part and every later difference.
//
// A step is a leaf call: a model-call span (chat, text_completion,
// generate_content, embeddings) none of whose descendants is a model call
// (an OpenInference LLM span wrapping the provider's is an aggregate, as
// the rollup counts it), an execute_tool span, a retrieval span. Steps are
// in start order (a parent before its children on a tie).
//
// What a step is compared on is its fields, named in this package's
// vocabulary (Field*): a model call on its model, answer and requested
// tool calls; a tool call on its tool, arguments, result and status; a
// retrieval on its data source, query and documents. Content capture is
// opt-in at the sender: a trace without it compares on names, status and
// documents only, and Compare says so (Notes). Durations and tokens are
// shown (Step.Info), never compared.
package tracediff

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/internal/stepdiff"
	"github.com/loomwork/loomwork/scorer/conversation"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Field names of a trace step.
const (
	FieldModel      = "model"
	FieldAnswer     = "answer"
	FieldToolCalls  = "tool_calls"
	FieldTool       = "tool"
	FieldArguments  = "arguments"
	FieldResult     = "result"
	FieldStatus     = "status"
	FieldDataSource = "data_source"
	FieldQuery      = "query"
	FieldDocuments  = "documents"
)

// Result is a comparison of two traces.
type Result struct {
	stepdiff.Diff
	// Notes say what the comparison could not see (no captured content on
	// a side).
	Notes []string `json:"notes,omitempty"`
}

// Compare aligns the steps of traces a and b and lists their differences.
func Compare(a, b []store.Span) Result {
	sa, sb := Steps(a), Steps(b)
	r := Result{Diff: stepdiff.Compare(sa, sb, stepdiff.Codes{})}
	for _, side := range []struct {
		name  string
		steps []stepdiff.Step
	}{{"A", sa}, {"B", sb}} {
		if len(side.steps) == 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("trace %s has no model call, tool call or retrieval span: nothing to align", side.name))
			continue
		}
		if !hasContent(side.steps) {
			r.Notes = append(r.Notes, fmt.Sprintf("trace %s carries no captured content (arguments, results, answers; capture is opt-in at the sender): its steps compare on names, status and documents only", side.name))
		}
	}
	if r.Approximate {
		r.Notes = append(r.Notes, fmt.Sprintf("the traces are too long to align exactly (%d × %d steps): the steps between their common start and end are paired by position", len(sa), len(sb)))
	}
	return r
}

func hasContent(steps []stepdiff.Step) bool {
	for _, s := range steps {
		for _, f := range s.Fields {
			switch f.Name {
			case FieldAnswer, FieldToolCalls, FieldArguments, FieldResult, FieldQuery:
				return true
			}
		}
	}
	return false
}

// Steps reads a trace's steps from its spans, in start order.
func Steps(spans []store.Span) []stepdiff.Step {
	order := treeOrder(spans)
	// A model step is a billed call (store.Roles, the rule every view
	// counts calls by): a span whose descendant reports the usage is not
	// a second step.
	roles := store.Roles(spans, store.BuildTree(spans))
	var out []stepdiff.Step
	for _, i := range order {
		s := &spans[i]
		switch {
		case roles[i] == store.RoleCall:
			out = append(out, modelStep(s))
		case semconv.IsModelCallOperation(s.Operation):
			// An aggregate, or a wrapper of the call below it.
		case s.Operation == semconv.OpExecuteTool:
			out = append(out, toolStep(s))
		case s.Operation == semconv.OpRetrieval:
			out = append(out, retrievalStep(s))
		}
	}
	return out
}

// treeOrder orders spans by start time, a parent before its children on a
// tie, then by span id, so the same trace gives the same steps whatever
// order the store returned its spans in.
func treeOrder(spans []store.Span) []int {
	depth := make([]int, len(spans))
	byID := make(map[string]int, len(spans))
	for i := range spans {
		byID[spans[i].SpanID] = i
	}
	for i := range spans {
		d := 0
		for p, ok := byID[spans[i].ParentSpanID]; ok && d < len(spans); p, ok = byID[spans[p].ParentSpanID] {
			d++
		}
		depth[i] = d
	}
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool {
		a, b := &spans[order[x]], &spans[order[y]]
		if !a.StartTime.Equal(b.StartTime) {
			return a.StartTime.Before(b.StartTime)
		}
		if depth[order[x]] != depth[order[y]] {
			return depth[order[x]] < depth[order[y]]
		}
		return a.SpanID < b.SpanID
	})
	return order
}

// add appends a field when it has a value: a field a trace does not carry
// compares as absent, not as an empty string.
func add(fs []stepdiff.Field, name, value string) []stepdiff.Field {
	if value == "" {
		return fs
	}
	return append(fs, stepdiff.Field{Name: name, Value: value})
}

func status(s *store.Span) string {
	if !s.IsError() {
		return ""
	}
	if s.StatusMessage != "" {
		return "error: " + s.StatusMessage
	}
	return "error"
}

func info(s *store.Span) []stepdiff.Field {
	fs := []stepdiff.Field{{Name: "duration", Value: fmtMS(float64(s.Duration().Microseconds()) / 1000)}}
	if s.HasUsage {
		fs = append(fs, stepdiff.Field{Name: "tokens", Value: fmt.Sprintf("%d in / %d out", s.InputTokens, s.OutputTokens)})
	}
	return fs
}

func fmtMS(ms float64) string {
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
}

func modelStep(s *store.Span) stepdiff.Step {
	model := s.RequestModel
	if model == "" {
		model = s.ResponseModel
	}
	st := stepdiff.Step{Kind: stepdiff.KindModel, Name: model, Ref: s.SpanID, Title: s.Name, Info: info(s)}
	answer, calls := output(s)
	st.Fields = add(st.Fields, FieldModel, model)
	st.Fields = add(st.Fields, FieldAnswer, answer)
	st.Fields = add(st.Fields, FieldToolCalls, strings.Join(calls, "\n"))
	st.Fields = add(st.Fields, FieldStatus, status(s))
	return st
}

func toolStep(s *store.Span) stepdiff.Step {
	name := s.ToolName
	if name == "" {
		name = strings.TrimSpace(strings.TrimPrefix(s.Name, semconv.OpExecuteTool))
	}
	st := stepdiff.Step{Kind: stepdiff.KindTool, Name: name, Ref: s.SpanID, Title: s.Name, Info: info(s)}
	st.Fields = add(st.Fields, FieldTool, name)
	st.Fields = add(st.Fields, FieldArguments, canonical(firstString(s.Attributes, semconv.AttrToolCallArguments, semconv.OpenInferenceInputValue)))
	st.Fields = add(st.Fields, FieldResult, canonical(firstString(s.Attributes, semconv.AttrToolCallResult, semconv.OpenInferenceOutputValue)))
	st.Fields = add(st.Fields, FieldStatus, status(s))
	st.Fields = add(st.Fields, FieldDocuments, strings.Join(s.RetrievedDocs, "\n"))
	return st
}

func retrievalStep(s *store.Span) stepdiff.Step {
	src := firstString(s.Attributes, semconv.AttrDataSourceID)
	name := src
	if name == "" {
		name = s.Name
	}
	st := stepdiff.Step{Kind: stepdiff.KindRetrieval, Name: name, Ref: s.SpanID, Title: s.Name, Info: info(s)}
	st.Fields = add(st.Fields, FieldDataSource, src)
	st.Fields = add(st.Fields, FieldQuery, firstString(s.Attributes, semconv.AttrRetrievalQueryText, semconv.OpenInferenceInputValue))
	st.Fields = add(st.Fields, FieldDocuments, strings.Join(s.RetrievedDocs, "\n"))
	st.Fields = add(st.Fields, FieldStatus, status(s))
	return st
}

func firstString(a store.Attributes, keys ...string) string {
	for _, k := range keys {
		if v, ok := a.String(k); ok && strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// canonical rewrites JSON text with sorted keys and no insignificant
// space, so two senders' spellings of the same arguments compare equal;
// other text is kept as it is.
func canonical(s string) string {
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return s
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	if dec.Decode(&v) != nil || dec.More() {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s
	}
	return string(b)
}

// output reads a model call's answer (its assistant text) and the tool
// calls it asked for ("name(arguments)") from its messages, as
// scorer/conversation reads them in every shape the UI shows (GenAI,
// OpenInference, OpenLLMetry).
func output(s *store.Span) (answer string, calls []string) {
	c := conversation.FromSpan(s)
	var text []string
	for _, m := range c.Output {
		if m.Role != "" && m.Role != "assistant" {
			continue
		}
		if t := m.Text(); t != "" {
			text = append(text, t)
		}
		for _, p := range m.Parts {
			if p.Kind == conversation.ToolCall {
				calls = append(calls, p.Name+"("+canonical(p.Arguments)+")")
			}
		}
	}
	return strings.Join(text, "\n"), calls
}
