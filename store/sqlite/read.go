package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/loomwork/loomwork/store"
)

// selectSpansSQL reads a trace's spans in table (rowid) order: the
// subquery collects the rowids from spans_by_trace and SQLite visits them
// sorted, so each table page is read once, where walking the index in span
// id (random) order jumped between pages, about 20% slower on a
// 50,000-span trace. GetTrace sorts by start time itself: an ORDER BY
// start_ns made SQLite copy every row, all 33 columns, through its sorter
// before returning the first one, where sorting row numbers in Go costs a
// few milliseconds.
const selectSpansSQL = `SELECT ` + spanColumns + `
	FROM spans s WHERE s.rowid IN (SELECT rowid FROM spans WHERE trace_seq = ?)`

// spanColumns are the columns scanSpanRows reads, of spans aliased s.
const spanColumns = `s.span_id, s.parent_span_id, s.trace_state, s.name, s.kind, s.start_ns, s.end_ns,
	s.status_code, s.status_message, s.service_name, s.scope_name, s.scope_version,
	s.operation, s.provider, s.request_model, s.response_model, s.agent_name, s.conversation_id,
	s.tool_name, s.tool_call_id, s.has_usage, s.input_tokens, s.output_tokens,
	s.cache_read_tokens, s.cache_creation_tokens, s.reasoning_tokens, s.cost_usd,
	s.resource_id, s.payload_block, s.payload_off, s.payload_len, s.scope_id`

// blocksPerQuery bounds the ids in one payload_blocks IN (...) query.
const blocksPerQuery = 256

// readRow is what GetTrace keeps of a span row besides the span itself.
type readRow struct {
	startNS            int64
	block, off, length int64
	resID              int64 // 0: none (resource ids start at 1)
	scopeID            int64 // 0: none (scope ids start at 1)
}

// GetTrace returns every span of traceID ordered by start time then span
// id, or store.ErrNotFound.
func (s *Store) GetTrace(ctx context.Context, traceID string) ([]store.Span, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	id, err := decodeID(traceID, 16)
	if err != nil {
		return nil, fmt.Errorf("get trace: %w: %w", store.ErrBadTraceID, err)
	}
	// One read transaction: spans, payloads and resources from one snapshot.
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	defer tx.Rollback()
	var seq, count int64
	var compact bool
	switch err := tx.QueryRowContext(ctx, `SELECT seq, span_count, compact FROM traces INDEXED BY traces_by_id WHERE trace_id = ? AND project = ?`, id, store.ProjectOf(ctx)).Scan(&seq, &count, &compact); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("get trace %s: %w", traceID, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	if compact {
		spans, err := s.compactTrace(ctx, tx, seq, traceID, true)
		if err != nil {
			return nil, fmt.Errorf("get trace %s: %w", traceID, err)
		}
		if len(spans) == 0 {
			return nil, fmt.Errorf("get trace %s: %w", traceID, store.ErrNotFound)
		}
		return spans, nil
	}
	spans, meta, err := readSpanRows(ctx, tx, seq, traceID, count)
	if err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("get trace %s: %w", traceID, store.ErrNotFound)
	}
	if err := s.readPayloads(ctx, tx, spans, meta); err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	if err := s.readResources(ctx, tx, spans, meta); err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	if err := s.readScopes(ctx, tx, spans, meta); err != nil {
		return nil, fmt.Errorf("get trace %s: %w", traceID, err)
	}
	// Start time, then span id: lower-case hex of equal-length ids orders
	// as the stored bytes do, which is what ORDER BY span_id compared.
	order := make([]int32, len(spans))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(meta[a].startNS, meta[b].startNS); c != 0 {
			return c
		}
		return strings.Compare(spans[a].SpanID, spans[b].SpanID)
	})
	permute(spans, order)
	if p := store.ProjectOf(ctx); p != "" {
		for i := range spans {
			spans[i].Project = p
		}
	}
	return spans, nil
}

// resolveSQL finds the trace ids in [lo, hi]: a range scan of the unique
// index on traces.trace_id (raw 16-byte ids compare as their hex does).
const resolveSQL = `SELECT trace_id FROM traces INDEXED BY traces_by_id WHERE trace_id BETWEEN ? AND ? AND project = ? ORDER BY trace_id LIMIT ?`

