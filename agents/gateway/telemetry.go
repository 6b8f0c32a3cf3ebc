package gateway

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/store"
)

// Attribute keys the gateway sets beyond the GenAI conventions.
const (
	// AttrAttempt is the 0-based attempt number on this model within one call.
	AttrAttempt = "loomwork.gateway.attempt"
	// AttrFallback is true when the model was not the first choice.
	AttrFallback = "loomwork.gateway.fallback"
	// AttrEntry is the chain entry name (Request.Model may differ from it).
	AttrEntry = "loomwork.gateway.model"
	// AttrCost is the attempt's cost in USD as priced by the gateway; it uses
	// the OpenInference key that the collector already reads as an explicit
	// cost.
	AttrCost = "llm.cost.total"
)

// startSpan starts the attempt's span. One span per attempt rather than per
// logical call: each attempt is a request a provider may bill, and the
// rollup charges leaf spans that made a call, so a failed attempt must be
// its own span to be charged.
func (g *Gateway) startSpan(ctx context.Context, e entry, req llm.Request, n int, fallback bool) (context.Context, trace.Span) {
	if g.opts.Tracer == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", e.cfg.Provider),
		attribute.String("gen_ai.request.model", req.Model),
		attribute.Int("gen_ai.request.max_tokens", req.MaxTokens),
		attribute.String(AttrEntry, e.name),
		attribute.Int(AttrAttempt, n),
		attribute.Bool(AttrFallback, fallback),
	}
	if req.Temperature != nil {
		attrs = append(attrs, attribute.Float64("gen_ai.request.temperature", *req.Temperature))
	}
	if host, port := serverOf(e.cfg.BaseURL); host != "" {
		attrs = append(attrs, attribute.String("server.address", host))
		if port > 0 {
			attrs = append(attrs, attribute.Int("server.port", port))
		}
	}
	return g.opts.Tracer.Start(ctx, "chat "+req.Model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func (g *Gateway) endSpan(span trace.Span, e entry, req llm.Request, resp llm.Response, err error) {
	if span == nil {
		return
	}
	defer span.End()
	if err != nil {
		errType := "_OTHER"
		var ae *APIError
		if errors.As(err, &ae) {
			errType = ae.ErrorType()
			if ae.Usage != nil {
				setUsage(span, *ae.Usage)
				span.SetAttributes(attribute.Float64(AttrCost, Cost(e.cfg.Prices, *ae.Usage)))
			}
			if ae.Status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", ae.Status))
			}
		} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			errType = "cancelled"
		}
		span.SetAttributes(attribute.String("error.type", errType))
		// err's text is scrubbed of credentials by the clients.
		span.SetStatus(codes.Error, err.Error())
		return
	}
	provider := resp.Provider
	if provider == "" {
		provider = e.cfg.Provider
	}
	span.SetAttributes(
		attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.response.model", resp.Model),
		attribute.String(store.AttrModelLabel, resp.Label),
		attribute.Float64(AttrCost, Cost(e.cfg.Prices, resp.Usage)),
	)
	if resp.StopReason != "" {
		span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.StopReason}))
	}
	setUsage(span, resp.Usage)
}

func setUsage(span trace.Span, u llm.Usage) {
	span.SetAttributes(
		attribute.Int64("gen_ai.usage.input_tokens", u.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", u.OutputTokens),
	)
	if u.CacheReadTokens > 0 {
		span.SetAttributes(attribute.Int64("gen_ai.usage.cache_read.input_tokens", u.CacheReadTokens))
	}
	if u.CacheCreationTokens > 0 {
		span.SetAttributes(attribute.Int64("gen_ai.usage.cache_creation.input_tokens", u.CacheCreationTokens))
	}
	if u.ReasoningTokens > 0 {
		span.SetAttributes(attribute.Int64("gen_ai.usage.reasoning.output_tokens", u.ReasoningTokens))
	}
}

// budgetEvent notes a refusal on the caller's span: no request was made, so
// there is no chat span to carry it.
func (g *Gateway) budgetEvent(ctx context.Context, be *BudgetError) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("loomwork.gateway.budget_refused", trace.WithAttributes(
		attribute.String(AttrEntry, be.Model),
		attribute.Float64("loomwork.gateway.spent_usd", be.SpentUSD),
		attribute.Float64("loomwork.gateway.estimate_usd", be.EstimateUSD),
		attribute.Float64("loomwork.gateway.budget_usd", be.BudgetUSD),
	))
}

func serverOf(base string) (string, int) {
	if base == "" {
		return "", 0
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", 0
	}
	port, _ := strconv.Atoi(u.Port())
	return u.Hostname(), port
}
