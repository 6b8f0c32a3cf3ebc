// Package agenttrace records a realistic agent run as OpenTelemetry spans,
// following the GenAI semantic conventions, through any TracerProvider. The
// `loom-eval demo` command sends it to a running collector, and the
// collector's end-to-end tests use it as the trace the real SDK exports.
//
// The run is scripted (no model is called): every model-call span carries
// loomwork.model.label = "scripted".
package agenttrace

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/store"
)

// ScopeName is the instrumentation scope of the recorded spans.
const ScopeName = "github.com/loomwork/loomwork/collector/agenttrace"

// ScopeVersion is the scope version.
const ScopeVersion = "0.1.0"

// Span names, in the GenAI convention's "{operation} {target}" form.
const (
	SpanAgent     = "invoke_agent researcher"
	SpanPlan      = "chat claude-sonnet-4-5"
	SpanTool      = "execute_tool search_docs"
	SpanRetrieval = "retrieval docs-index"
	SpanFailed    = "chat claude-sonnet-4-5 (attempt 1)"
	SpanRetry     = "chat claude-sonnet-4-5 (attempt 2)"
)

// Options vary a recorded run.
type Options struct {
	// Start is when the run begins (default: now). Span times are fixed
	// offsets from it, so a run recorded twice with the same Start and ids
	// is identical.
	Start time.Time
	// Conversation is the gen_ai.conversation.id (default "conv-demo-1").
	Conversation string
}

