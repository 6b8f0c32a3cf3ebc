package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Capability is something a request can require of a model.
type Capability string

// Capabilities a model can declare. Tools is derived from the request (a
// request that declares tools requires it); the others are asked for by the
// caller through CallOptions.Require.
const (
	CapTools     Capability = "tools"
	CapVision    Capability = "vision"
	CapJSON      Capability = "json"
	CapReasoning Capability = "reasoning"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("500ms", "2s").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"500ms\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Prices are USD per million tokens, the unit providers publish.
type Prices struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
	// CacheReadPerMTok prices input served from the prompt cache; zero means
	// "same as input" (never cheaper than what is known).
	CacheReadPerMTok float64 `json:"cache_read_per_mtok,omitempty"`
	// CacheWritePerMTok prices input written to the cache (Anthropic charges
	// a premium); zero means "same as input".
	CacheWritePerMTok float64 `json:"cache_write_per_mtok,omitempty"`
}

// ModelConfig declares one entry of the chain.
type ModelConfig struct {
	// Name identifies the entry in accounting, spans and Request.Model
	// pinning; it defaults to Model.
	Name string `json:"name,omitempty"`
	// Provider selects the client that serves the entry: a key of
	// Options.Providers ("openai", "anthropic" with the providers package).
	// Ignored when Client is set, except as the span's provider name.
	Provider string `json:"provider"`
	// Model is the provider's model id sent on the wire.
	Model string `json:"model"`
	// BaseURL overrides the provider's endpoint (e.g. a local
	// OpenAI-compatible server at http://127.0.0.1:8000/v1).
	BaseURL string `json:"base_url,omitempty"`
	// APIKeyEnv names the environment variable holding the key; empty means
	// the provider's default (OPENAI_API_KEY, ANTHROPIC_API_KEY). The key
	// itself never appears in configuration.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Stream asks for a streamed response (SSE) where the provider supports it.
	Stream bool `json:"stream,omitempty"`
	// Timeout bounds one attempt; zero means no per-attempt bound beyond the
	// caller's context.
	Timeout Duration `json:"timeout,omitempty"`

	// ContextWindow is the model's context size in tokens; a request whose
	// estimated input plus max tokens exceeds it skips this entry. Zero means
	// undeclared (not checked).
	ContextWindow int64 `json:"context_window,omitempty"`
	// MaxOutputTokens is used when a request sets no MaxTokens; it is also
	// the output side of the worst-case budget estimate.
	MaxOutputTokens int `json:"max_output_tokens"`
	// Capabilities the model has.
	Capabilities []Capability `json:"capabilities,omitempty"`
	Prices       Prices       `json:"prices"`

	// Client serves the entry directly (a scripted model, a test double, a
	// client built by hand); when set, Provider is not looked up.
	Client Model `json:"-"`
}

// RetryPolicy bounds retries on one model before falling back.
type RetryPolicy struct {
	// MaxRetries is the number of retries after the first attempt on a model.
	MaxRetries int `json:"max_retries"`
	// InitialBackoff is the base wait before the first retry; each retry
	// doubles it, capped at MaxBackoff, with jitter.
	InitialBackoff Duration `json:"initial_backoff"`
	MaxBackoff     Duration `json:"max_backoff"`
	// MaxRetryAfter is the longest Retry-After the gateway will honour by
	// waiting; a provider asking for longer makes it fall back to the next
	// model at once instead.
	MaxRetryAfter Duration `json:"max_retry_after"`
}

// Config is the declared chain and its policies.
type Config struct {
	// Models in preference order: routing takes the first eligible entry and
	// falls back down the list.
	Models []ModelConfig `json:"models"`
	Retry  RetryPolicy   `json:"retry"`
	// BudgetUSD caps the total spend of this gateway; zero means no budget.
	// It is enforced before each attempt against the attempt's worst case.
	BudgetUSD float64 `json:"budget_usd,omitempty"`

	_ struct{} // prevent unkeyed literals
}

// DefaultRetryPolicy is what DefaultConfig uses.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		MaxRetries:     2,
		InitialBackoff: Duration(500 * time.Millisecond),
		MaxBackoff:     Duration(8 * time.Second),
		MaxRetryAfter:  Duration(30 * time.Second),
	}
}

// DefaultConfig returns a config with the default retry policy and no models.
func DefaultConfig() Config { return Config{Retry: DefaultRetryPolicy()} }

// Config errors.
var (
	errNoModels = errors.New("models: at least one model must be declared")
)

