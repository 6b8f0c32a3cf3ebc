// Package rerank is a client for hosted rerank APIs speaking the Cohere/Jina
// shape: POST {base}/rerank with {"model","query","documents","top_n"},
// answered by {"results":[{"index","relevance_score"}]}. It sends through
// the gateway's Exchange, so failures are *gateway.APIError values
// (classified retryable or not) and the key, a gateway.Secret, is scrubbed
// from them. A Client satisfies retrieval.RemoteReranker.
package rerank

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API root, e.g. "https://host/v1"; the client posts to
	// BaseURL + "/rerank".
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey gateway.Secret
	Model  string
	// Provider names the endpoint in errors; default the BaseURL's host.
	Provider string
	// Timeout bounds one request when HTTPClient is nil (default 60s).
	Timeout time.Duration
	// HTTPClient is used when set (tests, proxies).
	HTTPClient *http.Client
	// Now is the clock used to read HTTP-date Retry-After values.
	Now func() time.Time
}

// Validate reports a configuration that cannot work, naming the field.
func (c Config) Validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("base_url: must be set"))
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("base_url: %q must be an http(s) URL", c.BaseURL))
	}
	if c.Model == "" {
		errs = append(errs, errors.New("model: must be set"))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: must be >= 0 (got %s)", c.Timeout))
	}
	return errors.Join(errs...)
}

// Client calls one hosted /rerank endpoint. It is safe for concurrent use.
type Client struct {
	cfg      Config
	endpoint string
}

// New validates cfg and returns a client; it performs no I/O.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("rerank config: %w", err)
	}
	if cfg.Provider == "" {
		u, _ := url.Parse(cfg.BaseURL)
		cfg.Provider = u.Host
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
	return &Client{cfg: cfg, endpoint: strings.TrimRight(cfg.BaseURL, "/") + "/rerank"}, nil
}

// Format prints the client without its configuration (fmt cannot reach
// the Secret's own Format inside an unexported field), whatever the verb.
func (c Client) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "rerank.Client{model %s at %s}", c.cfg.Model, c.endpoint)
}

type rerankRequest struct {
	Model           string   `json:"model"`
	Query           string   `json:"query"`
	Documents       []string `json:"documents"`
	TopN            int      `json:"top_n"`
	ReturnDocuments bool     `json:"return_documents"`
}

type rerankResponse struct {
	Results []struct {
		Index          int      `json:"index"`
		RelevanceScore *float64 `json:"relevance_score"`
	} `json:"results"`
}

// RerankTexts sends the documents and returns the endpoint's relevance
// scores in document order; a document the endpoint leaves out scores -Inf
// (ranks last).
func (c *Client) RerankTexts(ctx context.Context, query string, docs []string) ([]float64, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	x := gateway.Exchange{
		Client: c.cfg.HTTPClient, Provider: c.cfg.Provider, Model: c.cfg.Model, Key: c.cfg.APIKey, Now: c.cfg.Now,
		RequestIDHeader: "x-request-id", DecodeError: decodeError,
	}
	var resp rerankResponse
	req := rerankRequest{Model: c.cfg.Model, Query: query, Documents: docs, TopN: len(docs)}
	if err := x.PostJSON(ctx, c.endpoint, req, &resp); err != nil {
		return nil, fmt.Errorf("rerank %d documents: %w", len(docs), err)
	}
	out := make([]float64, len(docs))
	for i := range out {
		out[i] = math.Inf(-1)
	}
	seen := make([]bool, len(docs))
	for _, r := range resp.Results {
		if r.Index < 0 || r.Index >= len(docs) {
			return nil, fmt.Errorf("rerank %d documents: answer has index %d out of range", len(docs), r.Index)
		}
		if seen[r.Index] {
			return nil, fmt.Errorf("rerank %d documents: answer repeats index %d", len(docs), r.Index)
		}
		if r.RelevanceScore == nil {
			return nil, fmt.Errorf("rerank %d documents: result %d has no relevance_score", len(docs), r.Index)
		}
		seen[r.Index] = true
		out[r.Index] = *r.RelevanceScore
	}
	return out, nil
}

// decodeError reads the error shapes hosted rerank endpoints use: an
// OpenAI-style {"error":{"message","type","code"}}, Cohere's {"message"},
// FastAPI/Jina's {"detail"} (a string or a list of problems); anything else
// is kept, trimmed, as the message. Retryable follows the gateway's rule.
func decodeError(status int, body []byte) *gateway.APIError {
	e := &gateway.APIError{Status: status, Retryable: gateway.RetryableStatus(status)}
	var env struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
		Message string `json:"message"`
		Detail  any    `json:"detail"`
	}
	if json.Unmarshal(body, &env) == nil {
		switch {
		case env.Error != nil:
			e.Message, e.Type = env.Error.Message, env.Error.Type
			if env.Error.Code != nil {
				e.Code = fmt.Sprint(env.Error.Code)
			}
			return e
		case env.Message != "":
			e.Message = env.Message
			return e
		case env.Detail != nil:
			if s, ok := env.Detail.(string); ok {
				e.Message = s
			} else {
				b, _ := json.Marshal(env.Detail)
				e.Message = string(b)
			}
			return e
		}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 512 {
		msg = msg[:512] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	e.Message = msg
	return e
}
