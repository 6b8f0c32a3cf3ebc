package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/llm"
)

// Model answers model requests: a provider client, a scripted model, or the
// gateway itself. It is the method set the runtime consumes.
type Model interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// Provider builds clients for chain entries that name it.
type Provider struct {
	// DefaultKeyEnv is the environment variable read when an entry sets no
	// api_key_env (e.g. OPENAI_API_KEY).
	DefaultKeyEnv string
	// KeyOptional reports whether an entry may run without a key (a local
	// OpenAI-compatible server); nil means a key is always required, and a
	// missing one fails New.
	KeyOptional func(m ModelConfig) bool
	// Build makes the client. key is the resolved credential.
	Build func(m ModelConfig, key Secret, o BuildOptions) (Model, error)
}

// BuildOptions are the gateway's shared dependencies handed to each client.
type BuildOptions struct {
	// HTTPClient, when set, is used by every client (e.g. one transport with
	// a proxy); nil lets each client use its default.
	HTTPClient *http.Client
	// Now is the clock clients read HTTP-date Retry-After values against.
	Now func() time.Time
}

// Options are the gateway's injected dependencies. The zero value works:
// real clock and sleep, no tracing, logs discarded.
type Options struct {
	// Providers maps ModelConfig.Provider to a client builder; see the
	// providers package for the standard set.
	Providers map[string]Provider
	// Getenv reads credentials; nil means os.Getenv.
	Getenv func(string) string
	// Tracer, when set, gets one "chat {model}" client span per attempt.
	Tracer trace.Tracer
	Logger *slog.Logger
	// HTTPClient is passed to the provider clients; nil means their default.
	HTTPClient *http.Client
	// Now and Sleep are the clock; tests inject both so nothing waits.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a float in [0,1) for backoff jitter.
	Rand func() float64
	// Estimate returns the input token estimate for a request; nil means
	// EstimateInputTokens.
	Estimate func(llm.Request) int64
}

// entry is one built chain entry.
type entry struct {
	cfg    ModelConfig
	name   string
	client Model
}

// Gateway routes requests over a declared chain of models with retries,
// fallbacks, a pre-call budget and per-model accounting. It is safe for
// concurrent use.
type Gateway struct {
	cfg     Config
	entries []entry
	opts    Options
	acct    *accounts
}

var _ Model = (*Gateway)(nil)

// New validates cfg, resolves credentials from the environment and builds
// the clients. It performs no network I/O.
func New(cfg Config, opts Options) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate gateway config: %w", err)
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepContext
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	if opts.Estimate == nil {
		opts.Estimate = EstimateInputTokens
	}
	g := &Gateway{cfg: cfg, opts: opts}
	var errs []error
	for i, m := range cfg.Models {
		e := entry{cfg: m, name: m.entryName(), client: m.Client}
		if e.client == nil {
			p, ok := opts.Providers[m.Provider]
			if !ok {
				errs = append(errs, fmt.Errorf("models[%d].provider: no provider %q registered", i, m.Provider))
				continue
			}
			envName := m.APIKeyEnv
			if envName == "" {
				envName = p.DefaultKeyEnv
			}
			var key Secret
			if envName != "" {
				key = NewSecret(opts.Getenv(envName))
			}
			if key.IsZero() && (p.KeyOptional == nil || !p.KeyOptional(m)) {
				errs = append(errs, fmt.Errorf("models[%d]: environment variable %s is empty; it must hold the %s API key", i, envName, m.Provider))
				continue
			}
			c, err := p.Build(m, key, BuildOptions{HTTPClient: opts.HTTPClient, Now: opts.Now})
			if err != nil {
				errs = append(errs, fmt.Errorf("models[%d]: build %s client: %w", i, m.Provider, err))
				continue
			}
			e.client = c
		}
		g.entries = append(g.entries, e)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	g.acct = newAccounts(cfg)
	return g, nil
}

// Label is the label every answer of this gateway will carry, when all
// chain entries agree on it ("live" for provider clients, "scripted" for
// scripted models); "" when they differ or a client does not say, because
// then only the answer knows. It lets the runtime journal the label before
// the call.
func (g *Gateway) Label() string {
	label := ""
	for i, e := range g.entries {
		l, ok := e.client.(interface{ Label() string })
		if !ok {
			return ""
		}
		if i > 0 && l.Label() != label {
			return ""
		}
		label = l.Label()
	}
	return label
}

// CallOptions refine one call.
type CallOptions struct {
	// Require lists capabilities beyond those the request implies.
	Require []Capability
}