// ResolveTraceID returns the full id of the one trace whose id is or starts
// with idOrPrefix (see store.Reader).
func (s *Store) ResolveTraceID(ctx context.Context, idOrPrefix string) (string, error) {
	if err := s.usable(); err != nil {
		return "", err
	}
	return store.ResolveTraceIDWith(ctx, idOrPrefix, func(ctx context.Context, lo, hi string, limit int) ([]string, error) {
		loB, err := hex.DecodeString(lo)
		if err != nil {
			return nil, err
		}
		hiB, err := hex.DecodeString(hi)
		if err != nil {
			return nil, err
		}
		rows, err := s.reader.QueryContext(ctx, resolveSQL, loB, hiB, store.ProjectOf(ctx), limit)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var ids []string
		for rows.Next() {
			var id []byte
			if err := rows.Scan(&id); err != nil {
				return nil, err
			}
			if len(id) != 16 {
				return nil, fmt.Errorf("stored trace id %x has %d bytes", id, len(id))
			}
			ids = append(ids, hex.EncodeToString(id))
		}
		return ids, rows.Err()
	})
}

// permute reorders spans in place so that the new spans[i] is the old
// spans[order[i]], following each cycle of the permutation once (a sorted
// copy would allocate the whole trace a second time). order is consumed.
func permute(spans []store.Span, order []int32) {
	for i := range order {
		if order[i] < 0 {
			continue
		}
		tmp := spans[i]
		j := int32(i)
		for {
			k := order[j]
			order[j] = -1
			if k == int32(i) {
				spans[j] = tmp
				break
			}
			spans[j] = spans[k]
			j = k
		}
	}
}

// readSpanRows reads the typed columns of trace seq's spans, in no
// particular order. count, the trace summary's span count, sizes the
// result (a hint: growing a slice of 50,000 spans by appending copied
// ~40 MB).
func readSpanRows(ctx context.Context, tx *sql.Tx, seq int64, traceID string, count int64) ([]store.Span, []readRow, error) {
	rows, err := tx.QueryContext(ctx, selectSpansSQL, seq)
	if err != nil {
		return nil, nil, err
	}
	return scanSpanRows(rows, traceID, count)
}

