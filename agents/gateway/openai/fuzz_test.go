package openai

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/agents/llm"
)

func seedAnswers() []providertest.OpenAIAnswer {
	return []providertest.OpenAIAnswer{
		{Model: "gpt-4.1-mini", Content: "hello", Prompt: 10, Completion: 2},
		{Model: "o4-mini", ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "f", Arguments: json.RawMessage(`{"a":[1,2]}`)}},
			Prompt: 2006, Cached: 1920, Completion: 300, Reasoning: 256},
	}
}

// checkResponse asserts what any successful decode must satisfy.
func checkResponse(t *testing.T, resp llm.Response) {
	t.Helper()
	for _, c := range resp.Message.ToolCalls {
		if c.ID == "" || c.Name == "" || !json.Valid(c.Arguments) {
			t.Fatalf("bad tool call %+v", c)
		}
	}
	u := resp.Usage
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens > u.InputTokens || u.ReasoningTokens > u.OutputTokens {
		t.Fatalf("inconsistent usage %+v", u)
	}
	if _, err := json.Marshal(resp); err != nil {
		t.Fatalf("decoded response does not marshal: %v", err)
	}
}

func FuzzDecodeResponse(f *testing.F) {
	for _, a := range seedAnswers() {
		f.Add([]byte(providertest.OpenAICompletion(a).Body))
	}
	f.Add([]byte(`{"choices":[]}`))
	f.Add([]byte(`{"error":{"message":"x","type":"server_error","param":null,"code":null}}`))
	f.Add([]byte(`{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{bad"}}]}}],"usage":{"prompt_tokens":-1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := decodeResponse(data)
		if err == nil {
			checkResponse(t, resp)
		}
	})
}

func FuzzDecodeStream(f *testing.F) {
	for _, a := range seedAnswers() {
		f.Add([]byte(providertest.OpenAIStream(a, 0).Body))
		f.Add([]byte(providertest.OpenAIStream(a, 4).Body))
	}
	f.Add([]byte("data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n"))
	f.Add([]byte(": keep-alive\r\n\r\ndata: [DONE]\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := decodeStream(bytes.NewReader(data))
		if err == nil {
			checkResponse(t, resp)
		}
	})
}

func FuzzDecodeError(f *testing.F) {
	f.Add(400, []byte(providertest.OpenAIError(400, providertest.OpenAIOrphanToolMessage, "invalid_request_error", "messages.[1].role", "", nil).Body))
	f.Add(429, []byte(`{"error":{"message":"quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	f.Add(502, []byte(`<html>bad gateway</html>`))
	f.Add(400, []byte(`{"error":{"message":"x","code":400,"param":{"a":1}}}`))
	f.Fuzz(func(t *testing.T, status int, data []byte) {
		ae := decodeError(status, data)
		if ae == nil || ae.Status != status || ae.Message == "" && len(bytes.TrimSpace(data)) > 0 && !json.Valid(data) {
			t.Fatalf("decodeError(%d, %q) = %+v", status, data, ae)
		}
		if status == 400 && ae.Retryable {
			t.Fatal("a 400 was classified retryable")
		}
		_ = ae.Error()
	})
}
