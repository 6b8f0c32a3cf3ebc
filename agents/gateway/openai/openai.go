// Package openai is a client for the OpenAI Chat Completions API and for the
// many local servers that implement it (vLLM, llama.cpp, Ollama, LM Studio):
// set BaseURL to the server's /v1 endpoint.
//
// It translates llm requests to the wire format (assistant messages carry
// tool_calls with string arguments; each tool result is a role "tool"
// message naming its tool_call_id), decodes answers and streams (SSE with
// stream_options.include_usage, tool-call deltas assembled by index), and
// normalises usage: prompt_tokens already include
// prompt_tokens_details.cached_tokens, and completion_tokens already include
// completion_tokens_details.reasoning_tokens, so both map straight onto
// llm.Usage. Failures are *gateway.APIError values carrying the provider's
// own error body.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/llm"
)

// DefaultBaseURL is OpenAI's API root.
const DefaultBaseURL = "https://api.openai.com/v1"

// ProviderName is the gen_ai.provider.name value for OpenAI.
const ProviderName = "openai"

// Config configures a Client.
type Config struct {
	// BaseURL is the API root, up to and including /v1; default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token; it may be empty for local servers.
	APIKey gateway.Secret
	// Model is used when a request names none.
	Model string
	// Provider is reported as gen_ai.provider.name; default "openai".
	Provider string
	// Stream requests server-sent events and assembles them.
	Stream bool
	// MaxTokensParam is the request field carrying the output cap:
	// "max_completion_tokens" (default; required by OpenAI's reasoning
	// models, which reject max_tokens) or "max_tokens" (older local servers).
	MaxTokensParam string
	// HTTPClient defaults to a client without a global timeout (the caller's
	// context bounds each call).
	HTTPClient *http.Client
	// Now is the clock used to read HTTP-date Retry-After values.
	Now func() time.Time
}

// Validate checks the config.
func (c Config) Validate() error {
	var errs []error
	if c.BaseURL != "" && !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		errs = append(errs, fmt.Errorf("base_url: %q must start with http:// or https://", c.BaseURL))
	}
	switch c.MaxTokensParam {
	case "", "max_completion_tokens", "max_tokens":
	default:
		errs = append(errs, fmt.Errorf("max_tokens_param: %q must be max_completion_tokens or max_tokens", c.MaxTokensParam))
	}
	if (c.BaseURL == "" || c.BaseURL == DefaultBaseURL) && c.APIKey.IsZero() {
		errs = append(errs, errors.New("api_key: required for the OpenAI API (it may be empty only for a local server's base_url)"))
	}
	return errors.Join(errs...)
}

// Client calls one Chat Completions endpoint. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
}

var _ gateway.Model = (*Client)(nil)

// Format prints the client without its configuration, whatever the verb:
// fmt cannot reach the key's own redaction (gateway.Secret's Format) inside
// an unexported field, so %v of a Client would print the key.
func (c Client) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "%s.Client{model %s at %s}", "openai", c.cfg.Model, c.endpoint)
}

// New returns a client; it performs no I/O.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate openai config: %w", err)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Provider == "" {
		cfg.Provider = ProviderName
	}
	if cfg.MaxTokensParam == "" {
		cfg.MaxTokensParam = "max_completion_tokens"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg, endpoint: strings.TrimSuffix(cfg.BaseURL, "/") + "/chat/completions"}, nil
}

// Provider returns the gateway provider entry for OpenAI-compatible models:
// the key comes from OPENAI_API_KEY unless the entry names another
// variable, and may be absent for an entry pointing at a local server.
func Provider() gateway.Provider {
	return gateway.Provider{
		DefaultKeyEnv: "OPENAI_API_KEY",
		KeyOptional: func(m gateway.ModelConfig) bool {
			return m.BaseURL != "" && m.BaseURL != DefaultBaseURL
		},
		Build: func(m gateway.ModelConfig, key gateway.Secret, o gateway.BuildOptions) (gateway.Model, error) {
			return New(Config{BaseURL: m.BaseURL, APIKey: key, Model: m.Model, Provider: m.Provider, Stream: m.Stream,
				HTTPClient: o.HTTPClient, Now: o.Now})
		},
	}
}

// Label is "live": every answer comes from a real provider.
func (c *Client) Label() string { return llm.LabelLive }

