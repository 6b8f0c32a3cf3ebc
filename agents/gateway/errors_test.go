package gateway_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/gateway"
	"github.com/loomwork/loomwork/agents/llm"
)

func TestParseRetryAfterReadsMillisecondsSecondsAndDates(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After": {"0.25"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After": {"-3"}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{}, 0},
	}
	for _, tc := range cases {
		if got := gateway.ParseRetryAfter(tc.h, now); got != tc.want {
			t.Errorf("ParseRetryAfter(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

func TestRetryRuleCoversRateLimitsServerErrorsAndTransportOnly(t *testing.T) {
	for status, want := range map[int]bool{400: false, 401: false, 403: false, 404: false, 408: true, 409: false, 422: false, 429: true, 500: true, 502: true, 503: true, 504: true, 529: true} {
		if got := gateway.RetryableStatus(status); got != want {
			t.Errorf("RetryableStatus(%d) = %v", status, got)
		}
	}
	ctx := context.Background()
	timeout := gateway.TransportError(ctx, "openai", "m", &net.OpError{Op: "read", Err: timeoutErr{}})
	refused := gateway.TransportError(ctx, "openai", "m", &net.OpError{Op: "dial", Err: errors.New("connection refused")})
	var ae *gateway.APIError
	if !errors.As(timeout, &ae) || ae.Type != gateway.ErrTypeTimeout || !ae.Retryable {
		t.Fatalf("timeout = %v", timeout)
	}
	if !errors.As(refused, &ae) || ae.Type != gateway.ErrTypeConnection || !ae.Retryable {
		t.Fatalf("refused = %v", refused)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := gateway.TransportError(cctx, "openai", "m", errors.New("x")); gateway.IsRetryable(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled = %v", err)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestCostPricesCachedInputAtItsOwnRate(t *testing.T) {
	p := gateway.Prices{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75}
	u := llm.Usage{InputTokens: 2071, CacheReadTokens: 1800, CacheCreationTokens: 250, OutputTokens: 93}
	want := (21*3 + 1800*0.3 + 250*3.75 + 93*15) / 1e6
	if got := gateway.Cost(p, u); got-want > 1e-12 || want-got > 1e-12 {
		t.Fatalf("cost = %v, want %v", got, want)
	}
	// Unset cache prices fall back to the input price, never to free.
	if got := gateway.Cost(gateway.Prices{InputPerMTok: 2}, llm.Usage{InputTokens: 100, CacheReadTokens: 100}); got != 200.0/1e6 {
		t.Fatalf("cost with unset cache price = %v", got)
	}
}

func TestEstimateOverestimatesEnglishAndCountsToolsAndArguments(t *testing.T) {
	text := "The checkout service started timing out after deploy 812 rolled out to the payments cluster."
	base := gateway.EstimateInputTokens(llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}})
	// A BPE tokenizer gives about len/4 (~23) tokens for this sentence.
	if base < int64(len(text))/4 {
		t.Fatalf("estimate %d under-counts %d bytes", base, len(text))
	}
	withTools := gateway.EstimateInputTokens(llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: text}},
		Tools: []llm.ToolSpec{{Name: "grep", Parameters: []byte(`{"type":"object","properties":{"pattern":{"type":"string"}}}`)}}})
	if withTools <= base {
		t.Fatalf("tools not counted: %d <= %d", withTools, base)
	}
}
