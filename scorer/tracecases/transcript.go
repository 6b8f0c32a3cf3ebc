package tracecases

import (
	"encoding/json"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// openInferenceInput is OpenInference's span input (one value).
const openInferenceInput = "input.value"

// transcriptOf reads what the run was asked out of its spans. Build uses
// its Task only: the root span's first user message
// (gen_ai.input.messages), else its OpenInference input.value, else the
// first model call's first user message — the rule scorer/grade's
// TranscriptFromSpans follows for graders, which this is to call once it
// lands, so a case's task and a grader's transcript read the same text.
func transcriptOf(spans []store.Span) datasets.Transcript {
	var tr datasets.Transcript
	if len(spans) == 0 {
		return tr
	}
	tr.Source = "trace " + spans[0].TraceID
	tr.Task = userText(spans[rootSpan(spans)].Attributes)
	if tr.Task == "" {
		for _, i := range startOrder(spans) {
			if semconv.IsModelCallOperation(spans[i].Operation) {
				tr.Task = userText(spans[i].Attributes)
				break
			}
		}
	}
	return tr
}

// genAIMessage is one message of gen_ai.input.messages: a role and parts,
// of which text parts carry "content". Some senders put a plain "content"
// string on the message instead; both are read.
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

// userText is the first user message's text in gen_ai.input.messages
// (JSON text, or the structured value some SDKs send), else input.value.
func userText(a store.Attributes) string {
	if v, ok := a[semconv.AttrInputMessages]; ok {
		var raw []byte
		switch x := v.(type) {
		case string:
			raw = []byte(x)
		default:
			raw, _ = json.Marshal(x)
		}
		var ms []genAIMessage
		if json.Unmarshal(raw, &ms) == nil {
			for _, m := range ms {
				if m.Role == "user" {
					if t := m.text(); t != "" {
						return t
					}
				}
			}
		}
	}
	if v, ok := a.String(openInferenceInput); ok {
		return v
	}
	return ""
}
