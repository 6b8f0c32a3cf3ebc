package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
)

// The window reads (store.WindowReader) use the indexes of migration 7:
// spans_by_parent (trace_seq, parent_span_id, start_ns, span_id) lists a
// span's children in canonical order and counts them from the index
// alone, spans_by_start (trace_seq, start_ns, span_id) pages a trace's
// spans in canonical order, and trace_derived keeps what a view derived
// from a trace (its rollup's tree part).

var _ store.WindowReader = (*Store)(nil)

// bigTraceSpans is the trace size from which child counts of big parents
// are kept in memory (bigParents).
const bigTraceSpans = 10_000

// traceSeq finds a trace of ctx's project: its seq and span count.
func traceSeq(ctx context.Context, q queryRower, traceID string) (seq, count int64, err error) {
	seq, count, _, err = traceRef(ctx, q, traceID)
	return seq, count, err
}

type queryRower interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// traceRef finds a trace of ctx's project: its seq, its span count and
// whether its spans are in compact blocks.
func traceRef(ctx context.Context, q queryRower, traceID string) (seq, count int64, compact bool, err error) {
	id, err := decodeID(traceID, 16)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%w: %w", store.ErrBadTraceID, err)
	}
	switch err := q.QueryRowContext(ctx, `SELECT seq, span_count, compact FROM traces INDEXED BY traces_by_id WHERE trace_id = ? AND project = ?`,
		id, store.ProjectOf(ctx)).Scan(&seq, &count, &compact); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, 0, false, store.ErrNotFound
	case err != nil:
		return 0, 0, false, err
	}
	return seq, count, compact, nil
}

// TraceSize returns the span count of the trace's summary row.
func (s *Store) TraceSize(ctx context.Context, traceID string) (int64, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	_, n, err := traceSeq(ctx, s.reader, traceID)
	if err != nil {
		return 0, fmt.Errorf("trace size %s: %w", traceID, err)
	}
	return n, nil
}

// TraceHead returns the trace's summary row and billed calls, as
// ListTraces lists them: no span is read.
func (s *Store) TraceHead(ctx context.Context, traceID string) (store.TraceSummary, error) {
	if err := s.usable(); err != nil {
		return store.TraceSummary{}, err
	}
	fail := func(err error) (store.TraceSummary, error) {
		return store.TraceSummary{}, fmt.Errorf("trace head %s: %w", traceID, err)
	}
	id, err := decodeID(traceID, 16)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", store.ErrBadTraceID, err))
	}
	var ts store.TraceSummary
	var labels, groups string
	var root, service, agents, models any
	var startNS, endNS, durNS, afterNS int64
	err = s.reader.QueryRowContext(ctx, `SELECT call_groups, root_name, service_name, agent_names, models,
	start_ns, end_ns, duration_ns, span_count, error_count, model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
	after_root_ns, fragments, failed_model_calls, model_labels
	FROM traces INDEXED BY traces_by_id WHERE trace_id = ? AND project = ?`, id, store.ProjectOf(ctx)).Scan(
		&groups, &root, &service, &agents, &models,
		&startNS, &endNS, &durNS, &ts.SpanCount, &ts.ErrorCount, &ts.ModelCalls, &ts.ToolCalls,
		&ts.InputTokens, &ts.OutputTokens, &ts.CacheReadTokens, &ts.CacheCreationTokens, &ts.ReasoningTokens,
		&afterNS, &ts.Fragments, &ts.FailedModelCalls, &labels)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fail(store.ErrNotFound)
	case err != nil:
		return fail(err)
	}
	ts.TraceID = traceID
	ts.Start, ts.End = time.Unix(0, startNS).UTC(), time.Unix(0, endNS).UTC()
	ts.Duration, ts.AfterRoot = time.Duration(durNS), time.Duration(afterNS)
	if ts.RootName, err = s.strs.text(ctx, s.reader, root); err != nil {
		return fail(fmt.Errorf("root name: %w", err))
	}
	if ts.ServiceName, err = s.strs.text(ctx, s.reader, service); err != nil {
		return fail(fmt.Errorf("service: %w", err))
	}
	for _, l := range []struct {
		raw  any
		into *[]string
		what string
	}{{agents, &ts.AgentNames, "agent names"}, {models, &ts.Models, "models"}, {labels, &ts.ModelLabels, "model labels"}} {
		if *l.into, err = s.strs.list(ctx, s.reader, l.raw); err != nil {
			return fail(fmt.Errorf("%s: %w", l.what, err))
		}
	}
	if ts.Groups, err = decodeGroups(groups, ts.Models); err != nil {
		return fail(fmt.Errorf("call groups: %w", err))
	}
	// The calls are read apart from the row: a list row carries only the
	// groups, the head of one trace every call (the rollup lists them).
	if ts.Calls, err = s.TraceCalls(ctx, traceID); err != nil {
		return fail(err)
	}
	return ts, nil
}

