package runtime

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/replay/journal"
)

// GenAI semantic-convention attribute keys, and Loomwork's own.
const (
	attrOperation        = "gen_ai.operation.name"
	attrAgentName        = "gen_ai.agent.name"
	attrConversationID   = "gen_ai.conversation.id"
	attrProvider         = "gen_ai.provider.name"
	attrRequestModel     = "gen_ai.request.model"
	attrResponseModel    = "gen_ai.response.model"
	attrFinishReasons    = "gen_ai.response.finish_reasons"
	attrRequestMaxTokens = "gen_ai.request.max_tokens"
	attrInputTokens      = "gen_ai.usage.input_tokens"
	attrOutputTokens     = "gen_ai.usage.output_tokens"
	attrCacheRead        = "gen_ai.usage.cache_read.input_tokens"
	attrCacheCreation    = "gen_ai.usage.cache_creation.input_tokens"
	attrReasoning        = "gen_ai.usage.reasoning.output_tokens"
	attrToolName         = "gen_ai.tool.name"
	attrToolType         = "gen_ai.tool.type"
	attrToolCallID       = "gen_ai.tool.call.id"
	attrDataSource       = "gen_ai.data_source.id"
	attrRetrievedDocs    = "gen_ai.retrieval.documents"
	attrErrorType        = "error.type"

	// AttrCitations lists the evidence ids the final answer cites (the
	// same key as store.AttrCitedDocuments).
	AttrCitations = "loomwork.citations"
	// AttrModelLabel is "scripted" on spans of a scripted model.
	AttrModelLabel = "loomwork.model.label"
	// AttrReused is true on chat and execute_tool spans whose answer or
	// result was taken from the journal rather than produced again.
	AttrReused = "loomwork.journal.reused"
	// AttrStepLimit is true on the invoke_agent span of a run that reached
	// its step limit.
	AttrStepLimit = "loomwork.step_limit_reached"
)

func agentAttrs(agent, runID string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(attrOperation, "invoke_agent"),
		attribute.String(attrAgentName, agent),
		attribute.String(attrConversationID, runID),
	}
}

func endSpan(span trace.Span, at time.Time, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(at))
}

func (r *run) finishSpan() {
	attrs := []attribute.KeyValue{}
	if r.res.Label != "" {
		attrs = append(attrs, attribute.String(AttrModelLabel, r.res.Label))
	}
	if r.agent.Citations != nil {
		attrs = append(attrs, attribute.StringSlice(AttrCitations, nonNil(r.res.Citations)))
	}
	if r.res.StepLimitReached {
		attrs = append(attrs, attribute.Bool(AttrStepLimit, true))
	}
	r.span.SetAttributes(attrs...)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (r *run) startChat(ctx context.Context, req llm.Request, rec *ContextRecord) (context.Context, trace.Span) {
	name := "chat"
	if req.Model != "" {
		name += " " + req.Model
	}
	attrs := append(agentAttrs(r.agent.Name, r.task.RunID)[1:], attribute.String(attrOperation, "chat"))
	if req.Model != "" {
		attrs = append(attrs, attribute.String(attrRequestModel, req.Model))
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int(attrRequestMaxTokens, req.MaxTokens))
	}
	attrs = append(attrs, contextAttrs(rec)...)
	return r.rt.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(r.rt.cfg.Clock()), trace.WithAttributes(attrs...))
}

// Context-layer attribute keys on chat spans: what the layer did to the
// request before it was sent.
const (
	AttrContextStrategy     = "loomwork.context.strategy"
	AttrContextTokenizer    = "loomwork.context.tokenizer"
	AttrContextBudget       = "loomwork.context.budget"
	AttrContextTokensBefore = "loomwork.context.tokens_before"
	AttrContextTokensAfter  = "loomwork.context.tokens_after"
	AttrContextShrunk       = "loomwork.context.shrunk"
	AttrContextShrunkCalls  = "loomwork.context.shrunk.tool_call_ids"
	AttrContextShrunkSaved  = "loomwork.context.shrunk.tokens_saved"
	AttrContextSummarised   = "loomwork.context.summarised"
	AttrContextSummaryCalls = "loomwork.context.summarised.tool_call_ids"
	AttrContextSummaryBy    = "loomwork.context.summary.by"
	AttrContextPinned       = "loomwork.context.pinned"
	AttrContextPinnedValues = "loomwork.context.pinned.values"
	AttrContextPinsSkipped  = "loomwork.context.pins_skipped"
	AttrContextDropped      = "loomwork.context.dropped"
	AttrContextOverBudget   = "loomwork.context.over_budget"
	AttrContextUsageDelta   = "loomwork.context.usage_minus_estimate"
)

