package retrieval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// HostedRerankerConfig configures a client for a hosted rerank API speaking
// the Cohere/Jina shape: POST {base}/rerank with {"model","query",
// "documents","top_n"} answered by {"results":[{"index","relevance_score"}]}.
type HostedRerankerConfig struct {
	// BaseURL is the API root, e.g. "https://host/v1"; the client posts to
	// BaseURL + "/rerank".
	BaseURL string
	APIKey  string
	Model   string
	// MaxDocChars caps each document's text (default 4000).
	MaxDocChars int
	Timeout     time.Duration
	HTTPClient  *http.Client
}

// Validate reports a configuration that cannot work.
func (c HostedRerankerConfig) Validate() error {
	var errs []error
	if c.BaseURL == "" {
		errs = append(errs, errors.New("base_url must be set"))
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("base_url %q must be an http(s) URL", c.BaseURL))
	}
	if c.Model == "" {
		errs = append(errs, errors.New("model must be set"))
	}
	if c.MaxDocChars < 0 {
		errs = append(errs, fmt.Errorf("max_doc_chars must be >= 0 (got %d)", c.MaxDocChars))
	}
	return errors.Join(errs...)
}

// HostedReranker is a Reranker backed by a hosted /rerank endpoint.
type HostedReranker struct {
	cfg    HostedRerankerConfig
	client *http.Client
}

var _ Reranker = (*HostedReranker)(nil)

// NewHostedReranker validates cfg and returns a client (no I/O).
func NewHostedReranker(cfg HostedRerankerConfig) (*HostedReranker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("hosted reranker config: %w", err)
	}
	if cfg.MaxDocChars == 0 {
		cfg.MaxDocChars = 4000
	}
	c := cfg.HTTPClient
	if c == nil {
		t := cfg.Timeout
		if t <= 0 {
			t = 60 * time.Second
		}
		c = &http.Client{Timeout: t}
	}
	return &HostedReranker{cfg: cfg, client: c}, nil
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

// Rerank sends the candidates' texts and returns the endpoint's relevance
// scores; a candidate the endpoint leaves out scores -Inf (ranks last).
func (h *HostedReranker) Rerank(ctx context.Context, query string, cands []Candidate) ([]float64, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	req := rerankRequest{Model: h.cfg.Model, Query: query, TopN: len(cands)}
	for _, c := range cands {
		req.Documents = append(req.Documents, truncate(c.Doc.Text(), h.cfg.MaxDocChars))
	}
	var resp rerankResponse
	u := strings.TrimRight(h.cfg.BaseURL, "/") + "/rerank"
	if err := postJSON(ctx, h.client, u, h.cfg.APIKey, req, &resp); err != nil {
		return nil, fmt.Errorf("rerank %d documents: %w", len(cands), err)
	}
	out := make([]float64, len(cands))
	for i := range out {
		out[i] = math.Inf(-1)
	}
	seen := make([]bool, len(cands))
	for _, r := range resp.Results {
		if r.Index < 0 || r.Index >= len(cands) {
			return nil, fmt.Errorf("rerank %d documents: answer has index %d out of range", len(cands), r.Index)
		}
		if seen[r.Index] {
			return nil, fmt.Errorf("rerank %d documents: answer repeats index %d", len(cands), r.Index)
		}
		if r.RelevanceScore == nil {
			return nil, fmt.Errorf("rerank %d documents: result %d has no relevance_score", len(cands), r.Index)
		}
		seen[r.Index] = true
		out[r.Index] = *r.RelevanceScore
	}
	return out, nil
}
