package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
)

const selectSpansSQL = `SELECT
	s.span_id, s.parent_span_id, s.trace_state, s.name, s.kind, s.start_ns, s.end_ns,
	s.status_code, s.status_message, s.service_name, s.scope_name, s.scope_version,
	s.operation, s.provider, s.request_model, s.response_model, s.agent_name, s.conversation_id,
	s.tool_name, s.tool_call_id, s.has_usage, s.input_tokens, s.output_tokens,
	s.cache_read_tokens, s.cache_creation_tokens, s.reasoning_tokens, s.cost_usd,
	s.resource_id, s.payload_block, s.payload_off, s.payload_len
	FROM spans s WHERE s.trace_seq = ? ORDER BY s.start_ns, s.span_id`

// GetTrace returns every span of traceID ordered by start time then span
// id, or store.ErrNotFound.
func (s *Store) GetTrace(ctx context.Context, traceID string) ([]store.Span, error) {
	if s.isClosed() {
		return nil, errClosed
	}
	id, err := decodeID(traceID, 16)
	if err != nil {
		return nil, fmt.Errorf("get trace: trace id: %w", err)
	}
	// One read transaction: spans and their resources from one snapshot.
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	defer tx.Rollback()
	var seq int64
	switch err := tx.QueryRowContext(ctx, `SELECT seq FROM traces WHERE trace_id = ?`, id).Scan(&seq); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("get trace %s: %w", traceID, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	rows, err := tx.QueryContext(ctx, selectSpansSQL, seq)
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	defer rows.Close()
	var spans []store.Span
	resIDs := map[int]int64{} // span index → resource id
	type payloadRef struct{ block, off, n int64 }
	var refs []payloadRef
	for rows.Next() {
		sp := store.Span{TraceID: traceID}
		var spanID, parentID []byte
		var ref payloadRef
		var startNS, endNS int64
		var cost sql.NullFloat64
		var resID sql.NullInt64
		if err := rows.Scan(&spanID, &parentID, &sp.TraceState, &sp.Name, &sp.Kind, &startNS, &endNS,
			&sp.StatusCode, &sp.StatusMessage, &sp.ServiceName, &sp.ScopeName, &sp.ScopeVersion,
			&sp.Operation, &sp.Provider, &sp.RequestModel, &sp.ResponseModel, &sp.AgentName, &sp.ConversationID,
			&sp.ToolName, &sp.ToolCallID, &sp.HasUsage, &sp.InputTokens, &sp.OutputTokens,
			&sp.CacheReadTokens, &sp.CacheCreationTokens, &sp.ReasoningTokens, &cost,
			&resID, &ref.block, &ref.off, &ref.n); err != nil {
			return nil, fmt.Errorf("get trace %s: %w", traceID, err)
		}
		sp.SpanID = hex.EncodeToString(spanID)
		if parentID != nil {
			sp.ParentSpanID = hex.EncodeToString(parentID)
		}
		sp.StartTime = time.Unix(0, startNS).UTC()
		sp.EndTime = time.Unix(0, endNS).UTC()
		if cost.Valid {
			c := cost.Float64
			sp.CostUSD = &c
		}
		refs = append(refs, ref)
		if resID.Valid {
			resIDs[len(spans)] = resID.Int64
		}
		spans = append(spans, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	rows.Close()
	if len(spans) == 0 {
		return nil, fmt.Errorf("get trace %s: %w", traceID, store.ErrNotFound)
	}
	blocks := map[int64][]byte{}
	for i, ref := range refs {
		b, ok := blocks[ref.block]
		if !ok {
			var packed []byte
			if err := tx.QueryRowContext(ctx, `SELECT data FROM payload_blocks WHERE id = ?`, ref.block).Scan(&packed); err != nil {
				return nil, fmt.Errorf("get trace %s: payload block %d: %w", traceID, ref.block, err)
			}
			if b, err = s.codec.unpack(packed); err != nil {
				return nil, fmt.Errorf("get trace %s: payload block %d: %w", traceID, ref.block, err)
			}
			blocks[ref.block] = b
		}
		if ref.off < 0 || ref.n < 0 || ref.off+ref.n > int64(len(b)) {
			return nil, fmt.Errorf("get trace %s: span %s: payload [%d,+%d) outside block %d of %d bytes", traceID, spans[i].SpanID, ref.off, ref.n, ref.block, len(b))
		}
		if err := decodePayload(b[ref.off:ref.off+ref.n], &spans[i]); err != nil {
			return nil, fmt.Errorf("get trace %s: span %s: %w", traceID, spans[i].SpanID, err)
		}
	}
	// Resources: decompress each distinct one once, but give every span its
	// own decoded map (callers may modify what they get).
	raw := map[int64][]byte{}
	for i, rid := range resIDs {
		b, ok := raw[rid]
		if !ok {
			var packed []byte
			if err := tx.QueryRowContext(ctx, `SELECT attrs FROM resources WHERE id = ?`, rid).Scan(&packed); err != nil {
				return nil, fmt.Errorf("get trace %s: resource %d: %w", traceID, rid, err)
			}
			if b, err = s.codec.unpack(packed); err != nil {
				return nil, fmt.Errorf("get trace %s: resource %d: %w", traceID, rid, err)
			}
			raw[rid] = b
		}
		if err := json.Unmarshal(b, &spans[i].ResourceAttributes); err != nil {
			return nil, fmt.Errorf("get trace %s: resource %d: %w", traceID, rid, err)
		}
	}
	return spans, nil
}

// ListTraces returns one page of trace summaries matching q. It reads only
// the per-trace summary table; pagination is keyset-based on (sort key,
// trace id), so pages never overlap or skip a trace whose sort value does not
// change between the calls.
func (s *Store) ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error) {
	if s.isClosed() {
		return store.TracePage{}, errClosed
	}
	plan, err := planQuery(&q)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, plan.sql, plan.args...)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	defer rows.Close()
	page := store.TracePage{Traces: []store.TraceSummary{}}
	var last store.PagePosition
	more := false
	for rows.Next() {
		if len(page.Traces) == plan.Limit {
			more = true
			break
		}
		var ts store.TraceSummary
		var id []byte
		var agents, models string
		var startNS, endNS, durNS, sortValue int64
		if err := rows.Scan(&id, &ts.RootName, &ts.ServiceName, &agents, &models,
			&startNS, &endNS, &durNS, &ts.SpanCount, &ts.ErrorCount, &ts.ModelCalls, &ts.ToolCalls,
			&ts.InputTokens, &ts.OutputTokens, &ts.CacheReadTokens, &ts.CacheCreationTokens, &ts.ReasoningTokens,
			&sortValue); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: %w", err)
		}
		if len(id) != 16 {
			return store.TracePage{}, fmt.Errorf("list traces: stored trace id %x has %d bytes", id, len(id))
		}
		ts.TraceID = hex.EncodeToString(id)
		ts.Start = time.Unix(0, startNS).UTC()
		ts.End = time.Unix(0, endNS).UTC()
		ts.Duration = time.Duration(durNS)
		if ts.AgentNames, err = decodeList(agents); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: trace %s agent names: %w", ts.TraceID, err)
		}
		if ts.Models, err = decodeList(models); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: trace %s models: %w", ts.TraceID, err)
		}
		page.Traces = append(page.Traces, ts)
		last.SortValue = sortValue
		copy(last.TraceID[:], id)
	}
	if err := rows.Err(); err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	if more {
		page.NextPageToken = plan.NextPageToken(last)
	}
	return page, nil
}

