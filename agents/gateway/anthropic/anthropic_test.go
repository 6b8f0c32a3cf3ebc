package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/anthropic"
	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/agents/llm"
)

const testKey = "sk-ant-api03-test-9d8c7b6a5f4e3d2c1b0a"

func newClient(t *testing.T, srv *providertest.Server, stream bool) *anthropic.Client {
	t.Helper()
	c, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: gateway.NewSecret(testKey), Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var weatherTool = llm.ToolSpec{
	Name: "get_weather", Description: "Current weather for a city",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

func conversation() llm.Request {
	return llm.Request{
		Model:  "claude-sonnet-4-5",
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Weather in Paris and Oslo?"},
			{Role: llm.RoleAssistant, Content: "Checking both.", ToolCalls: []llm.ToolCall{
				{ID: "toolu_01Paris", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
				{ID: "toolu_02Oslo", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
			}},
			{Role: llm.RoleTool, ToolCallID: "toolu_01Paris", Content: `{"temp_c":18}`},
			{Role: llm.RoleTool, ToolCallID: "toolu_02Oslo", Content: "station offline", IsError: true},
			{Role: llm.RoleUser, Content: "Be brief."},
		},
		Tools: []llm.ToolSpec{weatherTool},
	}
}

func TestCompleteFoldsToolResultsIntoOneUserTurn(t *testing.T) {
	srv := providertest.NewAnthropic(t, testKey)
	srv.Enqueue(providertest.AnthropicMessage(providertest.AnthropicAnswer{
		Model: "claude-sonnet-4-5-20250929", Text: "Paris 18°C; Oslo unknown.", Input: 300, Output: 9,
	}))
	resp, err := newClient(t, srv, false).Complete(context.Background(), conversation())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Paris 18°C; Oslo unknown." || resp.StopReason != "end_turn" || resp.Label != llm.LabelLive || resp.Provider != "anthropic" {
		t.Fatalf("resp = %+v", resp)
	}
	got := srv.Requests()[0]
	if got.Header.Get("x-api-key") != testKey || got.Header.Get("anthropic-version") != "2023-06-01" {
		t.Fatalf("headers = %v", got.Header)
	}
	body := got.JSON()
	if body["system"] != "You are terse." {
		t.Fatalf("system = %v", body["system"])
	}
	if body["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Fatalf("max_tokens = %v; the API requires it", body["max_tokens"])
	}
	msgs := body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("sent %d turns, want user, assistant, user(results+text): %s", len(msgs), got.Body)
	}
	asst := msgs[1].(map[string]any)["content"].([]any)
	use := asst[1].(map[string]any)
	if use["type"] != "tool_use" || use["id"] != "toolu_01Paris" || use["input"].(map[string]any)["city"] != "Paris" {
		t.Fatalf("tool_use = %v", use)
	}
	results := msgs[2].(map[string]any)
	blocks := results["content"].([]any)
	if results["role"] != "user" || len(blocks) != 3 {
		t.Fatalf("results turn = %v", results)
	}
	r0, r1, text := blocks[0].(map[string]any), blocks[1].(map[string]any), blocks[2].(map[string]any)
	if r0["type"] != "tool_result" || r0["tool_use_id"] != "toolu_01Paris" || r0["content"] != `{"temp_c":18}` {
		t.Fatalf("first result = %v", r0)
	}
	if r1["tool_use_id"] != "toolu_02Oslo" || r1["is_error"] != true {
		t.Fatalf("second result = %v", r1)
	}
	if text["type"] != "text" || text["text"] != "Be brief." {
		t.Fatalf("trailing text = %v", text)
	}
	tool := body["tools"].([]any)[0].(map[string]any)
	if tool["name"] != "get_weather" || tool["input_schema"].(map[string]any)["type"] != "object" {
		t.Fatalf("tools = %v", tool)
	}
}

func TestCompleteDecodesToolUseAndNormalisesCacheUsage(t *testing.T) {
	answer := providertest.AnthropicAnswer{
		Model: "claude-sonnet-4-5-20250929", Text: "I'll check.",
		ToolUses: []llm.ToolCall{{ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: json.RawMessage(`{"city":"San Francisco, CA"}`)}},
		Input:    21, CacheRead: 1800, CacheCreation: 250, Output: 93,
	}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			srv := providertest.NewAnthropic(t, testKey)
			if stream {
				srv.Enqueue(providertest.AnthropicStream(answer, 0, 0, ""))
			} else {
				srv.Enqueue(providertest.AnthropicMessage(answer))
			}
			req := conversation()
			req.Messages = req.Messages[:1]
			req.MaxTokens = 1024
			resp, err := newClient(t, srv, stream).Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StopReason != "tool_use" || resp.Message.Content != "I'll check." || len(resp.Message.ToolCalls) != 1 {
				t.Fatalf("resp = %+v", resp)
			}
			c := resp.Message.ToolCalls[0]
			if c.ID != "toolu_01A09q90qw90lq917835lq9" || c.Name != "get_weather" || string(c.Arguments) != `{"city":"San Francisco, CA"}` {
				t.Fatalf("tool call = %+v (%s)", c, c.Arguments)
			}
			// input_tokens exclude both cache fields; normalised input includes them.
			want := llm.Usage{InputTokens: 21 + 1800 + 250, OutputTokens: 93, CacheReadTokens: 1800, CacheCreationTokens: 250}
			if resp.Usage != want {
				t.Fatalf("usage = %+v, want %+v", resp.Usage, want)
			}
			body := srv.Requests()[0].JSON()
			if body["max_tokens"] != float64(1024) || (body["stream"] == true) != stream {
				t.Fatalf("body = %v", body)
			}
		})
	}
}

