package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/gateway/providers"
	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/scripted"
)

const (
	openAIKey    = "sk-proj-gw-test-3b7e1f9a2c4d6e8f0a1b"
	anthropicKey = "sk-ant-api03-gw-test-5c6d7e8f9a0b1c2d"
)

// harness is a gateway over real clients talking to fake providers, with an
// injected clock that records waits instead of sleeping.
type harness struct {
	gw    *gateway.Gateway
	waits []time.Duration
	logs  *bytes.Buffer
	spans *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider
}

func env(name string) string {
	return map[string]string{"LW_OPENAI_KEY": openAIKey, "LW_ANTHROPIC_KEY": anthropicKey}[name]
}

func openAIEntry(srv *providertest.Server, name string) gateway.ModelConfig {
	return gateway.ModelConfig{
		Name: name, Provider: "openai", Model: "gpt-4.1-mini", BaseURL: srv.URL + "/v1", APIKeyEnv: "LW_OPENAI_KEY",
		ContextWindow: 128_000, MaxOutputTokens: 1024, Capabilities: []gateway.Capability{gateway.CapTools},
		Prices: gateway.Prices{InputPerMTok: 0.40, OutputPerMTok: 1.60, CacheReadPerMTok: 0.10},
	}
}

func anthropicEntry(srv *providertest.Server, name string, stream bool) gateway.ModelConfig {
	return gateway.ModelConfig{
		Name: name, Provider: "anthropic", Model: "claude-sonnet-4-5", BaseURL: srv.URL, APIKeyEnv: "LW_ANTHROPIC_KEY",
		Stream: stream, ContextWindow: 200_000, MaxOutputTokens: 1024, Capabilities: []gateway.Capability{gateway.CapTools, gateway.CapVision},
		Prices: gateway.Prices{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.30, CacheWritePerMTok: 3.75},
	}
}

func newHarness(t *testing.T, cfg gateway.Config) *harness {
	t.Helper()
	h := &harness{logs: &bytes.Buffer{}, spans: tracetest.NewSpanRecorder()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() { _ = h.tp.Shutdown(context.Background()) })
	var mu sync.Mutex
	gw, err := gateway.New(cfg, gateway.Options{
		Providers: providers.Standard(),
		Getenv:    env,
		Tracer:    h.tp.Tracer("loomwork/gateway"),
		Logger:    slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			h.waits = append(h.waits, d)
			return ctx.Err()
		},
		Rand: func() float64 { return 0.5 },
		Now:  func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.gw = gw
	return h
}

func retryPolicy(maxRetries int) gateway.RetryPolicy {
	return gateway.RetryPolicy{MaxRetries: maxRetries, InitialBackoff: gateway.Duration(time.Second),
		MaxBackoff: gateway.Duration(8 * time.Second), MaxRetryAfter: gateway.Duration(30 * time.Second)}
}

func hello() llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Diagnose the checkout failure spike."}}}
}

func account(s gateway.Snapshot, name string) gateway.ModelAccount {
	for _, m := range s.Models {
		if m.Name == name {
			return m
		}
	}
	return gateway.ModelAccount{}
}

