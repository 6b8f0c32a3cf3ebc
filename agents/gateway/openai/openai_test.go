package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/openai"
	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/agents/llm"
)

const testKey = "sk-test-7f3a9c1e5b2d4f6a8c0e"

func newClient(t *testing.T, srv *providertest.Server, stream bool) *openai.Client {
	t.Helper()
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: gateway.NewSecret(testKey), Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var weatherTool = llm.ToolSpec{
	Name: "get_weather", Description: "Current weather for a city",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

// conversation is a full tool round trip: the model called get_weather and
// the result is in; the next answer is requested.
func conversation() llm.Request {
	return llm.Request{
		Model:  "gpt-4.1-mini",
		System: "You are terse.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Weather in Paris and Oslo?"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "call_Paris1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
				{ID: "call_Oslo22", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
			}},
			{Role: llm.RoleTool, ToolCallID: "call_Paris1", ToolName: "get_weather", Content: `{"temp_c":18}`},
			{Role: llm.RoleTool, ToolCallID: "call_Oslo22", ToolName: "get_weather", Content: `{"temp_c":9}`},
		},
		Tools:     []llm.ToolSpec{weatherTool},
		MaxTokens: 256,
	}
}

func TestCompleteSendsToolHistoryInOpenAIWireShape(t *testing.T) {
	srv := providertest.NewOpenAI(t, testKey)
	srv.Enqueue(providertest.OpenAICompletion(providertest.OpenAIAnswer{
		Model: "gpt-4.1-mini-2025-04-14", Content: "Paris 18°C, Oslo 9°C.", Prompt: 120, Completion: 12,
	}))
	resp, err := newClient(t, srv, false).Complete(context.Background(), conversation())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Paris 18°C, Oslo 9°C." || resp.StopReason != "stop" {
		t.Fatalf("answer = %+v", resp)
	}
	if resp.Label != llm.LabelLive || resp.Provider != "openai" || resp.Model != "gpt-4.1-mini-2025-04-14" {
		t.Fatalf("label/provider/model = %q/%q/%q", resp.Label, resp.Provider, resp.Model)
	}

	got := srv.Requests()[0]
	if h := got.Header.Get("Authorization"); h != "Bearer "+testKey {
		t.Fatalf("Authorization = %q", h)
	}
	body := got.JSON()
	msgs := body["messages"].([]any)
	if len(msgs) != 5 {
		t.Fatalf("sent %d messages, want system+user+assistant+2 tool: %s", len(msgs), got.Body)
	}
	if m := msgs[0].(map[string]any); m["role"] != "system" || m["content"] != "You are terse." {
		t.Fatalf("system message = %v", m)
	}
	asst := msgs[2].(map[string]any)
	if c, ok := asst["content"]; !ok || c != nil {
		t.Fatalf("assistant content = %v (present %v), want null", c, ok)
	}
	call := asst["tool_calls"].([]any)[0].(map[string]any)
	fn := call["function"].(map[string]any)
	if call["type"] != "function" || call["id"] != "call_Paris1" || fn["name"] != "get_weather" || fn["arguments"] != `{"city":"Paris"}` {
		t.Fatalf("tool call = %v; arguments must be a JSON string", call)
	}
	tool := msgs[4].(map[string]any)
	if tool["role"] != "tool" || tool["tool_call_id"] != "call_Oslo22" || tool["content"] != `{"temp_c":9}` {
		t.Fatalf("tool message = %v", tool)
	}
	td := body["tools"].([]any)[0].(map[string]any)
	if td["type"] != "function" || td["function"].(map[string]any)["name"] != "get_weather" ||
		td["function"].(map[string]any)["parameters"].(map[string]any)["type"] != "object" {
		t.Fatalf("tools = %v", td)
	}
	if body["max_completion_tokens"] != float64(256) {
		t.Fatalf("max_completion_tokens = %v", body["max_completion_tokens"])
	}
	if _, streamed := body["stream"]; streamed {
		t.Fatalf("non-streaming client sent stream: %s", got.Body)
	}
}

