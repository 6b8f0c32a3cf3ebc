package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/llm"
)

// NewOpenAI starts a fake Chat Completions server; its base URL for clients
// is URL+"/v1". A non-empty key is required as the bearer token.
func NewOpenAI(t testing.TB, key string) *Server {
	return newServer(t, "/v1/chat/completions", func(h http.Header, body []byte) *Reply {
		return checkOpenAI(key, h, body)
	})
}

// OpenAIError is an error answer in OpenAI's shape:
// {"error":{"message":...,"type":...,"param":...,"code":...}}. Empty param
// and code are sent as null, as OpenAI does.
func OpenAIError(status int, message, typ, param, code string, header http.Header) Reply {
	e := map[string]any{"message": message, "type": typ, "param": nil, "code": nil}
	if param != "" {
		e["param"] = param
	}
	if code != "" {
		e["code"] = code
	}
	return Reply{Status: status, Header: header, Body: mustJSON(map[string]any{"error": e})}
}

// The errors OpenAI returns for the tool-call ordering rule, as reported
// verbatim by users (OpenAI's own spelling, "preceeding", included).
const (
	OpenAIOrphanToolMessage = "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
	openAIUnansweredCalls   = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s"
	openAIUnknownCallID     = "Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message."
)

func openAI400(message, param string) *Reply {
	r := OpenAIError(http.StatusBadRequest, message, "invalid_request_error", param, "", nil)
	return &r
}

