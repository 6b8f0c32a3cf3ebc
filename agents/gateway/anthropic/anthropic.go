// Package anthropic is a client for the Anthropic Messages API.
//
// It translates llm requests to the wire format: the system prompt is a
// top-level field; an assistant message's tool calls become tool_use blocks
// {id, name, input}; tool results become tool_result blocks {tool_use_id,
// content, is_error} folded into the next user turn, consecutive results
// merged into one user message (the API requires each tool_result to sit in
// the user message right after its tool_use); max_tokens is always sent
// because the API requires it.
//
// Usage is normalised to llm.Usage, whose InputTokens include cached input
// (the GenAI convention): Anthropic's input_tokens exclude
// cache_read_input_tokens and cache_creation_input_tokens, so
//
//	llm.InputTokens         = input_tokens + cache_read_input_tokens + cache_creation_input_tokens
//	llm.CacheReadTokens     = cache_read_input_tokens
//	llm.CacheCreationTokens = cache_creation_input_tokens
//	llm.OutputTokens        = output_tokens
package anthropic

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

// Defaults.
const (
	DefaultBaseURL = "https://api.anthropic.com"
	// APIVersion is the anthropic-version header value.
	APIVersion = "2023-06-01"
	// ProviderName is the gen_ai.provider.name value.
	ProviderName = "anthropic"
	// DefaultMaxTokens is sent when neither the request nor the config sets
	// one.
	DefaultMaxTokens = 4096
)

// maxTokenCount bounds any one reported token count; anything larger is a
// corrupt body, and summing such values could overflow.
const maxTokenCount = 1 << 50

// Config configures a Client.
type Config struct {
	BaseURL string // default DefaultBaseURL; the client appends /v1/messages
	APIKey  gateway.Secret
	Model   string // used when a request names none
	// Provider is reported as gen_ai.provider.name; default "anthropic".
	Provider string
	Stream   bool
	// MaxTokens is sent when a request sets none; default DefaultMaxTokens.
	MaxTokens  int
	HTTPClient *http.Client
	Now        func() time.Time
}

// Validate checks the config.
func (c Config) Validate() error {
	var errs []error
	if c.BaseURL != "" && !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://") {
		errs = append(errs, fmt.Errorf("base_url: %q must start with http:// or https://", c.BaseURL))
	}
	if c.APIKey.IsZero() {
		errs = append(errs, errors.New("api_key: required"))
	}
	if c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("max_tokens: must not be negative (got %d)", c.MaxTokens))
	}
	return errors.Join(errs...)
}

// Client calls the Messages endpoint. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
}

var _ gateway.Model = (*Client)(nil)

// Format prints the client without its configuration, whatever the verb:
// fmt cannot reach the key's own redaction (gateway.Secret's Format) inside
// an unexported field, so %v of a Client would print the key.
func (c Client) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "%s.Client{model %s at %s}", "anthropic", c.cfg.Model, c.endpoint)
}

// New returns a client; it performs no I/O.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate anthropic config: %w", err)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Provider == "" {
		cfg.Provider = ProviderName
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Client{cfg: cfg, endpoint: strings.TrimSuffix(cfg.BaseURL, "/") + "/v1/messages"}, nil
}