func TestCompleteDecodesToolCallsAndNormalisesCachedAndReasoningUsage(t *testing.T) {
	answer := providertest.OpenAIAnswer{
		Model: "o4-mini-2025-04-16",
		ToolCalls: []llm.ToolCall{
			{ID: "call_abc123", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
			{ID: "call_def456", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
		},
		Prompt: 2006, Cached: 1920, Completion: 300, Reasoning: 256,
	}
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "json", true: "stream"}[stream], func(t *testing.T) {
			srv := providertest.NewOpenAI(t, testKey)
			if stream {
				srv.Enqueue(providertest.OpenAIStream(answer, 0))
			} else {
				srv.Enqueue(providertest.OpenAICompletion(answer))
			}
			req := conversation()
			req.Messages = req.Messages[:1]
			resp, err := newClient(t, srv, stream).Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StopReason != "tool_calls" || len(resp.Message.ToolCalls) != 2 {
				t.Fatalf("resp = %+v", resp)
			}
			for i, want := range answer.ToolCalls {
				got := resp.Message.ToolCalls[i]
				if got.ID != want.ID || got.Name != want.Name || string(got.Arguments) != string(want.Arguments) {
					t.Fatalf("tool call %d = %+v, want %+v", i, got, want)
				}
			}
			// OpenAI's prompt_tokens already include cached_tokens and
			// completion_tokens include reasoning_tokens: nothing is added.
			want := llm.Usage{InputTokens: 2006, OutputTokens: 300, CacheReadTokens: 1920, ReasoningTokens: 256}
			if resp.Usage != want {
				t.Fatalf("usage = %+v, want %+v", resp.Usage, want)
			}
			if stream {
				body := srv.Requests()[0].JSON()
				if body["stream"] != true || body["stream_options"].(map[string]any)["include_usage"] != true {
					t.Fatalf("stream request = %v", body)
				}
			}
		})
	}
}

func TestOrphanToolResultSurfacesOpenAIs400WithoutRetry(t *testing.T) {
	srv := providertest.NewOpenAI(t, testKey)
	req := llm.Request{Model: "gpt-4.1-mini", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleTool, ToolCallID: "call_gone", Content: "42"},
	}}
	_, err := newClient(t, srv, false).Complete(context.Background(), req)
	var ae *gateway.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *gateway.APIError", err)
	}
	if ae.Status != 400 || ae.Type != "invalid_request_error" || ae.Param != "messages.[1].role" ||
		ae.Message != providertest.OpenAIOrphanToolMessage || ae.Retryable {
		t.Fatalf("APIError = %+v", ae)
	}
	if !strings.Contains(err.Error(), "must be a response to a preceeding message with 'tool_calls'") {
		t.Fatalf("error text hides the provider's message: %v", err)
	}
	if srv.Count() != 1 {
		t.Fatalf("client sent %d requests, want 1", srv.Count())
	}
}

func TestErrorClassificationFollowsStatusAndBody(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		reply      providertest.Reply
		retryable  bool
		retryAfter time.Duration
		typ        string
	}{
		{"rate limit with retry-after-ms", providertest.OpenAIError(429,
			"Rate limit reached for gpt-4.1-mini in organization org-x on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms.",
			"tokens", "", "rate_limit_exceeded", http.Header{"Retry-After-Ms": {"644"}, "Retry-After": {"1"}}),
			true, 644 * time.Millisecond, "tokens"},
		{"quota exhausted is permanent", providertest.OpenAIError(429,
			"You exceeded your current quota, please check your plan and billing details.",
			"insufficient_quota", "", "insufficient_quota", nil), false, 0, "insufficient_quota"},
		{"server error", providertest.OpenAIError(500,
			"The server had an error while processing your request. Sorry about that!", "server_error", "", "", nil),
			true, 0, "server_error"},
		{"503 with http-date retry-after", providertest.Reply{Status: 503, Body: "<html>upstream unavailable</html>",
			Header: http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}, "Content-Type": {"text/html"}}},
			true, 3 * time.Second, ""},
		{"not found is permanent", providertest.OpenAIError(404,
			"The model `gpt-9` does not exist or you do not have access to it.", "invalid_request_error", "", "model_not_found", nil),
			false, 0, "invalid_request_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewOpenAI(t, testKey)
			srv.Enqueue(tc.reply)
			c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: gateway.NewSecret(testKey), Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Complete(context.Background(), llm.Request{Model: "gpt-4.1-mini", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
			var ae *gateway.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v", err)
			}
			if ae.Retryable != tc.retryable || ae.RetryAfter != tc.retryAfter || ae.Type != tc.typ || ae.Status != tc.reply.Status {
				t.Fatalf("APIError = %+v", ae)
			}
			if ae.Message == "" {
				t.Fatal("empty message")
			}
		})
	}
}

