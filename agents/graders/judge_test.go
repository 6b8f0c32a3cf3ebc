package graders

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/pricing"
)

const (
	openAIKey    = "sk-judge-test-0123456789abcdef"
	anthropicKey = "sk-ant-judge-test-0123456789abcdef"
)

// fakeJudge is one provider fake and a judge pointed at it.
type fakeJudge struct {
	provider string
	model    string // the config's model
	respond  string // the dated id the provider answers with
	srv      *providertest.Server
	cfg      JudgeConfig
	env      map[string]string
}

func newFakeJudge(t *testing.T, provider string) *fakeJudge {
	t.Helper()
	switch provider {
	case ProviderOpenAI:
		s := providertest.NewOpenAI(t, openAIKey)
		return &fakeJudge{provider: provider, model: "gpt-4o-mini", respond: "gpt-4o-mini-2024-07-18", srv: s,
			cfg: JudgeConfig{Provider: provider, Model: "gpt-4o-mini", BaseURL: s.URL + "/v1"},
			env: map[string]string{"OPENAI_API_KEY": openAIKey}}
	case ProviderAnthropic:
		s := providertest.NewAnthropic(t, anthropicKey)
		return &fakeJudge{provider: provider, model: "claude-sonnet-4-5", respond: "claude-sonnet-4-5-20250929", srv: s,
			cfg: JudgeConfig{Provider: provider, Model: "claude-sonnet-4-5", BaseURL: s.URL},
			env: map[string]string{"ANTHROPIC_API_KEY": anthropicKey}}
	}
	t.Fatalf("no fake for %q", provider)
	return nil
}

// noWait keeps retries from sleeping.
func noWait(context.Context, time.Duration) error { return nil }

func (f *fakeJudge) judge(t *testing.T) *Judge {
	t.Helper()
	j, err := NewJudge(f.cfg, JudgeOptions{Getenv: func(k string) string { return f.env[k] }, Sleep: noWait})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// answer queues a reply with text, input tokens in (cacheRead of them
// from the prompt cache) and out output tokens, in the provider's shape.
func (f *fakeJudge) answer(text string, in, cacheRead, out int64) providertest.Reply {
	if f.provider == ProviderOpenAI {
		return providertest.OpenAICompletion(providertest.OpenAIAnswer{Model: f.respond, Content: text, Prompt: in, Completion: out, Cached: cacheRead})
	}
	return providertest.AnthropicMessage(providertest.AnthropicAnswer{Model: f.respond, Text: text, Input: in - cacheRead, CacheRead: cacheRead, Output: out})
}

// listCost prices usage from the price table's published rates, written
// out here rather than through the judge's pricing.
func listCost(t *testing.T, model string, in, cacheRead, out int64) float64 {
	t.Helper()
	pm, _, ok := pricing.Default().Lookup(model)
	if !ok {
		t.Fatalf("no price for %s", model)
	}
	readRate := pm.Input
	if pm.CacheRead != nil {
		readRate = *pm.CacheRead
	}
	return (float64(in-cacheRead)*pm.Input + float64(cacheRead)*readRate + float64(out)*pm.Output) / 1e6
}

// userText is the text of the request's user turn, in either wire shape.
func userText(t *testing.T, body map[string]any) string {
	t.Helper()
	for _, m := range body["messages"].([]any) {
		msg := m.(map[string]any)
		if msg["role"] != "user" {
			continue
		}
		switch c := msg["content"].(type) {
		case string:
			return c
		case []any:
			var b strings.Builder
			for _, blk := range c {
				if s, ok := blk.(map[string]any)["text"].(string); ok {
					b.WriteString(s)
				}
			}
			return b.String()
		}
	}
	t.Fatalf("no user message in %v", body)
	return ""
}

func systemText(body map[string]any) string {
	if s, ok := body["system"].(string); ok { // Anthropic: a top-level field
		return s
	}
	if blocks, ok := body["system"].([]any); ok {
		var b strings.Builder
		for _, blk := range blocks {
			b.WriteString(blk.(map[string]any)["text"].(string))
		}
		return b.String()
	}
	for _, m := range body["messages"].([]any) { // OpenAI: a system message
		if msg := m.(map[string]any); msg["role"] == "system" {
			return msg["content"].(string)
		}
	}
	return ""
}

func TestJudgeAsksTheProviderWithTheRubricPromptAndReportsUsageAndCost(t *testing.T) {
	for _, provider := range []string{ProviderOpenAI, ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			f := newFakeJudge(t, provider)
			j := f.judge(t)
			rubric := `Says "wal_keep_size" and why the standby fell behind.`
			prompt := grade.ModelPrompt("Why did the replica lag?", rubric, "Raise wal_keep_size: the standby fell behind the primary's WAL.")
			verdict := `{"score": 0.9, "passed": true, "reason": "names wal_keep_size"}`
			f.srv.Enqueue(f.answer(verdict, 812, 300, 37))

			r, err := j.Judge(context.Background(), grade.JudgeRequest{System: grade.JudgeSystem, Prompt: prompt, MaxTokens: 400})
			if err != nil {
				t.Fatal(err)
			}
			reqs := f.srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests reached the fake, want 1", len(reqs))
			}
			body := reqs[0].JSON()
			if body["model"] != f.model {
				t.Errorf("request model %v, want %s", body["model"], f.model)
			}
			if got := userText(t, body); got != prompt || !strings.Contains(got, rubric) {
				t.Errorf("user turn %q, want the rubric prompt", got)
			}
			if got := systemText(body); got != grade.JudgeSystem {
				t.Errorf("system %q, want grade.JudgeSystem", got)
			}
			maxTok := body["max_tokens"]
			if provider == ProviderOpenAI {
				maxTok = body["max_completion_tokens"]
			}
			if maxTok != 400.0 {
				t.Errorf("max tokens %v, want the request's 400", maxTok)
			}

			if r.Text != verdict || r.ModelLabel != "live" || r.Provider != provider || r.Model != f.respond {
				t.Errorf("reply %+v, want the verdict, live, %s, %s", r, provider, f.respond)
			}
			if r.InputTokens != 812 || r.OutputTokens != 37 {
				t.Errorf("tokens %d in, %d out; want 812 and 37 (input including the 300 cached)", r.InputTokens, r.OutputTokens)
			}
			if want := listCost(t, f.model, 812, 300, 37); r.CostUSD == nil || math.Abs(*r.CostUSD-want) > 1e-12 || want <= 0 {
				t.Errorf("cost %v, want %v", r.CostUSD, want)
			}
			acct := j.Accounting().Total()
			if acct.Attempts != 1 || acct.Usage.InputTokens != 812 {
				t.Errorf("judge account %+v", acct)
			}
		})
	}
}

