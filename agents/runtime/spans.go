package runtime

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/semconv"
)

func agentAttrs(agent, runID string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String(semconv.AttrOperationName, semconv.OpInvokeAgent),
		attribute.String(semconv.AttrAgentName, agent),
		attribute.String(semconv.AttrConversationID, runID),
	}
}

// rootAttrs are the invoke_agent span's attributes: the agent's, and the
// evaluation case and trial when the task names a case.
func rootAttrs(agent string, task Task) []attribute.KeyValue {
	attrs := agentAttrs(agent, task.RunID)
	if task.CaseID != "" {
		attrs = append(attrs, attribute.String(semconv.AttrCaseID, task.CaseID), attribute.Int(semconv.AttrTrial, task.Trial))
	}
	return attrs
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
		attrs = append(attrs, attribute.String(semconv.AttrModelLabel, r.res.Label))
	}
	if r.agent.Citations != nil {
		attrs = append(attrs, attribute.StringSlice(semconv.AttrCitations, nonNil(r.res.Citations)))
	}
	if r.res.StepLimitReached {
		attrs = append(attrs, attribute.Bool(semconv.AttrStepLimitReached, true))
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
	attrs := append(semconv.ChatAttributes(semconv.Chat{
		Operation:      semconv.OpChat,
		RequestModel:   req.Model,
		MaxTokens:      req.MaxTokens,
		AgentName:      r.agent.Name,
		ConversationID: r.task.RunID,
	}), contextAttrs(rec)...)
	if r.rt.cfg.CaptureContent {
		attrs = append(attrs, requestContentAttrs(req)...)
	}
	return r.rt.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(r.rt.cfg.Clock()), trace.WithAttributes(attrs...))
}

func contextAttrs(rec *ContextRecord) []attribute.KeyValue {
	if rec == nil {
		return nil
	}
	rp := rec.ContextReport
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
		attribute.String(semconv.AttrContextStrategy, rec.Strategy),
		attribute.String(semconv.AttrContextTokenizer, rp.Tokenizer),
		attribute.Int(semconv.AttrContextBudget, rp.Budget),
		attribute.Int(semconv.AttrContextTokensBefore, rp.TokensBefore),
		attribute.Int(semconv.AttrContextTokensAfter, rp.TokensAfter),
		attribute.Int(semconv.AttrContextShrunk, len(rp.Shrunk)),
		attribute.StringSlice(semconv.AttrContextShrunkCalls, shrunkIDs),
		attribute.Int(semconv.AttrContextShrunkSaved, saved),
		attribute.Int(semconv.AttrContextSummarised, summarised),
		attribute.StringSlice(semconv.AttrContextSummaryCalls, summaryIDs),
		attribute.Int(semconv.AttrContextPinned, len(rp.PinsRestored)),
		attribute.StringSlice(semconv.AttrContextPinnedValues, pins),
		attribute.Int(semconv.AttrContextDropped, rp.DroppedOldest),
		attribute.Bool(semconv.AttrContextOverBudget, rp.OverBudget),
	}
	if summaryBy != "" {
		attrs = append(attrs, attribute.String(semconv.AttrContextSummaryBy, summaryBy))
	}
	if rp.PinsSkipped > 0 {
		attrs = append(attrs, attribute.Int(semconv.AttrContextPinsSkipped, rp.PinsSkipped))
	}
	return append(attrs, tierAttrs(rec.Tiers)...)
}

func tierAttrs(t *journal.TierReport) []attribute.KeyValue {
	if t == nil {
		return nil
	}
	ids := map[string][]string{"kept": {}, "truncated": {}, "dropped": {}}
	mem := []string{}
	for _, d := range t.Items {
		ids[d.Action] = append(ids[d.Action], d.ID)
		if d.Tier == "memory" && d.Action != "dropped" {
			mem = append(mem, d.ID)
		}
	}
	return []attribute.KeyValue{
		attribute.Int(semconv.AttrContextTiersWindow, t.Window),
		attribute.Int(semconv.AttrContextTiersReserve, t.Reserve),
		attribute.Int(semconv.AttrContextTiersOffered, t.Offered),
		attribute.Int(semconv.AttrContextTiersUsed, t.Used),
		attribute.Int(semconv.AttrContextTiersDropped, t.Dropped),
		attribute.Float64(semconv.AttrContextTiersUtilization, t.Utilization),
		attribute.StringSlice(semconv.AttrContextTiersKept, ids["kept"]),
		attribute.StringSlice(semconv.AttrContextTiersTruncated, ids["truncated"]),
		attribute.StringSlice(semconv.AttrContextTiersDroppedIDs, ids["dropped"]),
		attribute.String(semconv.AttrContextTiersWeakest, t.WeakestID),
		attribute.StringSlice(semconv.AttrContextTiersMemory, mem),
	}
}