// Emit records one run of a research agent answering a question: the agent
// span; a planning chat call (with prompt-cache usage) that asks for a tool;
// the tool, which runs a retrieval returning documents; an answering chat
// call that fails (provider overloaded) and its retry, linked to the failed
// attempt; the agent's citations; and an evaluation result event. It returns
// the trace id. Spans are ended (exported by tp's processors) before Emit
// returns.
func Emit(ctx context.Context, tp trace.TracerProvider, opts Options) trace.TraceID {
	start := opts.Start
	if start.IsZero() {
		start = time.Now()
	}
	conv := opts.Conversation
	if conv == "" {
		conv = "conv-demo-1"
	}
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	tr := tp.Tracer(ScopeName, trace.WithInstrumentationVersion(ScopeVersion))
	scripted := attribute.String(store.AttrModelLabel, "scripted")

	ctx, agent := tr.Start(ctx, SpanAgent, trace.WithTimestamp(at(0)), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", "researcher"),
			attribute.String("gen_ai.agent.id", "agent_research_01"),
			attribute.String("gen_ai.conversation.id", conv),
			attribute.String("gen_ai.provider.name", "anthropic"),
			attribute.String("gen_ai.request.model", "claude-sonnet-4-5"),
		))

	_, plan := tr.Start(ctx, SpanPlan, trace.WithTimestamp(at(40)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "anthropic"),
			attribute.String("gen_ai.request.model", "claude-sonnet-4-5"),
			attribute.Float64("gen_ai.request.temperature", 0.2),
			attribute.Int64("gen_ai.request.max_tokens", 4096),
			attribute.String("server.address", "api.anthropic.example"),
			scripted,
		))
	plan.AddEvent("gen_ai.client.inference.operation.details", trace.WithTimestamp(at(1340)), trace.WithAttributes(
		attribute.String("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"How do I make failed uploads retry automatically?"}]}]`),
		attribute.String("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"tool_call","id":"toolu_01","name":"search_docs","arguments":{"query":"upload retry policy"}}],"finish_reason":"tool_use"}]`),
	))
	plan.SetAttributes(
		attribute.String("gen_ai.response.model", "claude-sonnet-4-5-20250929"),
		attribute.String("gen_ai.response.id", "msg_01plan"),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"tool_use"}),
		attribute.Int64("gen_ai.usage.input_tokens", 1850),
		attribute.Int64("gen_ai.usage.output_tokens", 120),
		attribute.Int64("gen_ai.usage.cache_read.input_tokens", 1024),
		attribute.Int64("gen_ai.usage.cache_creation.input_tokens", 512),
	)
	plan.End(trace.WithTimestamp(at(1350)))

	toolCtx, tool := tr.Start(ctx, SpanTool, trace.WithTimestamp(at(1400)), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", "search_docs"),
			attribute.String("gen_ai.tool.type", "function"),
			attribute.String("gen_ai.tool.call.id", "toolu_01"),
			attribute.String("gen_ai.tool.call.arguments", `{"query":"upload retry policy"}`),
		))
	_, retr := tr.Start(toolCtx, SpanRetrieval, trace.WithTimestamp(at(1450)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "retrieval"),
			attribute.String("gen_ai.data_source.id", "docs-index"),
			attribute.String("gen_ai.retrieval.query.text", "upload retry policy"),
			attribute.Int64("gen_ai.request.top_k", 3),
		))
	retr.SetAttributes(
		attribute.StringSlice("gen_ai.retrieval.documents", []string{"docs/uploads/retries.md", "docs/config/network.md", "docs/install.md"}),
		attribute.Float64Slice("loomwork.retrieval.scores", []float64{0.82, 0.61, 0.2}),
	)
	retr.End(trace.WithTimestamp(at(1850)))
	tool.SetAttributes(attribute.String("gen_ai.tool.call.result", `{"documents":["docs/uploads/retries.md","docs/config/network.md","docs/install.md"]}`))
	tool.End(trace.WithTimestamp(at(1900)))

	_, failed := tr.Start(ctx, SpanFailed, trace.WithTimestamp(at(1950)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "anthropic"),
			attribute.String("gen_ai.request.model", "claude-sonnet-4-5"),
			attribute.Int64("http.response.status_code", 529),
			attribute.String("error.type", "overloaded_error"),
			scripted,
		))
	failed.RecordError(errors.New("overloaded_error: Overloaded"), trace.WithTimestamp(at(2040)))
	failed.SetStatus(codes.Error, "provider overloaded (HTTP 529)")
	failed.End(trace.WithTimestamp(at(2050)))

	_, retry := tr.Start(ctx, SpanRetry, trace.WithTimestamp(at(2600)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: failed.SpanContext(), Attributes: []attribute.KeyValue{
			attribute.String("loomwork.link.kind", "retry_of"),
			attribute.Int64("loomwork.retry.attempt", 2),
		}}),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "anthropic"),
			attribute.String("gen_ai.request.model", "claude-sonnet-4-5"),
			attribute.Bool("gen_ai.request.stream", false),
			scripted,
		))
	retry.SetAttributes(
		attribute.String("gen_ai.response.model", "claude-sonnet-4-5-20250929"),
		attribute.String("gen_ai.response.id", "msg_02answer"),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"end_turn"}),
		attribute.Int64("gen_ai.usage.input_tokens", 2600),
		attribute.Int64("gen_ai.usage.output_tokens", 310),
		attribute.Int64("gen_ai.usage.cache_read.input_tokens", 1792),
		attribute.Int64("gen_ai.usage.reasoning.output_tokens", 96),
	)
	retry.End(trace.WithTimestamp(at(4100)))

	agent.AddEvent("gen_ai.evaluation.result", trace.WithTimestamp(at(4180)), trace.WithAttributes(
		attribute.String("gen_ai.evaluation.name", "groundedness"),
		attribute.Float64("gen_ai.evaluation.score.value", 0.92),
		attribute.String("gen_ai.evaluation.score.label", "grounded"),
	))
	agent.SetAttributes(attribute.StringSlice(store.AttrCitedDocuments, []string{"docs/uploads/retries.md", "docs/config/network.md"}))
	agent.SetStatus(codes.Ok, "")
	agent.End(trace.WithTimestamp(at(4200)))
	return agent.SpanContext().TraceID()
}
