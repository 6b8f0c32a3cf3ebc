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

// sortExprs maps store.Sort* names to the traces expression
// ordering by them.
var sortExprs = map[string]string{
	store.SortStart:    "toUnixTimestamp64Nano(start)",
	store.SortDuration: "duration_ns",
	store.SortSpans:    "span_count",
	store.SortErrors:   "error_count",
	store.SortTokens:   "tokens_total",
}

// summaryListColumns are what a list row reads of traces, in
// scanSummary's order (the sort value follows).
const summaryListColumns = `trace_id, root_name, toString(service_name), agents, models, labels, start, end,
	duration_ns, after_root_ns, fragments, span_count, error_count, model_calls, failed_model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, call_groups`

// ListTraces returns one page of trace summaries matching q, from
// traces alone (kept at ingest, one row per trace): every filter
// and sort key is a column of it, so a page costs a read of the project's
// summary rows, never of a trace's spans (search clauses other than the
// session select trace ids from spans first). Pagination is keyset-based
// on (sort value, trace id), so pages never overlap or skip a trace whose
// sort value did not change between the calls.
func (s *Store) ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error) {
	if err := s.usable(); err != nil {
		return store.TracePage{}, err
	}
	pc, err := projectCond(ctx)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	plan, err := s.planList(&q, pc, window{})
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	var rows []listRow
	if plan.windowed() {
		rows, err = s.listWindowed(ctx, &q, pc, plan)
	} else {
		rows, err = s.runList(ctx, plan, plan.Limit+1)
	}
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	page := store.TracePage{Traces: make([]store.TraceSummary, 0, min(len(rows), plan.Limit))}
	for i, r := range rows {
		if i == plan.Limit {
			last := rows[i-1]
			pos := store.PagePosition{SortValue: last.sortValue}
			if err := decodeTraceID(last.sum.TraceID, &pos.TraceID); err != nil {
				return store.TracePage{}, fmt.Errorf("list traces: %w", err)
			}
			page.NextPageToken = plan.NextPageToken(pos)
			break
		}
		page.Traces = append(page.Traces, r.sum)
	}
	return page, nil
}

// listRow is a row of a page query: a summary and its sort value.
type listRow struct {
	sum       store.TraceSummary
	sortValue int64
}

