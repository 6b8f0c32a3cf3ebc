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

	"github.com/loomwork/loomwork/semconv"
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
	scripted := attribute.String(semconv.AttrModelLabel, "scripted")

	ctx, agent := tr.Start(ctx, SpanAgent, trace.WithTimestamp(at(0)), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String(semconv.AttrOperationName, semconv.OpInvokeAgent),
			attribute.String(semconv.AttrAgentName, "researcher"),
			attribute.String(semconv.AttrAgentID, "agent_research_01"),
			attribute.String(semconv.AttrConversationID, conv),
			attribute.String(semconv.AttrProviderName, "anthropic"),
			attribute.String(semconv.AttrRequestModel, "claude-sonnet-4-5"),
		))

	_, plan := tr.Start(ctx, SpanPlan, trace.WithTimestamp(at(40)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String(semconv.AttrOperationName, semconv.OpChat),
			attribute.String(semconv.AttrProviderName, "anthropic"),
			attribute.String(semconv.AttrRequestModel, "claude-sonnet-4-5"),
			attribute.Float64(semconv.AttrRequestTemperature, 0.2),
			attribute.Int64(semconv.AttrRequestMaxTokens, 4096),
			attribute.String(semconv.AttrServerAddress, "api.anthropic.example"),
			scripted,
		))
	plan.AddEvent(semconv.EventInferenceOperationDetails, trace.WithTimestamp(at(1340)), trace.WithAttributes(
		attribute.String(semconv.AttrInputMessages, `[{"role":"user","parts":[{"type":"text","content":"How do I make failed uploads retry automatically?"}]}]`),
		attribute.String(semconv.AttrOutputMessages, `[{"role":"assistant","parts":[{"type":"tool_call","id":"toolu_01","name":"search_docs","arguments":{"query":"upload retry policy"}}],"finish_reason":"tool_use"}]`),
	))
	plan.SetAttributes(
		attribute.String(semconv.AttrResponseModel, "claude-sonnet-4-5-20250929"),
		attribute.String(semconv.AttrResponseID, "msg_01plan"),
		attribute.StringSlice(semconv.AttrResponseFinishReasons, []string{"tool_use"}),
		attribute.Int64(semconv.AttrUsageInputTokens, 1850),
		attribute.Int64(semconv.AttrUsageOutputTokens, 120),
		attribute.Int64(semconv.AttrUsageCacheReadInputTokens, 1024),
		attribute.Int64(semconv.AttrUsageCacheCreationInputTokens, 512),
	)
	plan.End(trace.WithTimestamp(at(1350)))

	toolCtx, tool := tr.Start(ctx, SpanTool, trace.WithTimestamp(at(1400)), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String(semconv.AttrOperationName, semconv.OpExecuteTool),
			attribute.String(semconv.AttrToolName, "search_docs"),
			attribute.String(semconv.AttrToolType, semconv.ToolTypeFunction),
			attribute.String(semconv.AttrToolCallID, "toolu_01"),
			attribute.String(semconv.AttrToolCallArguments, `{"query":"upload retry policy"}`),
		))
	_, retr := tr.Start(toolCtx, SpanRetrieval, trace.WithTimestamp(at(1450)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String(semconv.AttrOperationName, semconv.OpRetrieval),
			attribute.String(semconv.AttrDataSourceID, "docs-index"),
			attribute.String(semconv.AttrRetrievalQueryText, "upload retry policy"),
			attribute.Int64(semconv.AttrRequestTopK, 3),
		))
	retr.SetAttributes(
		attribute.StringSlice(semconv.AttrRetrievalDocuments, []string{"docs/uploads/retries.md", "docs/config/network.md", "docs/install.md"}),
		attribute.Float64Slice(semconv.AttrRetrievalScores, []float64{0.82, 0.61, 0.2}),
	)
	retr.End(trace.WithTimestamp(at(1850)))
	tool.SetAttributes(attribute.String(semconv.AttrToolCallResult, `{"documents":["docs/uploads/retries.md","docs/config/network.md","docs/install.md"]}`))
	tool.End(trace.WithTimestamp(at(1900)))

	_, failed := tr.Start(ctx, SpanFailed, trace.WithTimestamp(at(1950)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String(semconv.AttrOperationName, semconv.OpChat),
			attribute.String(semconv.AttrProviderName, "anthropic"),
			attribute.String(semconv.AttrRequestModel, "claude-sonnet-4-5"),
			attribute.Int64(semconv.AttrHTTPResponseStatusCode, 529),
			attribute.String(semconv.AttrErrorType, "overloaded_error"),
			scripted,
		))
	failed.RecordError(errors.New("overloaded_error: Overloaded"), trace.WithTimestamp(at(2040)))
	failed.SetStatus(codes.Error, "provider overloaded (HTTP 529)")
	failed.End(trace.WithTimestamp(at(2050)))

	_, retry := tr.Start(ctx, SpanRetry, trace.WithTimestamp(at(2600)), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: failed.SpanContext(), Attributes: []attribute.KeyValue{
			attribute.String(semconv.AttrLinkKind, "retry_of"),
			attribute.Int64(semconv.AttrRetryAttempt, 2),
		}}),
		trace.WithAttributes(
			attribute.String(semconv.AttrOperationName, semconv.OpChat),
			attribute.String(semconv.AttrProviderName, "anthropic"),
			attribute.String(semconv.AttrRequestModel, "claude-sonnet-4-5"),
			attribute.Bool(semconv.AttrRequestStream, false),
			scripted,
		))
	retry.SetAttributes(
		attribute.String(semconv.AttrResponseModel, "claude-sonnet-4-5-20250929"),
		attribute.String(semconv.AttrResponseID, "msg_02answer"),
		attribute.StringSlice(semconv.AttrResponseFinishReasons, []string{"end_turn"}),
		attribute.Int64(semconv.AttrUsageInputTokens, 2600),
		attribute.Int64(semconv.AttrUsageOutputTokens, 310),
		attribute.Int64(semconv.AttrUsageCacheReadInputTokens, 1792),
		attribute.Int64(semconv.AttrUsageReasoningOutputTokens, 96),
	)
	retry.End(trace.WithTimestamp(at(4100)))

	agent.AddEvent(semconv.EventEvaluationResult, trace.WithTimestamp(at(4180)), trace.WithAttributes(
		attribute.String(semconv.AttrEvaluationName, "groundedness"),
		attribute.Float64(semconv.AttrEvaluationScoreValue, 0.92),
		attribute.String(semconv.AttrEvaluationScoreLabel, "grounded"),
	))
	agent.SetAttributes(attribute.StringSlice(semconv.AttrCitations, []string{"docs/uploads/retries.md", "docs/config/network.md"}))
	agent.SetStatus(codes.Ok, "")
	agent.End(trace.WithTimestamp(at(4200)))
	return agent.SpanContext().TraceID()
}
