package gateway_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/providers"
)

func decodeFile(t *testing.T, path string) (gateway.Config, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return gateway.DecodeConfig(f)
}

func TestExampleConfigDecodesValidatesAndBuilds(t *testing.T) {
	cfg, err := decodeFile(t, "testdata/gateway.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Models) != 3 || cfg.Models[0].Timeout != gateway.Duration(120*time.Second) || cfg.Retry.InitialBackoff != gateway.Duration(500*time.Millisecond) || cfg.BudgetUSD != 5 {
		t.Fatalf("cfg = %+v", cfg)
	}
	getenv := func(k string) string {
		return map[string]string{"ANTHROPIC_API_KEY": "a-key", "OPENAI_API_KEY": "o-key"}[k]
	}
	if _, err := gateway.New(cfg, gateway.Options{Providers: providers.Standard(), Getenv: getenv}); err != nil {
		t.Fatal(err)
	}
}

func TestConfigTypoIsRejectedNamingTheKey(t *testing.T) {
	_, err := decodeFile(t, "testdata/typo_key.json")
	if err == nil || !strings.Contains(err.Error(), `unknown field "context_windw"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigSyntaxErrorNamesTheLine(t *testing.T) {
	_, err := decodeFile(t, "testdata/bad_syntax.json")
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("err = %v", err)
	}
}

func TestValidateReportsEveryProblemWithItsPath(t *testing.T) {
	cfg := gateway.Config{
		Models: []gateway.ModelConfig{
			{Provider: "openai", Model: "a", MaxOutputTokens: 0, ContextWindow: -1},
			{Model: "a", MaxOutputTokens: 10, Prices: gateway.Prices{InputPerMTok: -1}},
		},
		Retry:     gateway.RetryPolicy{MaxRetries: 11, InitialBackoff: gateway.Duration(time.Second)},
		BudgetUSD: -2,
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{
		"models[0].max_output_tokens", "models[0].context_window", "models[1].provider",
		`models[1].name: "a" already used by models[0]`, "models[1].prices.input_per_mtok",
		"retry.max_retries", "retry.max_backoff", "budget_usd",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if err := (gateway.Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "models") {
		t.Fatalf("empty config: %v", err)
	}
}

func TestUnknownProviderFailsNew(t *testing.T) {
	cfg := gateway.DefaultConfig()
	cfg.Models = []gateway.ModelConfig{{Provider: "gemini", Model: "g", MaxOutputTokens: 10}}
	if _, err := gateway.New(cfg, gateway.Options{Providers: providers.Standard()}); err == nil || !strings.Contains(err.Error(), `models[0].provider: no provider "gemini"`) {
		t.Fatalf("err = %v", err)
	}
}