// Complete sends one request and returns the assistant's answer.
func (c *Client) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	model := req.Model
	if model == "" {
		model = c.cfg.Model
	}
	if model == "" {
		return llm.Response{}, errors.New("openai: request names no model and the client has no default")
	}
	body, err := encodeRequest(req, model, c.cfg.MaxTokensParam, c.cfg.Stream)
	if err != nil {
		return llm.Response{}, fmt.Errorf("openai: encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return llm.Response{}, fmt.Errorf("openai: build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.cfg.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	if !c.cfg.APIKey.IsZero() {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey.Reveal())
	}
	return gateway.Exchange{
		Client: c.cfg.HTTPClient, Provider: c.cfg.Provider, Model: model, Key: c.cfg.APIKey, Now: c.cfg.Now,
		Stream: c.cfg.Stream, RequestIDHeader: "x-request-id",
		DecodeError: decodeError, DecodeStream: decodeStream, DecodeResponse: decodeResponse,
	}.Do(ctx, hreq)
}

// ---- wire format ----

type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Tools               []chatTool     `json:"tools,omitempty"`
	MaxCompletionTokens int            `json:"max_completion_tokens,omitempty"`
	MaxTokens           int            `json:"max_tokens,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is null on an assistant message that only calls tools.
	Content    *string        `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name string `json:"name"`
	// Arguments is a JSON document encoded as a string.
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string      `json:"type"`
	Function chatToolDef `json:"function"`
}

type chatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