// runList runs a page query and returns its rows, at most limit.
func (s *Store) runList(ctx context.Context, plan listPlan, limit int) ([]listRow, error) {
	rows, err := s.query(ctx, plan.sql, plan.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []listRow
	for rows.Next() && len(out) < limit {
		sum, sortValue, err := scanSummary(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, listRow{sum, sortValue})
	}
	return out, rows.Err()
}

// window bounds a page query to the traces starting in [from, to) (a zero
// bound is none), and the spans its search clauses read to those starting
// at or after from.
type window struct{ from, to time.Time }

// firstWindow is the first time window listWindowed searches,
// windowGrowth how much wider each next one is, and maxWindows how many
// it searches before the rest of the traces at once: a span whose trace
// started in an earlier window (a long trace still running) is read by
// every window after it, so more windows would read more than one pass.
const (
	firstWindow  = 15 * time.Minute
	windowGrowth = 16
	maxWindows   = 3
)

// listWindowed serves a search sorted newest first (the list's default)
// window by window: the traces starting in the last firstWindow before
// the newest (or before the page token's position), then those in the
// windowGrowth times wider window before it, and so on, each window's
// matches sorting after the previous one's, until the page is full or the
// windows cover every trace. A window's search clauses read only the spans
// from its start on (the first key of the spans table is the hour), so a
// search whose matches are common reads the spans of the newest traces
// only; one whose matches are rare reads what the skip indexes do not
// prune, the newest spans up to maxWindows times.
func (s *Store) listWindowed(ctx context.Context, q *store.TraceQuery, pc string, plan listPlan) ([]listRow, error) {
	var oldest, newest time.Time
	var n uint64
	if err := s.queryRow(ctx, "SELECT min(start), max(start), count() FROM "+s.summaryTable+" WHERE "+pc).Scan(&oldest, &newest, &n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	anchor := newest
	if plan.After != nil {
		anchor = time.Unix(0, plan.After.SortValue)
	}
	if !q.End.IsZero() && q.End.Before(anchor) {
		anchor = q.End
	}
	floor := oldest
	if q.Start.After(floor) {
		floor = q.Start
	}
	// The spans a window may read: those of the traces still running at
	// its start. A window reading more than half of them (a long trace is
	// among the newest) costs more than it can save: search at once.
	froms := make([]time.Time, maxWindows-1)
	sums := make([]string, len(froms))
	args := make([]any, len(froms))
	for k, size := 0, firstWindow; k < len(froms); k, size = k+1, size*windowGrowth {
		froms[k] = anchor.Add(-size)
		sums[k] = "toInt64(sumIf(span_count, end >= fromUnixTimestamp64Nano(?)))"
		args[k] = froms[k].UnixNano()
	}
	reads := make([]int64, len(froms))
	var all int64
	dest := []any{&all}
	for k := range reads {
		dest = append(dest, &reads[k])
	}
	if err := s.queryRow(ctx, "SELECT toInt64(sum(span_count)), "+strings.Join(sums, ", ")+" FROM "+s.summaryTable+" FINAL WHERE "+pc, args...).Scan(dest...); err != nil {
		return nil, err
	}
	var out []listRow
	var w window
	for k := 0; len(out) <= plan.Limit; k++ {
		last := k == len(froms) || !froms[k].After(floor) || reads[k]*2 > all
		w.from = time.Time{}
		if !last {
			w.from = froms[k]
		}
		p, err := s.planList(q, pc, w)
		if err != nil {
			return nil, err
		}
		rows, err := s.runList(ctx, p, plan.Limit+1-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		if last {
			break
		}
		w.to = w.from
	}
	return out, nil
}

// scanSummary reads a row of summaryListColumns and the sort value.
func scanSummary(rows interface{ Scan(...any) error }) (store.TraceSummary, int64, error) {
	var ts store.TraceSummary
	var durNS, afterNS, sortValue int64
	var groups string
	if err := rows.Scan(&ts.TraceID, &ts.RootName, &ts.ServiceName, &ts.AgentNames, &ts.Models, &ts.ModelLabels, &ts.Start, &ts.End,
		&durNS, &afterNS, &ts.Fragments, &ts.SpanCount, &ts.ErrorCount, &ts.ModelCalls, &ts.FailedModelCalls, &ts.ToolCalls,
		&ts.InputTokens, &ts.OutputTokens, &ts.CacheReadTokens, &ts.CacheCreationTokens, &ts.ReasoningTokens, &groups, &sortValue); err != nil {
		return ts, 0, err
	}
	ts.Start, ts.End = ts.Start.UTC(), ts.End.UTC()
	ts.Duration, ts.AfterRoot = time.Duration(durNS), time.Duration(afterNS)
	for _, l := range []*[]string{&ts.AgentNames, &ts.Models, &ts.ModelLabels} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if err := json.Unmarshal([]byte(groups), &ts.Groups); err != nil {
		return ts, 0, fmt.Errorf("trace %s: call groups: %w", ts.TraceID, err)
	}
	if len(ts.Groups) == 0 {
		ts.Groups = nil
	}
	return ts, sortValue, nil
}

type listPlan struct {
	store.PlannedQuery
	// sql selects the page's summaries in order, at most Limit+1 rows;
	// args are its parameters.
	sql  string
	args []any
	// spanSearch: the query has search clauses that read spans.
	spanSearch bool
}

// windowed reports whether the page is found window by window
// (listWindowed): a search of spans, newest first.
func (p listPlan) windowed() bool {
	return p.spanSearch && p.SortBy == store.SortStart && !p.Ascending
}

// planList validates q and builds the query for one page: the traces
// table FINAL (a trace's latest summary) of the project pc selects, each
// filter a condition on its columns, ordered by the sort key's column and
// the trace id. Search clauses other than the session become "trace_id IN
// (spans matching it)", bounded below by q.Start (no span of a trace
// starting at or after it is earlier). A window w (listWindowed) bounds
// the traces further, and the spans the clauses read to its traces'.
func (s *Store) planList(q *store.TraceQuery, pc string, w window) (listPlan, error) {
	var p listPlan
	var err error
	if p.PlannedQuery, err = q.Plan(checkTime); err != nil {
		return p, err
	}
	sortExpr, ok := sortExprs[p.SortBy]
	if !ok {
		return p, fmt.Errorf("sort_by %q is not supported by the ClickHouse store", p.SortBy)
	}
	where := []string{pc}
	var args []any
	cond := func(c string, a ...any) {
		where = append(where, c)
		args = append(args, a...)
	}
	lo, hi := q.Start, q.End
	if w.from.After(lo) {
		lo = w.from
	}
	if !w.to.IsZero() && (hi.IsZero() || w.to.Before(hi)) {
		hi = w.to
	}
	if !lo.IsZero() {
		cond("start >= fromUnixTimestamp64Nano(?)", lo.UnixNano())
	}
	if !hi.IsZero() {
		cond("start < fromUnixTimestamp64Nano(?)", hi.UnixNano())
	}
	if q.Service != "" {
		cond("has(services, ?)", q.Service)
	}
	if q.Agent != "" {
		cond("has(agents, ?)", q.Agent)
	}
	if q.Model != "" {
		cond("has(models, ?)", q.Model)
	}
	switch q.Status {
	case store.StatusOK:
		cond("error_count = 0")
	case store.StatusError:
		cond("error_count > 0")
	}
	if q.MinDuration > 0 {
		cond("duration_ns >= ?", int64(q.MinDuration))
	}
	if q.Text != "" {
		// A trace with more distinct names than a row lists is matched
		// on its spans.
		text := strings.ToLower(q.Text)
		// (Only those traces' spans: when every trace lists all its
		// names, the set is empty and the primary key skips every
		// granule.)
		cond("(arrayExists(n -> position(lowerUTF8(n), ?) > 0, names) OR (NOT names_complete AND trace_id IN (SELECT trace_id FROM "+
			s.spansTable+" WHERE "+pc+" AND trace_id IN (SELECT trace_id FROM "+s.summaryTable+" WHERE "+pc+" AND NOT names_complete)"+
			" AND position(lowerUTF8(name), ?) > 0)))", text, text)
	}
	if q.Session != "" {
		cond("has(sessions, ?)", q.Session)
	}
	search := p.TraceQuery
	search.Session = ""
	var sc []string
	var sa []any
	spanFrom, spanArgs := pc, []any(nil)
	if !lo.IsZero() {
		spanFrom, spanArgs = "start >= fromUnixTimestamp64Nano(?) AND "+pc, []any{lo.UnixNano()}
	}
	sc, sa = s.searchConds(&search, spanFrom, spanArgs, pc)
	p.spanSearch = len(sc) > 0
	where = append(where, sc...)
	args = append(args, sa...)
	dir, cmp := "DESC", "<"
	if q.Ascending {
		dir, cmp = "ASC", ">"
	}
	if p.After != nil {
		cond("("+sortExpr+", trace_id) "+cmp+" (?, ?)", p.After.SortValue, hex.EncodeToString(p.After.TraceID[:]))
	}
	p.sql = fmt.Sprintf("SELECT %s, toInt64(%s) AS sort_value FROM %s FINAL WHERE %s ORDER BY sort_value %s, trace_id %s LIMIT %d",
		summaryListColumns, sortExpr, s.summaryTable, strings.Join(where, " AND "), dir, dir, p.Limit+1)
	p.args = args
	return p, nil
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