func decodeList(s string) ([]string, error) {
	var l []string
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, nil
	}
	return l, nil
}

type queryPlan struct {
	store.PlannedQuery
	sql  string
	args []any
}

// sortColumns maps store.Sort* names to the traces column ordering by them.
var sortColumns = map[string]string{
	store.SortStart:    "start_ns",
	store.SortDuration: "duration_ns",
	store.SortSpans:    "span_count",
	store.SortErrors:   "error_count",
	store.SortTokens:   "tokens_total",
}

// planQuery validates q and builds the SQL for one page.
func planQuery(q *store.TraceQuery) (queryPlan, error) {
	var p queryPlan
	var err error
	if p.PlannedQuery, err = q.Plan(func(t time.Time) error {
		_, err := unixNanos(t)
		return err
	}); err != nil {
		return p, err
	}
	col, ok := sortColumns[p.SortBy]
	if !ok {
		return p, fmt.Errorf("sort_by %q is not supported by the embedded store", p.SortBy)
	}
	var where []string
	if !q.Start.IsZero() {
		where = append(where, "start_ns >= ?")
		p.args = append(p.args, q.Start.UnixNano())
	}
	if !q.End.IsZero() {
		where = append(where, "start_ns < ?")
		p.args = append(p.args, q.End.UnixNano())
	}
	for _, f := range []struct {
		kind int
		val  string
	}{{tagService, q.Service}, {tagAgent, q.Agent}, {tagModel, q.Model}} {
		if f.val != "" {
			where = append(where, "seq IN (SELECT seq FROM trace_tags WHERE kind = ? AND value = ?)")
			p.args = append(p.args, f.kind, f.val)
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
		p.args = append(p.args, int64(q.MinDuration))
	}
	if q.Text != "" {
		where = append(where, "instr(names_lower, ?) > 0")
		p.args = append(p.args, normName(q.Text))
	}
	dir, cmp := "DESC", "<"
	if q.Ascending {
		dir, cmp = "ASC", ">"
	}
	if p.After != nil {
		where = append(where, fmt.Sprintf("(%s, trace_id) %s (?, ?)", col, cmp))
		p.args = append(p.args, p.After.SortValue, p.After.TraceID[:])
	}
	var b strings.Builder
	b.WriteString(`SELECT trace_id, root_name, service_name, agent_names, models,
	start_ns, end_ns, duration_ns, span_count, error_count, model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, `)
	b.WriteString(col)
	b.WriteString(" FROM traces")
	if len(where) > 0 {
		b.WriteString(" WHERE ")
		b.WriteString(strings.Join(where, " AND "))
	}
	fmt.Fprintf(&b, " ORDER BY %s %s, trace_id %s LIMIT %d", col, dir, dir, p.Limit+1)
	p.sql = b.String()
	return p, nil
}
