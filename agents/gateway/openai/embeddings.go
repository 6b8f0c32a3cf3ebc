package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
)

// EmbeddingsConfig configures an Embeddings client for an OpenAI-compatible
// embeddings endpoint (OpenAI, vLLM, Ollama, LM Studio, TEI, …).
type EmbeddingsConfig struct {
	// BaseURL is the API root, up to and including /v1, e.g.
	// "http://127.0.0.1:8000/v1"; the client posts to BaseURL +
	// "/embeddings". Default DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token; it may be empty for local servers.
	APIKey gateway.Secret
	// Model is the model name the endpoint expects.
	Model string
	// Dimensions, when > 0, is sent as "dimensions" (models that support
	// shortening, e.g. text-embedding-3-*).
	Dimensions int
	// Provider names the endpoint in errors; default "openai".
	Provider string
	// Timeout bounds one request when HTTPClient is nil (default 60s).
	Timeout time.Duration
	// HTTPClient is used when set (tests, proxies).
	HTTPClient *http.Client
	// Now is the clock used to read HTTP-date Retry-After values.
	Now func() time.Time
}

// Validate reports a configuration that cannot work, naming the field.
func (c EmbeddingsConfig) Validate() error {
	var errs []error
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("base_url: %q must be an http(s) URL", c.BaseURL))
		}
	}
	if c.Model == "" {
		errs = append(errs, errors.New("model: must be set"))
	}
	if c.Dimensions < 0 {
		errs = append(errs, fmt.Errorf("dimensions: must be >= 0 (got %d)", c.Dimensions))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: must be >= 0 (got %s)", c.Timeout))
	}
	if (c.BaseURL == "" || c.BaseURL == DefaultBaseURL) && c.APIKey.IsZero() {
		errs = append(errs, errors.New("api_key: required for the OpenAI API (it may be empty only for a local server's base_url)"))
	}
	return errors.Join(errs...)
}

// Embeddings calls POST {base}/embeddings through the gateway's Exchange:
// failures are *gateway.APIError values (OpenAI's error body, classified
// retryable or not) with the key scrubbed from them. It satisfies
// retrieval.Embedder and is safe for concurrent use.
type Embeddings struct {
	cfg      EmbeddingsConfig
	endpoint string
}

// NewEmbeddings validates cfg and returns a client; it performs no I/O.
func NewEmbeddings(cfg EmbeddingsConfig) (*Embeddings, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("openai embeddings config: %w", err)
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Provider == "" {
		cfg.Provider = ProviderName
	}
	if cfg.HTTPClient == nil {
		t := cfg.Timeout
		if t == 0 {
			t = 60 * time.Second
		}
		cfg.HTTPClient = &http.Client{Timeout: t}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Embeddings{cfg: cfg, endpoint: strings.TrimRight(cfg.BaseURL, "/") + "/embeddings"}, nil
}

// Format prints the client without its configuration (fmt cannot reach
// the Secret's own Format inside an unexported field), whatever the verb.
func (e Embeddings) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "openai.Embeddings{model %s at %s}", e.cfg.Model, e.endpoint)
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
	// Error: some compatible servers answer 200 with an error body.
	Error *errorBody `json:"error"`
}

// Embed sends texts in one request and returns their vectors in input
// order (the answer is matched back by "index", whatever its order).
func (e *Embeddings) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	x := gateway.Exchange{
		Client: e.cfg.HTTPClient, Provider: e.cfg.Provider, Model: e.cfg.Model, Key: e.cfg.APIKey, Now: e.cfg.Now,
		RequestIDHeader: "x-request-id", DecodeError: decodeError,
	}
	var resp embeddingsResponse
	req := embeddingsRequest{Model: e.cfg.Model, Input: texts, EncodingFormat: "float", Dimensions: e.cfg.Dimensions}
	if err := x.PostJSON(ctx, e.endpoint, req, &resp); err != nil {
		return nil, fmt.Errorf("embed %d texts: %w", len(texts), err)
	}
	if resp.Error != nil {
		ae := resp.Error.apiError(http.StatusOK)
		ae.Provider, ae.Model = e.cfg.Provider, e.cfg.Model
		return nil, fmt.Errorf("embed %d texts: %w", len(texts), gateway.ScrubKey(ae, e.cfg.APIKey))
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