// nodeColumns are what scanNode reads, of spans aliased s.
const nodeColumns = `s.span_id, s.parent_span_id, s.name, s.kind, s.service_name, s.start_ns, s.end_ns,
	s.status_code, s.status_message, s.operation, s.request_model, s.response_model, s.tool_name,
	s.has_usage, s.input_tokens, s.output_tokens`

func scanNodes(rows *sql.Rows) ([]store.SpanNode, []int64, error) {
	defer rows.Close()
	var nodes []store.SpanNode
	var starts []int64
	var id, parent sql.RawBytes
	for rows.Next() {
		var n store.SpanNode
		var startNS, endNS int64
		if err := rows.Scan(&id, &parent, &n.Name, &n.Kind, &n.ServiceName, &startNS, &endNS,
			&n.StatusCode, &n.StatusMessage, &n.Operation, &n.RequestModel, &n.ResponseModel, &n.ToolName,
			&n.HasUsage, &n.InputTokens, &n.OutputTokens); err != nil {
			return nil, nil, err
		}
		n.SpanID = hex.EncodeToString(id)
		if parent != nil {
			n.ParentSpanID = hex.EncodeToString(parent)
		}
		n.StartTime, n.EndTime = time.Unix(0, startNS).UTC(), time.Unix(0, endNS).UTC()
		nodes = append(nodes, n)
		starts = append(starts, startNS)
	}
	return nodes, starts, rows.Err()
}

// SpanNodes returns one page of the light spans q selects (see
// store.WindowReader), each with its child count.
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
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	seq, count, compact, err := traceRef(ctx, tx, traceID)
	if err != nil {
		return fail(err)
	}
	if compact {
		spans, err := s.compactTrace(ctx, tx, seq, traceID, false)
		if err != nil {
			return fail(err)
		}
		return compactNodes(spans, q, limit), nil
	}
	afterNS, afterID, _ := store.DecodeSpanToken(q.PageToken)
	var where string
	args := []any{seq}
	index := "spans_by_start"
	switch {
	case q.Parent != "":
		pid, _ := hex.DecodeString(q.Parent)
		// A span naming itself is no child of its own.
		where, index = "s.parent_span_id = ? AND s.span_id != ?", "spans_by_parent"
		args = append(args, pid, pid)
	case q.IDs != nil:
		if len(q.IDs) == 0 {
			return store.NodePage{Nodes: []store.SpanNode{}}, nil
		}
		where, index = "s.span_id IN (?"+strings.Repeat(",?", len(q.IDs)-1)+")", "spans_by_trace"
		for _, id := range q.IDs {
			b, _ := hex.DecodeString(id)
			args = append(args, b)
		}
		limit = len(q.IDs)
	default:
		t := store.FoldText(q.Text)
		where = `(instr(lower(s.name), ?) OR instr(lower(s.operation), ?) OR instr(lower(s.tool_name), ?)
			OR instr(lower(s.request_model), ?) OR instr(lower(s.response_model), ?) OR instr(lower(s.service_name), ?)
			OR instr(lower(hex(s.span_id)), ?) OR instr(lower(s.status_message), ?))`
		for range 8 {
			args = append(args, t)
		}
	}
	if afterID != "" {
		b, _ := hex.DecodeString(afterID)
		where += " AND (s.start_ns, s.span_id) > (?, ?)"
		args = append(args, afterNS, b)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+nodeColumns+` FROM spans s INDEXED BY `+index+
		` WHERE s.trace_seq = ? AND `+where+fmt.Sprintf(` ORDER BY s.start_ns, s.span_id LIMIT %d`, limit+1), args...)
	if err != nil {
		return fail(err)
	}
	nodes, starts, err := scanNodes(rows)
	if err != nil {
		return fail(err)
	}
	page := store.NodePage{Nodes: nodes}
	if len(nodes) > limit {
		page.Nodes = nodes[:limit]
		last := &page.Nodes[limit-1]
		page.NextPageToken = store.EncodeSpanToken(starts[limit-1], last.SpanID)
	}
	if page.Nodes == nil {
		page.Nodes = []store.SpanNode{}
	}
	if err := s.childCounts(ctx, tx, seq, count, page.Nodes); err != nil {
		return fail(err)
	}
	return page, nil
}

