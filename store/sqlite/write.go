package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/store"
)

// spanRow is a span converted to column values, ready to insert.
type spanRow struct {
	span     *store.Span
	traceID  []byte
	spanID   []byte
	parentID []byte // nil for a root
	startNS  int64
	endNS    int64
	cost     any // nil or float64
	block    int // index of the span's payload block in the batch
	off, n   int // the span's payload within the decompressed block
	resHash  [16]byte
	resAttrs []byte // packed resource attributes; nil when the span has none
}

// WriteSpans stores spans in one transaction. It returns nil only after the
// transaction is committed and (with the default synchronous=full) fsynced.
// Spans already stored are skipped, and only newly stored spans update the
// per-trace summaries, so a retried batch changes nothing. A span with an
// invalid id or an unstorable time fails the whole batch before anything is
// written.
func (s *Store) WriteSpans(ctx context.Context, spans []store.Span) error {
	if s.isClosed() {
		return errClosed
	}
	if s.writer == nil {
		return errReadOnly
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write spans: %w", err)
	}
	if len(spans) == 0 {
		return nil
	}
	// Encoding and compression happen before taking the write lock, so
	// concurrent callers use both cores for it.
	rows, blocks, err := s.prepareRows(spans)
	if err != nil {
		return fmt.Errorf("write spans: %w", err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.isClosed() {
		return errClosed
	}
	if err := s.writeRows(ctx, rows, blocks); err != nil {
		// The transaction rolled back: resource rows it inserted are gone.
		clear(s.resourceIDs)
		return fmt.Errorf("write spans: %w", err)
	}
	return nil
}

// blockTarget is the raw size at which prepareRows starts a new payload
// block (between traces). Larger blocks compress a little better; smaller
// ones make GetTrace decompress less.
const blockTarget = 64 << 10

// prepareRows validates spans and converts them to rows, with their
// payloads in compressed blocks of about blockTarget bytes, each holding
// whole traces (of this batch) where possible.
func (s *Store) prepareRows(spans []store.Span) ([]spanRow, [][]byte, error) {
	rows := make([]spanRow, len(spans))
	// Resource maps are usually shared by every span of a batch: encode each
	// distinct map once.
	type resEnc struct {
		hash  [16]byte
		attrs []byte
	}
	seen := map[uintptr]resEnc{}
	for i := range spans {
		sp := &spans[i]
		r := &rows[i]
		r.span = sp
		var err error
		if r.traceID, err = decodeID(sp.TraceID, 16); err != nil {
			return nil, nil, fmt.Errorf("span %d (span_id %q): trace_id: %w", i, sp.SpanID, err)
		}
		if r.spanID, err = decodeID(sp.SpanID, 8); err != nil {
			return nil, nil, fmt.Errorf("span %d (trace_id %s): span_id: %w", i, sp.TraceID, err)
		}
		if sp.ParentSpanID != "" {
			if r.parentID, err = decodeID(sp.ParentSpanID, 8); err != nil {
				return nil, nil, fmt.Errorf("span %d (%s/%s): parent_span_id: %w", i, sp.TraceID, sp.SpanID, err)
			}
		}
		if r.startNS, err = unixNanos(sp.StartTime); err != nil {
			return nil, nil, fmt.Errorf("span %d (%s/%s): start_time: %w", i, sp.TraceID, sp.SpanID, err)
		}
		if r.endNS, err = unixNanos(sp.EndTime); err != nil {
			return nil, nil, fmt.Errorf("span %d (%s/%s): end_time: %w", i, sp.TraceID, sp.SpanID, err)
		}
		if sp.CostUSD != nil && !math.IsNaN(*sp.CostUSD) {
			r.cost = *sp.CostUSD
		}
		if sp.ResourceAttributes != nil {
			// Spans built from one OTLP resource share one map: key the
			// cache on the map's identity (all spans stay reachable for the
			// whole call, so an address cannot be reused). Different maps
			// with equal contents still end up as one row, by hash.
			key := reflect.ValueOf(sp.ResourceAttributes).Pointer()
			enc, ok := seen[key]
			if !ok {
				b, err := sp.ResourceAttributes.MarshalJSON()
				if err != nil {
					return nil, nil, fmt.Errorf("span %d (%s/%s): resource attributes: %w", i, sp.TraceID, sp.SpanID, err)
				}
				sum := sha256.Sum256(b)
				copy(enc.hash[:], sum[:16])
				enc.attrs = s.codec.pack(b)
				seen[key] = enc
			}
			r.resHash, r.resAttrs = enc.hash, enc.attrs
		}
	}

	// Payloads, in trace order so that a trace's spans share a block.
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return bytes.Compare(rows[order[a]].traceID, rows[order[b]].traceID) < 0 })
	var blocks [][]byte
	buf := make([]byte, 0, blockTarget+blockTarget/4)
	flush := func() {
		if len(buf) > 0 {
			blocks = append(blocks, s.codec.pack(buf))
			buf = buf[:0]
		}
	}
	for k, i := range order {
		r := &rows[i]
		if k > 0 && len(buf) >= blockTarget && !bytes.Equal(r.traceID, rows[order[k-1]].traceID) {
			flush()
		}
		r.block, r.off = len(blocks), len(buf)
		var err error
		if buf, err = appendPayload(buf, r.span); err != nil {
			return nil, nil, fmt.Errorf("span %d (%s/%s): %w", i, r.span.TraceID, r.span.SpanID, err)
		}
		r.n = len(buf) - r.off
	}
	flush()
	return rows, blocks, nil
}

