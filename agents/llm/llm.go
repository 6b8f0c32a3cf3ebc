// Package llm holds the provider-neutral conversation model shared by the
// runtime loop, the model gateway and the context layer: messages, tool
// calls, requests, responses and token usage.
//
// The shapes follow the intersection of OpenAI Chat Completions and Anthropic
// Messages: an assistant message may carry tool calls; each tool result is a
// message with RoleTool naming the call it answers. Providers translate to
// their own wire formats (Anthropic folds tool results into the next user
// turn), and the ordering rule both enforce — a tool result must follow the
// assistant message that made its call — is checked by ValidateOrder.
package llm

import (
	"encoding/json"
	"fmt"
)

// Role of a message author.
type Role string

// Roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one conversation turn.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message makes.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and ToolName identify the call a RoleTool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	ToolName   string `json:"tool_name,omitempty"`
	// IsError marks a tool result that reports a failure to the model.
	IsError bool `json:"is_error,omitempty"`
}

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec declares a tool to the model. Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	Model       string     `json:"model,omitempty"` // empty: the gateway routes
	System      string     `json:"system,omitempty"`
	Messages    []Message  `json:"messages"`
	Tools       []ToolSpec `json:"tools,omitempty"`
	MaxTokens   int        `json:"max_tokens,omitempty"`
	Temperature *float64   `json:"temperature,omitempty"`
}

// Usage is normalised token usage. InputTokens includes cached input (the
// GenAI convention's definition); providers that report cache reads and
// writes apart from input (Anthropic) are converted on the way in.
type Usage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
	ReasoningTokens     int64 `json:"reasoning_tokens,omitempty"`
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:         u.InputTokens + v.InputTokens,
		OutputTokens:        u.OutputTokens + v.OutputTokens,
		CacheReadTokens:     u.CacheReadTokens + v.CacheReadTokens,
		CacheCreationTokens: u.CacheCreationTokens + v.CacheCreationTokens,
		ReasoningTokens:     u.ReasoningTokens + v.ReasoningTokens,
	}
}

// Label values for Response.Label.
const (
	LabelLive     = "live"
	LabelScripted = "scripted"
)

// Response is a model's answer.
type Response struct {
	Message    Message `json:"message"` // RoleAssistant
	StopReason string  `json:"stop_reason,omitempty"`
	Usage      Usage   `json:"usage"`
	Provider   string  `json:"provider"` // gen_ai.provider.name, e.g. "openai", "anthropic", "scripted"
	Model      string  `json:"model"`    // the response model
	// Label is LabelScripted for a scripted model, LabelLive otherwise; it is
	// carried into journals, spans and reports so a scripted run is never
	// mistaken for a live one.
	Label string `json:"label"`
}

// ValidateOrder checks the ordering rule both providers enforce: every tool
// result answers a call made by the nearest preceding assistant message, and
// only tool results (or nothing) sit between that message and the next
// non-tool turn. It returns an error naming the offending message index.
func ValidateOrder(msgs []Message) error {
	var open map[string]bool // calls of the last assistant message not yet answered
	for i, m := range msgs {
		switch m.Role {
		case RoleAssistant:
			open = make(map[string]bool, len(m.ToolCalls))
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case RoleTool:
			if open == nil || !open[m.ToolCallID] {
				return fmt.Errorf("message %d: tool result for call %q does not follow the assistant message that made the call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			if len(open) > 0 {
				return fmt.Errorf("message %d: %s turn before the results of %d tool call(s) of the preceding assistant message", i, m.Role, len(open))
			}
			open = nil
		}
	}
	return nil
}