// bigParentMin is the child count from which a parent's count comes from
// the store's memory (bigParents) rather than a count of its index range:
// SQLite counts a range entry by entry, and a page of a million-span
// trace's sub-agents counted 20,000 children each, 0.4 s of CPU per page.
const bigParentMin = 256

// bigParentTraces bounds the traces whose big parents the store keeps.
const bigParentTraces = 64

// bigParentSet is one trace's parents with at least bigParentMin
// children, valid while the trace has spans spans.
type bigParentSet struct {
	spans  int64
	counts map[string]int64
}

// bigParents returns the counts of trace seq's parents with at least
// bigParentMin children (a span naming itself counted, as the index
// does), from memory while the trace's span count is count, else from
// one grouped pass over spans_by_parent.
func (s *Store) bigParents(ctx context.Context, tx *sql.Tx, seq, count int64) (map[string]int64, error) {
	s.bigMu.Lock()
	e, ok := s.big[seq]
	s.bigMu.Unlock()
	if ok && e.spans == count {
		return e.counts, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT parent_span_id, count(*) FROM spans INDEXED BY spans_by_parent
		WHERE trace_seq = ? AND parent_span_id IS NOT NULL GROUP BY parent_span_id HAVING count(*) >= ?`, seq, bigParentMin)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]int64{}
	var pid sql.RawBytes
	for rows.Next() {
		var n int64
		if err := rows.Scan(&pid, &n); err != nil {
			return nil, err
		}
		m[hex.EncodeToString(pid)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.bigMu.Lock()
	if s.big == nil || len(s.big) >= bigParentTraces {
		s.big = map[int64]bigParentSet{} // a handful of huge traces: start over
	}
	s.big[seq] = bigParentSet{spans: count, counts: m}
	s.bigMu.Unlock()
	return m, nil
}

// childCounts sets each node's child count from spans_by_parent: a parent
// of a trace over bigTraceSpans spans with many children from bigParents,
// the others by counting their range.
func (s *Store) childCounts(ctx context.Context, tx *sql.Tx, seq, count int64, nodes []store.SpanNode) error {
	if len(nodes) == 0 {
		return nil
	}
	var big map[string]int64
	if count >= bigTraceSpans {
		var err error
		if big, err = s.bigParents(ctx, tx, seq, count); err != nil {
			return err
		}
	}
	at := make(map[string][]int, len(nodes))
	args := []any{seq}
	for i := range nodes {
		if n, ok := big[nodes[i].SpanID]; ok {
			nodes[i].Children = n
			if nodes[i].ParentSpanID == nodes[i].SpanID {
				nodes[i].Children--
			}
			continue
		}
		if _, ok := at[nodes[i].SpanID]; !ok {
			b, _ := hex.DecodeString(nodes[i].SpanID)
			args = append(args, b)
		}
		at[nodes[i].SpanID] = append(at[nodes[i].SpanID], i)
	}
	if len(at) == 0 {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT parent_span_id, count(*) FROM spans INDEXED BY spans_by_parent
		WHERE trace_seq = ? AND parent_span_id IN (?`+strings.Repeat(",?", len(args)-2)+`) GROUP BY parent_span_id`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var pid sql.RawBytes
	for rows.Next() {
		var n int64
		if err := rows.Scan(&pid, &n); err != nil {
			return err
		}
		for _, i := range at[hex.EncodeToString(pid)] {
			nodes[i].Children = n
			if nodes[i].ParentSpanID == nodes[i].SpanID {
				nodes[i].Children-- // it names itself: no child of its own
			}
		}
	}
	return rows.Err()
}

// SpanPage returns one page of the trace's spans in full, in canonical
// order, through spans_by_start.
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
	afterNS, afterID, err := store.DecodeSpanToken(pageToken)
	if err != nil {
		return fail(err)
	}
	where, args := "", []any{}
	if afterID != "" {
		b, _ := hex.DecodeString(afterID)
		where, args = " AND (s.start_ns, s.span_id) > (?, ?)", []any{afterNS, b}
	}
	spans, err := s.readSpansWhere(ctx, traceID, `INDEXED BY spans_by_start`, where+fmt.Sprintf(" ORDER BY s.start_ns, s.span_id LIMIT %d", limit+1), args, int64(limit+1),
		func(all []store.Span) []store.Span { return pageAfter(all, afterNS, afterID, limit+1) })
	if err != nil {
		return fail(err)
	}
	page := store.SpanPage{Spans: spans}
	if len(spans) > limit {
		page.Spans = spans[:limit]
		last := &page.Spans[limit-1]
		page.NextPageToken = store.EncodeSpanToken(last.StartTime.UnixNano(), last.SpanID)
	}
	return page, nil
}