// decodeID parses a lower-case hex id of n bytes, rejecting the all-zero id
// OTLP defines as invalid.
func decodeID(id string, n int) ([]byte, error) {
	if len(id) != 2*n {
		return nil, fmt.Errorf("%q is not %d lower-case hex digits", id, 2*n)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return nil, fmt.Errorf("%q is not %d lower-case hex digits (bad character at offset %d)", id, 2*n, i)
		}
	}
	b, _ := hex.DecodeString(id)
	allZero := true
	for _, x := range b {
		if x != 0 {
			allZero = false
			break
		}
	}
	if allZero {
		return nil, fmt.Errorf("%q: the all-zero id is invalid", id)
	}
	return b, nil
}

const insertSpanSQL = `INSERT OR IGNORE INTO spans (
	trace_seq, span_id, parent_span_id, trace_state, name, kind, start_ns, end_ns,
	status_code, status_message, service_name, scope_name, scope_version,
	operation, provider, request_model, response_model, agent_name, conversation_id,
	tool_name, tool_call_id, has_usage, input_tokens, output_tokens,
	cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd,
	resource_id, payload_block, payload_off, payload_len
) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

// traceGroup is the part of a batch that belongs to one trace.
type traceGroup struct {
	traceID  []byte
	sm       *summary
	inserted []*spanRow
}

func (s *Store) writeRows(ctx context.Context, rows []spanRow, blocks [][]byte) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // no-op after Commit

	// Block ids and new traces' sequence numbers are assigned here, under
	// the write lock of an immediate transaction (so also safe against
	// another process writing the file).
	var firstBlock, nextSeq int64
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT coalesce(max(id), 0) + 1 FROM payload_blocks), (SELECT coalesce(max(seq), 0) + 1 FROM traces)`).Scan(&firstBlock, &nextSeq); err != nil {
		return fmt.Errorf("allocate ids: %w", err)
	}
	blockUsed := make([]bool, len(blocks))

	resIDs, err := s.resolveResources(ctx, tx, rows)
	if err != nil {
		return err
	}

	sel, err := tx.PrepareContext(ctx, selectSummarySQL)
	if err != nil {
		return fmt.Errorf("prepare summary read: %w", err)
	}
	defer sel.Close()
	groups := map[string]*traceGroup{}
	var order []*traceGroup
	for i := range rows {
		k := string(rows[i].traceID)
		if _, ok := groups[k]; ok {
			continue
		}
		sm, err := loadSummary(ctx, sel, rows[i].traceID)
		if err != nil {
			return fmt.Errorf("read summary of trace %x: %w", rows[i].traceID, err)
		}
		if !sm.exists {
			sm.seq = nextSeq
			nextSeq++
		}
		g := &traceGroup{traceID: rows[i].traceID, sm: sm}
		groups[k] = g
		order = append(order, g)
	}

	stmt, err := tx.PrepareContext(ctx, insertSpanSQL)
	if err != nil {
		return fmt.Errorf("prepare span insert: %w", err)
	}
	defer stmt.Close()
	for i := range rows {
		r := &rows[i]
		sp := r.span
		g := groups[string(r.traceID)]
		var resID any
		if r.resAttrs != nil {
			resID = resIDs[r.resHash]
		}
		var parent any
		if r.parentID != nil {
			parent = r.parentID
		}
		res, err := stmt.ExecContext(ctx,
			g.sm.seq, r.spanID, parent, sp.TraceState, sp.Name, sp.Kind, r.startNS, r.endNS,
			sp.StatusCode, sp.StatusMessage, sp.ServiceName, sp.ScopeName, sp.ScopeVersion,
			sp.Operation, sp.Provider, sp.RequestModel, sp.ResponseModel, sp.AgentName, sp.ConversationID,
			sp.ToolName, sp.ToolCallID, sp.HasUsage, sp.InputTokens, sp.OutputTokens,
			sp.CacheReadTokens, sp.CacheCreationTokens, sp.ReasoningTokens, r.cost,
			resID, firstBlock+int64(r.block), r.off, r.n)
		if err != nil {
			return fmt.Errorf("insert span %s/%s: %w", sp.TraceID, sp.SpanID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("insert span %s/%s: %w", sp.TraceID, sp.SpanID, err)
		}
		if n == 1 {
			g.inserted = append(g.inserted, r)
			blockUsed[r.block] = true
		}
	}
	for i, data := range blocks {
		if !blockUsed[i] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO payload_blocks (id, data) VALUES (?, ?)`, firstBlock+int64(i), data); err != nil {
			return fmt.Errorf("insert payload block: %w", err)
		}
	}
	if err := s.updateSummaries(ctx, tx, order); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// resolveResources returns the row id of every distinct resource map in
// rows, inserting the ones not stored yet.
func (s *Store) resolveResources(ctx context.Context, tx *sql.Tx, rows []spanRow) (map[[16]byte]int64, error) {
	ids := map[[16]byte]int64{}
	for i := range rows {
		r := &rows[i]
		if r.resAttrs == nil {
			continue
		}
		if _, ok := ids[r.resHash]; ok {
			continue
		}
		if id, ok := s.resourceIDs[r.resHash]; ok {
			ids[r.resHash] = id
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO resources (hash, attrs) VALUES (?, ?)`, r.resHash[:], r.resAttrs); err != nil {
			return nil, fmt.Errorf("insert resource attributes: %w", err)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, `SELECT id FROM resources WHERE hash = ?`, r.resHash[:]).Scan(&id); err != nil {
			return nil, fmt.Errorf("look up resource attributes: %w", err)
		}
		ids[r.resHash] = id
	}
	// Remember them only once the transaction commits; on failure
	// WriteSpans clears the cache. Bound the cache: resources are few in
	// practice, but a sender could vary them per batch.
	if len(s.resourceIDs) > 4096 {
		clear(s.resourceIDs)
	}
	for h, id := range ids {
		s.resourceIDs[h] = id
	}
	return ids, nil
}

