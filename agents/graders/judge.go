package graders

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/providers"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/pricing"
)

// Judge providers.
const (
	ProviderOpenAI    = "openai"    // OpenAI, or any OpenAI-compatible server at base_url
	ProviderAnthropic = "anthropic" // Anthropic's Messages API
)

// Defaults of a JudgeConfig.
const (
	DefaultJudgeMaxTokens = 1024
	DefaultJudgeTimeout   = 2 * time.Minute
)

// JudgeConfig says which provider and model answer judging calls. It is
// the shape `loom-eval run` builds its live gateway from (provider, model,
// base URL, key variable, budget), as a file or flags.
type JudgeConfig struct {
	// Provider is "openai" (or any OpenAI-compatible server, with
	// BaseURL) or "anthropic".
	Provider string `json:"provider"`
	// Model is the judge model graders get when they name none.
	Model string `json:"model"`
	// Models are other models of the same provider that a grader may ask
	// for by name (a grader's "model" field). A grader naming a model not
	// listed here is an error, never served by another model: a judge is
	// only comparable with itself.
	Models []string `json:"models,omitempty"`
	// BaseURL is the provider's API root (e.g. http://127.0.0.1:8000/v1 for
	// a local OpenAI-compatible server); empty: the provider's own.
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the key; empty:
	// OPENAI_API_KEY or ANTHROPIC_API_KEY. The key itself never appears
	// in configuration.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// MaxTokens caps an answer when the request sets no cap (default 1024).
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature is sent when set (0 makes most judges repeatable; some
	// reasoning models accept only their default, so it is not forced).
	Temperature *float64 `json:"temperature,omitempty"`
	// Timeout bounds one attempt (default 2m).
	Timeout gateway.Duration `json:"timeout,omitempty"`
	// BudgetUSD refuses judging calls whose worst case would take the
	// judge's total spend past it (0: no budget). It needs a known price.
	BudgetUSD float64 `json:"budget_usd,omitempty"`
}

// Validate checks the config without touching the environment or the
// network; every problem is reported, each naming its field.
func (c JudgeConfig) Validate() error {
	var errs []error
	switch c.Provider {
	case ProviderOpenAI, ProviderAnthropic:
	case "":
		errs = append(errs, errors.New("provider: must be set (openai or anthropic)"))
	default:
		errs = append(errs, fmt.Errorf("provider: %q is not a judge provider (want openai or anthropic)", c.Provider))
	}
	if strings.TrimSpace(c.Model) == "" {
		errs = append(errs, errors.New("model: must be set"))
	}
	seen := map[string]bool{c.Model: true}
	for i, m := range c.Models {
		switch {
		case strings.TrimSpace(m) == "":
			errs = append(errs, fmt.Errorf("models[%d]: must not be empty", i))
		case seen[m]:
			errs = append(errs, fmt.Errorf("models[%d]: %q is listed twice (or is the default model)", i, m))
		}
		seen[m] = true
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("base_url: %q must be an http(s) URL", c.BaseURL))
		}
	}
	if c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("max_tokens: must not be negative (got %d)", c.MaxTokens))
	}
	if t := c.Temperature; t != nil && !(*t >= 0 && *t <= 2) {
		errs = append(errs, fmt.Errorf("temperature: must be in [0, 2] (got %v)", *t))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout: must not be negative (got %v)", time.Duration(c.Timeout)))
	}
	if !(c.BudgetUSD >= 0) || math.IsInf(c.BudgetUSD, 0) {
		errs = append(errs, fmt.Errorf("budget_usd: must be a non-negative number (got %v)", c.BudgetUSD))
	}
	return errors.Join(errs...)
}

