package experiment

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
	"text/template"

	"github.com/loomwork/loomwork/datasets"
)

// maxResponseBytes bounds what the runner reads of an HTTP answer.
const maxResponseBytes = 16 << 20

// OpenAIConfig reaches an OpenAI-compatible chat-completions endpoint: the
// case's task is the user message, the answer choices[0].message.content.
type OpenAIConfig struct {
	// URL is the API base (…/v1) or the full …/chat/completions URL.
	URL   string
	Model string
	// System, when set, is sent as the system message.
	System string
	// APIKey is sent as a bearer token (never recorded).
	APIKey string
	Client *http.Client
}

// Validate reports every problem with the configuration.
func (c *OpenAIConfig) Validate() error {
	var errs []error
	if err := checkURL(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("openai url: %w", err))
	}
	if strings.TrimSpace(c.Model) == "" {
		errs = append(errs, errors.New("openai model: required (--model)"))
	}
	return errors.Join(errs...)
}

func (c *OpenAIConfig) endpoint() string {
	u := strings.TrimRight(c.URL, "/")
	if strings.HasSuffix(u, "/chat/completions") {
		return u
	}
	return u + "/chat/completions"
}

// OpenAITarget implements Target for OpenAIConfig.
type OpenAITarget struct{ cfg OpenAIConfig }

// NewOpenAITarget validates cfg; it connects to nothing.
func NewOpenAITarget(cfg OpenAIConfig) (*OpenAITarget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	return &OpenAITarget{cfg: cfg}, nil
}

// Describe implements Target.
func (t *OpenAITarget) Describe() datasets.ExperimentTarget {
	d := "POST " + redactURL(t.cfg.endpoint()) + " model " + t.cfg.Model
	if t.cfg.APIKey != "" {
		d += " (bearer key redacted)"
	}
	return datasets.ExperimentTarget{Kind: "openai", Description: d}
}

// Run implements Target.
func (t *OpenAITarget) Run(ctx context.Context, req Request) (Response, error) {
	msgs := []map[string]string{}
	if t.cfg.System != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": t.cfg.System})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": req.Case.Task})
	body, err := json.Marshal(map[string]any{"model": t.cfg.Model, "messages": msgs})
	if err != nil {
		return Response{}, &InfraError{Err: fmt.Errorf("encode request: %w", err)}
	}
	status, out, err := post(ctx, t.cfg.Client, t.cfg.endpoint(), body, t.cfg.APIKey, req.Trace)
	if err != nil || status != http.StatusOK {
		return classify(ctx, status, out, err)
	}
	var r struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage *struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return Response{Failure: fmt.Sprintf("response is not a chat completion: %v", err)}, nil
	}
	if len(r.Choices) == 0 || r.Choices[0].Message.Content == nil {
		return Response{Failure: "response has no choices[0].message.content"}, nil
	}
	resp := Response{Answer: strings.TrimSpace(*r.Choices[0].Message.Content), Model: r.Model}
	if r.Usage != nil {
		resp.Usage = &Usage{Input: r.Usage.Prompt, Output: r.Usage.Completion}
	}
	return resp, nil
}

// HTTPConfig POSTs a JSON body rendered from a template and reads the
// answer at a dotted path of the JSON response.
type HTTPConfig struct {
	URL string
	// Body is a text/template over TemplateData, with the function json
	// (JSON-encodes its argument): {"question": {{json .Task}}}.
	Body string
	// AnswerPath is the dotted path of the answer (data.answer,
	// choices.0.text); "" takes the whole body, trimmed.
	AnswerPath string
	// Headers are extra request headers (values never recorded).
	Headers map[string]string
	Client  *http.Client
}

// TemplateData is what an HTTP body template sees.
type TemplateData struct {
	ExperimentID, CaseID, Task string
	Trial                      int
	Case                       *datasets.Case
}