// summary is one row of the traces table, being merged with new spans.
type summary struct {
	exists bool
	seq    int64

	rootName, rootService string
	rootStart             sql.NullInt64
	rootSpanID            []byte
	firstService          string
	firstStart            int64
	firstSpanID           []byte

	agents, models, services map[string]struct{}
	names                    map[string]struct{} // lower-cased
	oldTags                  map[tagKey]struct{}

	start, end                                           int64
	spans, errors, modelCalls, toolCalls                 int64
	inTok, outTok, cacheReadTok, cacheCreateTok, reasTok int64
}

type tagKey struct {
	kind  int
	value string
}

const (
	tagService = 1
	tagAgent   = 2
	tagModel   = 3
)

// namesSep ends every name in traces.names_lower, so a Text filter matches
// within one name. A name's own U+001F is turned into a space (both when
// stored and in the query).
const namesSep = "\x1f"

func normName(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), namesSep, " ")
}

func (sm *summary) add(r *spanRow) {
	sp := r.span
	if r.parentID == nil {
		if !sm.rootStart.Valid || r.startNS < sm.rootStart.Int64 ||
			(r.startNS == sm.rootStart.Int64 && bytes.Compare(r.spanID, sm.rootSpanID) < 0) {
			sm.rootName, sm.rootService = sp.Name, sp.ServiceName
			sm.rootStart = sql.NullInt64{Int64: r.startNS, Valid: true}
			sm.rootSpanID = r.spanID
		}
	}
	if sm.firstSpanID == nil || r.startNS < sm.firstStart ||
		(r.startNS == sm.firstStart && bytes.Compare(r.spanID, sm.firstSpanID) < 0) {
		sm.firstService, sm.firstStart, sm.firstSpanID = sp.ServiceName, r.startNS, r.spanID
	}
	if sp.AgentName != "" {
		sm.agents[sp.AgentName] = struct{}{}
	}
	for _, m := range [2]string{sp.RequestModel, sp.ResponseModel} {
		if m != "" {
			sm.models[m] = struct{}{}
		}
	}
	if sp.ServiceName != "" {
		sm.services[sp.ServiceName] = struct{}{}
	}
	if sp.Name != "" {
		sm.names[normName(sp.Name)] = struct{}{}
	}
	if sm.spans == 0 {
		sm.start, sm.end = r.startNS, r.endNS
	} else {
		sm.start = min(sm.start, r.startNS)
		sm.end = max(sm.end, r.endNS)
	}
	sm.spans++
	if sp.IsError() {
		sm.errors++
	}
	if sp.Operation == "execute_tool" {
		sm.toolCalls++
	}
	if store.IsModelCallOperation(sp.Operation) {
		sm.modelCalls++
		sm.inTok += sp.InputTokens
		sm.outTok += sp.OutputTokens
		sm.cacheReadTok += sp.CacheReadTokens
		sm.cacheCreateTok += sp.CacheCreationTokens
		sm.reasTok += sp.ReasoningTokens
	}
}