// DecodeJudgeConfig reads a judge config file's JSON: unknown keys are
// errors (a typo must not silently drop a setting); name labels errors.
func DecodeJudgeConfig(r io.Reader, name string) (JudgeConfig, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return JudgeConfig{}, fmt.Errorf("read judge config %s: %w", name, err)
	}
	var c JudgeConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return JudgeConfig{}, fmt.Errorf("judge config %s: line %d: %w", name, lineOf(data, se.Offset), err)
		case errors.As(err, &te):
			return JudgeConfig{}, fmt.Errorf("judge config %s: line %d: field %s: %w", name, lineOf(data, te.Offset), te.Field, err)
		}
		return JudgeConfig{}, fmt.Errorf("judge config %s: %w", name, err)
	}
	if dec.More() {
		return JudgeConfig{}, fmt.Errorf("judge config %s: trailing data after the config object", name)
	}
	if err := c.Validate(); err != nil {
		return JudgeConfig{}, fmt.Errorf("judge config %s: %w", name, err)
	}
	return c, nil
}

// LoadJudgeConfig reads and validates a judge config file.
func LoadJudgeConfig(path string) (JudgeConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return JudgeConfig{}, fmt.Errorf("open judge config: %w", err)
	}
	defer f.Close()
	return DecodeJudgeConfig(f, path)
}

func lineOf(data []byte, off int64) int {
	off = min(off, int64(len(data)))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// JudgeOptions are a judge's injected dependencies; the zero value works
// (the process environment, the embedded price table, real clock).
type JudgeOptions struct {
	// Getenv reads the key; nil means os.Getenv.
	Getenv func(string) string
	// Prices price each reply (nil: pricing.Default()). A model the table
	// does not know gets a nil cost, never 0.
	Prices     *pricing.Table
	HTTPClient *http.Client
	// Tracer, when set, gets the gateway's "chat {model}" span per attempt.
	Tracer trace.Tracer
	Logger *slog.Logger
	// Now and Sleep are the gateway's clock (tests inject Sleep so a
	// retried 429 does not wait).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Judge answers scorer/grade's judging calls through agents/gateway: one
// chain entry per model the config allows, every request pinned to its
// model (so a failing judge model is retried, never replaced by another),
// and each reply priced with the price table.
type Judge struct {
	cfg    JudgeConfig
	gw     *gateway.Gateway
	prices *pricing.Table
}

var _ grade.Judge = (*Judge)(nil)

// NewJudge validates cfg, resolves the key from the environment and builds
// the provider client. It makes no network call.
func NewJudge(cfg JudgeConfig, opts JudgeOptions) (*Judge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("judge config: %w", err)
	}
	prices := opts.Prices
	if prices == nil {
		prices = pricing.Default()
	}
	maxTokens := cfg.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultJudgeMaxTokens
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = gateway.Duration(DefaultJudgeTimeout)
	}
	gcfg := gateway.DefaultConfig()
	gcfg.BudgetUSD = cfg.BudgetUSD
	for _, model := range append([]string{cfg.Model}, cfg.Models...) {
		mc := gateway.ModelConfig{Provider: cfg.Provider, Model: model, BaseURL: cfg.BaseURL, APIKeyEnv: cfg.APIKeyEnv,
			MaxOutputTokens: maxTokens, Timeout: timeout}
		if pm, _, ok := prices.Lookup(model); ok {
			mc.Prices = GatewayPrices(pm)
		} else if cfg.BudgetUSD > 0 {
			return nil, fmt.Errorf("judge config: budget_usd: no price is known for model %q, so the budget cannot be enforced", model)
		}
		gcfg.Models = append(gcfg.Models, mc)
	}
	gw, err := gateway.New(gcfg, gateway.Options{Providers: providers.Standard(), Getenv: opts.Getenv, HTTPClient: opts.HTTPClient,
		Tracer: opts.Tracer, Logger: opts.Logger, Now: opts.Now, Sleep: opts.Sleep})
	if err != nil {
		return nil, fmt.Errorf("judge %s %s: %w", cfg.Provider, cfg.Model, err)
	}
	return &Judge{cfg: cfg, gw: gw, prices: prices}, nil
}

