package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/internal/sse"
	"github.com/loomwork/loomwork/agents/llm"
)

// maxStreamToolCalls bounds the tool calls one streamed answer may open.
const maxStreamToolCalls = 1024

type callBuilder struct {
	id, name string
	args     strings.Builder
}

// decodeStream assembles a chat.completion.chunk stream: content deltas are
// concatenated, tool calls are assembled by their index (the first delta of
// a call carries id and name, later ones only argument fragments), the last
// choice chunk carries finish_reason, and with include_usage a final chunk
// with empty choices carries usage. The stream ends with "data: [DONE]".
func decodeStream(body io.Reader) (llm.Response, error) {
	r := sse.NewReader(body)
	var (
		content, refusal strings.Builder
		calls            = map[int]*callBuilder{}
		resp             llm.Response
		usage            *llm.Usage
		finished, done   bool
	)
	for !done {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) && finished {
				break // some compatible servers omit [DONE]
			}
			ae := &gateway.APIError{Provider: ProviderName, Type: gateway.ErrTypeStreamCut, Retryable: true, Usage: usage, Err: err,
				Message: "stream ended before [DONE]"}
			if errors.Is(err, sse.ErrEventTooLarge) {
				ae.Type, ae.Retryable, ae.Message = gateway.ErrTypeDecode, false, err.Error()
			}
			return llm.Response{}, ae
		}
		data := strings.TrimSpace(string(ev.Data))
		if data == "[DONE]" {
			done = true
			continue
		}
		var chunk chatResponse
		if err := json.Unmarshal(ev.Data, &chunk); err != nil {
			return llm.Response{}, decodeErr("decode stream chunk: %v", err)
		}
		if chunk.Error != nil {
			ae := chunk.Error.apiError(http.StatusOK)
			ae.Usage = usage
			return llm.Response{}, ae
		}
		if chunk.Model != "" {
			resp.Model = chunk.Model
		}
		if chunk.Usage != nil {
			u, err := chunk.Usage.normalise()
			if err != nil {
				return llm.Response{}, decodeErr("decode stream usage: %v", err)
			}
			usage = &u
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // only one choice is requested
			}
			d := ch.Delta
			if d.Content != nil {
				content.WriteString(*d.Content)
			}
			if d.Refusal != nil {
				refusal.WriteString(*d.Refusal)
			}
			for pos, tc := range d.ToolCalls {
				idx := pos
				if tc.Index != nil {
					idx = *tc.Index
				}
				b := calls[idx]
				if b == nil {
					if len(calls) >= maxStreamToolCalls || idx < 0 {
						return llm.Response{}, decodeErr("decode stream: tool call index %d out of range", idx)
					}
					b = &callBuilder{}
					calls[idx] = b
				}
				if b.id == "" {
					b.id = tc.ID
				}
				if b.name == "" {
					b.name = tc.Function.Name
				}
				b.args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				resp.StopReason = *ch.FinishReason
				finished = true
			}
		}
	}
	msg := llm.Message{Role: llm.RoleAssistant, Content: content.String()}
	if msg.Content == "" {
		msg.Content = refusal.String()
	}
	idxs := make([]int, 0, len(calls))
	for i := range calls {
		idxs = append(idxs, i)
	}
	slices.Sort(idxs)
	for _, i := range idxs {
		b := calls[i]
		call, err := toolCall(b.id, b.name, b.args.String())
		if err != nil {
			return llm.Response{}, decodeErr("decode stream: tool call index %d: %v", i, err)
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
	}
	resp.Message = msg
	if usage != nil {
		resp.Usage = *usage
	}
	return resp, nil
}