// Validate checks the config without touching the environment or network;
// every problem is reported, each prefixed with its key path.
func (c Config) Validate() error {
	var errs []error
	if len(c.Models) == 0 {
		errs = append(errs, errNoModels)
	}
	seen := map[string]int{}
	for i, m := range c.Models {
		p := fmt.Sprintf("models[%d]", i)
		if m.Client == nil && m.Provider == "" {
			errs = append(errs, fmt.Errorf("%s.provider: must be set (or a Client given)", p))
		}
		if m.Model == "" && m.Client == nil {
			errs = append(errs, fmt.Errorf("%s.model: must be set", p))
		}
		name := m.entryName()
		if name == "" {
			errs = append(errs, fmt.Errorf("%s.name: must be set when model is empty", p))
		} else if j, dup := seen[name]; dup {
			errs = append(errs, fmt.Errorf("%s.name: %q already used by models[%d]", p, name, j))
		} else {
			seen[name] = i
		}
		if m.ContextWindow < 0 {
			errs = append(errs, fmt.Errorf("%s.context_window: must not be negative (got %d)", p, m.ContextWindow))
		}
		if m.MaxOutputTokens <= 0 {
			// Anthropic requires max_tokens, and the budget's worst case needs
			// an output bound: a model without one cannot be costed.
			errs = append(errs, fmt.Errorf("%s.max_output_tokens: must be positive (got %d)", p, m.MaxOutputTokens))
		}
		if m.ContextWindow > 0 && int64(m.MaxOutputTokens) > m.ContextWindow {
			errs = append(errs, fmt.Errorf("%s.max_output_tokens: %d exceeds context_window %d", p, m.MaxOutputTokens, m.ContextWindow))
		}
		if m.Timeout < 0 {
			errs = append(errs, fmt.Errorf("%s.timeout: must not be negative", p))
		}
		for name, v := range map[string]float64{
			"input_per_mtok": m.Prices.InputPerMTok, "output_per_mtok": m.Prices.OutputPerMTok,
			"cache_read_per_mtok": m.Prices.CacheReadPerMTok, "cache_write_per_mtok": m.Prices.CacheWritePerMTok,
		} {
			if v < 0 || v != v {
				errs = append(errs, fmt.Errorf("%s.prices.%s: must be a non-negative number (got %v)", p, name, v))
			}
		}
		for j, c := range m.Capabilities {
			if c == "" {
				errs = append(errs, fmt.Errorf("%s.capabilities[%d]: must not be empty", p, j))
			}
		}
	}
	r := c.Retry
	if r.MaxRetries < 0 || r.MaxRetries > 10 {
		errs = append(errs, fmt.Errorf("retry.max_retries: must be between 0 and 10 (got %d)", r.MaxRetries))
	}
	if r.InitialBackoff < 0 {
		errs = append(errs, errors.New("retry.initial_backoff: must not be negative"))
	}
	if r.MaxBackoff < r.InitialBackoff {
		errs = append(errs, fmt.Errorf("retry.max_backoff: %v is less than initial_backoff %v", time.Duration(r.MaxBackoff), time.Duration(r.InitialBackoff)))
	}
	if r.MaxRetryAfter < 0 {
		errs = append(errs, errors.New("retry.max_retry_after: must not be negative"))
	}
	if c.BudgetUSD < 0 || c.BudgetUSD != c.BudgetUSD {
		errs = append(errs, fmt.Errorf("budget_usd: must be a non-negative number (got %v)", c.BudgetUSD))
	}
	return errors.Join(errs...)
}

func (m ModelConfig) entryName() string {
	if m.Name != "" {
		return m.Name
	}
	return m.Model
}

func (m ModelConfig) has(c Capability) bool { return slices.Contains(m.Capabilities, c) }

// DecodeConfig reads a JSON config; unknown keys are errors (a typo must not
// silently drop a setting), and syntax errors name the line.
func DecodeConfig(r io.Reader) (Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, fmt.Errorf("read gateway config: %w", err)
	}
	cfg := DefaultConfig()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return Config{}, fmt.Errorf("decode gateway config: line %d: %w", lineOf(data, se.Offset), err)
		case errors.As(err, &te):
			return Config{}, fmt.Errorf("decode gateway config: line %d: field %s: %w", lineOf(data, te.Offset), te.Field, err)
		}
		return Config{}, fmt.Errorf("decode gateway config: %w", err)
	}
	if dec.More() {
		return Config{}, errors.New("decode gateway config: trailing data after the config object")
	}
	return cfg, nil
}

func lineOf(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}
