package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/agents/llm"
)

func seedAnswers() []providertest.AnthropicAnswer {
	return []providertest.AnthropicAnswer{
		{Model: "claude-sonnet-4-5", Text: "hello", Input: 10, Output: 2},
		{Model: "claude-sonnet-4-5", Text: "checking", ToolUses: []llm.ToolCall{{ID: "toolu_1", Name: "f", Arguments: json.RawMessage(`{"a":[1,2]}`)}},
			Input: 21, CacheRead: 1800, CacheCreation: 250, Output: 93},
	}
}

func checkResponse(t *testing.T, resp llm.Response) {
	t.Helper()
	for _, c := range resp.Message.ToolCalls {
		if c.ID == "" || c.Name == "" || !json.Valid(c.Arguments) {
			t.Fatalf("bad tool call %+v", c)
		}
	}
	u := resp.Usage
	if u.InputTokens < u.CacheReadTokens+u.CacheCreationTokens || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheCreationTokens < 0 {
		t.Fatalf("inconsistent usage %+v", u)
	}
	if _, err := json.Marshal(resp); err != nil {
		t.Fatalf("decoded response does not marshal: %v", err)
	}
}

func FuzzDecodeResponse(f *testing.F) {
	for _, a := range seedAnswers() {
		f.Add([]byte(providertest.AnthropicMessage(a).Body))
	}
	f.Add([]byte(providertest.AnthropicError(529, "overloaded_error", "Overloaded", nil).Body))
	f.Add([]byte(`{"type":"message","content":[{"type":"tool_use","id":"x","name":"f","input":"{bad"}],"usage":{"input_tokens":-5}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := decodeResponse(data)
		if err == nil {
			checkResponse(t, resp)
		}
	})
}

func FuzzDecodeStream(f *testing.F) {
	for _, a := range seedAnswers() {
		f.Add([]byte(providertest.AnthropicStream(a, 0, 0, "").Body))
		f.Add([]byte(providertest.AnthropicStream(a, 0, 3, "overloaded_error").Body))
		f.Add([]byte(providertest.AnthropicStream(a, 5, 0, "").Body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := decodeStream(bytes.NewReader(data))
		if err == nil {
			checkResponse(t, resp)
		}
	})
}

func FuzzDecodeError(f *testing.F) {
	f.Add(400, []byte(providertest.AnthropicError(400, "invalid_request_error", "messages.1.content.0: unexpected `tool_use_id`", nil).Body))
	f.Add(429, []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"enforced_spend_limit_reached"}}}`))
	f.Add(529, []byte(`Overloaded`))
	f.Fuzz(func(t *testing.T, status int, data []byte) {
		ae := decodeError(status, data)
		if ae == nil || ae.Status != status {
			t.Fatalf("decodeError(%d, %q) = %+v", status, data, ae)
		}
		if status == 400 && ae.Retryable {
			t.Fatal("a 400 was classified retryable")
		}
		_ = ae.Error()
	})
}