// scanSpanRows scans rows of spanColumns (selectSpansSQL's list) and
// closes them; count sizes the result.
func scanSpanRows(rows *sql.Rows, traceID string, count int64) ([]store.Span, []readRow, error) {
	defer rows.Close()
	hint := int(min(max(count, 0), 1<<20))
	spans := make([]store.Span, 0, hint)
	meta := make([]readRow, 0, hint)
	// Scan targets live outside the loop, and rows are scanned straight into
	// the result: Scan's pointer arguments make whatever they point into
	// escape, which cost a heap copy of every store.Span.
	var spanID, parentID sql.RawBytes
	var endNS int64
	var cost sql.NullFloat64
	var resID, scopeID sql.NullInt64
	for rows.Next() {
		spans = append(spans, store.Span{TraceID: traceID})
		meta = append(meta, readRow{})
		sp, m := &spans[len(spans)-1], &meta[len(meta)-1]
		if err := rows.Scan(&spanID, &parentID, &sp.TraceState, &sp.Name, &sp.Kind, &m.startNS, &endNS,
			&sp.StatusCode, &sp.StatusMessage, &sp.ServiceName, &sp.ScopeName, &sp.ScopeVersion,
			&sp.Operation, &sp.Provider, &sp.RequestModel, &sp.ResponseModel, &sp.AgentName, &sp.ConversationID,
			&sp.ToolName, &sp.ToolCallID, &sp.HasUsage, &sp.InputTokens, &sp.OutputTokens,
			&sp.CacheReadTokens, &sp.CacheCreationTokens, &sp.ReasoningTokens, &cost,
			&resID, &m.block, &m.off, &m.length, &scopeID); err != nil {
			return nil, nil, err
		}
		sp.SpanID = hex.EncodeToString(spanID)
		if parentID != nil {
			sp.ParentSpanID = hex.EncodeToString(parentID)
		}
		sp.StartTime = time.Unix(0, m.startNS).UTC()
		sp.EndTime = time.Unix(0, endNS).UTC()
		if cost.Valid {
			c := cost.Float64
			sp.CostUSD = &c
		}
		if resID.Valid {
			if resID.Int64 == 0 {
				return nil, nil, fmt.Errorf("span %s: resource id 0", sp.SpanID)
			}
			m.resID = resID.Int64
		}
		if scopeID.Valid {
			if scopeID.Int64 == 0 {
				return nil, nil, fmt.Errorf("span %s: scope id 0", sp.SpanID)
			}
			m.scopeID = scopeID.Int64
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return spans, meta, nil
}

// parallelSpans is the trace size from which readPayloads decodes on two
// goroutines: below it, starting them costs more than it saves.
const parallelSpans = 2048

// decodeChunk is the most spans one decoding job covers. A batch's spans of
// one trace share one payload block however many they are (the write path
// only starts a block between traces), so a trace written in one batch is
// one block: jobs split blocks.
const decodeChunk = 512

// readPayloads decodes the payload of every span, reading and decompressing
// each payload block once. A block's strings are shared with the spans
// (substrings of the decompressed block, no copy) when they use at least
// half of it, as they do for a large trace; otherwise they are copied, so a
// 10-span trace does not keep 64 KB blocks of other traces alive.
//
// For a large trace, two goroutines decode the spans while this one reads
// and decompresses blocks: decoding is pure CPU on disjoint spans, and was
// a quarter of GetTrace for a 50,000-span trace with attributes.
func (s *Store) readPayloads(ctx context.Context, tx *sql.Tx, spans []store.Span, meta []readRow) error {
	byBlock := map[int64][]int32{}
	var ids []int64
	for i, m := range meta {
		if _, ok := byBlock[m.block]; !ok {
			ids = append(ids, m.block)
		}
		byBlock[m.block] = append(byBlock[m.block], int32(i))
	}
	type job struct {
		id      int64
		src     string
		share   bool
		members []int32
	}
	decode := func(d *payloadDecoder, j job) error {
		for _, i := range j.members {
			m := meta[i]
			d.reset(j.src[m.off:m.off+m.length], j.share)
			if err := d.decode(&spans[i]); err != nil {
				return fmt.Errorf("span %s: %w", spans[i].SpanID, err)
			}
		}
		return nil
	}
	var d payloadDecoder
	run := func(j job) error { return decode(&d, j) }
	finish := func() error { return nil }
	if len(spans) >= parallelSpans {
		jobs := make(chan job, 4)
		var wg sync.WaitGroup
		var errMu sync.Mutex
		var firstErr error
		// Each worker ranges over its own copy of the channel: finish sets
		// jobs to nil, and a worker that started late and read the shared
		// variable would range over a nil channel for ever (GetTrace then
		// hung in wg.Wait; it was also a data race).
		work := jobs
		for range 2 {
			wg.Go(func() {
				var d payloadDecoder
				for j := range work {
					if err := decode(&d, j); err != nil {
						errMu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						errMu.Unlock()
					}
				}
			})
		}
		// Whatever happens, the workers end before readPayloads returns.
		defer func() {
			if jobs != nil {
				close(jobs)
				wg.Wait()
			}
		}()
		run = func(j job) error {
			jobs <- j
			return nil
		}
		finish = func() error {
			close(jobs)
			jobs = nil
			wg.Wait()
			return firstErr
		}
	}
	consume := func(id int64, packed []byte) error {
		members := byBlock[id]
		delete(byBlock, id)
		b, err := s.codec.unpackOwned(packed)
		if err != nil {
			return fmt.Errorf("payload block %d: %w", id, err)
		}
		used := int64(0)
		for _, i := range members {
			m := meta[i]
			if m.off < 0 || m.length < 0 || m.off > int64(len(b)) || m.length > int64(len(b))-m.off {
				return fmt.Errorf("span %s: payload [%d,+%d) outside block %d of %d bytes", spans[i].SpanID, m.off, m.length, id, len(b))
			}
			used += m.length
		}
		// b is never written again: viewing it as a string lets decoded
		// strings be substrings of it.
		j := job{id: id, src: unsafe.String(unsafe.SliceData(b), len(b)), share: used*2 >= int64(len(b))}
		for len(members) > 0 {
			n := min(len(members), decodeChunk)
			j.members, members = members[:n], members[n:]
			if err := run(j); err != nil {
				return err
			}
		}
		return nil
	}
	for len(ids) > 0 {
		n := min(len(ids), blocksPerQuery)
		if err := s.queryBlobs(ctx, tx, "SELECT id, data FROM payload_blocks WHERE id IN ", ids[:n], consume); err != nil {
			return err
		}
		ids = ids[n:]
	}
	if err := finish(); err != nil {
		return err
	}
	for id, members := range byBlock {
		return fmt.Errorf("span %s: payload block %d: %w", spans[members[0]].SpanID, id, sql.ErrNoRows)
	}
	return nil
}

// queryBlobs runs query (ending in "IN ") for ids and calls fn with each
// row's id and blob. The blob is only valid during the call.
func (s *Store) queryBlobs(ctx context.Context, tx *sql.Tx, query string, ids []int64, fn func(id int64, blob []byte) error) error {
	var q strings.Builder
	q.WriteString(query)
	q.WriteByte('(')
	args := make([]any, len(ids))
	for i, id := range ids {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('?')
		args[i] = id
	}
	q.WriteByte(')')
	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var blob sql.RawBytes
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &blob); err != nil {
			return err
		}
		if err := fn(id, blob); err != nil {
			return err
		}
	}
	return rows.Err()
}