// Attempt records one call to one model.
type Attempt struct {
	Model    string        // chain entry name
	Err      error         // nil for the successful attempt
	Usage    *llm.Usage    // as reported, nil when the provider reported none
	CostUSD  float64       // charged for this attempt
	Waited   time.Duration // backoff slept before this attempt
	Response *llm.Response `json:"-"`
}

// Result is a successful call with its history.
type Result struct {
	Response llm.Response
	Model    string // chain entry that answered
	Attempts []Attempt
	// Skipped explains entries passed over without a request (capability,
	// context window, budget).
	Skipped []string
}

// Complete routes req through the chain; it satisfies Model so a gateway can
// stand wherever a single model can.
func (g *Gateway) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	res, err := g.CompleteWith(ctx, req, CallOptions{})
	return res.Response, err
}

// CompleteWith routes req through the chain and reports every attempt.
//
// For each eligible entry in order: check the budget against the worst case
// (estimated input + max tokens at the entry's prices) and skip the entry if
// it cannot be afforded; call; on a retryable failure retry with exponential
// backoff and jitter (waiting at least the provider's Retry-After) up to
// Retry.MaxRetries times, then fall back to the next entry. A permanent
// failure (a 400, a missing model, bad credentials) is returned at once.
func (g *Gateway) CompleteWith(ctx context.Context, req llm.Request, co CallOptions) (Result, error) {
	var res Result
	need := requiredCapabilities(req, co.Require)
	inTokens := g.opts.Estimate(req)

	var candidates []entry
	pinned := req.Model != ""
	for _, e := range g.entries {
		if pinned && req.Model != e.name && req.Model != e.cfg.Model {
			continue
		}
		if reason := eligible(e.cfg, need, inTokens, maxTokensFor(req, e.cfg)); reason != "" {
			res.Skipped = append(res.Skipped, e.name+": "+reason)
			continue
		}
		candidates = append(candidates, e)
	}
	if len(candidates) == 0 {
		if pinned && len(res.Skipped) == 0 {
			return res, fmt.Errorf("route request: no model named %q in the chain", req.Model)
		}
		return res, &NoEligibleModelError{Need: need, InputTokens: inTokens, Reasons: res.Skipped}
	}

	var (
		lastErr   error
		budgetErr *BudgetError
	)
	for ci, e := range candidates {
		mreq := req
		mreq.Model = e.cfg.Model
		mreq.MaxTokens = maxTokensFor(req, e.cfg)
		worst := worstCaseCost(e.cfg.Prices, inTokens, int64(mreq.MaxTokens))

		var wait time.Duration
		for attempt := 0; attempt <= g.cfg.Retry.MaxRetries; attempt++ {
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("complete: %w", err)
			}
			reservation, berr := g.acct.reserve(e.name, worst)
			if berr != nil {
				budgetErr = berr
				res.Skipped = append(res.Skipped, e.name+": "+berr.Error())
				g.budgetEvent(ctx, berr)
				g.opts.Logger.WarnContext(ctx, "model call refused by budget", "model", e.name,
					"spent_usd", berr.SpentUSD, "estimate_usd", berr.EstimateUSD, "budget_usd", berr.BudgetUSD)
				break
			}
			resp, err := g.attempt(ctx, e, mreq, attempt, ci > 0)
			usage := reportedUsage(resp, err)
			cost := 0.0
			if usage != nil {
				cost = Cost(e.cfg.Prices, *usage)
			}
			g.acct.settle(e.name, reservation, usage, cost, err == nil, attempt > 0, ci > 0 && attempt == 0)
			at := Attempt{Model: e.name, Err: err, Usage: usage, CostUSD: cost, Waited: wait}
			if err == nil {
				at.Response = &resp
				res.Attempts = append(res.Attempts, at)
				res.Response, res.Model = resp, e.name
				return res, nil
			}
			res.Attempts = append(res.Attempts, at)
			lastErr = err
			if !IsRetryable(err) {
				return res, err
			}
			if attempt == g.cfg.Retry.MaxRetries {
				g.opts.Logger.WarnContext(ctx, "model retries exhausted; falling back", "model", e.name,
					"attempts", attempt+1, "err", err)
				break
			}
			var ae *APIError
			errors.As(err, &ae)
			wait = g.backoff(attempt)
			if ae.RetryAfter > wait {
				if ae.RetryAfter > time.Duration(g.cfg.Retry.MaxRetryAfter) {
					g.opts.Logger.WarnContext(ctx, "provider asked to wait longer than allowed; falling back", "model", e.name,
						"retry_after", ae.RetryAfter, "err", err)
					break
				}
				wait = ae.RetryAfter
			}
			g.opts.Logger.WarnContext(ctx, "model call failed; retrying", "model", e.name,
				"attempt", attempt+1, "wait", wait, "err", err)
			if err := g.opts.Sleep(ctx, wait); err != nil {
				return res, fmt.Errorf("complete: wait before retry: %w", err)
			}
		}
	}
	if lastErr == nil && budgetErr != nil {
		return res, budgetErr
	}
	return res, &ChainError{Attempts: res.Attempts, Skipped: res.Skipped, Last: lastErr, Budget: budgetErr}
}