func checkOpenAI(key string, h http.Header, body []byte) *Reply {
	if key != "" && h.Get("Authorization") != "Bearer "+key {
		r := OpenAIError(http.StatusUnauthorized,
			"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
			"invalid_request_error", "", "invalid_api_key", nil)
		return &r
	}
	var req struct {
		Model    *string `json:"model"`
		Messages []struct {
			Role      string           `json:"role"`
			Content   *json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments any    `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return openAI400(fmt.Sprintf("We could not parse the JSON body of your request. (%v)", err), "")
	}
	if req.Model == nil || *req.Model == "" {
		return openAI400("you must provide a model parameter", "")
	}
	if len(req.Messages) == 0 {
		return openAI400("[] is too short - 'messages'", "messages")
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return openAI400(fmt.Sprintf("Missing required parameter: 'tools[%d].function'.", i), fmt.Sprintf("tools[%d].function", i))
		}
	}
	// The ordering rule: a tool message answers a call of the nearest
	// preceding assistant message, and that message's calls must all be
	// answered before any other turn.
	var open []string
	lastCalls := -1
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user":
			if len(open) > 0 {
				return openAI400(fmt.Sprintf(openAIUnansweredCalls, strings.Join(open, ", ")), fmt.Sprintf("messages.[%d].role", lastCalls))
			}
			open, lastCalls = nil, -1
		case "assistant":
			if len(open) > 0 {
				return openAI400(fmt.Sprintf(openAIUnansweredCalls, strings.Join(open, ", ")), fmt.Sprintf("messages.[%d].role", lastCalls))
			}
			open = nil
			if len(m.ToolCalls) > 0 {
				lastCalls = i
			} else {
				lastCalls = -1
			}
			for j, c := range m.ToolCalls {
				if _, ok := c.Function.Arguments.(string); !ok {
					return openAI400(fmt.Sprintf("Invalid type for 'messages[%d].tool_calls[%d].function.arguments': expected a string, but got an object instead.", i, j),
						fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j))
				}
				open = append(open, c.ID)
			}
		case "tool":
			if lastCalls < 0 {
				return openAI400(OpenAIOrphanToolMessage, fmt.Sprintf("messages.[%d].role", i))
			}
			found := false
			for k, id := range open {
				if id == m.ToolCallID {
					open = append(open[:k], open[k+1:]...)
					found = true
					break
				}
			}
			if !found {
				return openAI400(fmt.Sprintf(openAIUnknownCallID, m.ToolCallID), fmt.Sprintf("messages.[%d].tool_call_id", i))
			}
		default:
			return openAI400(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", m.Role),
				fmt.Sprintf("messages[%d].role", i))
		}
	}
	if len(open) > 0 {
		return openAI400(fmt.Sprintf(openAIUnansweredCalls, strings.Join(open, ", ")), fmt.Sprintf("messages.[%d].role", lastCalls))
	}
	return nil
}

// OpenAIAnswer describes a completion to send.
type OpenAIAnswer struct {
	Model        string
	Content      string
	ToolCalls    []llm.ToolCall
	FinishReason string // default "stop", or "tool_calls" when ToolCalls are set
	// Usage as OpenAI reports it: Cached is inside Prompt, Reasoning inside
	// Completion.
	Prompt, Completion, Cached, Reasoning int64
}

func (a OpenAIAnswer) finish() string {
	switch {
	case a.FinishReason != "":
		return a.FinishReason
	case len(a.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func (a OpenAIAnswer) usage() map[string]any {
	return map[string]any{
		"prompt_tokens":     a.Prompt,
		"completion_tokens": a.Completion,
		"total_tokens":      a.Prompt + a.Completion,
		"prompt_tokens_details": map[string]any{
			"cached_tokens": a.Cached, "audio_tokens": 0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens": a.Reasoning, "audio_tokens": 0,
			"accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		},
	}
}

// OpenAICompletion is a chat.completion body.
func OpenAICompletion(a OpenAIAnswer) Reply {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{}}
	if a.Content != "" {
		msg["content"] = a.Content
	}
	if len(a.ToolCalls) > 0 {
		var calls []any
		for _, c := range a.ToolCalls {
			calls = append(calls, map[string]any{
				"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)},
			})
		}
		msg["tool_calls"] = calls
	}
	return Reply{Body: mustJSON(map[string]any{
		"id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion", "created": 1741570283,
		"model": a.Model,
		"choices": []any{map[string]any{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": a.finish(),
		}},
		"usage":              a.usage(),
		"service_tier":       "default",
		"system_fingerprint": "fp_fc9f1d7035",
	})}
}

// OpenAIStream is the same answer as a chat.completion.chunk SSE stream with
// stream_options.include_usage: a role chunk, content pieces, tool calls
// opened with id and name and then filled by argument fragments, a finish
// chunk, a usage chunk with empty choices, and [DONE]. Cut, when positive,
// ends the stream after that many events without [DONE].
func OpenAIStream(a OpenAIAnswer, cut int) Reply {
	var events []string
	chunk := func(choices []any, usage any) {
		events = append(events, "data: "+mustJSON(map[string]any{
			"id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", "object": "chat.completion.chunk", "created": 1741570283,
			"model": a.Model, "system_fingerprint": "fp_fc9f1d7035", "choices": choices, "usage": usage,
		})+"\n\n")
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}
	chunk(delta(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil), nil)
	for _, piece := range split(a.Content, 3) {
		chunk(delta(map[string]any{"content": piece}, nil), nil)
	}
	for i, c := range a.ToolCalls {
		chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""},
		}}}, nil), nil)
		for _, piece := range split(string(c.Arguments), 3) {
			chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": piece},
			}}}, nil), nil)
		}
	}
	chunk(delta(map[string]any{}, a.finish()), nil)
	chunk([]any{}, a.usage())
	events = append(events, "data: [DONE]\n\n")
	if cut > 0 && cut < len(events) {
		events = events[:cut]
	}
	return Reply{Stream: true, Body: strings.Join(events, "")}
}

// split cuts s into at most n pieces (fewer for short strings), on rune
// boundaries, so streams deliver text and JSON in fragments as providers do.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	r := []rune(s)
	size := (len(r) + n - 1) / n
	var out []string
	for len(r) > 0 {
		k := min(size, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}
