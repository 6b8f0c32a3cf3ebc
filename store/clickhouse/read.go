package clickhouse

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
)

const selectSpanColumns = `span_id, parent_span_id, trace_state, name, kind, start, end,
	status_code, status_message, service_name, scope_name, scope_version,
	operation, provider, request_model, response_model, agent_name, conversation_id,
	tool_name, tool_call_id, has_usage, input_tokens, output_tokens,
	cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd,
	retrieved_docs, cited_docs, attributes, resource_attributes, events, links`

// GetTrace returns every span of traceID ordered by start time then span
// id, each span once, or store.ErrNotFound.
func (s *Store) GetTrace(ctx context.Context, traceID string) ([]store.Span, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if err := checkID(traceID, 16); err != nil {
		return nil, fmt.Errorf("get trace: trace id: %w", err)
	}
	// LIMIT 1 BY collapses copies of a span that merges have not collapsed
	// yet (a retried batch that arrived as a different block).
	q := "SELECT " + selectSpanColumns + " FROM " + s.spansTable +
		" WHERE trace_id = ? ORDER BY start, span_id LIMIT 1 BY span_id"
	rows, err := s.conn.Query(ctx, q, traceID)
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	defer rows.Close()
	var spans []store.Span
	for rows.Next() {
		sp := store.Span{TraceID: traceID}
		var attrs, resource, events, links string
		if err := rows.Scan(&sp.SpanID, &sp.ParentSpanID, &sp.TraceState, &sp.Name, &sp.Kind, &sp.StartTime, &sp.EndTime,
			&sp.StatusCode, &sp.StatusMessage, &sp.ServiceName, &sp.ScopeName, &sp.ScopeVersion,
			&sp.Operation, &sp.Provider, &sp.RequestModel, &sp.ResponseModel, &sp.AgentName, &sp.ConversationID,
			&sp.ToolName, &sp.ToolCallID, &sp.HasUsage, &sp.InputTokens, &sp.OutputTokens,
			&sp.CacheReadTokens, &sp.CacheCreationTokens, &sp.ReasoningTokens, &sp.CostUSD,
			&sp.RetrievedDocs, &sp.CitedDocs, &attrs, &resource, &events, &links); err != nil {
			return nil, fmt.Errorf("get trace %s: %w", traceID, err)
		}
		sp.StartTime, sp.EndTime = sp.StartTime.UTC(), sp.EndTime.UTC()
		if len(sp.RetrievedDocs) == 0 {
			sp.RetrievedDocs = nil
		}
		if len(sp.CitedDocs) == 0 {
			sp.CitedDocs = nil
		}
		if err := decodeJSONColumns(&sp, attrs, resource, events, links); err != nil {
			return nil, fmt.Errorf("get trace %s: span %s: %w", traceID, sp.SpanID, err)
		}
		spans = append(spans, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("get trace %s: %w", traceID, store.ErrNotFound)
	}
	return spans, nil
}

func decodeJSONColumns(sp *store.Span, attrs, resource, events, links string) error {
	if attrs != "" {
		if err := json.Unmarshal([]byte(attrs), &sp.Attributes); err != nil {
			return fmt.Errorf("attributes: %w", err)
		}
	}
	if resource != "" {
		if err := json.Unmarshal([]byte(resource), &sp.ResourceAttributes); err != nil {
			return fmt.Errorf("resource attributes: %w", err)
		}
	}
	if events != "" {
		if err := json.Unmarshal([]byte(events), &sp.Events); err != nil {
			return fmt.Errorf("events: %w", err)
		}
		for i := range sp.Events {
			sp.Events[i].Time = sp.Events[i].Time.UTC()
		}
	}
	if links != "" {
		if err := json.Unmarshal([]byte(links), &sp.Links); err != nil {
			return fmt.Errorf("links: %w", err)
		}
	}
	return nil
}

// sortExprs maps store.Sort* names to the expression ordering by them.
var sortExprs = map[string]string{
	store.SortStart:    "start_ns",
	store.SortDuration: "duration_ns",
	store.SortSpans:    "span_count",
	store.SortErrors:   "error_count",
	store.SortTokens:   "input_tokens + output_tokens",
}

// summarySQL merges the summary rows of each trace (one per insert block
// until background merges fold them) into its summary. maxMap over the
// per-span map keeps one entry per span id, so sums never count a span
// twice. %[1]s is the sort expression, %[2]s the summaries table, %[3]s
// the inner WHERE (pre-filters), %[4]s the outer WHERE (exact filters).
const summarySQL = `SELECT
    trace_id,
    tupleElement(root, 2) AS root_name,
    if(tupleElement(root, 1) = 1, tupleElement(root, 3), first_service) AS service_name,
    arraySort(agent_set) AS agent_names,
    arraySort(model_set) AS model_names,
    t_start,
    t_end,
    toUnixTimestamp64Nano(t_start) AS start_ns,
    toUnixTimestamp64Nano(t_end) - toUnixTimestamp64Nano(t_start) AS duration_ns,
    toInt64(length(tupleElement(per_span, 1))) AS span_count,
    toInt64(arraySum(tupleElement(per_span, 2))) AS error_count,
    toInt64(arraySum(tupleElement(per_span, 3))) AS model_calls,
    toInt64(arraySum(tupleElement(per_span, 4))) AS tool_calls,
    toInt64(arraySum(tupleElement(per_span, 5))) AS input_tokens,
    toInt64(arraySum(tupleElement(per_span, 6))) AS output_tokens,
    toInt64(arraySum(tupleElement(per_span, 7))) AS cache_read_tokens,
    toInt64(arraySum(tupleElement(per_span, 8))) AS cache_creation_tokens,
    toInt64(arraySum(tupleElement(per_span, 9))) AS reasoning_tokens,
    toInt64(%[1]s) AS sort_value
FROM
(
    SELECT
        trace_id,
        min(start) AS t_start,
        max(end) AS t_end,
        argMinIfMerge(root) AS root,
        argMinMerge(first_service) AS first_service,
        groupUniqArrayArray(services) AS service_set,
        groupUniqArrayArray(agents) AS agent_set,
        groupUniqArrayArray(models) AS model_set,
        groupUniqArrayArray(names) AS name_set,
        maxMap(spans) AS per_span
    FROM %[2]s
    %[3]s
    GROUP BY trace_id
)
%[4]s`

// listSQL picks the page in a first pass that selects only trace ids and
// sort values (ClickHouse drops the aggregates nothing reads, so sorting
// by start time merges just min/max), then computes full summaries for
// those ids alone, found through the summaries' trace_id order.
// %[1]s is the page query, %[2]s the full summary query, %[3]s the order.
const listSQL = `WITH page AS (%[1]s)
SELECT * FROM (%[2]s)
ORDER BY %[3]s`

// ListTraces returns one page of trace summaries matching q. Pagination is
// keyset-based on (sort value, trace id), so pages never overlap or skip a
// trace whose sort value did not change between the calls.
func (s *Store) ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error) {
	if s.closed.Load() {
		return store.TracePage{}, errClosed
	}
	plan, err := s.planList(&q)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	rows, err := s.conn.Query(ctx, plan.sql, plan.args...)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	defer rows.Close()
	page := store.TracePage{Traces: []store.TraceSummary{}}
	var lastValue int64
	var lastTrace string
	more := false
	for rows.Next() {
		if len(page.Traces) == plan.Limit {
			more = true
			break
		}
		var ts store.TraceSummary
		var startNS, durNS, sortValue int64
		if err := rows.Scan(&ts.TraceID, &ts.RootName, &ts.ServiceName, &ts.AgentNames, &ts.Models,
			&ts.Start, &ts.End, &startNS, &durNS,
			&ts.SpanCount, &ts.ErrorCount, &ts.ModelCalls, &ts.ToolCalls,
			&ts.InputTokens, &ts.OutputTokens, &ts.CacheReadTokens, &ts.CacheCreationTokens, &ts.ReasoningTokens,
			&sortValue); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: %w", err)
		}
		ts.Start, ts.End = ts.Start.UTC(), ts.End.UTC()
		ts.Duration = time.Duration(durNS)
		if len(ts.AgentNames) == 0 {
			ts.AgentNames = nil
		}
		if len(ts.Models) == 0 {
			ts.Models = nil
		}
		page.Traces = append(page.Traces, ts)
		lastValue, lastTrace = sortValue, ts.TraceID
	}
	if err := rows.Err(); err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	if more {
		last := store.PagePosition{SortValue: lastValue}
		// Stored ids were checked on write, so this fails only for a
		// table written by something else.
		id, err := hex.DecodeString(lastTrace)
		if err != nil || len(id) != len(last.TraceID) {
			return store.TracePage{}, fmt.Errorf("list traces: stored trace id %q is not 32 hex digits", lastTrace)
		}
		copy(last.TraceID[:], id)
		page.NextPageToken = plan.NextPageToken(last)
	}
	return page, nil
}

