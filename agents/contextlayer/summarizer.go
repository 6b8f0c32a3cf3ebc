package contextlayer

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomwork/loomwork/agents/llm"
)

// Completer is the one method of the model gateway a summary needs.
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// ModelSummarizer asks a model (through the gateway) for the summary.
type ModelSummarizer struct {
	Model Completer
	// ModelName is passed as Request.Model ("" lets the gateway route).
	ModelName string
}

// Summarize implements Summarizer. The transcript is sent as one user
// message, so the request carries no tool results whose calls are missing.
func (s ModelSummarizer) Summarize(ctx context.Context, msgs []llm.Message, maxTokens int) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(&b, "assistant called %s(%s) [call %s]\n", tc.Name, tc.Arguments, tc.ID)
			}
			if m.Content != "" {
				fmt.Fprintf(&b, "assistant: %s\n", m.Content)
			}
		case llm.RoleTool:
			fmt.Fprintf(&b, "result of %s [call %s]: %s\n", m.ToolName, m.ToolCallID, m.Content)
		default:
			fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
		}
	}
	req := llm.Request{
		Model: s.ModelName,
		System: "You compress agent transcripts. Summarise the steps below in at most " +
			fmt.Sprint(maxTokens) + " tokens: what was tried, what was found, and every identifier, path, " +
			"number and ticket id that a later step could need, verbatim. No preamble.",
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: b.String()}},
		MaxTokens: maxTokens,
	}
	resp, err := s.Model.Complete(ctx, req)
	if err != nil {
		return "", fmt.Errorf("summary model call: %w", err)
	}
	text := strings.TrimSpace(resp.Message.Content)
	if text == "" {
		return "", fmt.Errorf("summary model returned no text (stop reason %q)", resp.StopReason)
	}
	if resp.Label == llm.LabelScripted {
		text = "(scripted summary) " + text
	}
	return text, nil
}
