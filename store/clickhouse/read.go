package clickhouse

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/loomwork/loomwork/store"
)

const selectSpanColumns = `span_id, parent_span_id, trace_state, name, kind, start, end,
	status_code, status_message, service_name, scope_name, scope_version,
	operation, provider, request_model, response_model, agent_name, conversation_id,
	tool_name, tool_call_id, has_usage, input_tokens, output_tokens,
	cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd,
	retrieved_docs, cited_docs, attributes, resource_attributes, events, links, ` + envelopeColumns + `,
	` + typedAttrsColumns

// GetTrace returns every span of traceID ordered by start time then span
// id, each span once, or store.ErrNotFound.
func (s *Store) GetTrace(ctx context.Context, traceID string) ([]store.Span, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := checkID(traceID, 16); err != nil {
		return nil, fmt.Errorf("get trace: %w: %w", store.ErrBadTraceID, err)
	}
	pc, err := projectCond(ctx)
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	// LIMIT 1 BY collapses copies of a span that merges have not collapsed
	// yet (a retried batch that arrived as a different block).
	q := "SELECT " + selectSpanColumns + " FROM " + s.spansTable +
		" WHERE trace_id = ? AND " + pc + " ORDER BY start, span_id LIMIT 1 BY span_id"
	rows, err := s.query(ctx, q, traceID)
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	defer rows.Close()
	var spans []store.Span
	for rows.Next() {
		sp, err := scanSpan(rows, traceID, store.ProjectOf(ctx))
		if err != nil {
			return nil, fmt.Errorf("get trace %s: %w", traceID, err)
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

// scanSpan reads one row of selectSpanColumns.
func scanSpan(rows driver.Rows, traceID, project string) (store.Span, error) {
	sp := store.Span{TraceID: traceID, Project: project}
	var attrs, resource, events, links, scopeAttrs string
	var inColumns uint32
	if err := rows.Scan(&sp.SpanID, &sp.ParentSpanID, &sp.TraceState, &sp.Name, &sp.Kind, &sp.StartTime, &sp.EndTime,
		&sp.StatusCode, &sp.StatusMessage, &sp.ServiceName, &sp.ScopeName, &sp.ScopeVersion,
		&sp.Operation, &sp.Provider, &sp.RequestModel, &sp.ResponseModel, &sp.AgentName, &sp.ConversationID,
		&sp.ToolName, &sp.ToolCallID, &sp.HasUsage, &sp.InputTokens, &sp.OutputTokens,
		&sp.CacheReadTokens, &sp.CacheCreationTokens, &sp.ReasoningTokens, &sp.CostUSD,
		&sp.RetrievedDocs, &sp.CitedDocs, &attrs, &resource, &events, &links,
		&sp.Flags, &sp.DroppedAttributesCount, &sp.DroppedEventsCount, &sp.DroppedLinksCount,
		&scopeAttrs, &sp.ScopeDroppedAttributesCount, &sp.ScopeSchemaURL,
		&sp.ResourceSchemaURL, &sp.ResourceDroppedAttributesCount, &inColumns); err != nil {
		return sp, err
	}
	sp.StartTime, sp.EndTime = sp.StartTime.UTC(), sp.EndTime.UTC()
	if len(sp.RetrievedDocs) == 0 {
		sp.RetrievedDocs = nil
	}
	if len(sp.CitedDocs) == 0 {
		sp.CitedDocs = nil
	}
	if scopeAttrs != "" {
		if err := json.Unmarshal([]byte(scopeAttrs), &sp.ScopeAttributes); err != nil {
			return sp, fmt.Errorf("span %s: scope attributes: %w", sp.SpanID, err)
		}
	}
	if err := decodeJSONColumns(&sp, attrs, resource, events, links); err != nil {
		return sp, fmt.Errorf("span %s: %w", sp.SpanID, err)
	}
	restoreTypedAttrs(&sp, inColumns)
	return sp, nil
}

// ResolveTraceID returns the full id of the one trace whose id is or starts
// with idOrPrefix (see store.Reader). It reads trace_index, whose ordering
// key is trace_id, so the range condition selects the granules of the
// matching ids only (a prefix is a range of the key).
func (s *Store) ResolveTraceID(ctx context.Context, idOrPrefix string) (string, error) {
	if err := s.usable(); err != nil {
		return "", err
	}
	pc, err := projectCond(ctx)
	if err != nil {
		return "", fmt.Errorf("resolve trace id %q: %w", idOrPrefix, err)
	}
	return store.ResolveTraceIDWith(ctx, idOrPrefix, func(ctx context.Context, lo, hi string, limit int) ([]string, error) {
		// DISTINCT: a trace has a row per batch until merges fold them.
		q := "SELECT DISTINCT trace_id FROM " + s.traceIndexTable +
			" WHERE trace_id >= ? AND trace_id <= ? AND " + pc + " ORDER BY trace_id LIMIT " + strconv.Itoa(limit)
		rows, err := s.query(ctx, q, lo, hi)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		return ids, rows.Err()
	})
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

// sortExprs maps store.Sort* names to the expression ordering by them in
// spanSummarySQL's output.
var sortExprs = map[string]string{
	store.SortStart:    "start_ns",
	store.SortDuration: "duration_ns",
	store.SortSpans:    "span_count",
	store.SortErrors:   "error_count",
}

// indexSortExprs are the sort keys the trace index alone can order by.
var indexSortExprs = map[string]string{
	store.SortStart:    "toUnixTimestamp64Nano(c_start)",
	store.SortDuration: "toUnixTimestamp64Nano(c_end) - toUnixTimestamp64Nano(c_start)",
}

// spanSummarySQL aggregates spans into one summary per trace. FINAL reads
// each (trace_id, span_id) once however many copies are stored, so counts
// and sums never count a span twice. The minimum of the root key is the
// earliest root span (flag 0), else the earliest span. %[1]s is the spans
// table, %[2]s the WHERE clause on spans, %[3]s the sort expression.
const spanSummarySQL = `SELECT
    trace_id,
    if(tupleElement(root, 1) = 0, tupleElement(root, 4), '') AS root_name,
    tupleElement(root, 5) AS service_name,
    arraySort(agent_set) AS agent_names,
    arraySort(model_set) AS model_names,
    t_start,
    t_end,
    toUnixTimestamp64Nano(t_start) AS start_ns,
    toUnixTimestamp64Nano(t_end) - toUnixTimestamp64Nano(t_start) AS duration_ns,
    s_spans AS span_count,
    s_errors AS error_count,
    s_tool_calls AS tool_calls,
    name_set,
    toInt64(%[3]s) AS sort_value
FROM
(
    SELECT
        trace_id,
        min(start) AS t_start,
        max(end) AS t_end,
        min((toUInt8(parent_span_id != ''), start, span_id, toString(name), toString(service_name))) AS root,
        groupUniqArrayIf(toString(agent_name), agent_name != '') AS agent_set,
        groupUniqArrayArray(arrayFilter(m -> m != '', [toString(request_model), toString(response_model)])) AS model_set,
        groupUniqArray(toString(name)) AS name_set,
        toInt64(count()) AS s_spans,
        toInt64(countIf(status_code = 'error')) AS s_errors,
        toInt64(countIf(operation = 'execute_tool')) AS s_tool_calls
    FROM %[1]s FINAL
    WHERE %[2]s
    GROUP BY trace_id
)`

// ListTraces returns one page of trace summaries matching q. Pagination is
// keyset-based on (sort value, trace id), so pages never overlap or skip a
// trace whose sort value did not change between the calls.
func (s *Store) ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error) {
	if err := s.usable(); err != nil {
		return store.TracePage{}, err
	}
	pc, err := projectCond(ctx)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	plan, err := s.planList(&q, pc)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	if plan.SortBy == store.SortTokens {
		page, err := s.listByTokens(ctx, plan)
		if err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: %w", err)
		}
		return page, nil
	}
	// Two round trips: the page's ids, then their summaries. (A CTE
	// referenced twice is evaluated twice; the page query is the costly
	// part.)
	ids, first, last, err := s.pageIDs(ctx, plan)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	page := store.TracePage{Traces: []store.TraceSummary{}}
	if len(ids) == 0 {
		return page, nil
	}
	sums, err := s.summarize(ctx, "trace_id IN (?) AND start >= fromUnixTimestamp64Nano(?) AND start <= fromUnixTimestamp64Nano(?)",
		ids, first.UnixNano(), last.UnixNano())
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	for _, id := range ids {
		if len(page.Traces) == plan.Limit {
			last := page.Traces[len(page.Traces)-1]
			pos := store.PagePosition{SortValue: sortValue(&last, plan.SortBy)}
			if err := decodeTraceID(last.TraceID, &pos.TraceID); err != nil {
				return store.TracePage{}, fmt.Errorf("list traces: %w", err)
			}
			page.NextPageToken = plan.NextPageToken(pos)
			break
		}
		sum, ok := sums[id]
		if !ok {
			// The trace index lists a trace whose spans are not
			// readable yet (another writer's insert in flight).
			continue
		}
		page.Traces = append(page.Traces, *sum)
	}
	return page, nil
}

type listPlan struct {
	store.PlannedQuery
	// sql selects the page's (trace_id, start, end) in order, at most
	// Limit+1 rows; args are its parameters.
	sql  string
	args []any
	// sortExpr and order are the sort expression over spanSummarySQL's
	// output and the ORDER BY clause.
	sortExpr, order string
}

// pageIDs runs the page query: the page's trace ids in order and the time
// range their spans lie in.
func (s *Store) pageIDs(ctx context.Context, plan listPlan) (ids []string, first, last time.Time, err error) {
	rows, err := s.query(ctx, plan.sql, plan.args...)
	if err != nil {
		return nil, first, last, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var start, end time.Time
		if err := rows.Scan(&id, &start, &end); err != nil {
			return nil, first, last, err
		}
		if len(ids) == 0 || start.Before(first) {
			first = start
		}
		if len(ids) == 0 || end.After(last) {
			last = end
		}
		ids = append(ids, id)
	}
	return ids, first, last, rows.Err()
}

// planList validates q and builds the query for one page, in up to three
// steps (CTEs):
//
//   - cand: with a start bound, the traces that start inside it, from the
//     trace index (the minimum of a trace's rows' starts is the trace's
//     start; partitions by day prune the search for candidates).
//   - page: the page's trace ids, in order. Sorting by start or duration
//     with no other filter needs the index alone; anything else aggregates
//     the spans of the candidates (with cheap necessary pre-filters on
//     spans for service, agent and model).
//
// ListTraces then reads full summaries of the page's traces from their
// spans, within the page's time range (the primary key starts with the
// hour) and by trace id.
//
// pc (projectCond) is added to every read of spans and trace_index.
func (s *Store) planList(q *store.TraceQuery, pc string) (listPlan, error) {
	var p listPlan
	var err error
	if p.PlannedQuery, err = q.Plan(checkTime); err != nil {
		return p, err
	}
	// SortTokens is ordered in Go (listByTokens): the query then selects
	// every candidate, with no order, keyset or limit.
	byTokens := p.SortBy == store.SortTokens
	sortExpr, ok := sortExprs[p.SortBy]
	if byTokens {
		sortExpr, ok = "0", true
	}
	if !ok {
		return p, fmt.Errorf("sort_by %q is not supported by the ClickHouse store", p.SortBy)
	}
	dir, cmp := "DESC", "<"
	if q.Ascending {
		dir, cmp = "ASC", ">"
	}
	order := "sort_value " + dir + ", trace_id " + dir
	var args []any
	var ctes []string

	bounded := !q.Start.IsZero() || !q.End.IsZero()
	// No span of a trace starting at or after Start is earlier, so every
	// scan of spans may start there.
	const fromStart = "start >= fromUnixTimestamp64Nano(?)"

	// The filters that only ask whether a trace has a span of some kind
	// (service, agent, model, search clauses, session) are conditions
	// "trace_id IN (spans …)". Without a filter or sort that needs the
	// per-trace aggregate (status, text, spans, errors), they are applied to
	// the trace index, and the page is ordered from it: the spans of the
	// matching traces are never aggregated to choose the page.
	var member []string
	var memberArgs []any
	for _, f := range []struct{ cond, val string }{
		{"service_name = ?", q.Service},
		{"agent_name = ?", q.Agent},
		{"(request_model = ? OR response_model = ?)", q.Model},
	} {
		if f.val == "" {
			continue
		}
		cond := f.cond
		for range strings.Count(f.cond, "?") {
			memberArgs = append(memberArgs, f.val)
		}
		if !q.Start.IsZero() {
			cond += " AND " + fromStart
			memberArgs = append(memberArgs, q.Start.UnixNano())
		}
		member = append(member, "trace_id IN (SELECT trace_id FROM "+s.spansTable+" WHERE "+cond+" AND "+pc+")")
	}
	var sc []string
	var sa []any
	if q.Start.IsZero() {
		sc, sa = s.searchConds(&p.TraceQuery, pc, nil)
	} else {
		sc, sa = s.searchConds(&p.TraceQuery, fromStart+" AND "+pc, []any{q.Start.UnixNano()})
	}
	member = append(member, sc...)
	memberArgs = append(memberArgs, sa...)

	indexSort, indexOnly := indexSortExprs[p.SortBy]
	if byTokens {
		indexSort, indexOnly = "0", true
	}
	if q.Status != "" || q.Text != "" {
		indexOnly = false
	}

	if bounded || indexOnly {
		where, having := []string{pc}, []string(nil)
		if !q.Start.IsZero() {
			// A trace starting at or after Start has every index row on
			// or after Start, in partitions from Start's day on; its start
			// is the minimum over all its rows, earlier days included.
			where = append(where, "trace_id IN (SELECT trace_id FROM "+s.traceIndexTable+
				" WHERE day >= toDate(fromUnixTimestamp64Nano(?), 'UTC') AND start >= fromUnixTimestamp64Nano(?) AND "+pc+")")
			args = append(args, q.Start.UnixNano(), q.Start.UnixNano())
		}
		if indexOnly {
			where = append(where, member...)
			args = append(args, memberArgs...)
		}
		if !q.Start.IsZero() {
			having = append(having, "c_start >= fromUnixTimestamp64Nano(?)")
			args = append(args, q.Start.UnixNano())
		}
		if !q.End.IsZero() {
			having = append(having, "c_start < fromUnixTimestamp64Nano(?)")
			args = append(args, q.End.UnixNano())
		}
		whereSQL, havingSQL := "", ""
		if len(where) > 0 {
			whereSQL = "WHERE " + strings.Join(where, " AND ")
		}
		if len(having) > 0 {
			havingSQL = "HAVING " + strings.Join(having, " AND ")
		}
		ctes = append(ctes, fmt.Sprintf("cand AS (SELECT trace_id, min(start) AS c_start, max(end) AS c_end FROM %s %s GROUP BY trace_id %s)",
			s.traceIndexTable, whereSQL, havingSQL))
	}
	var pageSQL string
	if indexOnly {
		var where []string
		if q.MinDuration > 0 {
			where = append(where, "toUnixTimestamp64Nano(c_end) - toUnixTimestamp64Nano(c_start) >= ?")
			args = append(args, int64(q.MinDuration))
		}
		if p.After != nil && !byTokens {
			where = append(where, "(sort_value, trace_id) "+cmp+" (?, ?)")
			args = append(args, p.After.SortValue, hex.EncodeToString(p.After.TraceID[:]))
		}
		whereSQL := ""
		if len(where) > 0 {
			whereSQL = "WHERE " + strings.Join(where, " AND ")
		}
		pageSQL = fmt.Sprintf("SELECT trace_id, c_start, c_end FROM (SELECT trace_id, c_start, c_end, toInt64(%s) AS sort_value FROM cand) %s",
			indexSort, whereSQL)
		if !byTokens {
			pageSQL += fmt.Sprintf(" ORDER BY %s LIMIT %d", order, p.Limit+1)
		}
	} else {
		spanWhere := []string{pc}
		if bounded {
			spanWhere = append(spanWhere, "trace_id IN (SELECT trace_id FROM cand)")
		}
		if !q.Start.IsZero() {
			spanWhere = append(spanWhere, fromStart)
			args = append(args, q.Start.UnixNano())
		}
		spanWhere = append(spanWhere, member...)
		args = append(args, memberArgs...)
		var where []string
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
		if p.After != nil && !byTokens {
			where = append(where, "(sort_value, trace_id) "+cmp+" (?, ?)")
			args = append(args, p.After.SortValue, hex.EncodeToString(p.After.TraceID[:]))
		}
		whereSQL := ""
		if len(where) > 0 {
			whereSQL = "WHERE " + strings.Join(where, " AND ")
		}
		pageSQL = fmt.Sprintf("SELECT trace_id, t_start AS c_start, t_end AS c_end FROM (%s) %s",
			fmt.Sprintf(spanSummarySQL, s.spansTable, strings.Join(spanWhere, " AND "), sortExpr), whereSQL)
		if !byTokens {
			pageSQL += fmt.Sprintf(" ORDER BY %s LIMIT %d", order, p.Limit+1)
		}
	}
	p.sql = pageSQL
	if len(ctes) > 0 {
		p.sql = "WITH " + strings.Join(ctes, ", ") + " " + pageSQL
	}
	p.args = args
	p.sortExpr, p.order = sortExpr, order
	return p, nil
}