// Config is the judge's configuration.
func (j *Judge) Config() JudgeConfig { return j.cfg }

// Accounting is the judge's running account: every attempt, failed ones
// included, per model.
func (j *Judge) Accounting() gateway.Snapshot { return j.gw.Accounting() }

// Judge makes one judging call. The reply's tokens and cost are every
// attempt's the provider reported (a retried call costs its failed
// attempts too); its cost is nil when the price table knows neither the
// response model nor the requested one. A failure is an error naming the
// provider and model, with the provider's own message.
func (j *Judge) Judge(ctx context.Context, req grade.JudgeRequest) (grade.JudgeReply, error) {
	model := req.Model
	if model == "" {
		model = j.cfg.Model
	} else if model != j.cfg.Model && !slices.Contains(j.cfg.Models, model) {
		return grade.JudgeReply{}, fmt.Errorf("judge %s: the grader asks for model %q, which the judge config does not list (model %q, models %q)",
			j.cfg.Provider, model, j.cfg.Model, j.cfg.Models)
	}
	lreq := llm.Request{Model: model, System: req.System, MaxTokens: req.MaxTokens, Temperature: j.cfg.Temperature,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: req.Prompt}}}
	res, err := j.gw.CompleteWith(ctx, lreq, gateway.CallOptions{})
	if err != nil {
		return grade.JudgeReply{}, fmt.Errorf("judge %s %s: %w", j.cfg.Provider, model, err)
	}
	resp := res.Response
	reply := grade.JudgeReply{Text: resp.Message.Content, ModelLabel: resp.Label, Provider: resp.Provider, Model: resp.Model}
	if reply.Provider == "" {
		reply.Provider = j.cfg.Provider
	}
	if reply.Model == "" {
		reply.Model = model
	}
	cost, priced := 0.0, true
	for _, at := range res.Attempts {
		if at.Usage == nil {
			continue // nothing reported, nothing to price
		}
		reply.InputTokens += at.Usage.InputTokens
		reply.OutputTokens += at.Usage.OutputTokens
		answered := model
		if at.Response != nil && at.Response.Model != "" {
			answered = at.Response.Model
		}
		usd, ok := j.price(*at.Usage, answered, model)
		cost += usd
		priced = priced && ok
	}
	if priced {
		reply.CostUSD = &cost
	}
	return reply, nil
}

// price prices one attempt's usage as the trace rollup does.
func (j *Judge) price(u llm.Usage, names ...string) (float64, bool) {
	return PriceCall(j.prices, u, names...)
}

// PriceCall prices one model call's usage at table's rates as the trace
// rollup does (scorer/rollup): each name is looked up in turn — the
// response model first (a dated snapshot id), then the requested one — and
// cache reads and writes are billed apart. ok is false when the table knows
// none of the names. This package sees both the model interface and the
// scorer's prices, so the judge and `loom-eval run` share it.
func PriceCall(table *pricing.Table, u llm.Usage, names ...string) (usd float64, ok bool) {
	for _, name := range names {
		if name == "" {
			continue
		}
		if pm, _, found := table.Lookup(name); found {
			b, _ := pricing.Split(u.InputTokens, u.CacheReadTokens, u.CacheCreationTokens, u.OutputTokens)
			return pm.Cost(b), true
		}
	}
	return 0, false
}

// GatewayPrices hands the price table's rates for a model to the gateway,
// whose budget refuses a call by its worst case.
func GatewayPrices(pm *pricing.Model) gateway.Prices {
	p := gateway.Prices{InputPerMTok: pm.Input, OutputPerMTok: pm.Output}
	if pm.CacheRead != nil {
		p.CacheReadPerMTok = *pm.CacheRead
	}
	if pm.CacheWrite != nil {
		p.CacheWritePerMTok = *pm.CacheWrite
	}
	return p
}