// Provider returns the gateway provider entry for Anthropic models; the key
// comes from ANTHROPIC_API_KEY unless the entry names another variable.
func Provider() gateway.Provider {
	return gateway.Provider{
		DefaultKeyEnv: "ANTHROPIC_API_KEY",
		Build: func(m gateway.ModelConfig, key gateway.Secret, o gateway.BuildOptions) (gateway.Model, error) {
			return New(Config{BaseURL: m.BaseURL, APIKey: key, Model: m.Model, Provider: m.Provider,
				Stream: m.Stream, MaxTokens: m.MaxOutputTokens, HTTPClient: o.HTTPClient, Now: o.Now})
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
		return llm.Response{}, errors.New("anthropic: request names no model and the client has no default")
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = c.cfg.MaxTokens
	}
	body, err := encodeRequest(req, model, maxTokens, c.cfg.Stream)
	if err != nil {
		return llm.Response{}, fmt.Errorf("anthropic: encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return llm.Response{}, fmt.Errorf("anthropic: build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("anthropic-version", APIVersion)
	hreq.Header.Set("x-api-key", c.cfg.APIKey.Reveal())
	if c.cfg.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	return gateway.Exchange{
		Client: c.cfg.HTTPClient, Provider: c.cfg.Provider, Model: model, Key: c.cfg.APIKey, Now: c.cfg.Now,
		Stream: c.cfg.Stream, RequestIDHeader: "request-id",
		DecodeError: decodeError, DecodeStream: decodeStream, DecodeResponse: decodeResponse,
	}.Do(ctx, hreq)
}

// ---- wire format ----

type msgRequest struct {
	Model       string    `json:"model"`
	MaxTokens   int       `json:"max_tokens"`
	System      string    `json:"system,omitempty"`
	Messages    []msgTurn `json:"messages"`
	Tools       []msgTool `json:"tools,omitempty"`
	Temperature *float64  `json:"temperature,omitempty"`
	Stream      bool      `json:"stream,omitempty"`
}

type msgTurn struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a request content block; which fields are set depends on Type.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type msgTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func encodeRequest(req llm.Request, model string, maxTokens int, stream bool) ([]byte, error) {
	out := msgRequest{Model: model, MaxTokens: maxTokens, Temperature: req.Temperature, Stream: stream}
	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	add := func(role string, blocks []block) {
		if len(blocks) == 0 {
			return // the API rejects empty content
		}
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			// Consecutive results, or results then the user's next words,
			// share one user turn; the API wants turns to alternate.
			out.Messages[n-1].Content = append(out.Messages[n-1].Content, blocks...)
			return
		}
		out.Messages = append(out.Messages, msgTurn{Role: role, Content: blocks})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case llm.RoleSystem:
			// Messages has no system role: fold into the top-level prompt.
			if m.Content != "" {
				system = append(system, m.Content)
			}
		case llm.RoleUser:
			if m.Content != "" {
				add("user", []block{{Type: "text", Text: m.Content}})
			}
		case llm.RoleAssistant:
			var blocks []block
			if m.Content != "" {
				blocks = append(blocks, block{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				input := json.RawMessage("{}")
				if t := bytes.TrimSpace(tc.Arguments); len(t) > 0 {
					if !json.Valid(t) || t[0] != '{' {
						return nil, fmt.Errorf("message %d: tool call %q: arguments are not a JSON object", i, tc.ID)
					}
					input = json.RawMessage(t)
				}
				blocks = append(blocks, block{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: input})
			}
			add("assistant", blocks)
		case llm.RoleTool:
			add("user", []block{{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError}})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	out.System = strings.Join(system, "\n\n")
	if out.Messages == nil {
		out.Messages = []msgTurn{}
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out.Tools = append(out.Tools, msgTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return json.Marshal(out)
}

type msgResponse struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Role       string      `json:"role"`
	Model      string      `json:"model"`
	Content    []respBlock `json:"content"`
	StopReason *string     `json:"stop_reason"`
	Usage      *msgUsage   `json:"usage"`
	Error      *errorBody  `json:"error"`
}

type respBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// msgUsage is Anthropic's usage block. Pointers tell "absent" from zero,
// which matters when a stream's message_delta updates only some fields.
type msgUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

// merge overwrites fields present in v (stream usage is cumulative).
func (u *msgUsage) merge(v *msgUsage) {
	if v == nil {
		return
	}
	if v.InputTokens != nil {
		u.InputTokens = v.InputTokens
	}
	if v.OutputTokens != nil {
		u.OutputTokens = v.OutputTokens
	}
	if v.CacheCreationInputTokens != nil {
		u.CacheCreationInputTokens = v.CacheCreationInputTokens
	}
	if v.CacheReadInputTokens != nil {
		u.CacheReadInputTokens = v.CacheReadInputTokens
	}
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// normalise converts to llm.Usage, adding the cache fields back into input
// (see the package doc).
func (u *msgUsage) normalise() (llm.Usage, error) {
	in, out := val(u.InputTokens), val(u.OutputTokens)
	cr, cw := val(u.CacheReadInputTokens), val(u.CacheCreationInputTokens)
	for _, v := range []int64{in, out, cr, cw} {
		if v < 0 || v > maxTokenCount {
			return llm.Usage{}, fmt.Errorf("usage: token count %d out of range", v)
		}
	}
	return llm.Usage{
		InputTokens:         in + cr + cw,
		OutputTokens:        out,
		CacheReadTokens:     cr,
		CacheCreationTokens: cw,
	}, nil
}

func decodeErr(format string, args ...any) *gateway.APIError {
	return &gateway.APIError{Provider: ProviderName, Type: gateway.ErrTypeDecode, Message: fmt.Sprintf(format, args...)}
}

// decodeResponse decodes a non-streamed message body.
func decodeResponse(data []byte) (llm.Response, error) {
	var mr msgResponse
	if err := json.Unmarshal(data, &mr); err != nil {
		return llm.Response{}, decodeErr("decode message: %v", err)
	}
	if mr.Type == "error" && mr.Error != nil {
		return llm.Response{}, mr.Error.apiError(streamStatus(mr.Error.Type))
	}
	if mr.Type != "message" {
		return llm.Response{}, decodeErr("decode message: type %q, want \"message\"", mr.Type)
	}
	msg := llm.Message{Role: llm.RoleAssistant}
	var text strings.Builder
	for i, b := range mr.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			call, err := toolCall(b.ID, b.Name, b.Input)
			if err != nil {
				return llm.Response{}, decodeErr("decode message: content[%d]: %v", i, err)
			}
			msg.ToolCalls = append(msg.ToolCalls, call)
		}
		// thinking and server-tool blocks are not part of llm.Message.
	}
	msg.Content = text.String()
	resp := llm.Response{Message: msg, Model: mr.Model}
	if mr.StopReason != nil {
		resp.StopReason = *mr.StopReason
	}
	if mr.Usage != nil {
		u, err := mr.Usage.normalise()
		if err != nil {
			return llm.Response{}, decodeErr("decode message: %v", err)
		}
		resp.Usage = u
	}
	return resp, nil
}

// toolCall converts a tool_use block. Input that is not valid JSON is kept
// as a JSON string so the runtime's schema check reports it to the model.
func toolCall(id, name string, input json.RawMessage) (llm.ToolCall, error) {
	if id == "" {
		return llm.ToolCall{}, errors.New("tool_use without id")
	}
	if name == "" {
		return llm.ToolCall{}, fmt.Errorf("tool_use %q without name", id)
	}
	raw := json.RawMessage("{}")
	if t := bytes.TrimSpace(input); len(t) > 0 {
		if json.Valid(t) {
			raw = append(json.RawMessage(nil), t...)
		} else {
			raw, _ = json.Marshal(string(t))
		}
	}
	return llm.ToolCall{ID: id, Name: name, Arguments: raw}, nil
}

// errorBody is the "error" object of
// {"type":"error","error":{"type":...,"message":...},"request_id":...}.
type errorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details *struct {
		ErrorCode string `json:"error_code"`
	} `json:"details"`
}

func (e *errorBody) apiError(status int) *gateway.APIError {
	ae := &gateway.APIError{Provider: ProviderName, Status: status, Type: e.Type, Message: e.Message}
	if e.Details != nil {
		ae.Code = e.Details.ErrorCode
	}
	ae.Retryable = gateway.RetryableStatus(status)
	if status == http.StatusTooManyRequests && ae.Code == "enforced_spend_limit_reached" {
		ae.Retryable = false // the monthly cap does not reset by waiting seconds
	}
	return ae
}

// streamStatus maps an error type seen inside a 200 (a stream's error event)
// to the status the same error has as an HTTP answer, so the retry rule is
// the same either way.
func streamStatus(typ string) int {
	switch typ {
	case "overloaded_error":
		return 529
	case "api_error":
		return http.StatusInternalServerError
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusOK
}

func decodeError(status int, data []byte) *gateway.APIError {
	var env struct {
		Type      string     `json:"type"`
		Error     *errorBody `json:"error"`
		RequestID string     `json:"request_id"`
	}
	if json.Unmarshal(data, &env) == nil && env.Error != nil {
		ae := env.Error.apiError(status)
		ae.RequestID = env.RequestID
		return ae
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &gateway.APIError{Provider: ProviderName, Status: status, Message: msg, Retryable: gateway.RetryableStatus(status)}
}