// GetSpan returns one span in full.
func (s *Store) GetSpan(ctx context.Context, traceID, spanID string) (store.Span, error) {
	if err := s.usable(); err != nil {
		return store.Span{}, err
	}
	if !store.IsSpanID(spanID) {
		return store.Span{}, fmt.Errorf("span %s of trace %s: %w", spanID, traceID, store.ErrNotFound)
	}
	b, _ := hex.DecodeString(spanID)
	spans, err := s.readSpansWhere(ctx, traceID, `INDEXED BY spans_by_trace`, " AND s.span_id = ?", []any{b}, 1,
		func(all []store.Span) []store.Span {
			for i := range all {
				if all[i].SpanID == spanID {
					return all[i : i+1]
				}
			}
			return nil
		})
	if err != nil {
		return store.Span{}, fmt.Errorf("span %s of trace %s: %w", spanID, traceID, err)
	}
	if len(spans) == 0 {
		return store.Span{}, fmt.Errorf("span %s of trace %s: %w", spanID, traceID, store.ErrNotFound)
	}
	return spans[0], nil
}

// readSpansWhere reads full spans of a trace of ctx's project: those of
// spans s (hint: index) with trace_seq = the trace's and the condition
// rest (" AND ..." and any ORDER BY/LIMIT), in the order rest gives. Of a
// trace in compact blocks, it reads every span and returns what keep
// keeps of them in canonical order.
func (s *Store) readSpansWhere(ctx context.Context, traceID, hint, rest string, args []any, count int64, keep func([]store.Span) []store.Span) ([]store.Span, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	seq, _, compact, err := traceRef(ctx, tx, traceID)
	if err != nil {
		return nil, err
	}
	if compact {
		spans, err := s.compactTrace(ctx, tx, seq, traceID, true)
		if err != nil {
			return nil, err
		}
		return keep(spans), nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+spanColumns+` FROM spans s `+hint+` WHERE s.trace_seq = ?`+rest, append([]any{seq}, args...)...)
	if err != nil {
		return nil, err
	}
	spans, meta, err := scanSpanRows(rows, traceID, count)
	if err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return []store.Span{}, nil
	}
	if err := s.readPayloads(ctx, tx, spans, meta); err != nil {
		return nil, err
	}
	if err := s.readResources(ctx, tx, spans, meta); err != nil {
		return nil, err
	}
	if err := s.readScopes(ctx, tx, spans, meta); err != nil {
		return nil, err
	}
	if p := store.ProjectOf(ctx); p != "" {
		for i := range spans {
			spans[i].Project = p
		}
	}
	return spans, nil
}

