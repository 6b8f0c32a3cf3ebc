package grade

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// OpenInference content keys (a span's input and output as one value).
const (
	openInferenceInput  = "input.value"
	openInferenceOutput = "output.value"
)

// TranscriptFromSpans reads a transcript out of a trace, for agents that
// are not on Loomwork's runtime and send only spans:
//   - task: the root span's first user message (gen_ai.input.messages, as
//     an attribute or on a gen_ai.client.inference.operation.details
//     event), else its OpenInference input.value, else the first model
//     call's first user message;
//   - answer: the root's last assistant message (gen_ai.output.messages),
//     else its output.value, else the last-ending model call's;
//   - tool calls: every execute_tool span in start order, with
//     gen_ai.tool.call.arguments and gen_ai.tool.call.result (or
//     OpenInference's input.value / output.value), an error status marking
//     an error result;
//   - citations: loomwork.citations across the trace.
//
// Content capture is opt-in in every SDK: a trace without it yields an
// empty answer, which answer graders then fail with that reason.
func TranscriptFromSpans(spans []store.Span) datasets.Transcript {
	tr := datasets.Transcript{}
	if len(spans) == 0 {
		return tr
	}
	tr.Source = "trace " + spans[0].TraceID
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return spans[order[a]].StartTime.Before(spans[order[b]].StartTime) })
	root := scorer.RootSpan(spans)

	var firstCall, lastCall = -1, -1
	seenCite := map[string]bool{}
	for _, i := range order {
		s := &spans[i]
		if semconv.IsModelCallOperation(s.Operation) {
			if firstCall < 0 {
				firstCall = i
			}
			if lastCall < 0 || !s.EndTime.Before(spans[lastCall].EndTime) {
				lastCall = i
			}
		}
		if s.Operation == semconv.OpExecuteTool {
			name := s.ToolName
			if name == "" {
				name = strings.TrimSpace(strings.TrimPrefix(s.Name, semconv.OpExecuteTool))
			}
			tc := datasets.ToolCall{Name: name, IsError: s.IsError()}
			if a, ok := firstString(s.Attributes, semconv.AttrToolCallArguments, openInferenceInput); ok {
				if json.Valid([]byte(a)) {
					tc.Arguments = json.RawMessage(a)
				} else {
					b, _ := json.Marshal(a)
					tc.Arguments = b
				}
			}
			tc.Result, _ = firstString(s.Attributes, semconv.AttrToolCallResult, openInferenceOutput)
			tr.ToolCalls = append(tr.ToolCalls, tc)
		}
		for _, d := range s.CitedDocs {
			if !seenCite[d] {
				seenCite[d] = true
				tr.Citations = append(tr.Citations, d)
			}
		}
	}
	if root >= 0 {
		r := &spans[root]
		tr.Task = userText(r)
		tr.Answer = assistantText(r)
	}
	if tr.Task == "" && firstCall >= 0 {
		tr.Task = userText(&spans[firstCall])
	}
	if tr.Answer == "" && lastCall >= 0 {
		tr.Answer = assistantText(&spans[lastCall])
	}
	return tr
}

// contentSources are where a span's message content may be: its
// attributes, then (the GenAI convention's newer form) the attributes of
// its gen_ai.client.inference.operation.details events.
func contentSources(s *store.Span) []store.Attributes {
	out := []store.Attributes{s.Attributes}
	for _, e := range s.Events {
		if e.Name == semconv.EventInferenceOperationDetails {
			out = append(out, e.Attributes)
		}
	}
	return out
}

func firstString(a store.Attributes, keys ...string) (string, bool) {
	for _, k := range keys {
		if v, ok := a.String(k); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// genAIMessage is one message of gen_ai.input.messages /
// gen_ai.output.messages: a role and parts, of which text parts carry
// "content". Some senders put a plain "content" string on the message
// instead; both are read.
type genAIMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
	Parts   []struct {
		Type    string `json:"type"`
		Content any    `json:"content"`
	} `json:"parts"`
}

func (m genAIMessage) text() string {
	var parts []string
	if s, ok := m.Content.(string); ok && s != "" {
		parts = append(parts, s)
	}
	for _, p := range m.Parts {
		if s, ok := p.Content.(string); ok && (p.Type == "" || p.Type == "text") && s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "\n")
}

func messages(a store.Attributes, key string) []genAIMessage {
	v, ok := a[key]
	if !ok {
		return nil
	}
	var raw []byte
	switch x := v.(type) {
	case string:
		raw = []byte(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return nil
		}
		raw = b
	}
	var ms []genAIMessage
	if json.Unmarshal(raw, &ms) != nil {
		return nil
	}
	return ms
}

func userText(s *store.Span) string {
	for _, a := range contentSources(s) {
		for _, m := range messages(a, semconv.AttrInputMessages) {
			if m.Role == "user" {
				if t := m.text(); t != "" {
					return t
				}
			}
		}
	}
	if v, ok := s.Attributes.String(openInferenceInput); ok {
		return v
	}
	return ""
}

func assistantText(s *store.Span) string {
	for _, a := range contentSources(s) {
		ms := messages(a, semconv.AttrOutputMessages)
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].Role == "assistant" || ms[i].Role == "" {
				if t := ms[i].text(); t != "" {
					return t
				}
			}
		}
	}
	if v, ok := s.Attributes.String(openInferenceOutput); ok {
		return v
	}
	return ""
}

// describeTranscript is a short account of where a transcript came from,
// for reasons.
func describeTranscript(t *datasets.Transcript) string {
	if t == nil {
		return "no transcript"
	}
	if t.Source != "" {
		return fmt.Sprintf("transcript from %s", t.Source)
	}
	return "transcript"
}
