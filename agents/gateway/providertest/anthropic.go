package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/llm"
)

// NewAnthropic starts a fake Messages server; its base URL for clients is
// URL. key is required in x-api-key.
func NewAnthropic(t testing.TB, key string) *Server {
	return newServer(t, "/v1/messages", func(h http.Header, body []byte) *Reply {
		return checkAnthropic(key, h, body)
	})
}

// AnthropicError is an error answer in Anthropic's shape:
// {"type":"error","error":{"type":...,"message":...},"request_id":...}.
func AnthropicError(status int, typ, message string, header http.Header) Reply {
	return Reply{Status: status, Header: header, Body: mustJSON(map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": message},
		"request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
	})}
}

func anthropic400(message string) *Reply {
	r := AnthropicError(http.StatusBadRequest, "invalid_request_error", message, nil)
	return &r
}

func checkAnthropic(key string, h http.Header, body []byte) *Reply {
	if h.Get("x-api-key") != key {
		r := AnthropicError(http.StatusUnauthorized, "authentication_error", "invalid x-api-key", nil)
		return &r
	}
	if h.Get("anthropic-version") == "" {
		return anthropic400("anthropic-version: header is required")
	}
	var req struct {
		Model     string          `json:"model"`
		MaxTokens *int            `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return anthropic400(fmt.Sprintf("There was an error parsing the body: %v", err))
	}
	if req.Model == "" {
		return anthropic400("model: Field required")
	}
	if req.MaxTokens == nil {
		return anthropic400("max_tokens: Field required")
	}
	for i, t := range req.Tools {
		if t.Name == "" || len(t.InputSchema) == 0 {
			return anthropic400(fmt.Sprintf("tools.%d.input_schema: Field required", i))
		}
	}
	type blk struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text"`
		ID        string          `json:"id"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
	}
	var prevUses []string
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return anthropic400(fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
		}
		var blocks []blk
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			blocks = []blk{{Type: "text", Text: &s}}
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return anthropic400(fmt.Sprintf("messages.%d.content: Input should be a valid list", i))
		}
		if len(blocks) == 0 && i < len(req.Messages)-1 {
			return anthropic400(fmt.Sprintf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i))
		}
		answered := map[string]bool{}
		var uses []string
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text == nil || *b.Text == "" {
					return anthropic400(fmt.Sprintf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j))
				}
			case "tool_use":
				if m.Role != "assistant" {
					return anthropic400(fmt.Sprintf("messages.%d.content.%d: tool_use blocks can only be in assistant messages", i, j))
				}
				var obj map[string]any
				if json.Unmarshal(b.Input, &obj) != nil {
					return anthropic400(fmt.Sprintf("messages.%d.content.%d.tool_use.input: Input should be a valid dictionary", i, j))
				}
				uses = append(uses, b.ID)
			case "tool_result":
				ok := false
				for _, id := range prevUses {
					if id == b.ToolUseID {
						ok = true
					}
				}
				if !ok {
					return anthropic400(fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID))
				}
				answered[b.ToolUseID] = true
			}
		}
		var missing []string
		for _, id := range prevUses {
			if !answered[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return anthropic400(fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(missing, ", ")))
		}
		prevUses = uses
	}
	if len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "assistant" && len(prevUses) > 0 {
		return anthropic400(fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", len(req.Messages)-1, strings.Join(prevUses, ", ")))
	}
	return nil
}

// AnthropicAnswer describes a message to send.
type AnthropicAnswer struct {
	Model      string
	Text       string
	ToolUses   []llm.ToolCall
	StopReason string // default "end_turn", or "tool_use" when ToolUses are set
	// Usage as Anthropic reports it: Input excludes the two cache fields.
	Input, Output, CacheRead, CacheCreation int64
}

func (a AnthropicAnswer) stop() string {
	switch {
	case a.StopReason != "":
		return a.StopReason
	case len(a.ToolUses) > 0:
		return "tool_use"
	}
	return "end_turn"
}

func (a AnthropicAnswer) usage(output int64) map[string]any {
	return map[string]any{
		"input_tokens":                a.Input,
		"cache_creation_input_tokens": a.CacheCreation,
		"cache_read_input_tokens":     a.CacheRead,
		"output_tokens":               output,
		"service_tier":                "standard",
	}
}

// AnthropicMessage is a Messages API message body.
func AnthropicMessage(a AnthropicAnswer) Reply {
	var content []any
	if a.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": a.Text})
	}
	for _, u := range a.ToolUses {
		content = append(content, map[string]any{"type": "tool_use", "id": u.ID, "name": u.Name, "input": json.RawMessage(u.Arguments)})
	}
	if content == nil {
		content = []any{}
	}
	return Reply{Body: mustJSON(map[string]any{
		"id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant", "model": a.Model,
		"content": content, "stop_reason": a.stop(), "stop_sequence": nil, "usage": a.usage(a.Output),
	})}
}

// AnthropicStream is the same answer as a Messages event stream:
// message_start (input usage, output_tokens 1), a ping, text and tool_use
// blocks delivered in delta fragments, message_delta with stop_reason and
// cumulative output usage, message_stop. Cut, when positive, ends the stream
// after that many events; ErrorAfter, when positive, replaces the rest of the
// stream after that many events with an error event of type errType.
func AnthropicStream(a AnthropicAnswer, cut, errorAfter int, errType string) Reply {
	var events []string
	ev := func(name string, data map[string]any) {
		data["type"] = name
		events = append(events, "event: "+name+"\ndata: "+mustJSON(data)+"\n\n")
	}
	ev("message_start", map[string]any{"message": map[string]any{
		"id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant", "model": a.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": a.usage(1),
	}})
	ev("ping", map[string]any{})
	idx := 0
	if a.Text != "" {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, piece := range split(a.Text, 3) {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "text_delta", "text": piece}})
		}
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	for _, u := range a.ToolUses {
		ev("content_block_start", map[string]any{"index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": u.ID, "name": u.Name, "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, piece := range split(string(u.Arguments), 3) {
			ev("content_block_delta", map[string]any{"index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
		}
		ev("content_block_stop", map[string]any{"index": idx})
		idx++
	}
	ev("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": a.stop(), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": a.Output},
	})
	ev("message_stop", map[string]any{})
	if errorAfter > 0 && errorAfter < len(events) {
		events = events[:errorAfter]
		msg := "Overloaded"
		if errType == "api_error" {
			msg = "Internal server error"
		}
		ev("error", map[string]any{"error": map[string]any{"type": errType, "message": msg}})
	}
	if cut > 0 && cut < len(events) {
		events = events[:cut]
	}
	return Reply{Stream: true, Body: strings.Join(events, "")}
}
