package grade

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/conversation"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// TranscriptFromSpans reads a transcript out of a trace, for agents that
// are not on Loomwork's runtime and send only spans:
//   - task: the root span's first user message, else the first model
//     call's (messages as scorer/conversation reads them: GenAI
//     gen_ai.input.messages as an attribute or on a
//     gen_ai.client.inference.operation.details event, OpenInference
//     llm.input_messages.* or input.value, OpenLLMetry gen_ai.prompt.*);
//   - answer: the root's last assistant message, else the last-ending
//     model call's (gen_ai.output.messages, llm.output_messages.*,
//     gen_ai.completion.*, output.value);
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
			if a, ok := firstString(s.Attributes, semconv.AttrToolCallArguments, semconv.OpenInferenceInputValue); ok {
				if json.Valid([]byte(a)) {
					tc.Arguments = json.RawMessage(a)
				} else {
					b, _ := json.Marshal(a)
					tc.Arguments = b
				}
			}
			tc.Result, _ = firstString(s.Attributes, semconv.AttrToolCallResult, semconv.OpenInferenceOutputValue)
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

func firstString(a store.Attributes, keys ...string) (string, bool) {
	for _, k := range keys {
		if v, ok := a.String(k); ok && v != "" {
			return v, true
		}
	}
	return "", false
}

// userText is a span's first user message (scorer/conversation reads every
// shape senders capture content in).
func userText(s *store.Span) string {
	c := conversation.FromSpan(s)
	for _, m := range c.Input {
		if m.Role == "user" {
			if t := m.Text(); t != "" {
				return t
			}
		}
	}
	return ""
}

// assistantText is a span's last assistant (or role-less) output message.
func assistantText(s *store.Span) string {
	c := conversation.FromSpan(s)
	for i := len(c.Output) - 1; i >= 0; i-- {
		if m := c.Output[i]; m.Role == "assistant" || m.Role == "" {
			if t := m.Text(); t != "" {
				return t
			}
		}
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