// readResources sets every span's resource attributes. Each distinct
// resource is read and decoded once; every span still gets its own copy of
// the map (callers may modify what they get).
func (s *Store) readResources(ctx context.Context, tx *sql.Tx, spans []store.Span, meta []readRow) error {
	decoded := map[int64]store.Attributes{}
	var ids []int64
	for _, m := range meta {
		if _, ok := decoded[m.resID]; m.resID != 0 && !ok {
			decoded[m.resID] = nil
			ids = append(ids, m.resID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	found := make(map[int64]bool, len(ids))
	var d payloadDecoder
	for len(ids) > 0 {
		n := min(len(ids), blocksPerQuery)
		err := s.queryBlobs(ctx, tx, "SELECT id, attrs FROM resources WHERE id IN ", ids[:n], func(id int64, packed []byte) error {
			b, err := s.codec.unpack(packed)
			if err != nil {
				return fmt.Errorf("resource %d: %w", id, err)
			}
			var a store.Attributes
			d.reset(string(b), false)
			if err := d.decodeAttributes(&a); err != nil {
				return fmt.Errorf("resource %d: %w", id, err)
			}
			decoded[id] = a
			found[id] = true
			return nil
		})
		if err != nil {
			return err
		}
		ids = ids[n:]
	}
	for id := range decoded {
		if !found[id] {
			return fmt.Errorf("resource %d: %w", id, sql.ErrNoRows)
		}
	}
	for i, m := range meta {
		if m.resID != 0 {
			spans[i].ResourceAttributes = cloneAttributes(decoded[m.resID])
		}
	}
	return nil
}

// readScopes sets every span's scope data (see migration 0002), reading
// and decoding each distinct scopes row once; every span gets its own copy
// of the attribute map, as with resources.
func (s *Store) readScopes(ctx context.Context, tx *sql.Tx, spans []store.Span, meta []readRow) error {
	decoded := map[int64]*scopeRec{}
	var ids []int64
	for _, m := range meta {
		if _, ok := decoded[m.scopeID]; m.scopeID != 0 && !ok {
			decoded[m.scopeID] = nil
			ids = append(ids, m.scopeID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var d payloadDecoder
	for len(ids) > 0 {
		n := min(len(ids), blocksPerQuery)
		err := s.queryBlobs(ctx, tx, "SELECT id, data FROM scopes WHERE id IN ", ids[:n], func(id int64, packed []byte) error {
			b, err := s.codec.unpack(packed)
			if err != nil {
				return fmt.Errorf("scope %d: %w", id, err)
			}
			r := new(scopeRec)
			d.reset(string(b), false)
			if err := d.decodeScope(r); err != nil {
				return fmt.Errorf("scope %d: %w", id, err)
			}
			decoded[id] = r
			return nil
		})
		if err != nil {
			return err
		}
		ids = ids[n:]
	}
	for id, r := range decoded {
		if r == nil {
			return fmt.Errorf("scope %d: %w", id, sql.ErrNoRows)
		}
	}
	for i, m := range meta {
		if m.scopeID != 0 {
			r := *decoded[m.scopeID]
			r.Attributes = cloneAttributes(r.Attributes)
			r.applyTo(&spans[i])
		}
	}
	return nil
}

// cloneAttributes deep-copies a decoded attribute map (whose values are
// strings, numbers, booleans, nil, []any and map[string]any).
func cloneAttributes(a store.Attributes) store.Attributes {
	if a == nil {
		return nil
	}
	return store.Attributes(cloneMap(a))
}

func cloneMap(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = cloneValue(v)
	}
	return c
}

func cloneValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		if t == nil {
			return t
		}
		return cloneMap(t)
	case []any:
		if t == nil {
			return t
		}
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = cloneValue(e)
		}
		return c
	default:
		return v
	}
}

// ListTraces returns one page of trace summaries matching q. It reads only
// the per-trace summary table, each row with its call groups (never its
// calls), by the index of its sort key or of a selective filter
// (planList); pagination is
// keyset-based on (sort key, trace id), so pages never overlap or skip a
// trace whose sort value does not change between the calls.
func (s *Store) ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error) {
	if err := s.usable(); err != nil {
		return store.TracePage{}, err
	}
	plan, err := s.planList(ctx, &q, store.ProjectOf(ctx))
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	defer plan.release()
	if err := s.searchReady(ctx, &q); err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	rows, err := s.reader.QueryContext(ctx, plan.sql, plan.args...)
	if err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	defer rows.Close()
	page := store.TracePage{Traces: []store.TraceSummary{}}
	type rawStrings struct {
		root, service, agents, models any
		groups                        string
	}
	var raw []rawStrings
	var last store.PagePosition
	more := false
	for rows.Next() {
		if len(page.Traces) == plan.Limit {
			more = true
			break
		}
		var ts store.TraceSummary
		var id []byte
		var labels, groups string
		var root, service, agents, models any
		var startNS, endNS, durNS, afterNS, sortValue int64
		if err := rows.Scan(&id, &root, &service, &agents, &models,
			&startNS, &endNS, &durNS, &ts.SpanCount, &ts.ErrorCount, &ts.ModelCalls, &ts.ToolCalls,
			&ts.InputTokens, &ts.OutputTokens, &ts.CacheReadTokens, &ts.CacheCreationTokens, &ts.ReasoningTokens,
			&afterNS, &ts.Fragments, &ts.FailedModelCalls, &labels, &groups,
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
		ts.AfterRoot = time.Duration(afterNS)
		if ts.ModelLabels, err = decodeList(labels); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: trace %s model labels: %w", ts.TraceID, err)
		}
		page.Traces = append(page.Traces, ts)
		raw = append(raw, rawStrings{root, service, agents, models, groups})
		last.SortValue = sortValue
		copy(last.TraceID[:], id)
	}
	if err := rows.Err(); err != nil {
		return store.TracePage{}, fmt.Errorf("list traces: %w", err)
	}
	// The strings are resolved once the rows are closed: a string not
	// cached is read through another connection of the pool, which
	// concurrent lists each holding one could otherwise exhaust.
	rows.Close()
	for i := range page.Traces {
		ts, r := &page.Traces[i], &raw[i]
		if ts.RootName, err = s.strs.text(ctx, s.reader, r.root); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: trace %s root name: %w", ts.TraceID, err)
		}
		if ts.ServiceName, err = s.strs.text(ctx, s.reader, r.service); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: trace %s service: %w", ts.TraceID, err)
		}
		if ts.AgentNames, err = s.strs.list(ctx, s.reader, r.agents); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: trace %s agent names: %w", ts.TraceID, err)
		}
		if ts.Models, err = s.strs.list(ctx, s.reader, r.models); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: trace %s models: %w", ts.TraceID, err)
		}
		if ts.Groups, err = decodeGroups(r.groups, ts.Models); err != nil {
			return store.TracePage{}, fmt.Errorf("list traces: trace %s call groups: %w", ts.TraceID, err)
		}
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