func TestToolResultWithoutItsCallSurfacesAnthropics400WithoutRetry(t *testing.T) {
	srv := providertest.NewAnthropic(t, testKey)
	req := llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, Content: "hello"},
		{Role: llm.RoleTool, ToolCallID: "toolu_01Gone", Content: "42"},
	}}
	_, err := newClient(t, srv, false).Complete(context.Background(), req)
	var ae *gateway.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v", err)
	}
	want := "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_01Gone. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
	if ae.Status != 400 || ae.Type != "invalid_request_error" || ae.Message != want || ae.Retryable || ae.RequestID == "" {
		t.Fatalf("APIError = %+v", ae)
	}
	if srv.Count() != 1 {
		t.Fatalf("%d requests, want 1", srv.Count())
	}
}

func TestOverloadAndRateLimitAreRetryableSpendCapIsNot(t *testing.T) {
	cases := []struct {
		name       string
		reply      providertest.Reply
		retryable  bool
		retryAfter time.Duration
	}{
		{"529 overloaded", providertest.AnthropicError(529, "overloaded_error", "Overloaded", nil), true, 0},
		{"429 with retry-after", providertest.AnthropicError(429, "rate_limit_error",
			"This request would exceed the rate limit for your organization of 20,000 input tokens per minute.",
			http.Header{"Retry-After": {"7"}}), true, 7 * time.Second},
		{"500 api_error", providertest.AnthropicError(500, "api_error", "Internal server error", nil), true, 0},
		{"429 spend cap", providertest.Reply{Status: 429, Body: `{"type":"error","error":{"type":"rate_limit_error","message":"You have reached your specified API usage limits.","details":{"error_code":"enforced_spend_limit_reached"}},"request_id":"req_1"}`}, false, 0},
		{"401", providertest.AnthropicError(401, "authentication_error", "invalid x-api-key", nil), false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewAnthropic(t, testKey)
			srv.Enqueue(tc.reply)
			_, err := newClient(t, srv, false).Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			var ae *gateway.APIError
			if !errors.As(err, &ae) || ae.Retryable != tc.retryable || ae.RetryAfter != tc.retryAfter || ae.Status != tc.reply.Status {
				t.Fatalf("err = %v (%+v)", err, ae)
			}
		})
	}
}

func TestStreamErrorEventChargesUsageSeenSoFar(t *testing.T) {
	srv := providertest.NewAnthropic(t, testKey)
	// message_start (with input usage) and a ping arrive, then overloaded.
	srv.Enqueue(providertest.AnthropicStream(providertest.AnthropicAnswer{Model: "claude-sonnet-4-5", Text: "never finished", Input: 500, CacheRead: 100, Output: 40}, 0, 3, "overloaded_error"))
	_, err := newClient(t, srv, true).Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	var ae *gateway.APIError
	if !errors.As(err, &ae) || ae.Type != "overloaded_error" || ae.Status != 529 || !ae.Retryable {
		t.Fatalf("err = %v (%+v)", err, ae)
	}
	if ae.Usage == nil || ae.Usage.InputTokens != 600 || ae.Usage.CacheReadTokens != 100 || ae.Usage.OutputTokens != 1 {
		t.Fatalf("partial usage = %+v", ae.Usage)
	}

	srv.Enqueue(providertest.AnthropicStream(providertest.AnthropicAnswer{Model: "m", Text: "cut short"}, 4, 0, ""))
	_, err = newClient(t, srv, true).Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if !errors.As(err, &ae) || ae.Type != gateway.ErrTypeStreamCut || !ae.Retryable {
		t.Fatalf("cut stream err = %v", err)
	}
}

func TestKeyNeverAppearsInErrors(t *testing.T) {
	srv := providertest.NewAnthropic(t, testKey)
	srv.Enqueue(providertest.AnthropicError(403, "permission_error", "key "+testKey+" lacks access", nil))
	_, err := newClient(t, srv, false).Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "lacks access") {
		t.Fatalf("scrubbing lost the message: %v", err)
	}
}

func TestNonObjectToolArgumentsAreRejectedBeforeSending(t *testing.T) {
	srv := providertest.NewAnthropic(t, testKey)
	req := llm.Request{Model: "m", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "f", Arguments: json.RawMessage(`"{broken"`)}}},
		{Role: llm.RoleTool, ToolCallID: "t1", Content: "x"},
	}}
	_, err := newClient(t, srv, false).Complete(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "message 1") || srv.Count() != 0 {
		t.Fatalf("err = %v, requests %d", err, srv.Count())
	}
}