// Validate reports every problem with the configuration.
func (c *HTTPConfig) Validate() error {
	var errs []error
	if err := checkURL(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("http url: %w", err))
	}
	if strings.TrimSpace(c.Body) == "" {
		errs = append(errs, errors.New(`http body: required, e.g. --body '{"question": {{json .Task}}}'`))
	} else if _, err := parseBody(c.Body); err != nil {
		errs = append(errs, fmt.Errorf("http body: %w", err))
	}
	return errors.Join(errs...)
}

func parseBody(s string) (*template.Template, error) {
	return template.New("body").Option("missingkey=error").Funcs(template.FuncMap{
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
	}).Parse(s)
}

// HTTPTarget implements Target for HTTPConfig.
type HTTPTarget struct {
	cfg  HTTPConfig
	body *template.Template
}

// NewHTTPTarget validates cfg; it connects to nothing.
func NewHTTPTarget(cfg HTTPConfig) (*HTTPTarget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	body, _ := parseBody(cfg.Body)
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	return &HTTPTarget{cfg: cfg, body: body}, nil
}

// Describe implements Target.
func (t *HTTPTarget) Describe() datasets.ExperimentTarget {
	d := "POST " + redactURL(t.cfg.URL) + " body " + t.cfg.Body
	if t.cfg.AnswerPath != "" {
		d += " answer at " + t.cfg.AnswerPath
	}
	if len(t.cfg.Headers) > 0 {
		d += fmt.Sprintf(" (%d headers, values redacted)", len(t.cfg.Headers))
	}
	return datasets.ExperimentTarget{Kind: "http", Description: d}
}

// Run implements Target.
func (t *HTTPTarget) Run(ctx context.Context, req Request) (Response, error) {
	var body bytes.Buffer
	data := TemplateData{ExperimentID: req.ExperimentID, CaseID: req.Case.ID, Task: req.Case.Task, Trial: req.Trial, Case: req.Case}
	if err := t.body.Execute(&body, data); err != nil {
		return Response{}, &InfraError{Err: fmt.Errorf("render body for case %q: %w", req.Case.ID, err)}
	}
	status, out, err := postHeaders(ctx, t.cfg.Client, t.cfg.URL, body.Bytes(), "", t.cfg.Headers, req.Trace)
	if err != nil || status < 200 || status > 299 {
		return classify(ctx, status, out, err)
	}
	if t.cfg.AnswerPath == "" {
		return Response{Answer: strings.TrimSpace(string(out))}, nil
	}
	ans, err := answerAt(out, t.cfg.AnswerPath)
	if err != nil {
		return Response{Failure: fmt.Sprintf("response: %v", err)}, nil
	}
	return Response{Answer: strings.TrimSpace(ans)}, nil
}

func post(ctx context.Context, c *http.Client, u string, body []byte, key string, p Propagation) (int, []byte, error) {
	return postHeaders(ctx, c, u, body, key, nil, p)
}

func postHeaders(ctx context.Context, c *http.Client, u string, body []byte, key string, headers map[string]string, p Propagation) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	p.Headers(req.Header)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	return resp.StatusCode, out, nil
}

// classify sorts a failed exchange: no response, 429, 502, 503 and 504 are
// the infrastructure's (retried); the trial's deadline, any other 4xx and
// 500 are the agent's (a 500 is the agent's own code failing).
func classify(ctx context.Context, status int, body []byte, err error) (Response, error) {
	if ctx.Err() != nil {
		return Response{Failure: fmt.Sprintf("no answer before the trial's deadline (%v)", context.Cause(ctx))}, nil
	}
	if err != nil {
		return Response{}, &InfraError{Retryable: true, Err: err}
	}
	snippet := strings.TrimSpace(string(body))
	if len(snippet) > 300 {
		snippet = snippet[:300] + "…"
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Response{}, &InfraError{Retryable: true, Err: fmt.Errorf("HTTP %d: %s", status, snippet)}
	}
	return Response{Failure: fmt.Sprintf("HTTP %d: %s", status, snippet)}, nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: want an http or https URL", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%q: no host", raw)
	}
	return nil
}

// redactURL drops user info and query values (where keys hide).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if q := u.Query(); len(q) > 0 {
		for k := range q {
			q.Set(k, "REDACTED")
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
