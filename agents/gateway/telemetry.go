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
	"github.com/loomwork/loomwork/semconv"
)

// startSpan starts the attempt's span. One span per attempt rather than per
// logical call: each attempt is a request a provider may bill, and the
// rollup charges leaf spans that made a call, so a failed attempt must be
// its own span to be charged.
func (g *Gateway) startSpan(ctx context.Context, e entry, req llm.Request, n int, fallback bool) (context.Context, trace.Span) {
	if g.opts.Tracer == nil {
		return ctx, nil
	}
	attrs := append(semconv.ChatAttributes(semconv.Chat{
		Operation:    semconv.OpChat,
		Provider:     e.cfg.Provider,
		RequestModel: req.Model,
		MaxTokens:    req.MaxTokens,
		Temperature:  req.Temperature,
	}),
		attribute.String(semconv.AttrGatewayModel, e.name),
		attribute.Int(semconv.AttrGatewayAttempt, n),
		attribute.Bool(semconv.AttrGatewayFallback, fallback),
	)
	if host, port := serverOf(e.cfg.BaseURL); host != "" {
		attrs = append(attrs, attribute.String(semconv.AttrServerAddress, host))
		if port > 0 {
			attrs = append(attrs, attribute.Int(semconv.AttrServerPort, port))
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
		c := semconv.Chat{ErrorType: semconv.ErrorTypeOther}
		var ae *APIError
		if errors.As(err, &ae) {
			c.ErrorType = ae.ErrorType()
			if ae.Usage != nil {
				u, cost := semconv.Usage(*ae.Usage), Cost(e.cfg.Prices, *ae.Usage)
				c.Usage, c.CostUSD = &u, &cost
			}
			if ae.Status != 0 {
				span.SetAttributes(attribute.Int(semconv.AttrHTTPResponseStatusCode, ae.Status))
			}
		} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			c.ErrorType = "cancelled"
		}
		span.SetAttributes(semconv.ChatAttributes(c)...)
		// err's text is scrubbed of credentials by the clients.
		span.SetStatus(codes.Error, err.Error())
		return
	}
	provider := resp.Provider
	if provider == "" {
		provider = e.cfg.Provider
	}
	u, cost := semconv.Usage(resp.Usage), Cost(e.cfg.Prices, resp.Usage)
	span.SetAttributes(semconv.ChatAttributes(semconv.Chat{
		Provider:      provider,
		ResponseModel: resp.Model,
		FinishReasons: []string{resp.StopReason},
		Label:         resp.Label,
		Usage:         &u,
		CostUSD:       &cost,
	})...)
}

// budgetEvent notes a refusal on the caller's span: no request was made, so
// there is no chat span to carry it.
func (g *Gateway) budgetEvent(ctx context.Context, be *BudgetError) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(semconv.EventGatewayBudgetRefused, trace.WithAttributes(
		attribute.String(semconv.AttrGatewayModel, be.Model),
		attribute.Float64(semconv.AttrGatewaySpentUSD, be.SpentUSD),
		attribute.Float64(semconv.AttrGatewayEstimateUSD, be.EstimateUSD),
		attribute.Float64(semconv.AttrGatewayBudgetUSD, be.BudgetUSD),
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