// attempt makes one call with its span; it also checks the response label.
func (g *Gateway) attempt(ctx context.Context, e entry, req llm.Request, n int, fallback bool) (llm.Response, error) {
	callCtx := ctx
	if e.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, time.Duration(e.cfg.Timeout))
		defer cancel()
	}
	callCtx, span := g.startSpan(callCtx, e, req, n, fallback)
	resp, err := e.client.Complete(callCtx, req)
	if err != nil && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		// Our per-attempt bound fired, not the caller's: that is a timeout
		// worth retrying, whatever the client made of the cancellation.
		var ae *APIError
		if !errors.As(err, &ae) {
			err = &APIError{Provider: e.cfg.Provider, Model: req.Model, Type: ErrTypeTimeout, Retryable: true,
				Message: fmt.Sprintf("no answer within %v", time.Duration(e.cfg.Timeout)), Err: err}
		}
	}
	if err == nil {
		if resp.Label != llm.LabelLive && resp.Label != llm.LabelScripted {
			// An unlabelled answer could pass a scripted run off as live.
			err = fmt.Errorf("model %s: response label %q is neither %q nor %q", e.name, resp.Label, llm.LabelLive, llm.LabelScripted)
		}
	}
	g.endSpan(span, e, req, resp, err)
	return resp, err
}

func (g *Gateway) backoff(attempt int) time.Duration {
	base := float64(g.cfg.Retry.InitialBackoff) * math.Pow(2, float64(attempt))
	if max := float64(g.cfg.Retry.MaxBackoff); base > max {
		base = max
	}
	// "Equal jitter": half fixed, half random, so retries from many callers
	// spread out but never collapse to zero.
	return time.Duration(base/2 + g.opts.Rand()*base/2)
}

func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func reportedUsage(resp llm.Response, err error) *llm.Usage {
	if err == nil {
		u := resp.Usage
		return &u
	}
	var ae *APIError
	if errors.As(err, &ae) && ae.Usage != nil {
		u := *ae.Usage
		return &u
	}
	return nil
}

func requiredCapabilities(req llm.Request, extra []Capability) []Capability {
	var need []Capability
	if len(req.Tools) > 0 {
		need = append(need, CapTools)
	}
	for _, c := range extra {
		if !containsCap(need, c) {
			need = append(need, c)
		}
	}
	return need
}

func containsCap(cs []Capability, c Capability) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

func maxTokensFor(req llm.Request, m ModelConfig) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return m.MaxOutputTokens
}

// eligible returns why m cannot serve the request, or "" if it can.
func eligible(m ModelConfig, need []Capability, inTokens int64, maxTokens int) string {
	for _, c := range need {
		if !m.has(c) {
			return fmt.Sprintf("lacks capability %q", c)
		}
	}
	if m.ContextWindow > 0 && inTokens+int64(maxTokens) > m.ContextWindow {
		return fmt.Sprintf("context window %d < %d input (estimated) + %d output tokens", m.ContextWindow, inTokens, maxTokens)
	}
	return ""
}

// NoEligibleModelError means no entry of the chain can serve the request.
type NoEligibleModelError struct {
	Need        []Capability
	InputTokens int64
	Reasons     []string
}

func (e *NoEligibleModelError) Error() string {
	return fmt.Sprintf("route request: no eligible model (needs %v, ~%d input tokens): %v", e.Need, e.InputTokens, e.Reasons)
}

// ChainError means every eligible entry failed or was refused. Unwrap gives
// the last failure, so errors.As finds its *APIError.
type ChainError struct {
	Attempts []Attempt
	Skipped  []string
	Last     error
	Budget   *BudgetError // set when an entry was refused by the budget
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("complete: all models failed after %d attempt(s); last: %v", len(e.Attempts), e.Last)
}

func (e *ChainError) Unwrap() []error {
	errs := []error{e.Last}
	if e.Budget != nil {
		errs = append(errs, e.Budget)
	}
	return errs
}