func contextAttrs(rec *ContextRecord) []attribute.KeyValue {
	if rec == nil {
		return nil
	}
	rp := rec.Report
	shrunkIDs := []string{}
	saved := 0
	for _, s := range rp.Shrunk {
		if s.ToolCallID != "" {
			shrunkIDs = append(shrunkIDs, s.ToolCallID)
		}
		saved += s.TokensBefore - s.TokensAfter
	}
	summarised, summaryBy, summaryIDs := 0, "", []string{}
	if rp.Summary != nil {
		summarised, summaryBy = rp.Summary.Messages, rp.Summary.By
		summaryIDs = append(summaryIDs, rp.Summary.ToolCallIDs...)
	}
	pins := make([]string, 0, len(rp.PinsRestored))
	for _, p := range rp.PinsRestored {
		pins = append(pins, p.Value)
	}
	attrs := []attribute.KeyValue{
		attribute.String(AttrContextStrategy, rec.Strategy),
		attribute.String(AttrContextTokenizer, rp.Tokenizer),
		attribute.Int(AttrContextBudget, rp.Budget),
		attribute.Int(AttrContextTokensBefore, rp.TokensBefore),
		attribute.Int(AttrContextTokensAfter, rp.TokensAfter),
		attribute.Int(AttrContextShrunk, len(rp.Shrunk)),
		attribute.StringSlice(AttrContextShrunkCalls, shrunkIDs),
		attribute.Int(AttrContextShrunkSaved, saved),
		attribute.Int(AttrContextSummarised, summarised),
		attribute.StringSlice(AttrContextSummaryCalls, summaryIDs),
		attribute.Int(AttrContextPinned, len(rp.PinsRestored)),
		attribute.StringSlice(AttrContextPinnedValues, pins),
		attribute.Int(AttrContextDropped, rp.DroppedOldest),
		attribute.Bool(AttrContextOverBudget, rp.OverBudget),
	}
	if summaryBy != "" {
		attrs = append(attrs, attribute.String(AttrContextSummaryBy, summaryBy))
	}
	if rp.PinsSkipped > 0 {
		attrs = append(attrs, attribute.Int(AttrContextPinsSkipped, rp.PinsSkipped))
	}
	return attrs
}

func (r *run) endChat(span trace.Span, req llm.Request, resp llm.Response, reused bool, err error, rec *ContextRecord) {
	attrs := []attribute.KeyValue{attribute.Bool(AttrReused, reused)}
	if resp.Provider != "" {
		attrs = append(attrs, attribute.String(attrProvider, resp.Provider))
	}
	if resp.Model != "" {
		attrs = append(attrs, attribute.String(attrResponseModel, resp.Model))
		if req.Model == "" {
			// The gateway routed: name the span for the model that answered.
			span.SetName("chat " + resp.Model)
		}
	}
	if resp.Label != "" {
		attrs = append(attrs, attribute.String(AttrModelLabel, resp.Label))
	}
	if err == nil {
		u := resp.Usage
		attrs = append(attrs,
			attribute.Int64(attrInputTokens, u.InputTokens),
			attribute.Int64(attrOutputTokens, u.OutputTokens),
			attribute.Int64(attrCacheRead, u.CacheReadTokens),
			attribute.Int64(attrCacheCreation, u.CacheCreationTokens),
			attribute.Int64(attrReasoning, u.ReasoningTokens))
		if resp.StopReason != "" {
			attrs = append(attrs, attribute.StringSlice(attrFinishReasons, []string{resp.StopReason}))
		}
		if rec != nil && u.InputTokens > 0 {
			// The provider's count beside the layer's own: the difference is
			// the estimate's error (plus the tool schemas, which the layer's
			// budget does not cover).
			attrs = append(attrs, attribute.Int64(AttrContextUsageDelta, u.InputTokens-int64(rec.TokensAfter)))
		}
	} else {
		attrs = append(attrs, attribute.String(attrErrorType, "model_error"))
	}
	span.SetAttributes(attrs...)
	endSpan(span, r.rt.cfg.Clock(), err)
}

// toolSpan is an execute_tool span with its start time (a retrieval child
// span spans the same interval).
type toolSpan struct {
	trace.Span
	ctx   context.Context
	call  llm.ToolCall
	start time.Time
}

func (r *run) startTool(ctx context.Context, call llm.ToolCall) (context.Context, *toolSpan) {
	start := r.rt.cfg.Clock()
	attrs := append(agentAttrs(r.agent.Name, r.task.RunID)[1:],
		attribute.String(attrOperation, "execute_tool"),
		attribute.String(attrToolName, call.Name),
		attribute.String(attrToolType, "function"),
		attribute.String(attrToolCallID, call.ID))
	ctx, span := r.rt.tracer.Start(ctx, "execute_tool "+call.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	return ctx, &toolSpan{Span: span, ctx: ctx, call: call, start: start}
}

func (r *run) endTool(ts *toolSpan, tr journal.ToolResult, reused bool, err error) {
	end := r.rt.cfg.Clock()
	ts.SetAttributes(attribute.Bool(AttrReused, reused))
	if len(tr.Documents) > 0 {
		_, rs := r.rt.tracer.Start(ts.ctx, "retrieval "+ts.call.Name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(ts.start), trace.WithAttributes(
				attribute.String(attrOperation, "retrieval"),
				attribute.String(attrAgentName, r.agent.Name),
				attribute.String(attrConversationID, r.task.RunID),
				attribute.String(attrDataSource, ts.call.Name),
				attribute.StringSlice(attrRetrievedDocs, tr.Documents),
				attribute.Bool(AttrReused, reused)))
		rs.End(trace.WithTimestamp(end))
	}
	if err == nil && tr.IsError {
		ts.SetAttributes(attribute.String(attrErrorType, "tool_error"))
		ts.SetStatus(codes.Error, tr.Content)
	}
	endSpan(ts.Span, end, err)
}