func TestCutStreamIsRetryableAndCallerCancelIsNot(t *testing.T) {
	srv := providertest.NewOpenAI(t, testKey)
	srv.Enqueue(providertest.OpenAIStream(providertest.OpenAIAnswer{Model: "m", Content: "a long answer that is cut"}, 3))
	c := newClient(t, srv, true)
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	_, err := c.Complete(context.Background(), req)
	var ae *gateway.APIError
	if !errors.As(err, &ae) || ae.Type != gateway.ErrTypeStreamCut || !ae.Retryable {
		t.Fatalf("cut stream err = %v", err)
	}

	srv.Enqueue(providertest.Reply{Hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Complete(ctx, req)
	if !errors.Is(err, context.DeadlineExceeded) || gateway.IsRetryable(err) {
		t.Fatalf("caller deadline err = %v (retryable %v), want the context error, not retryable", err, gateway.IsRetryable(err))
	}
}

func TestLocalServerNeedsNoKeyAndOldServersGetMaxTokens(t *testing.T) {
	srv := providertest.NewOpenAI(t, "")
	srv.Enqueue(providertest.OpenAICompletion(providertest.OpenAIAnswer{Model: "qwen2.5-7b-instruct", Content: "ok"}))
	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "qwen2.5-7b-instruct", MaxTokensParam: "max_tokens"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Complete(context.Background(), llm.Request{MaxTokens: 64, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil || resp.Message.Content != "ok" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	got := srv.Requests()[0]
	if got.Header.Get("Authorization") != "" {
		t.Fatal("sent an Authorization header without a key")
	}
	body := got.JSON()
	if body["max_tokens"] != float64(64) || body["model"] != "qwen2.5-7b-instruct" {
		t.Fatalf("body = %v", body)
	}
	if _, err := openai.New(openai.Config{}); err == nil {
		t.Fatal("the OpenAI API without a key was accepted")
	}
}

func TestKeyEchoedByServerIsScrubbedFromErrors(t *testing.T) {
	srv := providertest.NewOpenAI(t, testKey)
	srv.Enqueue(providertest.OpenAIError(401, "Incorrect API key provided: "+testKey+".", "invalid_request_error", "", "invalid_api_key", nil))
	_, err := newClient(t, srv, false).Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("err = %v", err)
	}
	var ae *gateway.APIError
	if !errors.As(err, &ae) || strings.Contains(ae.Message, testKey) || ae.Retryable {
		t.Fatalf("APIError = %+v", ae)
	}
}

func TestInvalidArgumentsFromModelAreKeptAsJSONString(t *testing.T) {
	srv := providertest.NewOpenAI(t, testKey)
	srv.Enqueue(providertest.Reply{Body: `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Par"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`})
	resp, err := newClient(t, srv, false).Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Message.ToolCalls[0].Arguments); got != `"{\"city\": \"Par"` {
		t.Fatalf("arguments = %s", got)
	}
	if !json.Valid(resp.Message.ToolCalls[0].Arguments) {
		t.Fatal("arguments are not valid JSON")
	}
}