func encodeRequest(req llm.Request, model, maxParam string, stream bool) ([]byte, error) {
	out := chatRequest{Model: model, Temperature: req.Temperature}
	if req.MaxTokens > 0 {
		if maxParam == "max_tokens" {
			out.MaxTokens = req.MaxTokens
		} else {
			out.MaxCompletionTokens = req.MaxTokens
		}
	}
	if stream {
		out.Stream = true
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if req.System != "" {
		s := req.System
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: &s})
	}
	for i, m := range req.Messages {
		content := m.Content
		cm := chatMessage{Role: string(m.Role), Content: &content}
		switch m.Role {
		case llm.RoleSystem, llm.RoleUser:
		case llm.RoleAssistant:
			if content == "" && len(m.ToolCalls) > 0 {
				cm.Content = nil
			}
			for _, tc := range m.ToolCalls {
				args := "{}"
				if len(bytes.TrimSpace(tc.Arguments)) > 0 {
					args = string(tc.Arguments)
				}
				cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
					ID: tc.ID, Type: "function", Function: chatFunction{Name: tc.Name, Arguments: args},
				})
			}
		case llm.RoleTool:
			// The wire format has no error flag for tool results; the
			// content itself must say that the tool failed.
			cm.ToolCallID = m.ToolCallID
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		out.Messages = append(out.Messages, cm)
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatToolDef{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters,
		}})
	}
	return json.Marshal(out)
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage"`
	Error   *errorBody   `json:"error"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      respMessage `json:"message"` // non-streamed answers
	Delta        respMessage `json:"delta"`   // stream chunks
	FinishReason *string     `json:"finish_reason"`
}

type respMessage struct {
	Role      string      `json:"role"`
	Content   *string     `json:"content"`
	Refusal   *string     `json:"refusal"`
	ToolCalls []deltaCall `json:"tool_calls"`
}

// deltaCall is a tool call in a response message or a stream delta; in a
// delta, only Index is always present and the other fields arrive in pieces.
type deltaCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// normalise maps OpenAI usage onto llm.Usage. prompt_tokens already include
// the cached part and completion_tokens the reasoning part, so nothing is
// added; the details are copied out as breakdowns.
func (u *chatUsage) normalise() (llm.Usage, error) {
	out := llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CacheReadTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	switch {
	case out.InputTokens < 0 || out.OutputTokens < 0 || out.CacheReadTokens < 0 || out.ReasoningTokens < 0:
		return llm.Usage{}, errors.New("usage: negative token count")
	case out.CacheReadTokens > out.InputTokens:
		return llm.Usage{}, fmt.Errorf("usage: cached_tokens %d exceed prompt_tokens %d", out.CacheReadTokens, out.InputTokens)
	case out.ReasoningTokens > out.OutputTokens:
		return llm.Usage{}, fmt.Errorf("usage: reasoning_tokens %d exceed completion_tokens %d", out.ReasoningTokens, out.OutputTokens)
	}
	return out, nil
}

func decodeErr(format string, args ...any) *gateway.APIError {
	return &gateway.APIError{Provider: ProviderName, Type: gateway.ErrTypeDecode, Message: fmt.Sprintf(format, args...)}
}

// decodeResponse decodes a non-streamed chat.completion body.
func decodeResponse(data []byte) (llm.Response, error) {
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return llm.Response{}, decodeErr("decode chat completion: %v", err)
	}
	if cr.Error != nil { // some compatible servers answer 200 with an error body
		return llm.Response{}, cr.Error.apiError(http.StatusOK)
	}
	if len(cr.Choices) == 0 {
		return llm.Response{}, decodeErr("decode chat completion: no choices")
	}
	ch := cr.Choices[0]
	msg := llm.Message{Role: llm.RoleAssistant}
	switch {
	case ch.Message.Content != nil:
		msg.Content = *ch.Message.Content
	case ch.Message.Refusal != nil:
		msg.Content = *ch.Message.Refusal
	}
	for i, tc := range ch.Message.ToolCalls {
		call, err := toolCall(tc.ID, tc.Function.Name, tc.Function.Arguments)
		if err != nil {
			return llm.Response{}, decodeErr("decode chat completion: choices[0].message.tool_calls[%d]: %v", i, err)
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
	}
	resp := llm.Response{Message: msg, Model: cr.Model}
	if ch.FinishReason != nil {
		resp.StopReason = *ch.FinishReason
	}
	if cr.Usage != nil {
		u, err := cr.Usage.normalise()
		if err != nil {
			return llm.Response{}, decodeErr("decode chat completion: %v", err)
		}
		resp.Usage = u
	}
	return resp, nil
}

// toolCall converts a wire tool call. Arguments that are not valid JSON
// (models do emit them) are kept as a JSON string, so the runtime's schema
// check rejects them and tells the model, instead of the call failing here.
func toolCall(id, name, args string) (llm.ToolCall, error) {
	if id == "" {
		return llm.ToolCall{}, errors.New("tool call without id")
	}
	if name == "" {
		return llm.ToolCall{}, fmt.Errorf("tool call %q without function name", id)
	}
	raw := json.RawMessage("{}")
	if strings.TrimSpace(args) != "" {
		if json.Valid([]byte(args)) {
			raw = json.RawMessage(args)
		} else {
			b, _ := json.Marshal(args)
			raw = b
		}
	}
	return llm.ToolCall{ID: id, Name: name, Arguments: raw}, nil
}

// errorBody is OpenAI's error object:
// {"error":{"message":...,"type":...,"param":...,"code":...}}. Compatible
// servers vary: code may be a number, param an object.
type errorBody struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Param   json.RawMessage `json:"param"`
	Code    json.RawMessage `json:"code"`
}

func rawString(r json.RawMessage) string {
	if len(r) == 0 || string(r) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(r, &s) == nil {
		return s
	}
	return string(r)
}

func (e *errorBody) apiError(status int) *gateway.APIError {
	ae := &gateway.APIError{
		Provider: ProviderName, Status: status, Type: e.Type, Message: e.Message,
		Param: rawString(e.Param), Code: rawString(e.Code),
	}
	ae.Retryable = retryable(status, ae.Type, ae.Code)
	return ae
}

// retryable applies the gateway's rule, except that a 429 which means the
// account is out of credit does not get better by waiting.
func retryable(status int, typ, code string) bool {
	if status == http.StatusOK {
		// An error inside a 200 (stream error chunk): transient only if the
		// server says it was its fault.
		return typ == "server_error" || code == "server_error" || typ == "rate_limit_exceeded" || code == "rate_limit_exceeded"
	}
	if status == http.StatusTooManyRequests && (code == "insufficient_quota" || typ == "insufficient_quota") {
		return false
	}
	return gateway.RetryableStatus(status)
}

// decodeError reads an error answer. A body that is not OpenAI's JSON (a
// proxy's HTML page) is kept, trimmed, as the message.
func decodeError(status int, data []byte) *gateway.APIError {
	var env struct {
		Error *errorBody `json:"error"`
	}
	if json.Unmarshal(data, &env) == nil && env.Error != nil {
		return env.Error.apiError(status)
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &gateway.APIError{Provider: ProviderName, Status: status, Message: msg, Retryable: retryable(status, "", "")}
}