func TestRetryableFailuresAreRetriedWithBackoffThenFallBack(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	an := providertest.NewAnthropic(t, anthropicKey)
	// Primary: a 429 asking for 2 s, then 503 twice: retries exhausted.
	oa.Enqueue(
		providertest.OpenAIError(429, "Rate limit reached for gpt-4.1-mini in organization org-x on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 2s.",
			"requests", "", "rate_limit_exceeded", http.Header{"Retry-After": {"2"}}),
		providertest.Reply{Status: 503, Body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`},
		providertest.Reply{Status: 503, Body: `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`},
	)
	// Fallback: overloaded once, then answers.
	an.Enqueue(
		providertest.AnthropicError(529, "overloaded_error", "Overloaded", nil),
		providertest.AnthropicMessage(providertest.AnthropicAnswer{Model: "claude-sonnet-4-5-20250929", Text: "Deploy 812 caused it.", Input: 40, Output: 8}),
	)
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{openAIEntry(oa, "primary"), anthropicEntry(an, "fallback", false)}, Retry: retryPolicy(2)})

	res, err := h.gw.CompleteWith(context.Background(), hello(), gateway.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "fallback" || res.Response.Message.Content != "Deploy 812 caused it." || res.Response.Provider != "anthropic" {
		t.Fatalf("result = %+v", res)
	}
	if oa.Count() != 3 || an.Count() != 2 {
		t.Fatalf("requests: primary %d (want 3 = 1 + 2 retries), fallback %d (want 2)", oa.Count(), an.Count())
	}
	// Waits: Retry-After 2 s beats the first backoff (1 s base, equal
	// jitter at 0.5 → 0.75 s); the second backoff is 2 s base → 1.5 s; then
	// fallback without waiting; the fallback's first retry waits 0.75 s.
	want := []time.Duration{2 * time.Second, 1500 * time.Millisecond, 750 * time.Millisecond}
	if fmt.Sprint(h.waits) != fmt.Sprint(want) {
		t.Fatalf("waits = %v, want %v", h.waits, want)
	}
	var kinds []string
	for _, a := range res.Attempts {
		kinds = append(kinds, fmt.Sprintf("%s:%v", a.Model, errType(a.Err)))
	}
	if got := strings.Join(kinds, " "); got != "primary:requests primary:server_error primary:server_error fallback:overloaded_error fallback:<nil>" {
		t.Fatalf("attempts = %s", got)
	}

	snap := h.gw.Accounting()
	p, f := account(snap, "primary"), account(snap, "fallback")
	if p.Attempts != 3 || p.Failures != 3 || p.Retries != 2 || p.FailuresWithoutUsage != 3 || p.Successes != 0 {
		t.Fatalf("primary account = %+v", p)
	}
	if f.Attempts != 2 || f.Successes != 1 || f.Failures != 1 || f.Fallbacks != 1 || f.Usage.InputTokens != 40 {
		t.Fatalf("fallback account = %+v", f)
	}
	wantCost := (40*3.0 + 8*15.0) / 1e6
	if diff := f.CostUSD - wantCost; diff > 1e-12 || diff < -1e-12 || snap.SpentUSD != f.CostUSD {
		t.Fatalf("cost = %v (spent %v), want %v", f.CostUSD, snap.SpentUSD, wantCost)
	}
}

func errType(err error) any {
	var ae *gateway.APIError
	if errors.As(err, &ae) {
		return ae.Type
	}
	return err
}

func TestBadRequestIsSurfacedNotRetriedNorFallenBack(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	an := providertest.NewAnthropic(t, anthropicKey)
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{openAIEntry(oa, "primary"), anthropicEntry(an, "fallback", false)}, Retry: retryPolicy(3)})
	req := llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleTool, ToolCallID: "call_summarised_away", Content: "42"},
	}}
	_, err := h.gw.Complete(context.Background(), req)
	var ae *gateway.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Retryable || ae.Message != providertest.OpenAIOrphanToolMessage {
		t.Fatalf("err = %v", err)
	}
	if oa.Count() != 1 || an.Count() != 0 || len(h.waits) != 0 {
		t.Fatalf("requests primary %d fallback %d, waits %v: a 400 must not be retried or fall back", oa.Count(), an.Count(), h.waits)
	}
	if a := account(h.gw.Accounting(), "primary"); a.Attempts != 1 || a.Failures != 1 {
		t.Fatalf("account = %+v", a)
	}
}

func TestBudgetRefusesBeforeAnyRequestIsSent(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	an := providertest.NewAnthropic(t, anthropicKey)
	// Worst case on the cheaper model: ~20 input tokens + 1024 output at
	// $1.60/M ≈ $0.0016; the budget is a tenth of that.
	h := newHarness(t, gateway.Config{
		Models:    []gateway.ModelConfig{anthropicEntry(an, "frontier", false), openAIEntry(oa, "mini")},
		Retry:     retryPolicy(2),
		BudgetUSD: 0.00016,
	})
	_, err := h.gw.Complete(context.Background(), hello())
	var be *gateway.BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want *gateway.BudgetError", err)
	}
	if oa.Count() != 0 || an.Count() != 0 {
		t.Fatalf("requests sent despite the refusal: %d + %d", an.Count(), oa.Count())
	}
	if be.SpentUSD != 0 || be.EstimateUSD <= be.BudgetUSD {
		t.Fatalf("refusal = %+v", be)
	}
	snap := h.gw.Accounting()
	if snap.SpentUSD != 0 || snap.Total().Attempts != 0 || snap.Total().Refusals != 2 {
		t.Fatalf("snapshot = %+v", snap)
	}
}

func TestBudgetPassesOverModelsItCannotAfford(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	an := providertest.NewAnthropic(t, anthropicKey)
	oa.Enqueue(providertest.OpenAICompletion(providertest.OpenAIAnswer{Model: "gpt-4.1-mini", Content: "ok", Prompt: 20, Completion: 1}))
	// frontier worst case ≈ 1024 × $15/M ≈ $0.015; mini ≈ $0.0016.
	h := newHarness(t, gateway.Config{
		Models:    []gateway.ModelConfig{anthropicEntry(an, "frontier", false), openAIEntry(oa, "mini")},
		BudgetUSD: 0.005,
	})
	res, err := h.gw.CompleteWith(context.Background(), hello(), gateway.CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "mini" || an.Count() != 0 || oa.Count() != 1 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "budget") {
		t.Fatalf("result %+v, requests %d/%d", res, an.Count(), oa.Count())
	}
}

func TestFailedAttemptsAreChargedWithTheirReportedUsage(t *testing.T) {
	an := providertest.NewAnthropic(t, anthropicKey)
	an.Enqueue(
		// message_start reports 1000 input tokens (800 from cache), then
		// the stream dies with overloaded_error: the input was processed.
		providertest.AnthropicStream(providertest.AnthropicAnswer{Model: "claude-sonnet-4-5", Text: "lost", Input: 200, CacheRead: 800, Output: 50}, 0, 3, "overloaded_error"),
		providertest.AnthropicError(500, "api_error", "Internal server error", nil),
		providertest.AnthropicStream(providertest.AnthropicAnswer{Model: "claude-sonnet-4-5", Text: "done", Input: 200, CacheRead: 800, Output: 10}, 0, 0, ""),
	)
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{anthropicEntry(an, "claude", true)}, Retry: retryPolicy(2)})
	if _, err := h.gw.Complete(context.Background(), hello()); err != nil {
		t.Fatal(err)
	}
	a := account(h.gw.Accounting(), "claude")
	if a.Attempts != 3 || a.Failures != 2 || a.FailuresWithoutUsage != 1 || a.Successes != 1 {
		t.Fatalf("account = %+v", a)
	}
	// Failed stream: 1000 in (800 cached), 1 out; success: 1000 in (800 cached), 10 out.
	wantUsage := llm.Usage{InputTokens: 2000, OutputTokens: 11, CacheReadTokens: 1600}
	if a.Usage != wantUsage {
		t.Fatalf("usage = %+v, want %+v", a.Usage, wantUsage)
	}
	failed := (200*3.0 + 800*0.30 + 1*15.0) / 1e6
	ok := (200*3.0 + 800*0.30 + 10*15.0) / 1e6
	if d := a.CostUSD - (failed + ok); d > 1e-12 || d < -1e-12 {
		t.Fatalf("cost = %.9f, want %.9f (failed attempt charged)", a.CostUSD, failed+ok)
	}
}

// fakeModel is a deterministic stand-in model for routing tests; it labels
// its answers "scripted" as every non-live model must.
type fakeModel struct {
	mu    sync.Mutex
	name  string
	calls int
	label string
	block chan struct{}
}

func (s *fakeModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	if s.block != nil {
		select {
		case <-s.block:
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
	}
	label := s.label
	if label == "" {
		label = llm.LabelScripted
	}
	return llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Content: "answer from " + s.name}, StopReason: "end_turn",
		Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}, Provider: "scripted", Model: s.name, Label: label,
	}, nil
}

func scriptedEntry(name string, window int64, caps ...gateway.Capability) (gateway.ModelConfig, *fakeModel) {
	m := &fakeModel{name: name}
	return gateway.ModelConfig{Name: name, Provider: "scripted", ContextWindow: window, MaxOutputTokens: 256,
		Capabilities: caps, Client: m}, m
}

func TestRoutingPicksFirstModelWithCapabilitiesAndWindow(t *testing.T) {
	small, _ := scriptedEntry("small", 2_000)
	mid, _ := scriptedEntry("mid", 32_000, gateway.CapTools)
	long, _ := scriptedEntry("long", 1_000_000, gateway.CapTools, gateway.CapVision)
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{small, mid, long}, Retry: retryPolicy(0)})
	ctx := context.Background()

	big := strings.Repeat("log line with an error code 0x5f3a; ", 4_000) // ~150 kB ≈ 50k tokens estimated
	cases := []struct {
		name string
		req  llm.Request
		need []gateway.Capability
		want string
	}{
		{"plain request", hello(), nil, "small"},
		{"tools", llm.Request{Messages: hello().Messages, Tools: []llm.ToolSpec{{Name: "grep", Parameters: json.RawMessage(`{"type":"object"}`)}}}, nil, "mid"},
		{"vision", hello(), []gateway.Capability{gateway.CapVision}, "long"},
		{"long prompt", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: big}}}, nil, "long"},
		{"pinned", llm.Request{Model: "mid", Messages: hello().Messages}, nil, "mid"},
	}
	for _, tc := range cases {
		res, err := h.gw.CompleteWith(ctx, tc.req, gateway.CallOptions{Require: tc.need})
		if err != nil || res.Model != tc.want {
			t.Fatalf("%s: routed to %q (err %v), want %q; skipped %v", tc.name, res.Model, err, tc.want, res.Skipped)
		}
	}
	_, err := h.gw.CompleteWith(ctx, hello(), gateway.CallOptions{Require: []gateway.Capability{gateway.CapJSON}})
	var ne *gateway.NoEligibleModelError
	if !errors.As(err, &ne) || len(ne.Reasons) != 3 {
		t.Fatalf("err = %v, want NoEligibleModelError naming all three models", err)
	}
	if _, err := h.gw.Complete(ctx, llm.Request{Model: "gpt-9", Messages: hello().Messages}); err == nil || !strings.Contains(err.Error(), "gpt-9") {
		t.Fatalf("unknown pinned model: err = %v", err)
	}
}

func TestScriptedModelIsRoutedAndKeepsItsLabel(t *testing.T) {
	entry, m := scriptedEntry("scripted-baseline", 0, gateway.CapTools)
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{entry}, Retry: retryPolicy(0)})
	resp, err := h.gw.Complete(context.Background(), hello())
	if err != nil || resp.Label != llm.LabelScripted || m.calls != 1 {
		t.Fatalf("resp %+v err %v calls %d", resp, err, m.calls)
	}
	spans := h.spans.Ended()
	if len(spans) != 1 || attr(spans[0], "loomwork.model.label") != "scripted" || attr(spans[0], "gen_ai.provider.name") != "scripted" {
		t.Fatalf("span attributes = %v", spans[0].Attributes())
	}

	entry.Client = &fakeModel{name: "sneaky", label: "maybe"}
	h = newHarness(t, gateway.Config{Models: []gateway.ModelConfig{entry}, Retry: retryPolicy(0)})
	if _, err := h.gw.Complete(context.Background(), hello()); err == nil || !strings.Contains(err.Error(), "label") {
		t.Fatalf("a response with label %q was accepted: %v", "maybe", err)
	}
}

func TestConcurrentCallsCannotJointlyOverspendTheBudget(t *testing.T) {
	entry, m := scriptedEntry("m", 0)
	entry.Prices = gateway.Prices{InputPerMTok: 1000, OutputPerMTok: 1000}
	m.block = make(chan struct{})
	// Each call's worst case is (~17 in + 256 out) × $1000/M ≈ $0.27; the
	// budget fits two of them in flight, not three.
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{entry}, BudgetUSD: 0.6})
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() { _, err := h.gw.Complete(context.Background(), hello()); errs <- err }()
	}
	next := func() error {
		select {
		case err := <-errs:
			return err
		case <-time.After(30 * time.Second): // hang guard, not a timing assertion
			close(m.block)
			t.Fatal("calls still blocked: more than two passed the budget check")
			return nil
		}
	}
	var refused int
	for range n - 2 {
		var be *gateway.BudgetError
		if err := next(); !errors.As(err, &be) {
			t.Fatalf("err = %v, want a budget refusal", err)
		}
		refused++
	}
	close(m.block)
	for range 2 {
		if err := next(); err != nil {
			t.Fatal(err)
		}
	}
	a := account(h.gw.Accounting(), "m")
	if refused != 3 || m.calls != 2 || a.Successes != 2 || a.Refusals != 3 {
		t.Fatalf("refused %d, calls %d, account %+v", refused, m.calls, a)
	}
	if s := h.gw.Accounting(); s.ReservedUSD != 0 {
		t.Fatalf("reservations leaked: %+v", s)
	}
}

func TestPerAttemptTimeoutIsRetriedThenFallsBack(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	oa.Enqueue(providertest.Reply{Hang: true}, providertest.Reply{Hang: true})
	entry := openAIEntry(oa, "slow")
	entry.Timeout = gateway.Duration(30 * time.Millisecond)
	backup, m := scriptedEntry("backup", 0)
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{entry, backup}, Retry: retryPolicy(1)})
	res, err := h.gw.CompleteWith(context.Background(), hello(), gateway.CallOptions{})
	if err != nil || res.Model != "backup" || m.calls != 1 || oa.Count() != 2 {
		t.Fatalf("res %+v err %v calls %d requests %d", res, err, m.calls, oa.Count())
	}
	if errType(res.Attempts[0].Err) != gateway.ErrTypeTimeout {
		t.Fatalf("first attempt error = %v", res.Attempts[0].Err)
	}
}

func TestRetryAfterLongerThanAllowedFallsBackAtOnce(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	oa.Enqueue(providertest.OpenAIError(429, "Please try again in 20m.", "requests", "", "rate_limit_exceeded", http.Header{"Retry-After": {"1200"}}))
	backup, _ := scriptedEntry("backup", 0)
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{openAIEntry(oa, "primary"), backup}, Retry: retryPolicy(3)})
	res, err := h.gw.CompleteWith(context.Background(), hello(), gateway.CallOptions{})
	if err != nil || res.Model != "backup" || oa.Count() != 1 || len(h.waits) != 0 {
		t.Fatalf("res %+v err %v requests %d waits %v", res, err, oa.Count(), h.waits)
	}
}

func TestAllModelsFailingReturnsChainErrorWrappingTheLastAPIError(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	for range 2 {
		oa.Enqueue(providertest.OpenAIError(500, "The server had an error while processing your request. Sorry about that!", "server_error", "", "", nil))
	}
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{openAIEntry(oa, "only")}, Retry: retryPolicy(1)})
	_, err := h.gw.Complete(context.Background(), hello())
	var ce *gateway.ChainError
	var ae *gateway.APIError
	if !errors.As(err, &ce) || !errors.As(err, &ae) || ae.Status != 500 || len(ce.Attempts) != 2 {
		t.Fatalf("err = %v", err)
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) any {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsInterface()
		}
	}
	return nil
}

func TestSpansCarryGenAIAttributesPerAttempt(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	oa.Enqueue(
		providertest.Reply{Status: 503, Body: `{"error":{"message":"Service Unavailable","type":"server_error","param":null,"code":null}}`},
		providertest.OpenAICompletion(providertest.OpenAIAnswer{Model: "gpt-4.1-mini-2025-04-14", Content: "ok", Prompt: 2006, Cached: 1920, Completion: 300, Reasoning: 256}),
	)
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{openAIEntry(oa, "primary")}, Retry: retryPolicy(1)})
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "invoke_agent researcher")
	if _, err := h.gw.Complete(ctx, hello()); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var chats []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if strings.HasPrefix(s.Name(), "chat ") {
			chats = append(chats, s)
		}
	}
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want one per attempt", len(chats))
	}
	failed, ok := chats[0], chats[1]
	for _, s := range chats {
		if s.Name() != "chat gpt-4.1-mini" || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Fatalf("span %q kind %v parent %v", s.Name(), s.SpanKind(), s.Parent().SpanID())
		}
		if attr(s, "gen_ai.operation.name") != "chat" || attr(s, "gen_ai.provider.name") != "openai" || attr(s, "gen_ai.request.model") != "gpt-4.1-mini" {
			t.Fatalf("request attributes = %v", s.Attributes())
		}
	}
	if failed.Status().Code.String() != "Error" || attr(failed, "error.type") != "server_error" || attr(failed, "http.response.status_code") != int64(503) {
		t.Fatalf("failed span status %v attrs %v", failed.Status(), failed.Attributes())
	}
	want := map[string]any{
		"gen_ai.response.model":                "gpt-4.1-mini-2025-04-14",
		"gen_ai.usage.input_tokens":            int64(2006),
		"gen_ai.usage.output_tokens":           int64(300),
		"gen_ai.usage.cache_read.input_tokens": int64(1920),
		"gen_ai.usage.reasoning.output_tokens": int64(256),
		"loomwork.model.label":                 "live",
		"loomwork.gateway.attempt":             int64(1),
	}
	for k, v := range want {
		if got := attr(ok, k); fmt.Sprint(got) != fmt.Sprint(v) {
			t.Fatalf("%s = %v, want %v", k, got, v)
		}
	}
	if fr, _ := attr(ok, "gen_ai.response.finish_reasons").([]string); len(fr) != 1 || fr[0] != "stop" {
		t.Fatalf("finish reasons = %v", attr(ok, "gen_ai.response.finish_reasons"))
	}
	cost := attr(ok, "llm.cost.total").(float64)
	wantCost := ((2006-1920)*0.40 + 1920*0.10 + 300*1.60) / 1e6
	if d := cost - wantCost; d > 1e-12 || d < -1e-12 {
		t.Fatalf("cost = %v, want %v", cost, wantCost)
	}
}

func TestKeyNeverReachesLogsErrorsSpansOrAccounts(t *testing.T) {
	oa := providertest.NewOpenAI(t, openAIKey)
	an := providertest.NewAnthropic(t, anthropicKey)
	// Servers that echo the key back in their error messages.
	oa.Enqueue(
		providertest.OpenAIError(503, "backend for key "+openAIKey+" unavailable", "server_error", "", "", nil),
		providertest.OpenAIError(503, "backend for key "+openAIKey+" unavailable", "server_error", "", "", nil),
	)
	an.Enqueue(providertest.AnthropicError(401, "authentication_error", "invalid x-api-key "+anthropicKey, nil))
	cfg := gateway.Config{Models: []gateway.ModelConfig{openAIEntry(oa, "primary"), anthropicEntry(an, "fallback", false)}, Retry: retryPolicy(1)}
	h := newHarness(t, cfg)
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "invoke_agent")
	res, err := h.gw.CompleteWith(ctx, hello(), gateway.CallOptions{})
	parent.End()
	if err == nil {
		t.Fatal("expected failure")
	}
	acct, _ := json.Marshal(h.gw.Accounting())
	cfgJSON, _ := json.Marshal(cfg)
	var spanText strings.Builder
	for _, s := range h.spans.Ended() {
		fmt.Fprintf(&spanText, "%s %v %v %v\n", s.Name(), s.Attributes(), s.Status(), s.Events())
	}
	var attempts strings.Builder
	for _, a := range res.Attempts {
		fmt.Fprintf(&attempts, "%v %+v\n", a.Err, a.Err)
	}
	haystacks := map[string]string{
		"logs": h.logs.String(), "error": err.Error(), "error %+v": fmt.Sprintf("%+v", err), "attempts": attempts.String(),
		"spans": spanText.String(), "accounting": string(acct), "config": string(cfgJSON),
	}
	if !strings.Contains(h.logs.String(), "retrying") {
		t.Fatalf("expected retry logs, got %s", h.logs.String())
	}
	for where, text := range haystacks {
		for _, key := range []string{openAIKey, anthropicKey} {
			if strings.Contains(text, key) {
				t.Errorf("key leaked into %s: %s", where, text)
			}
		}
	}
	if oa.Requests()[0].Header.Get("Authorization") != "Bearer "+openAIKey {
		t.Fatal("the key was not sent to the provider")
	}
}

func TestMissingCredentialFailsNewNamingTheVariableOnly(t *testing.T) {
	an := providertest.NewAnthropic(t, anthropicKey)
	entry := anthropicEntry(an, "claude", false)
	entry.APIKeyEnv = ""
	_, err := gateway.New(gateway.Config{Models: []gateway.ModelConfig{entry}, Retry: retryPolicy(0)},
		gateway.Options{Providers: providers.Standard(), Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Fatalf("err = %v", err)
	}
	// A local OpenAI-compatible server needs no key.
	oa := providertest.NewOpenAI(t, "")
	local := openAIEntry(oa, "local")
	local.APIKeyEnv = ""
	if _, err := gateway.New(gateway.Config{Models: []gateway.ModelConfig{local}, Retry: retryPolicy(0)},
		gateway.Options{Providers: providers.Standard(), Getenv: func(string) string { return "" }}); err != nil {
		t.Fatalf("local server without key: %v", err)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := gateway.NewSecret(openAIKey)
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "key", s)
	j, _ := json.Marshal(struct{ K gateway.Secret }{s})
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x", s, s, s, s, s, s), logs.String(), string(j)} {
		if strings.Contains(out, openAIKey) || strings.Contains(out, "3b7e1f9a") {
			t.Fatalf("secret printed: %s", out)
		}
	}
	if s.Reveal() != openAIKey {
		t.Fatal("Reveal lost the value")
	}
}

func TestRealScriptedModelIsRoutedLikeALiveOneAndStaysScripted(t *testing.T) {
	sm := scripted.NewFunc("scripted-baseline", func(req llm.Request, turn int) (scripted.Turn, error) {
		return scripted.Turn{Content: "deploy 812", Usage: llm.Usage{InputTokens: 30, OutputTokens: 3}}, nil
	})
	oa := providertest.NewOpenAI(t, openAIKey)
	oa.Enqueue(providertest.OpenAIError(503, "Service Unavailable", "server_error", "", "", nil))
	// A live primary that fails over to the scripted model.
	h := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{
		openAIEntry(oa, "live"),
		{Name: "scripted", Provider: "scripted", MaxOutputTokens: 256, Capabilities: []gateway.Capability{gateway.CapTools}, Client: sm},
	}, Retry: retryPolicy(0)})
	if h.gw.Label() != "" {
		t.Fatalf("mixed chain label = %q, want unknown", h.gw.Label())
	}
	resp, err := h.gw.Complete(context.Background(), hello())
	if err != nil || resp.Label != llm.LabelScripted || resp.Provider != "scripted" || sm.Calls() != 1 {
		t.Fatalf("resp %+v err %v calls %d", resp, err, sm.Calls())
	}
	only := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{
		{Name: "scripted", Provider: "scripted", MaxOutputTokens: 256, Client: sm},
	}})
	if only.gw.Label() != llm.LabelScripted {
		t.Fatalf("scripted-only chain label = %q", only.gw.Label())
	}
	live := newHarness(t, gateway.Config{Models: []gateway.ModelConfig{openAIEntry(oa, "live")}})
	if live.gw.Label() != llm.LabelLive {
		t.Fatalf("live-only chain label = %q", live.gw.Label())
	}
}
