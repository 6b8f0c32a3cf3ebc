package runtime

import (
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/semconv"
)

// Message content on chat spans (Config.CaptureContent), in the GenAI
// semantic conventions' JSON shape that scorer/conversation reads (the
// UI's conversation panel and the graders' transcripts): a message is
// {"role", "parts", "finish_reason"?}; a part is {"type": "text",
// "content"}, {"type": "tool_call", "id", "name", "arguments"} or
// {"type": "tool_call_response", "id", "response"}. The system prompt is a
// list of text parts. What is recorded is what the model was sent and
// answered: an llm.Request carries no credential or header.

type genAIMessage struct {
	Role         string      `json:"role"`
	Parts        []genAIPart `json:"parts"`
	FinishReason string      `json:"finish_reason,omitempty"`
}

type genAIPart struct {
	Type     string          `json:"type"`
	Content  string          `json:"content,omitempty"`
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name,omitempty"`
	Args     json.RawMessage `json:"arguments,omitempty"`
	Response *string         `json:"response,omitempty"`
}

// genAIMessageOf converts one conversation message.
func genAIMessageOf(m llm.Message) genAIMessage {
	out := genAIMessage{Role: string(m.Role), Parts: []genAIPart{}}
	if m.Role == llm.RoleTool {
		content := m.Content
		out.Parts = append(out.Parts, genAIPart{Type: "tool_call_response", ID: m.ToolCallID, Response: &content})
		return out
	}
	if m.Content != "" {
		out.Parts = append(out.Parts, genAIPart{Type: "text", Content: m.Content})
	}
	for _, c := range m.ToolCalls {
		args := c.Arguments
		if !json.Valid(args) {
			// Kept as a JSON string: the attribute stays valid JSON.
			args, _ = json.Marshal(string(args))
		}
		out.Parts = append(out.Parts, genAIPart{Type: "tool_call", ID: c.ID, Name: c.Name, Args: args})
	}
	return out
}

// requestContentAttrs are a request's system instructions and input
// messages.
func requestContentAttrs(req llm.Request) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if req.System != "" {
		if b, err := json.Marshal([]genAIPart{{Type: "text", Content: req.System}}); err == nil {
			attrs = append(attrs, attribute.String(semconv.AttrSystemInstructions, string(b)))
		}
	}
	msgs := make([]genAIMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, genAIMessageOf(m))
	}
	if b, err := json.Marshal(msgs); err == nil {
		attrs = append(attrs, attribute.String(semconv.AttrInputMessages, string(b)))
	}
	return attrs
}

// responseContentAttrs are a response's output message.
func responseContentAttrs(resp llm.Response) []attribute.KeyValue {
	m := resp.Message
	m.Role = llm.RoleAssistant
	msg := genAIMessageOf(m)
	msg.FinishReason = resp.StopReason
	b, err := json.Marshal([]genAIMessage{msg})
	if err != nil {
		return nil
	}
	return []attribute.KeyValue{attribute.String(semconv.AttrOutputMessages, string(b))}
}