const selectSummarySQL = `SELECT seq, root_name, root_service, root_start_ns, root_span_id,
	first_service, first_start_ns, first_span_id, agent_names, models, services, names_lower,
	start_ns, end_ns, span_count, error_count, model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens
	FROM traces WHERE trace_id = ?`

// summaryCols are written by both the insert and the update of a summary,
// after seq and trace_id.
const summaryCols = `service_name, root_name, root_service, root_start_ns, root_span_id,
	first_service, first_start_ns, first_span_id, agent_names, models, services, names_lower,
	start_ns, end_ns, duration_ns, span_count, error_count, model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, tokens_total`

var (
	insertSummarySQL = `INSERT INTO traces (seq, trace_id, ` + summaryCols + `)
	VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`
	updateSummarySQL = `UPDATE traces SET (` + summaryCols + `) =
	(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) WHERE seq = ?`
)

// updateSummaries folds each group's newly inserted spans into its trace's
// summary row and tag rows. Groups without new spans are left alone.
func (s *Store) updateSummaries(ctx context.Context, tx *sql.Tx, groups []*traceGroup) error {
	var ins, upd, tag *sql.Stmt
	prep := func(st **sql.Stmt, q string) error {
		if *st != nil {
			return nil
		}
		var err error
		*st, err = tx.PrepareContext(ctx, q)
		return err
	}
	defer func() {
		for _, st := range []*sql.Stmt{ins, upd, tag} {
			if st != nil {
				st.Close()
			}
		}
	}()
	for _, g := range groups {
		if len(g.inserted) == 0 {
			continue
		}
		sm := g.sm
		for _, r := range g.inserted {
			sm.add(r)
		}
		service := sm.firstService
		if sm.rootStart.Valid {
			service = sm.rootService
		}
		var rootSpan any
		if sm.rootSpanID != nil {
			rootSpan = sm.rootSpanID
		}
		var names strings.Builder
		for _, n := range sortedKeys(sm.names) {
			names.WriteString(n)
			names.WriteString(namesSep)
		}
		vals := []any{
			service, sm.rootName, sm.rootService, sm.rootStart, rootSpan,
			sm.firstService, sm.firstStart, sm.firstSpanID,
			jsonList(sm.agents), jsonList(sm.models), jsonList(sm.services), names.String(),
			sm.start, sm.end, sm.end - sm.start, sm.spans, sm.errors, sm.modelCalls, sm.toolCalls,
			sm.inTok, sm.outTok, sm.cacheReadTok, sm.cacheCreateTok, sm.reasTok, sm.inTok + sm.outTok,
		}
		var err error
		if sm.exists {
			if err = prep(&upd, updateSummarySQL); err == nil {
				_, err = upd.ExecContext(ctx, append(vals, sm.seq)...)
			}
		} else {
			if err = prep(&ins, insertSummarySQL); err == nil {
				_, err = ins.ExecContext(ctx, append([]any{sm.seq, g.traceID}, vals...)...)
			}
		}
		if err != nil {
			return fmt.Errorf("write summary of trace %x: %w", g.traceID, err)
		}
		for _, set := range []struct {
			kind int
			vals map[string]struct{}
		}{{tagService, sm.services}, {tagAgent, sm.agents}, {tagModel, sm.models}} {
			for v := range set.vals {
				if _, ok := sm.oldTags[tagKey{set.kind, v}]; ok {
					continue
				}
				if err := prep(&tag, `INSERT OR IGNORE INTO trace_tags (kind, value, seq) VALUES (?, ?, ?)`); err != nil {
					return fmt.Errorf("prepare tag write: %w", err)
				}
				if _, err := tag.ExecContext(ctx, set.kind, v, sm.seq); err != nil {
					return fmt.Errorf("write tags of trace %x: %w", g.traceID, err)
				}
			}
		}
	}
	return nil
}

