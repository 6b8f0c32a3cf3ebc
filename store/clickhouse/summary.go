package clickhouse

import (
	"context"
	"fmt"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// A trace's summary computed from the typed columns of its spans, for what
// reads one trace whole (TraceCalls): the billing rule needs the span tree
// (a span whose descendants report usage is an aggregate), which an
// aggregate over rows cannot see. Lists read the summaries kept at ingest
// (summaries.go) instead.

// lightColumns are what Summarize reads of a span, plus its model label
// (the one attribute a summary lists), in scanLight's order.
const lightColumns = `trace_id, span_id, parent_span_id, toString(name), start, end, toString(status_code),
	toString(service_name), toString(operation), toString(request_model), toString(response_model),
	toString(agent_name), has_usage, input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens,
	reasoning_tokens, cost_usd, JSONExtractString(attributes, ?) AS model_label`

// summarize reads the light columns of the spans selected by where (over
// the spans table, FINAL) and returns each trace's summary, by trace id.
// Rows come ordered by trace, so only one trace's spans are held at a time.
func (s *Store) summarize(ctx context.Context, where string, args ...any) (map[string]*store.TraceSummary, error) {
	// Scoped to ctx's project here, for every caller.
	pc, err := projectCond(ctx)
	if err != nil {
		return nil, err
	}
	q := "SELECT " + lightColumns + " FROM " + s.spansTable + " FINAL WHERE " + pc + " AND (" + where + ") ORDER BY trace_id"
	rows, err := s.query(ctx, q, append([]any{semconv.AttrModelLabel}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]*store.TraceSummary{}
	var spans []store.Span
	flush := func() {
		if len(spans) > 0 {
			sum := store.Summarize(spans)
			out[spans[0].TraceID] = &sum
			spans = spans[:0]
		}
	}
	for rows.Next() {
		var sp store.Span
		var label string
		if err := rows.Scan(&sp.TraceID, &sp.SpanID, &sp.ParentSpanID, &sp.Name, &sp.StartTime, &sp.EndTime, &sp.StatusCode,
			&sp.ServiceName, &sp.Operation, &sp.RequestModel, &sp.ResponseModel,
			&sp.AgentName, &sp.HasUsage, &sp.InputTokens, &sp.OutputTokens, &sp.CacheReadTokens, &sp.CacheCreationTokens,
			&sp.ReasoningTokens, &sp.CostUSD, &label); err != nil {
			return nil, err
		}
		sp.StartTime, sp.EndTime = sp.StartTime.UTC(), sp.EndTime.UTC()
		if label != "" {
			sp.Attributes = store.Attributes{semconv.AttrModelLabel: label}
		}
		if len(spans) > 0 && spans[0].TraceID != sp.TraceID {
			flush()
		}
		spans = append(spans, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

// TraceCalls returns the billed calls of traceID in canonical order (see
// store.CallReader), from its spans' typed columns: a list reads them only
// for a trace whose call groups cannot be priced alone.
func (s *Store) TraceCalls(ctx context.Context, traceID string) ([]store.Call, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := checkID(traceID, 16); err != nil {
		return nil, fmt.Errorf("trace calls: %w: %w", store.ErrBadTraceID, err)
	}
	sums, err := s.summarize(ctx, "trace_id = ?", traceID)
	if err != nil {
		return nil, fmt.Errorf("trace calls of %s: %w", traceID, err)
	}
	sum, ok := sums[traceID]
	if !ok {
		return nil, fmt.Errorf("trace calls of %s: %w", traceID, store.ErrNotFound)
	}
	return sum.Calls, nil
}

var _ store.CallReader = (*Store)(nil)