// TraceBones reads the typed columns a tree needs of every span, then the
// flags (kept in the payload) of the spans whose parent is not in the
// trace.
func (s *Store) TraceBones(ctx context.Context, traceID string) ([]store.Bone, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	fail := func(err error) ([]store.Bone, error) {
		return nil, fmt.Errorf("bones of trace %s: %w", traceID, err)
	}
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	seq, count, compact, err := traceRef(ctx, tx, traceID)
	if err != nil {
		return fail(err)
	}
	if compact {
		spans, err := s.compactTrace(ctx, tx, seq, traceID, true)
		if err != nil {
			return fail(err)
		}
		bones := make([]store.Bone, len(spans))
		for i := range spans {
			bones[i] = store.BoneOf(&spans[i])
		}
		return bones, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT span_id, parent_span_id, name, start_ns, end_ns, has_usage, cost_usd
		FROM spans WHERE trace_seq = ?`, seq)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	bones := make([]store.Bone, 0, min(max(count, 0), 1<<22))
	names := map[string]string{} // names repeat: one string each
	var id, parent, name sql.RawBytes
	for rows.Next() {
		var startNS, endNS int64
		var usage bool
		var cost sql.NullFloat64
		if err := rows.Scan(&id, &parent, &name, &startNS, &endNS, &usage, &cost); err != nil {
			return fail(err)
		}
		nm, ok := names[string(name)]
		if !ok {
			nm = string(name)
			names[nm] = nm
		}
		b := store.Bone{SpanID: hex.EncodeToString(id), Name: nm, StartTime: time.Unix(0, startNS).UTC(), EndTime: time.Unix(0, endNS).UTC(),
			Carries: usage || (cost.Valid && !math.IsNaN(cost.Float64) && !math.IsInf(cost.Float64, 0))}
		if parent != nil {
			b.ParentSpanID = hex.EncodeToString(parent)
		}
		bones = append(bones, b)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	rows.Close()
	// Flags live in the payload: read them for the spans whose parent did
	// not arrive (the tops whose parent may be remote), only.
	ids := make(map[string]int, len(bones))
	for i := range bones {
		ids[bones[i].SpanID] = i
	}
	var orphans []any
	at := map[string][]int{}
	for i := range bones {
		if p := bones[i].ParentSpanID; p != "" {
			if _, ok := ids[p]; !ok {
				if _, seen := at[bones[i].SpanID]; !seen {
					b, _ := hex.DecodeString(bones[i].SpanID)
					orphans = append(orphans, b)
				}
				at[bones[i].SpanID] = append(at[bones[i].SpanID], i)
			}
		}
	}
	for len(orphans) > 0 {
		n := min(len(orphans), blocksPerQuery)
		rows, err := tx.QueryContext(ctx, `SELECT `+spanColumns+` FROM spans s INDEXED BY spans_by_trace WHERE s.trace_seq = ? AND s.span_id IN (?`+
			strings.Repeat(",?", n-1)+`)`, append([]any{seq}, orphans[:n]...)...)
		if err != nil {
			return fail(err)
		}
		spans, meta, err := scanSpanRows(rows, traceID, int64(n))
		if err != nil {
			return fail(err)
		}
		if err := s.readPayloads(ctx, tx, spans, meta); err != nil {
			return fail(err)
		}
		for k := range spans {
			for _, i := range at[spans[k].SpanID] {
				bones[i].Flags = spans[k].Flags
			}
		}
		orphans = orphans[n:]
	}
	return bones, nil
}

// LoadDerived returns what SaveDerived kept for the trace under kind.
func (s *Store) LoadDerived(ctx context.Context, traceID, kind string) ([]byte, int64, bool, error) {
	if err := s.usable(); err != nil {
		return nil, 0, false, err
	}
	seq, _, err := traceSeq(ctx, s.reader, traceID)
	if err != nil {
		return nil, 0, false, fmt.Errorf("load %s of trace %s: %w", kind, traceID, err)
	}
	var id, data []byte
	var n int64
	switch err := s.reader.QueryRowContext(ctx, `SELECT trace_id, span_count, data FROM trace_derived WHERE trace_seq = ? AND kind = ?`, seq, kind).Scan(&id, &n, &data); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, 0, false, nil
	case err != nil:
		return nil, 0, false, fmt.Errorf("load %s of trace %s: %w", kind, traceID, err)
	}
	// A row of a trace that retention deleted, whose seq a later trace
	// reuses, names the old trace's id.
	if hex.EncodeToString(id) != traceID {
		return nil, 0, false, nil
	}
	return data, n, true, nil
}

// SaveDerived keeps data for the trace under kind, replacing what was kept.
func (s *Store) SaveDerived(ctx context.Context, traceID, kind string, spans int64, data []byte) error {
	if err := s.usable(); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("save %s of trace %s: %w", kind, traceID, err) }
	if s.writer == nil {
		return fail(store.ErrReadOnly)
	}
	if len(data) > store.MaxDerivedBytes {
		return fail(fmt.Errorf("%d bytes, at most %d", len(data), store.MaxDerivedBytes))
	}
	seq, _, err := traceSeq(ctx, s.reader, traceID)
	if err != nil {
		return fail(err)
	}
	id, _ := hex.DecodeString(traceID)
	if _, err := s.writer.ExecContext(ctx, `INSERT OR REPLACE INTO trace_derived (trace_seq, kind, trace_id, span_count, data) VALUES (?, ?, ?, ?, ?)`,
		seq, kind, id, spans, data); err != nil {
		return fail(err)
	}
	return nil
}
