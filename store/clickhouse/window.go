package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/loomwork/loomwork/store"
)

// The window reads (store.WindowReader). A trace's rows are found as
// GetTrace finds them (trace_id through the bloom filter index), and each
// read selects the columns it needs only: a page of children reads the
// trace's parent_span_id column and the light columns of the page's rows,
// never the attribute JSON. Copies of a span not merged yet are read once
// (LIMIT 1 BY span_id, uniqExact).
//
// ClickHouse keeps no per-trace summary at ingest (migration 3 dropped the
// view: it cost more CPU than storing the spans). TraceHead computes the
// summary from the light columns (summarize) once per span count and keeps
// it in trace_derived (migration 8), so later reads cost a count of the
// trace's span ids and one row.

var _ store.WindowReader = (*Store)(nil)

// headKind is the trace_derived kind of TraceHead's kept summary.
const headKind = "store.head.v1"

// traceWhere is the condition selecting a trace's rows of ctx's project.
func traceWhere(ctx context.Context, traceID string) (string, error) {
	if err := store.CheckTraceID("trace", traceID); err != nil {
		return "", err
	}
	pc, err := projectCond(ctx)
	if err != nil {
		return "", err
	}
	return "trace_id = " + quoteString(traceID) + " AND " + pc, nil
}

// spanCount is how many distinct span ids the trace has stored; 0 when it
// has none (not found).
func (s *Store) spanCount(ctx context.Context, where string) (int64, error) {
	var n uint64
	if err := s.queryRow(ctx, "SELECT uniqExact(span_id) FROM "+s.spansTable+" WHERE "+where).Scan(&n); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// TraceSize counts the trace's distinct span ids.
func (s *Store) TraceSize(ctx context.Context, traceID string) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	where, err := traceWhere(ctx, traceID)
	if err == nil {
		var n int64
		if n, err = s.spanCount(ctx, where); err == nil && n == 0 {
			err = store.ErrNotFound
		}
		if err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("trace size %s: %w", traceID, err)
}

// TraceHead returns what Summarize returns for the trace's stored spans:
// the copy kept for its current span count, else computed and kept.
func (s *Store) TraceHead(ctx context.Context, traceID string) (store.TraceSummary, error) {
	if err := s.usable(); err != nil {
		return store.TraceSummary{}, err
	}
	fail := func(err error) (store.TraceSummary, error) {
		return store.TraceSummary{}, fmt.Errorf("trace head %s: %w", traceID, err)
	}
	where, err := traceWhere(ctx, traceID)
	if err != nil {
		return fail(err)
	}
	n, err := s.spanCount(ctx, where)
	if err != nil {
		return fail(err)
	}
	if n == 0 {
		return fail(store.ErrNotFound)
	}
	if data, kept, ok, err := s.LoadDerived(ctx, traceID, headKind); err != nil {
		return fail(err)
	} else if ok && kept == n {
		var sum store.TraceSummary
		if err := json.Unmarshal(data, &sum); err == nil && sum.SpanCount == n {
			return sum, nil
		}
	}
	sums, err := s.summarize(ctx, where)
	if err != nil {
		return fail(err)
	}
	sum, ok := sums[traceID]
	if !ok {
		return fail(store.ErrNotFound)
	}
	if data, err := json.Marshal(sum); err == nil && len(data) <= store.MaxDerivedBytes {
		// Keeping it only spares the next read; this one is served.
		_ = s.SaveDerived(ctx, traceID, headKind, sum.SpanCount, data)
	}
	return *sum, nil
}

// nodeColumns are what scanNodes reads.
const nodeColumns = `span_id, parent_span_id, toString(name), toString(kind), toString(service_name), start, end,
	toString(status_code), status_message, toString(operation), toString(request_model), toString(response_model),
	toString(tool_name), has_usage, input_tokens, output_tokens`

// SpanNodes returns one page of the light spans q selects, each with its
// child count.
func (s *Store) SpanNodes(ctx context.Context, traceID string, q store.NodeQuery) (store.NodePage, error) {
	if err := s.usable(); err != nil {
		return store.NodePage{}, err
	}
	fail := func(err error) (store.NodePage, error) {
		return store.NodePage{}, fmt.Errorf("span nodes of trace %s: %w", traceID, err)
	}
	limit, err := q.Check()
	if err != nil {
		return fail(err)
	}
	where, err := traceWhere(ctx, traceID)
	if err != nil {
		return fail(err)
	}
	var args []any
	switch {
	case q.Parent != "":
		// A span naming itself is no child of its own.
		where += " AND parent_span_id = ? AND span_id != ?"
		args = append(args, q.Parent, q.Parent)
	case q.IDs != nil:
		if len(q.IDs) == 0 {
			return store.NodePage{Nodes: []store.SpanNode{}}, nil
		}
		where += " AND span_id IN (?)"
		args = append(args, q.IDs)
		limit = len(q.IDs)
	default:
		where += ` AND (position(lower(name), ?) > 0 OR position(lower(operation), ?) > 0 OR position(lower(tool_name), ?) > 0
			OR position(lower(request_model), ?) > 0 OR position(lower(response_model), ?) > 0 OR position(lower(service_name), ?) > 0
			OR position(span_id, ?) > 0 OR position(lower(status_message), ?) > 0)`
		t := store.FoldText(q.Text)
		for range 8 {
			args = append(args, t)
		}
	}
	where, args = afterToken(where, args, q.PageToken)
	rows, err := s.query(ctx, "SELECT "+nodeColumns+" FROM "+s.spansTable+" WHERE "+where+
		fmt.Sprintf(" ORDER BY start, span_id LIMIT 1 BY span_id LIMIT %d", limit+1), args...)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	page := store.NodePage{Nodes: []store.SpanNode{}}
	for rows.Next() {
		var n store.SpanNode
		if err := rows.Scan(&n.SpanID, &n.ParentSpanID, &n.Name, &n.Kind, &n.ServiceName, &n.StartTime, &n.EndTime,
			&n.StatusCode, &n.StatusMessage, &n.Operation, &n.RequestModel, &n.ResponseModel, &n.ToolName,
			&n.HasUsage, &n.InputTokens, &n.OutputTokens); err != nil {
			return fail(err)
		}
		n.StartTime, n.EndTime = n.StartTime.UTC(), n.EndTime.UTC()
		page.Nodes = append(page.Nodes, n)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	rows.Close()
	if len(page.Nodes) > limit {
		page.Nodes = page.Nodes[:limit]
		last := &page.Nodes[limit-1]
		page.NextPageToken = store.EncodeSpanToken(last.StartTime.UnixNano(), last.SpanID)
	}
	if err := s.childCounts(ctx, traceID, page.Nodes); err != nil {
		return fail(err)
	}
	return page, nil
}

// afterToken adds the keyset condition of a span page token (checked by
// the caller) to where.
func afterToken(where string, args []any, tok string) (string, []any) {
	ns, id, _ := store.DecodeSpanToken(tok)
	if id == "" {
		return where, args
	}
	return where + " AND (start, span_id) > (fromUnixTimestamp64Nano(?), ?)", append(args, ns, id)
}

// childCounts sets each node's child count.
func (s *Store) childCounts(ctx context.Context, traceID string, nodes []store.SpanNode) error {
	if len(nodes) == 0 {
		return nil
	}
	where, err := traceWhere(ctx, traceID)
	if err != nil {
		return err
	}
	at := make(map[string][]int, len(nodes))
	ids := make([]string, 0, len(nodes))
	for i := range nodes {
		if _, ok := at[nodes[i].SpanID]; !ok {
			ids = append(ids, nodes[i].SpanID)
		}
		at[nodes[i].SpanID] = append(at[nodes[i].SpanID], i)
	}
	rows, err := s.query(ctx, "SELECT parent_span_id, uniqExact(span_id) FROM "+s.spansTable+" WHERE "+where+
		" AND parent_span_id IN (?) GROUP BY parent_span_id", ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pid string
		var n uint64
		if err := rows.Scan(&pid, &n); err != nil {
			return err
		}
		for _, i := range at[pid] {
			nodes[i].Children = int64(n)
			if nodes[i].ParentSpanID == nodes[i].SpanID {
				nodes[i].Children-- // it names itself: no child of its own
			}
		}
	}
	return rows.Err()
}

// SpanPage returns one page of the trace's spans in full, in canonical
// order.
func (s *Store) SpanPage(ctx context.Context, traceID, pageToken string, limit int) (store.SpanPage, error) {
	if err := s.usable(); err != nil {
		return store.SpanPage{}, err
	}
	fail := func(err error) (store.SpanPage, error) {
		return store.SpanPage{}, fmt.Errorf("span page of trace %s: %w", traceID, err)
	}
	limit, err := store.PageLimit(limit)
	if err != nil {
		return fail(err)
	}
	if _, _, err := store.DecodeSpanToken(pageToken); err != nil {
		return fail(err)
	}
	where, err := traceWhere(ctx, traceID)
	if err != nil {
		return fail(err)
	}
	// The page's span ids first, from two columns (ordering the trace's
	// rows with every column read made a page of a million-span trace
	// cost seconds), then those spans in full.
	keyWhere, args := afterToken(where, nil, pageToken)
	rows, err := s.query(ctx, "SELECT span_id FROM "+s.spansTable+" WHERE "+keyWhere+
		fmt.Sprintf(" ORDER BY start, span_id LIMIT 1 BY span_id LIMIT %d", limit+1), args...)
	if err != nil {
		return fail(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fail(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	spans := []store.Span{}
	if len(ids) > 0 {
		if spans, err = s.readSpans(ctx, traceID, where+" AND span_id IN (?) ORDER BY start, span_id LIMIT 1 BY span_id", ids); err != nil {
			return fail(err)
		}
	}
	if pageToken == "" && len(spans) == 0 {
		return fail(store.ErrNotFound)
	}
	page := store.SpanPage{Spans: spans}
	if len(spans) > limit {
		page.Spans = spans[:limit]
		last := &page.Spans[limit-1]
		page.NextPageToken = store.EncodeSpanToken(last.StartTime.UnixNano(), last.SpanID)
	}
	return page, nil
}

// readSpans reads full spans: WHERE rest.
func (s *Store) readSpans(ctx context.Context, traceID, rest string, args ...any) ([]store.Span, error) {
	rows, err := s.query(ctx, "SELECT "+selectSpanColumns+" FROM "+s.spansTable+" WHERE "+rest, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	spans := []store.Span{}
	for rows.Next() {
		sp, err := scanSpan(rows, traceID, store.ProjectOf(ctx))
		if err != nil {
			return nil, err
		}
		spans = append(spans, sp)
	}
	return spans, rows.Err()
}

// GetSpan returns one span in full.
func (s *Store) GetSpan(ctx context.Context, traceID, spanID string) (store.Span, error) {
	if err := s.usable(); err != nil {
		return store.Span{}, err
	}
	fail := func(err error) (store.Span, error) {
		return store.Span{}, fmt.Errorf("span %s of trace %s: %w", spanID, traceID, err)
	}
	where, err := traceWhere(ctx, traceID)
	if err != nil {
		return fail(err)
	}
	if !store.IsSpanID(spanID) {
		return fail(store.ErrNotFound)
	}
	spans, err := s.readSpans(ctx, traceID, where+" AND span_id = ? LIMIT 1", spanID)
	if err != nil {
		return fail(err)
	}
	if len(spans) == 0 {
		return fail(store.ErrNotFound)
	}
	return spans[0], nil
}

// TraceBones reads the columns a tree needs of every span of the trace.
func (s *Store) TraceBones(ctx context.Context, traceID string) ([]store.Bone, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	fail := func(err error) ([]store.Bone, error) {
		return nil, fmt.Errorf("bones of trace %s: %w", traceID, err)
	}
	where, err := traceWhere(ctx, traceID)
	if err != nil {
		return fail(err)
	}
	rows, err := s.query(ctx, "SELECT span_id, parent_span_id, toString(name), start, end, flags, has_usage, cost_usd FROM "+
		s.spansTable+" WHERE "+where+" LIMIT 1 BY span_id")
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	var bones []store.Bone
	names := map[string]string{}
	for rows.Next() {
		var b store.Bone
		var usage bool
		var cost *float64
		if err := rows.Scan(&b.SpanID, &b.ParentSpanID, &b.Name, &b.StartTime, &b.EndTime, &b.Flags, &usage, &cost); err != nil {
			return fail(err)
		}
		if nm, ok := names[b.Name]; ok {
			b.Name = nm
		} else {
			names[b.Name] = b.Name
		}
		b.StartTime, b.EndTime = b.StartTime.UTC(), b.EndTime.UTC()
		b.Carries = usage || (cost != nil && !math.IsNaN(*cost) && !math.IsInf(*cost, 0))
		bones = append(bones, b)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if len(bones) == 0 {
		return fail(store.ErrNotFound)
	}
	return bones, nil
}

// derivedWhere selects a trace's kept rows of one kind.
func (s *Store) derivedWhere(ctx context.Context, traceID, kind string) (string, error) {
	where, err := traceWhere(ctx, traceID)
	if err != nil {
		return "", err
	}
	return where + " AND kind = " + quoteString(kind), nil
}

// LoadDerived returns the latest copy SaveDerived kept for the trace under
// kind.
func (s *Store) LoadDerived(ctx context.Context, traceID, kind string) ([]byte, int64, bool, error) {
	if err := s.usable(); err != nil {
		return nil, 0, false, err
	}
	where, err := s.derivedWhere(ctx, traceID, kind)
	if err != nil {
		return nil, 0, false, fmt.Errorf("load %s of trace %s: %w", kind, traceID, err)
	}
	rows, err := s.query(ctx, "SELECT span_count, data FROM "+s.ddl.DB+".trace_derived WHERE "+where+" ORDER BY saved DESC LIMIT 1")
	if err != nil {
		return nil, 0, false, fmt.Errorf("load %s of trace %s: %w", kind, traceID, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, 0, false, rows.Err()
	}
	var n int64
	var data string
	if err := rows.Scan(&n, &data); err != nil {
		return nil, 0, false, fmt.Errorf("load %s of trace %s: %w", kind, traceID, err)
	}
	return []byte(data), n, true, nil
}

// SaveDerived keeps data for the trace under kind; the latest save wins
// (ReplacingMergeTree by the server's time of the insert).
func (s *Store) SaveDerived(ctx context.Context, traceID, kind string, spans int64, data []byte) error {
	if err := s.usable(); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("save %s of trace %s: %w", kind, traceID, err) }
	if err := store.CheckTraceID("trace", traceID); err != nil {
		return fail(err)
	}
	if len(data) > store.MaxDerivedBytes {
		return fail(fmt.Errorf("%d bytes, at most %d", len(data), store.MaxDerivedBytes))
	}
	p, ok := store.ProjectFor(ctx)
	if !ok {
		return fail(store.ErrNoProject)
	}
	if strings.TrimSpace(kind) == "" {
		return fail(fmt.Errorf("empty kind"))
	}
	cols := []any{[]string{p}, []string{traceID}, []string{kind}, []int64{spans}, []string{string(data)}}
	if err := s.insert(ctx, s.ddl.DB+".trace_derived", "project, trace_id, kind, span_count, data", cols, 1); err != nil {
		return fail(err)
	}
	return nil
}
