// Package runtimetest holds the scripted fixtures the runtime's and the
// replay engine's context-layer tests share: an agent whose tool returns
// large log pages hiding one identifier, a scripted model (labelled so)
// that pages through them, and a counting stand-in for a model summariser.
package runtimetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
)

// LogAgent has one tool returning a large JSON payload of log rows; the
// payload of step 3 hides the identifier INC-40721 in row 12 — the fact a
// context layer must not lose.
func LogAgent() runtime.Agent {
	return runtime.Agent{
		Name:   "log-reader",
		System: "You read logs page by page and report the incident id.",
		Tools: []runtime.Tool{{
			Name:        "read_logs",
			Description: "Read one page of logs.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"page":{"type":"integer","minimum":1}},"required":["page"]}`),
			Run: func(_ context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
				var a struct{ Page int }
				if err := json.Unmarshal(in.Arguments, &a); err != nil {
					return runtime.ToolOutput{}, err
				}
				rows := make([]map[string]any, 30)
				for i := range rows {
					msg := fmt.Sprintf("page %d row %d: request served in %d ms by worker-%d", a.Page, i, 40+i*3, i%7)
					if a.Page == 3 && i == 12 {
						msg = "page 3 row 12: escalated as INC-40721 after three retries"
					}
					rows[i] = map[string]any{"ts": fmt.Sprintf("2026-03-01T09:%02d:%02dZ", a.Page, i), "msg": msg}
				}
				b, _ := json.Marshal(map[string]any{"page": a.Page, "finding": fmt.Sprintf("finding-%d", a.Page), "rows": rows})
				return runtime.ToolOutput{Content: string(b)}, nil
			},
		}},
	}
}

// StepModel is a scripted model (labelled so) that reads its step from the
// context the runtime passes, as a real model would not need to: it calls
// read_logs for pages 1..pages, then answers. Its usage is the estimate of
// the request it received, so spans carry a provider-style count.
type StepModel struct {
	Pages int
	Calls atomic.Int64
	Seen  []llm.Request // every request, in order
}

func (m *StepModel) Label() string { return llm.LabelScripted }

func (m *StepModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	m.Calls.Add(1)
	m.Seen = append(m.Seen, req)
	if err := llm.ValidateOrder(req.Messages); err != nil {
		return llm.Response{}, err
	}
	step, ok := runtime.StepFromContext(ctx)
	if !ok {
		return llm.Response{}, errors.New("no step in context")
	}
	in := int64(contextlayer.ConversationTokens(contextlayer.Estimate{}, req.System, req.Messages))
	resp := llm.Response{Provider: "scripted", Model: "scripted-logs", Label: llm.LabelScripted, Usage: llm.Usage{InputTokens: in, OutputTokens: 9}}
	if step <= m.Pages && len(req.Tools) > 0 {
		resp.Message = llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: fmt.Sprintf("call_%d", step), Name: "read_logs", Arguments: json.RawMessage(fmt.Sprintf(`{"page":%d}`, step))}}}
		return resp, nil
	}
	var all strings.Builder
	for _, msg := range req.Messages {
		all.WriteString(msg.Content)
	}
	answer := "no incident id in view"
	if strings.Contains(all.String(), "INC-40721") {
		answer = "The incident is INC-40721."
	}
	resp.Message = llm.Message{Role: llm.RoleAssistant, Content: answer}
	return resp, nil
}

// CountingSummarizer is a model summariser stand-in that counts its calls.
type CountingSummarizer struct{ N atomic.Int64 }

func (s *CountingSummarizer) Summarize(_ context.Context, msgs []llm.Message, _ int) (string, error) {
	k := s.N.Add(1)
	return fmt.Sprintf("(scripted summary %d) %d messages read pages of logs", k, len(msgs)), nil
}

// Replaying such a run without asking the summariser again is checked with
// the engine, in replay/context_test.go.