func (r *run) endChat(span trace.Span, req llm.Request, resp llm.Response, reused bool, err error, rec *ContextRecord) {
	if resp.Model != "" && req.Model == "" {
		// The gateway routed: name the span for the model that answered.
		span.SetName("chat " + resp.Model)
	}
	c := semconv.Chat{Provider: resp.Provider, ResponseModel: resp.Model, Label: resp.Label}
	if err == nil {
		u := semconv.Usage(resp.Usage)
		c.Usage, c.FinishReasons = &u, []string{resp.StopReason}
	} else {
		c.ErrorType = "model_error"
	}
	attrs := append([]attribute.KeyValue{attribute.Bool(semconv.AttrJournalReused, reused)}, semconv.ChatAttributes(c)...)
	if r.rt.cfg.CaptureContent && err == nil {
		attrs = append(attrs, responseContentAttrs(resp)...)
	}
	if u := resp.Usage; err == nil && rec != nil && u.InputTokens > 0 {
		// The provider's count beside the layer's own: the difference is
		// the estimate's error (plus the tool schemas, which the layer's
		// budget does not cover).
		attrs = append(attrs, attribute.Int64(semconv.AttrContextUsageDelta, u.InputTokens-int64(rec.TokensAfter)))
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
		attribute.String(semconv.AttrOperationName, semconv.OpExecuteTool),
		attribute.String(semconv.AttrToolName, call.Name),
		attribute.String(semconv.AttrToolType, semconv.ToolTypeFunction),
		attribute.String(semconv.AttrToolCallID, call.ID))
	ctx, span := r.rt.tracer.Start(ctx, "execute_tool "+call.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	return ctx, &toolSpan{Span: span, ctx: ctx, call: call, start: start}
}

func (r *run) endTool(ts *toolSpan, tr journal.ToolResult, reused bool, err error) {
	end := r.rt.cfg.Clock()
	ts.SetAttributes(attribute.Bool(semconv.AttrJournalReused, reused))
	if len(tr.Documents) > 0 {
		_, rs := r.rt.tracer.Start(ts.ctx, "retrieval "+ts.call.Name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(ts.start), trace.WithAttributes(
				attribute.String(semconv.AttrOperationName, semconv.OpRetrieval),
				attribute.String(semconv.AttrAgentName, r.agent.Name),
				attribute.String(semconv.AttrConversationID, r.task.RunID),
				attribute.String(semconv.AttrDataSourceID, ts.call.Name),
				attribute.StringSlice(semconv.AttrRetrievalDocuments, tr.Documents),
				attribute.Bool(semconv.AttrJournalReused, reused)))
		rs.End(trace.WithTimestamp(end))
	}
	for _, k := range slices.Sorted(maps.Keys(tr.Attrs)) {
		ts.SetAttributes(attribute.String(k, tr.Attrs[k]))
	}
	for _, ev := range tr.Events {
		keys := make([]string, 0, len(ev.Attrs))
		for k := range ev.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		attrs := make([]attribute.KeyValue, 0, len(keys))
		for _, k := range keys {
			attrs = append(attrs, attribute.String(k, ev.Attrs[k]))
		}
		ts.AddEvent(ev.Name, trace.WithTimestamp(end), trace.WithAttributes(attrs...))
	}
	if err == nil && tr.IsError {
		ts.SetAttributes(attribute.String(semconv.AttrErrorType, "tool_error"))
		ts.SetStatus(codes.Error, tr.Content)
	}
	endSpan(ts.Span, end, err)
}