func loadSummary(ctx context.Context, sel *sql.Stmt, traceID []byte) (*summary, error) {
	sm := &summary{
		agents: map[string]struct{}{}, models: map[string]struct{}{},
		services: map[string]struct{}{}, names: map[string]struct{}{},
		oldTags: map[tagKey]struct{}{},
	}
	var agents, models, services, names string
	err := sel.QueryRowContext(ctx, traceID).Scan(&sm.seq,
		&sm.rootName, &sm.rootService, &sm.rootStart, &sm.rootSpanID,
		&sm.firstService, &sm.firstStart, &sm.firstSpanID, &agents, &models, &services, &names,
		&sm.start, &sm.end, &sm.spans, &sm.errors, &sm.modelCalls, &sm.toolCalls,
		&sm.inTok, &sm.outTok, &sm.cacheReadTok, &sm.cacheCreateTok, &sm.reasTok)
	if err == sql.ErrNoRows {
		return sm, nil
	}
	if err != nil {
		return nil, err
	}
	sm.exists = true
	for _, l := range []struct {
		kind int
		src  string
		dst  map[string]struct{}
	}{{tagAgent, agents, sm.agents}, {tagModel, models, sm.models}, {tagService, services, sm.services}} {
		var vals []string
		if err := json.Unmarshal([]byte(l.src), &vals); err != nil {
			return nil, fmt.Errorf("decode stored list %q: %w", l.src, err)
		}
		for _, v := range vals {
			l.dst[v] = struct{}{}
			sm.oldTags[tagKey{l.kind, v}] = struct{}{}
		}
	}
	for _, n := range strings.Split(names, namesSep) {
		if n != "" {
			sm.names[n] = struct{}{}
		}
	}
	return sm, nil
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func jsonList(m map[string]struct{}) string {
	b, _ := json.Marshal(sortedKeys(m)) // []string always marshals
	return string(b)
}
