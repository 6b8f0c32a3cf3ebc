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

// OpenInference and OpenLLMetry names of a span's content (OpenInference's
// input.value / output.value, its flattened output messages; OpenLLMetry's
// indexed gen_ai.completion.<i>.* attributes).
const (
	oiInput          = "input.value"
	oiOutput         = "output.value"
	oiOutputMessages = "llm.output_messages."
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
	aggregate := modelAggregates(spans)
	var out []stepdiff.Step
	for _, i := range order {
		s := &spans[i]
		switch {
		case semconv.IsModelCallOperation(s.Operation):
			if !aggregate[i] {
				out = append(out, modelStep(s))
			}
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

// modelAggregates marks the model-call spans with a model-call descendant.
func modelAggregates(spans []store.Span) map[int]bool {
	byID := make(map[string]int, len(spans))
	for i := range spans {
		byID[spans[i].SpanID] = i
	}
	out := map[int]bool{}
	for i := range spans {
		if !semconv.IsModelCallOperation(spans[i].Operation) {
			continue
		}
		seen := 0
		for p, ok := byID[spans[i].ParentSpanID]; ok && seen < len(spans); p, ok = byID[spans[p].ParentSpanID] {
			if semconv.IsModelCallOperation(spans[p].Operation) {
				out[p] = true
			}
			seen++
		}
	}
	return out
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
	st.Fields = add(st.Fields, FieldArguments, canonical(firstString(s.Attributes, semconv.AttrToolCallArguments, oiInput)))
	st.Fields = add(st.Fields, FieldResult, canonical(firstString(s.Attributes, semconv.AttrToolCallResult, oiOutput)))
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
	st.Fields = add(st.Fields, FieldQuery, firstString(s.Attributes, semconv.AttrRetrievalQueryText, oiInput))
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
// calls it asked for ("name(arguments)"): the GenAI convention's
// gen_ai.output.messages (an attribute, or on a
// gen_ai.client.inference.operation.details event), else OpenInference's
// flattened llm.output_messages, else OpenLLMetry's gen_ai.completion.<i>,
// else OpenInference's output.value as the answer.
func output(s *store.Span) (answer string, calls []string) {
	sources := []store.Attributes{s.Attributes}
	for _, e := range s.Events {
		if e.Name == semconv.EventInferenceOperationDetails {
			sources = append(sources, e.Attributes)
		}
	}
	for _, a := range sources {
		if answer, calls, ok := genAIOutput(a); ok {
			return answer, calls
		}
	}
	if answer, calls, ok := flattenedOutput(s.Attributes, oiOutputMessages, ".message.content", ".message.tool_calls.", ".tool_call.function.name", ".tool_call.function.arguments"); ok {
		return answer, calls
	}
	if answer, calls, ok := flattenedOutput(s.Attributes, semconv.AttrCompletionPrefix, ".content", ".tool_calls.", ".name", ".arguments"); ok {
		return answer, calls
	}
	return firstString(s.Attributes, oiOutput), nil
}

type genAIPart struct {
	Type      string `json:"type"`
	Content   any    `json:"content"`
	Name      string `json:"name"`
	Arguments any    `json:"arguments"`
}

type genAIMessage struct {
	Role    string      `json:"role"`
	Content any         `json:"content"`
	Parts   []genAIPart `json:"parts"`
}

func genAIOutput(a store.Attributes) (string, []string, bool) {
	v, ok := a[semconv.AttrOutputMessages]
	if !ok {
		return "", nil, false
	}
	var raw []byte
	if s, isStr := v.(string); isStr {
		raw = []byte(s)
	} else {
		b, err := json.Marshal(v)
		if err != nil {
			return "", nil, false
		}
		raw = b
	}
	var ms []genAIMessage
	if json.Unmarshal(raw, &ms) != nil {
		return "", nil, false
	}
	var text, calls []string
	for _, m := range ms {
		if m.Role != "" && m.Role != "assistant" {
			continue
		}
		if s, ok := m.Content.(string); ok && s != "" {
			text = append(text, s)
		}
		for _, p := range m.Parts {
			switch p.Type {
			case "", "text":
				if s, ok := p.Content.(string); ok && s != "" {
					text = append(text, s)
				}
			case "tool_call":
				calls = append(calls, call(p.Name, p.Arguments))
			}
		}
	}
	return strings.Join(text, "\n"), calls, true
}

func call(name string, args any) string {
	var s string
	switch x := args.(type) {
	case nil:
	case string:
		s = canonical(x)
	default:
		b, _ := json.Marshal(x)
		s = string(b)
	}
	return name + "(" + s + ")"
}

// flattenedOutput reads output messages flattened into indexed attributes:
// prefix<i>contentKey and prefix<i>callsKey<j>nameKey / argsKey.
func flattenedOutput(a store.Attributes, prefix, contentKey, callsKey, nameKey, argsKey string) (string, []string, bool) {
	found := false
	var text, calls []string
	for i := 0; i < 1000; i++ {
		p := prefix + strconv.Itoa(i)
		if !anyKeyWithPrefix(a, p+".") {
			break
		}
		found = true
		if c, _ := a.String(p + contentKey); c != "" {
			text = append(text, c)
		}
		for j := 0; ; j++ {
			q := p + callsKey + strconv.Itoa(j)
			name, ok := a.String(q + nameKey)
			if !ok {
				break
			}
			args, _ := a.String(q + argsKey)
			calls = append(calls, call(name, args))
		}
	}
	return strings.Join(text, "\n"), calls, found
}

func anyKeyWithPrefix(a store.Attributes, p string) bool {
	for k := range a {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
