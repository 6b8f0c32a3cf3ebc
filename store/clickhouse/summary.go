package clickhouse

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Trace summaries are store.Summarize's, computed here from the typed
// columns of a trace's spans: the billing rule needs the span tree (a span
// whose descendants report usage is an aggregate), which an aggregate over
// rows cannot see. The structure-free figures (start, end, span and error
// counts, names) are also aggregated in SQL, where filters and the other
// sort keys need them, and the two agree by construction: both read each
// (trace_id, span_id) once (FINAL) and use the same definitions.

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

// sortValue is a summary's value for a sort key, as the page query orders
// by it.
func sortValue(sum *store.TraceSummary, key string) int64 {
	switch key {
	case store.SortDuration:
		return int64(sum.Duration)
	case store.SortSpans:
		return sum.SpanCount
	case store.SortErrors:
		return sum.ErrorCount
	case store.SortTokens:
		return sum.InputTokens + sum.OutputTokens
	default:
		return sum.Start.UnixNano()
	}
}

// listByTokens serves SortTokens: the token sums follow the billing rule,
// so every candidate trace (plan.sql selects them, filters applied) is
// summarised here and ordered in Go. It reads the light columns of every
// matching span; a time bound keeps that small (docs/benchmarks.md).
func (s *Store) listByTokens(ctx context.Context, plan listPlan) (store.TracePage, error) {
	where := "trace_id IN (SELECT trace_id FROM (" + plan.sql + "))"
	args := plan.args
	if !plan.Start.IsZero() {
		where += " AND start >= fromUnixTimestamp64Nano(?)"
		args = append(args[:len(args):len(args)], plan.Start.UnixNano())
	}
	sums, err := s.summarize(ctx, where, args...)
	if err != nil {
		return store.TracePage{}, err
	}
	list := make([]*store.TraceSummary, 0, len(sums))
	for _, sum := range sums {
		list = append(list, sum)
	}
	dir := -1
	if plan.Ascending {
		dir = 1
	}
	slices.SortFunc(list, func(a, b *store.TraceSummary) int {
		if c := cmp.Compare(sortValue(a, store.SortTokens), sortValue(b, store.SortTokens)); c != 0 {
			return dir * c
		}
		return dir * cmp.Compare(a.TraceID, b.TraceID)
	})
	if plan.After != nil {
		after := hex.EncodeToString(plan.After.TraceID[:])
		at, _ := slices.BinarySearchFunc(list, struct{}{}, func(a *store.TraceSummary, _ struct{}) int {
			if c := cmp.Compare(sortValue(a, store.SortTokens), plan.After.SortValue); c != 0 {
				return dir * c
			}
			return dir * cmp.Compare(a.TraceID, after)
		})
		for at < len(list) && sortValue(list[at], store.SortTokens) == plan.After.SortValue && list[at].TraceID == after {
			at++
		}
		list = list[at:]
	}
	page := store.TracePage{Traces: []store.TraceSummary{}}
	for _, sum := range list {
		if len(page.Traces) == plan.Limit {
			last := page.Traces[len(page.Traces)-1]
			pos := store.PagePosition{SortValue: sortValue(&last, store.SortTokens)}
			if err := decodeTraceID(last.TraceID, &pos.TraceID); err != nil {
				return store.TracePage{}, err
			}
			page.NextPageToken = plan.NextPageToken(pos)
			break
		}
		page.Traces = append(page.Traces, *sum)
	}
	return page, nil
}

// decodeTraceID parses a stored trace id (checked on write, so this fails
// only for a table written by something else).
func decodeTraceID(id string, into *[16]byte) error {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) != len(into) {
		return fmt.Errorf("stored trace id %q is not 32 hex digits", id)
	}
	copy(into[:], b)
	return nil
}
