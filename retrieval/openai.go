package retrieval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// OpenAIEmbeddingsConfig configures a client for an OpenAI-compatible
// embeddings endpoint (OpenAI, vLLM, Ollama, LM Studio, TEI, …).
type OpenAIEmbeddingsConfig struct {
	// BaseURL is the API root, e.g. "http://127.0.0.1:8000/v1"; the client
	// posts to BaseURL + "/embeddings".
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Model is the model name the endpoint expects.
	Model string
	// Dimensions, when > 0, is sent as "dimensions" (models that support
	// shortening, e.g. text-embedding-3-*).
	Dimensions int
	// Timeout bounds one request (default 60s).
	Timeout time.Duration
	// HTTPClient is used when set (tests, proxies).
	HTTPClient *http.Client
}

// Validate reports a configuration that cannot work.
func (c OpenAIEmbeddingsConfig) Validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("base_url must be set"))
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("base_url %q must be an http(s) URL", c.BaseURL))
	}
	if c.Model == "" {
		errs = append(errs, errors.New("model must be set"))
	}
	if c.Dimensions < 0 {
		errs = append(errs, fmt.Errorf("dimensions must be >= 0 (got %d)", c.Dimensions))
	}
	return errors.Join(errs...)
}

// OpenAIEmbeddings is an Embedder backed by POST /v1/embeddings.
type OpenAIEmbeddings struct {
	cfg    OpenAIEmbeddingsConfig
	client *http.Client
}

var _ Embedder = (*OpenAIEmbeddings)(nil)

// NewOpenAIEmbeddings validates cfg and returns a client (no I/O).
func NewOpenAIEmbeddings(cfg OpenAIEmbeddingsConfig) (*OpenAIEmbeddings, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("openai embeddings config: %w", err)
	}
	c := cfg.HTTPClient
	if c == nil {
		t := cfg.Timeout
		if t <= 0 {
			t = 60 * time.Second
		}
		c = &http.Client{Timeout: t}
	}
	return &OpenAIEmbeddings{cfg: cfg, client: c}, nil
}

type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

type embeddingsResponse struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// APIError is an error answer from a hosted model endpoint.
type APIError struct {
	StatusCode int
	Type       string
	Code       string
	Message    string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "status %d", e.StatusCode)
	if e.Type != "" {
		fmt.Fprintf(&b, " %s", e.Type)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// parseAPIError reads the error shapes hosted endpoints use: OpenAI's
// {"error":{"message","type","code"}}, Cohere's {"message"}, FastAPI/Jina's
// {"detail"}; anything else is quoted (truncated).
func parseAPIError(status int, body []byte) *APIError {
	e := &APIError{StatusCode: status}
	var oa struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
		Message string `json:"message"`
		Detail  any    `json:"detail"`
	}
	if json.Unmarshal(body, &oa) == nil {
		switch {
		case oa.Error != nil:
			e.Message, e.Type = oa.Error.Message, oa.Error.Type
			if oa.Error.Code != nil {
				e.Code = fmt.Sprint(oa.Error.Code)
			}
			return e
		case oa.Message != "":
			e.Message = oa.Message
			return e
		case oa.Detail != nil:
			if s, ok := oa.Detail.(string); ok {
				e.Message = s
			} else {
				b, _ := json.Marshal(oa.Detail)
				e.Message = string(b)
			}
			return e
		}
	}
	e.Message = strings.TrimSpace(truncate(string(body), 300))
	return e
}

// postJSON posts req to u and decodes a 2xx answer into resp.
func postJSON(ctx context.Context, client *http.Client, u, apiKey string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+apiKey)
	}
	res, err := client.Do(hr)
	if err != nil {
		return fmt.Errorf("post %s: %w", u, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s: %w", u, err)
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("post %s: %w", u, parseAPIError(res.StatusCode, data))
	}
	if err := json.Unmarshal(data, resp); err != nil {
		return fmt.Errorf("decode answer of %s: %w", u, err)
	}
	return nil
}

// Embed sends texts in one request and returns vectors in input order.
func (o *OpenAIEmbeddings) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	u := strings.TrimRight(o.cfg.BaseURL, "/") + "/embeddings"
	var resp embeddingsResponse
	req := embeddingsRequest{Model: o.cfg.Model, Input: texts, EncodingFormat: "float", Dimensions: o.cfg.Dimensions}
	if err := postJSON(ctx, o.client, u, o.cfg.APIKey, req, &resp); err != nil {
		return nil, fmt.Errorf("embed %d texts: %w", len(texts), err)
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(texts) {
			return nil, fmt.Errorf("embed %d texts: answer has index %d out of range", len(texts), d.Index)
		}
		if out[d.Index] != nil {
			return nil, fmt.Errorf("embed %d texts: answer repeats index %d", len(texts), d.Index)
		}
		if len(d.Embedding) == 0 {
			return nil, fmt.Errorf("embed %d texts: empty embedding at index %d", len(texts), d.Index)
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if v == nil {
			return nil, fmt.Errorf("embed %d texts: answer lacks index %d", len(texts), i)
		}
	}
	return out, nil
}