// A model the price table does not know costs "unknown", never 0.
func TestJudgeCostOfAnUnpricedModelIsNil(t *testing.T) {
	f := newFakeJudge(t, ProviderOpenAI)
	f.cfg.Model, f.respond = "judge-local-7b", "judge-local-7b"
	j := f.judge(t)
	f.srv.Enqueue(f.answer(`{"score":1}`, 100, 0, 5))
	r, err := j.Judge(context.Background(), grade.JudgeRequest{System: "s", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if r.CostUSD != nil || r.InputTokens != 100 || r.Model != "judge-local-7b" {
		t.Fatalf("reply %+v: want nil cost with the tokens kept", r)
	}

	f.cfg.BudgetUSD = 1
	if _, err := NewJudge(f.cfg, JudgeOptions{Getenv: func(k string) string { return f.env[k] }}); err == nil || !strings.Contains(err.Error(), "budget_usd") || !strings.Contains(err.Error(), "judge-local-7b") {
		t.Errorf("a budget over an unpriced model: %v, want a refusal naming budget_usd and the model", err)
	}
}

func TestJudgeProviderErrorsNameTheProviderAndKeepTheKeyOut(t *testing.T) {
	ctx := context.Background()
	f := newFakeJudge(t, ProviderOpenAI)
	j := f.judge(t)
	f.srv.Enqueue(providertest.OpenAIError(http.StatusBadRequest, "Unsupported value: 'temperature' does not support 0 with this model.", "invalid_request_error", "temperature", "unsupported_value", nil))
	_, err := j.Judge(ctx, grade.JudgeRequest{System: "s", Prompt: "p"})
	var ae *gateway.APIError
	if err == nil || !errors.As(err, &ae) || ae.Status != 400 || !strings.HasPrefix(err.Error(), "judge openai gpt-4o-mini: ") ||
		!strings.Contains(err.Error(), "does not support 0 with this model") {
		t.Fatalf("400: %v, want an error naming openai and carrying its message", err)
	}
	if f.srv.Count() != 1 {
		t.Errorf("a 400 was sent %d times, want once (not retryable)", f.srv.Count())
	}

	a := newFakeJudge(t, ProviderAnthropic)
	a.env["ANTHROPIC_API_KEY"] = "sk-ant-wrong-key-ffffffffffff"
	ja := a.judge(t)
	_, err = ja.Judge(ctx, grade.JudgeRequest{System: "s", Prompt: "p"})
	if err == nil || !strings.Contains(err.Error(), "judge anthropic claude-sonnet-4-5") || !strings.Contains(err.Error(), "authentication_error") ||
		strings.Contains(err.Error(), "sk-ant-wrong-key") {
		t.Fatalf("401: %v, want an error naming anthropic's authentication_error without the key", err)
	}

	// A 429 is retried; the reply is the answer that came after it.
	f429 := newFakeJudge(t, ProviderAnthropic)
	j429 := f429.judge(t)
	f429.srv.Enqueue(providertest.AnthropicError(http.StatusTooManyRequests, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", http.Header{"Retry-After": {"1"}}),
		f429.answer(`{"score":0}`, 50, 0, 4))
	r, err := j429.Judge(ctx, grade.JudgeRequest{System: "s", Prompt: "p"})
	if err != nil || r.Text != `{"score":0}` || r.InputTokens != 50 || f429.srv.Count() != 2 {
		t.Fatalf("after a 429: %+v, %v (%d requests)", r, err, f429.srv.Count())
	}
}

// A grader may name another judge model only when the config lists it,
// and then exactly that model answers.
func TestJudgeServesOnlyTheModelsItIsConfiguredFor(t *testing.T) {
	f := newFakeJudge(t, ProviderOpenAI)
	f.cfg.Models = []string{"gpt-4.1-mini"}
	j := f.judge(t)
	_, err := j.Judge(context.Background(), grade.JudgeRequest{Model: "gpt-4o", System: "s", Prompt: "p"})
	if err == nil || !strings.Contains(err.Error(), `"gpt-4o"`) || !strings.Contains(err.Error(), "does not list") || f.srv.Count() != 0 {
		t.Fatalf("unlisted model: %v (%d requests), want a refusal before any request", err, f.srv.Count())
	}
	f.srv.Enqueue(providertest.OpenAICompletion(providertest.OpenAIAnswer{Model: "gpt-4.1-mini-2025-04-14", Content: `{"score":1}`, Prompt: 10, Completion: 2}))
	r, err := j.Judge(context.Background(), grade.JudgeRequest{Model: "gpt-4.1-mini", System: "s", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.srv.Requests()[0].JSON()["model"]; got != "gpt-4.1-mini" || r.Model != "gpt-4.1-mini-2025-04-14" {
		t.Errorf("request model %v, reply model %s", got, r.Model)
	}
	if want := listCost(t, "gpt-4.1-mini", 10, 0, 2); r.CostUSD == nil || math.Abs(*r.CostUSD-want) > 1e-15 {
		t.Errorf("cost %v, want %v (priced as the snapshot's model)", r.CostUSD, want)
	}
}

// The budget refuses a call whose worst case it cannot cover before
// anything is sent.
func TestJudgeBudgetRefusesBeforeSending(t *testing.T) {
	f := newFakeJudge(t, ProviderAnthropic)
	f.cfg.BudgetUSD = 1e-6
	j := f.judge(t)
	_, err := j.Judge(context.Background(), grade.JudgeRequest{System: "s", Prompt: strings.Repeat("long prompt ", 100), MaxTokens: 400})
	var be *gateway.BudgetError
	if !errors.As(err, &be) || f.srv.Count() != 0 || !strings.Contains(err.Error(), "judge anthropic") {
		t.Fatalf("%v (%d requests), want a budget refusal before sending", err, f.srv.Count())
	}
}

func TestJudgeConfigIsCheckedWithoutIO(t *testing.T) {
	neg := -0.5
	bad := JudgeConfig{Provider: "gemini", Models: []string{"", "m"}, BaseURL: "ftp://x", MaxTokens: -1, Temperature: &neg, Timeout: -1, BudgetUSD: math.NaN()}
	err := bad.Validate()
	for _, want := range []string{"provider: \"gemini\"", "model: must be set", "models[0]", "base_url", "max_tokens", "temperature", "timeout", "budget_usd"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want it to name %s", err, want)
		}
	}
	if err := (JudgeConfig{Provider: "openai", Model: "m", Models: []string{"m"}}).Validate(); err == nil || !strings.Contains(err.Error(), "models[0]") {
		t.Errorf("the default model listed again: %v", err)
	}

	// No key: New fails naming the variable, without a request.
	_, err = NewJudge(JudgeConfig{Provider: "anthropic", Model: "claude-haiku-4-5", APIKeyEnv: "JUDGE_KEY"}, JudgeOptions{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "JUDGE_KEY") {
		t.Errorf("missing key: %v, want the variable named", err)
	}

	cfg, err := DecodeJudgeConfig(strings.NewReader(`{"provider":"openai","model":"gpt-4o-mini","temperature":0,"timeout":"30s","budget_usd":0.5}`), "judge.json")
	if err != nil || cfg.Temperature == nil || *cfg.Temperature != 0 || time.Duration(cfg.Timeout) != 30*time.Second || cfg.BudgetUSD != 0.5 {
		t.Fatalf("decoded %+v, %v", cfg, err)
	}
	for in, want := range map[string]string{
		"{\"provider\":\"openai\",\n\"modle\":\"x\"}":                        `unknown field "modle"`,
		"{\"provider\":\"openai\",\n\"model\":\"x\",\n\"max_tokens\":\"a\"}": "judge.json: line 3: field max_tokens",
		`{"provider":"openai"}`:                                              "judge.json: model: must be set",
		`{"provider":"openai","model":"x"} {}`:                               "trailing data",
	} {
		if _, err := DecodeJudgeConfig(strings.NewReader(in), "judge.json"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