type listPlan struct {
	store.PlannedQuery
	sql  string
	args []any
}

// planList validates q and builds the query for one page.
func (s *Store) planList(q *store.TraceQuery) (listPlan, error) {
	var p listPlan
	var err error
	if p.PlannedQuery, err = q.Plan(checkTime); err != nil {
		return p, err
	}
	sortExpr, ok := sortExprs[p.SortBy]
	if !ok {
		return p, fmt.Errorf("sort_by %q is not supported by the ClickHouse store", p.SortBy)
	}

	// Pre-filters pick the traces with at least one summary row that could
	// match, using the partition (day) and the trace_id order; they are
	// necessary conditions only; the exact test is on the merged summary.
	var pre []string
	var args []any
	if !q.Start.IsZero() || !q.End.IsZero() {
		var cond []string
		if !q.Start.IsZero() {
			cond = append(cond, "day >= toDate(fromUnixTimestamp64Nano(?))", "start >= fromUnixTimestamp64Nano(?)")
			args = append(args, q.Start.UnixNano(), q.Start.UnixNano())
		}
		if !q.End.IsZero() {
			cond = append(cond, "day <= toDate(fromUnixTimestamp64Nano(?))", "start < fromUnixTimestamp64Nano(?)")
			args = append(args, q.End.UnixNano(), q.End.UnixNano())
		}
		pre = append(pre, "trace_id IN (SELECT trace_id FROM "+s.summariesTable+" WHERE "+strings.Join(cond, " AND ")+")")
	}
	for _, f := range []struct{ col, val string }{{"services", q.Service}, {"agents", q.Agent}, {"models", q.Model}} {
		if f.val != "" {
			pre = append(pre, "trace_id IN (SELECT trace_id FROM "+s.summariesTable+" WHERE has("+f.col+", ?))")
			args = append(args, f.val)
		}
	}
	var where []string
	if !q.Start.IsZero() {
		where = append(where, "start_ns >= ?")
		args = append(args, q.Start.UnixNano())
	}
	if !q.End.IsZero() {
		where = append(where, "start_ns < ?")
		args = append(args, q.End.UnixNano())
	}
	for _, f := range []struct{ col, val string }{{"service_set", q.Service}, {"agent_set", q.Agent}, {"model_set", q.Model}} {
		if f.val != "" {
			where = append(where, "has("+f.col+", ?)")
			args = append(args, f.val)
		}
	}
	switch q.Status {
	case store.StatusOK:
		where = append(where, "error_count = 0")
	case store.StatusError:
		where = append(where, "error_count > 0")
	}
	if q.MinDuration > 0 {
		where = append(where, "duration_ns >= ?")
		args = append(args, int64(q.MinDuration))
	}
	if q.Text != "" {
		where = append(where, "arrayExists(n -> position(lowerUTF8(n), ?) > 0, name_set)")
		args = append(args, strings.ToLower(q.Text))
	}
	dir, cmp := "DESC", "<"
	if q.Ascending {
		dir, cmp = "ASC", ">"
	}
	if p.After != nil {
		where = append(where, "(sort_value, trace_id) "+cmp+" (?, ?)")
		args = append(args, p.After.SortValue, hex.EncodeToString(p.After.TraceID[:]))
	}
	preSQL, whereSQL := "", ""
	if len(pre) > 0 {
		preSQL = "WHERE " + strings.Join(pre, " AND ")
	}
	if len(where) > 0 {
		whereSQL = "WHERE " + strings.Join(where, " AND ")
	}
	order := "sort_value " + dir + ", trace_id " + dir
	pageSQL := fmt.Sprintf("SELECT trace_id FROM (%s) ORDER BY %s LIMIT %d",
		fmt.Sprintf(summarySQL, sortExpr, s.summariesTable, preSQL, whereSQL), order, p.Limit+1)
	full := fmt.Sprintf(summarySQL, sortExpr, s.summariesTable, "WHERE trace_id IN (SELECT trace_id FROM page)", "")
	p.sql = fmt.Sprintf(listSQL, pageSQL, full, order)
	p.args = args
	return p, nil
}
