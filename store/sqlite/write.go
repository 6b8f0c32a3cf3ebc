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
	"time"

	"github.com/loomwork/loomwork/semconv"
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
	cost     any    // nil or float64
	payload  []byte // appendPayload's JSON
	block    int    // index of the span's compact block in the batch
	pblock   int    // a span row's payload block (index in payloadBlocks' result)
	off, n   int    // a span row's payload within its payload block
	resHash  [16]byte
	resAttrs []byte // packed resource attributes; nil when the span has none
	scHash   [16]byte
	scData   []byte // packed scopes row (scopeRec); nil when the span has none
}

// WriteSpans stores spans in one transaction. It returns nil only after the
// transaction is committed and (with the default synchronous=full) fsynced.
// Spans already stored are skipped, and only newly stored spans update the
// per-trace summaries, so a retried batch changes nothing. A span with an
// invalid id or an unstorable time fails the whole batch before anything is
// written.
func (s *Store) WriteSpans(ctx context.Context, spans []store.Span) error {
	if len(spans) == 0 {
		return s.checkWritable(ctx)
	}
	p, err := s.PrepareSpans(spans)
	if err != nil {
		return fmt.Errorf("write spans: %w", err)
	}
	return s.WritePrepared(ctx, p)
}

// PreparedSpans is a batch validated and encoded (payload JSON, compressed
// blocks) by PrepareSpans, ready for WritePrepared. It refers to the spans
// it was made from: they must not change until the write returns.
type PreparedSpans struct {
	rows   []spanRow
	blocks [][]byte
}

// PrepareSpans does the CPU-heavy part of a write (validation, payload
// encoding, compression) without the write lock, so that callers can run it
// concurrently, e.g. one per incoming request, while another batch's
// transaction holds the lock. It fails, naming the span, for the spans
// WriteSpans would reject.
func (s *Store) PrepareSpans(spans []store.Span) (*PreparedSpans, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	rows, blocks, err := s.prepareRows(spans)
	if err != nil {
		return nil, err
	}
	return &PreparedSpans{rows: rows, blocks: blocks}, nil
}

// WritePrepared stores the prepared batches in one transaction, with
// WriteSpans' guarantees (committed and fsynced before it returns nil;
// spans already stored, or repeated across the batches, are stored once).
func (s *Store) WritePrepared(ctx context.Context, batches ...*PreparedSpans) error {
	if err := s.checkWritable(ctx); err != nil {
		return err
	}
	var rows []spanRow
	var blocks [][]byte
	switch len(batches) {
	case 0:
		return nil
	case 1:
		rows, blocks = batches[0].rows, batches[0].blocks
	default:
		n := 0
		for _, b := range batches {
			n += len(b.rows)
		}
		rows = make([]spanRow, 0, n)
		for _, b := range batches {
			at := len(rows)
			rows = append(rows, b.rows...)
			for i := at; i < len(rows); i++ {
				rows[i].block += len(blocks)
			}
			blocks = append(blocks, b.blocks...)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.writeRows(ctx, rows, blocks); err != nil {
		// The transaction rolled back: resource and scope rows and search
		// keys it inserted are gone. (The builders it used were taken out
		// of their cache and are not put back.)
		clear(s.resourceIDs)
		clear(s.scopeIDs)
		clear(s.searchKeys)
		s.strs.clear()
		return fmt.Errorf("write spans: %w", err)
	}
	return nil
}

func (s *Store) checkWritable(ctx context.Context) error {
	if err := s.usable(); err != nil {
		return err
	}
	if s.writer == nil {
		return errReadOnly
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write spans: %w", err)
	}
	return nil
}

// blockTarget is the raw size at which prepareRows starts a new payload
// block (between traces). Larger blocks compress a little better; smaller
// ones make GetTrace decompress less.
const blockTarget = 64 << 10

// compactTarget is the plain size at which prepareRows starts a new
// compact block (between traces): about a 512-span batch. One block per
// batch compresses a tenth smaller than blocks of blockTarget, and each
// block's row wastes half an overflow page on average (measured: 112 vs
// 80 bytes a span); GetTrace of a small trace decompresses the whole
// block, ~0.3 ms.
const compactTarget = 1 << 20

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
	// Likewise the scope data: spans of one OTLP ScopeSpans share its
	// attribute map and the same strings and counts.
	type scopeKey struct {
		attrs             uintptr
		dropped, resDrop  uint32
		schemaURL, resURL string
	}
	seenScopes := map[scopeKey]resEnc{}
	for i := range spans {
		sp := &spans[i]
		r := &rows[i]
		r.span = sp
		// The one rule every store keeps (store.CheckStorable): what it
		// refuses, no store holds.
		if err := store.CheckStorable(sp); err != nil {
			return nil, nil, fmt.Errorf("span %d (trace_id %q, span_id %q): %w", i, sp.TraceID, sp.SpanID, err)
		}
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
		if hasScope(sp) {
			key := scopeKey{reflect.ValueOf(sp.ScopeAttributes).Pointer(), sp.ScopeDroppedAttributesCount,
				sp.ResourceDroppedAttributesCount, sp.ScopeSchemaURL, sp.ResourceSchemaURL}
			enc, ok := seenScopes[key]
			if !ok {
				b, err := appendScope(nil, sp)
				if err != nil {
					return nil, nil, fmt.Errorf("span %d (%s/%s): %w", i, sp.TraceID, sp.SpanID, err)
				}
				sum := sha256.Sum256(b)
				copy(enc.hash[:], sum[:16])
				enc.attrs = s.codec.pack(b)
				seenScopes[key] = enc
			}
			r.scHash, r.scData = enc.hash, enc.attrs
		}
	}

	// Compact blocks (compact.go), in trace order so that a trace's spans
	// share a block. Each row keeps its payload JSON too, for a block
	// re-encoded under the write lock or a trace kept in span rows.
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		if c := bytes.Compare(rows[order[a]].traceID, rows[order[b]].traceID); c != 0 {
			return c < 0
		}
		return rows[order[a]].span.Project < rows[order[b]].span.Project
	})
	var blocks [][]byte
	var segs []compactSeg
	raw := 0
	var arena []byte
	flush := func() {
		if len(segs) > 0 {
			blocks = append(blocks, s.codec.packDense(encodeCompact(segs)))
			segs, raw = nil, 0
		}
	}
	for k, i := range order {
		r := &rows[i]
		first := k == 0
		if !first {
			prev := &rows[order[k-1]]
			first = !bytes.Equal(r.traceID, prev.traceID) || r.span.Project != prev.span.Project
		}
		if first && raw >= compactTarget {
			flush()
		}
		if first {
			segs = append(segs, compactSeg{traceID: r.traceID, project: r.span.Project})
		}
		if cap(arena)-len(arena) < 4096 {
			arena = make([]byte, 0, 64<<10)
		}
		at := len(arena)
		var err error
		if arena, err = appendPayload(arena, r.span); err != nil {
			return nil, nil, fmt.Errorf("span %d (%s/%s): %w", i, r.span.TraceID, r.span.SpanID, err)
		}
		r.payload = arena[at:len(arena):len(arena)]
		r.block = len(blocks)
		segs[len(segs)-1].rows = append(segs[len(segs)-1].rows, r)
		raw += len(r.payload) + 64
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

// spanCols is the spans insert column list; writeRows appends a row's
// values in this order.
const spanCols = `trace_seq, span_id, parent_span_id, trace_state, name, kind, start_ns, end_ns,
	status_code, status_message, service_name, scope_name, scope_version,
	operation, provider, request_model, response_model, agent_name, conversation_id,
	tool_name, tool_call_id, has_usage, input_tokens, output_tokens,
	cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd,
	resource_id, payload_block, payload_off, payload_len, scope_id`

const spanColCount = 33

// traceGroup is the part of a batch that belongs to one trace.
type traceGroup struct {
	traceID  []byte
	project  string // store.Span.Project of its spans
	sm       *summary
	b        *store.SummaryBuilder // the trace's summary, stored spans added
	rows     []*spanRow            // in batch order
	inserted []*spanRow
	// compact: the trace's spans are in compact blocks (after this
	// write); converted holds its stored spans when this write moves it
	// from compact blocks to span rows (it reached bigTraceSpans).
	compact   bool
	converted []*spanRow
	// convs are the conversation ids of its stored spans (compact traces;
	// for span rows, search_terms has them).
	convs map[string]struct{}
	// newTags are the tags this write gives the trace.
	newTags []tagKey
}

func (s *Store) writeRows(ctx context.Context, rows []spanRow, blocks [][]byte) error {
	if err := s.prepareBulk(ctx); err != nil {
		return err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // no-op after Commit
	// Statements below run under a context that is never cancelled: for
	// every statement executed under a cancellable one, modernc starts a
	// watcher goroutine and installs a progress handler, a per-row cost.
	// Each statement is short; ctx still ends the transaction (database/sql
	// rolls it back when ctx is done, and later statements then fail).
	sctx := context.WithoutCancel(ctx)

	// Block ids and new traces' sequence numbers are assigned here, under
	// the write lock of an immediate transaction (so also safe against
	// another process writing the file).
	var firstPayload, firstBlock, nextSeq int64
	if err := tx.QueryRowContext(sctx, `SELECT (SELECT coalesce(max(id), 0) + 1 FROM payload_blocks),
		(SELECT coalesce(max(id), 0) + 1 FROM span_blocks), (SELECT coalesce(max(seq), 0) + 1 FROM traces)`).Scan(&firstPayload, &firstBlock, &nextSeq); err != nil {
		return fmt.Errorf("allocate ids: %w", err)
	}

	resIDs, err := s.resolveShared(sctx, tx, sharedResources, rows)
	if err != nil {
		return err
	}
	scopeIDs, err := s.resolveShared(sctx, tx, sharedScopes, rows)
	if err != nil {
		return err
	}

	groups := map[string]*traceGroup{}
	var order []*traceGroup
	for i := range rows {
		r := &rows[i]
		key := groupKey(r.span.Project, r.traceID)
		g, ok := groups[key]
		if !ok {
			g = &traceGroup{traceID: r.traceID, project: r.span.Project}
			groups[key] = g
			order = append(order, g)
		}
		g.rows = append(g.rows, r)
	}
	if err := s.loadSummaries(sctx, tx, order); err != nil {
		return err
	}

	// Decide which spans are new, so that the inserts need no per-row
	// answer and can carry many rows each: a trace without a summary row
	// has no stored spans (both are written in one transaction); for a
	// known trace, its stored span ids are read. A span repeated within the
	// batch is stored once, first copy wins. The span row insert has no OR
	// IGNORE: if this reasoning were ever wrong, the unique index fails the
	// whole transaction instead of letting a summary count a span twice.
	var existing *sql.Stmt
	defer func() {
		if existing != nil {
			existing.Close()
		}
	}()
	inBlock := make(map[*spanRow]bool) // rows stored in compact blocks
	var legacy []*spanRow              // rows stored as span rows
	for _, g := range order {
		if !g.sm.exists {
			g.sm.seq = nextSeq
			nextSeq++
			g.b = store.NewSummaryBuilder()
			g.convs = map[string]struct{}{}
		} else if g.b, g.convs = s.builders.take(g.sm.seq); g.b == nil || int64(g.b.Len()) != g.sm.spanCount {
			// Not cached (or stale): rebuild from the stored spans.
			var stored []store.Span
			g.convs = map[string]struct{}{}
			if g.sm.compact {
				cs, err := s.readCompact(sctx, tx, g.sm.seq, g.traceID, g.project, false)
				if err != nil {
					return fmt.Errorf("read stored spans of trace %x: %w", g.traceID, err)
				}
				stored = make([]store.Span, len(cs))
				for i := range cs {
					stored[i] = cs[i].span
					if c := cs[i].span.ConversationID; c != "" {
						g.convs[c] = struct{}{}
					}
				}
			} else {
				if existing == nil {
					if existing, err = tx.PrepareContext(sctx, `SELECT `+lightSpanCols+` FROM spans WHERE trace_seq = ?`); err != nil {
						return fmt.Errorf("prepare stored span lookup: %w", err)
					}
				}
				if stored, err = readLightSpans(sctx, existing, g.sm.seq, hex.EncodeToString(g.traceID)); err != nil {
					return fmt.Errorf("read stored spans of trace %x: %w", g.traceID, err)
				}
			}
			g.b = store.NewSummaryBuilder()
			g.b.Add(stored)
			g.b.AddLabels(sortedKeys(g.sm.labels)...)
		}
		seen := make(map[[8]byte]struct{}, len(g.rows))
		for _, r := range g.rows {
			var id [8]byte
			copy(id[:], r.spanID)
			if _, dup := seen[id]; dup || g.b.Has(r.span.SpanID) {
				continue
			}
			seen[id] = struct{}{}
			g.inserted = append(g.inserted, r)
		}
		if len(g.inserted) == 0 {
			continue
		}
		// A trace stays in compact blocks while it is below bigTraceSpans
		// (small traces are read whole); one that reaches it gets span
		// rows and their window indexes, its stored spans moved.
		big := g.b.Len()+len(g.inserted) >= s.compactBelow || s.writeV8
		switch {
		case !g.sm.exists:
			g.compact = !big
		case g.sm.compact && big:
			if g.converted, err = s.convertedRows(sctx, tx, g, resIDs, scopeIDs); err != nil {
				return fmt.Errorf("move trace %x to span rows: %w", g.traceID, err)
			}
			legacy = append(legacy, g.converted...)
		default:
			g.compact = g.sm.compact
		}
		if g.compact {
			for _, r := range g.inserted {
				inBlock[r] = true
			}
		} else {
			legacy = append(legacy, g.inserted...)
		}
	}

	// Span rows, with their payloads in blocks of their own.
	if len(legacy) > 0 {
		pblocks := s.payloadBlocks(legacy)
		ins := s.newBulkInsert(tx, spansHead, spanColCount)
		for _, r := range legacy {
			sp := r.span
			var resID any
			if r.resAttrs != nil {
				resID = resIDs[r.resHash]
			}
			var scopeID any
			if r.scData != nil {
				scopeID = scopeIDs[r.scHash]
			}
			var parent any
			if r.parentID != nil {
				parent = r.parentID
			}
			ins.args = append(ins.args,
				groups[groupKey(sp.Project, r.traceID)].sm.seq, r.spanID, parent, sp.TraceState, sp.Name, sp.Kind, r.startNS, r.endNS,
				sp.StatusCode, sp.StatusMessage, sp.ServiceName, sp.ScopeName, sp.ScopeVersion,
				sp.Operation, sp.Provider, sp.RequestModel, sp.ResponseModel, sp.AgentName, sp.ConversationID,
				sp.ToolName, sp.ToolCallID, sp.HasUsage, sp.InputTokens, sp.OutputTokens,
				sp.CacheReadTokens, sp.CacheCreationTokens, sp.ReasoningTokens, r.cost,
				resID, firstPayload+int64(r.pblock), r.off, r.n, scopeID)
			if err := ins.rowAdded(sctx); err != nil {
				return fmt.Errorf("insert spans: %w", err)
			}
		}
		if err := ins.flush(sctx); err != nil {
			return fmt.Errorf("insert spans: %w", err)
		}
		for i, data := range pblocks {
			if _, err := tx.ExecContext(sctx, `INSERT INTO payload_blocks (id, data) VALUES (?, ?)`, firstPayload+int64(i), data); err != nil {
				return fmt.Errorf("insert payload block: %w", err)
			}
		}
	}

	// Compact blocks: a prepared block is stored as it is when every span
	// in it is new and compact (the usual case), re-encoded with those
	// that are when only some are (a retried batch, a trace that went to
	// span rows), and not at all when none is.
	if err := s.writeCompactBlocks(sctx, tx, rows, blocks, inBlock, firstBlock, groups); err != nil {
		return err
	}
	for _, g := range order {
		if g.converted == nil {
			continue
		}
		if _, err := tx.ExecContext(sctx, `DELETE FROM trace_blocks WHERE trace_seq = ?`, g.sm.seq); err != nil {
			return fmt.Errorf("move trace %x to span rows: %w", g.traceID, err)
		}
		if _, err := tx.ExecContext(sctx, `UPDATE traces SET compact = 0 WHERE seq = ?`, g.sm.seq); err != nil {
			return fmt.Errorf("move trace %x to span rows: %w", g.traceID, err)
		}
	}
	if err := s.updateSummaries(sctx, tx, order); err != nil {
		return err
	}
	if err := s.indexSearch(sctx, tx, order); err != nil {
		return err
	}
	if err := s.updateSessions(sctx, tx, order); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("before commit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	// Only now do the builders match what is stored.
	for _, g := range order {
		for _, r := range g.inserted {
			if c := r.span.ConversationID; c != "" && g.convs != nil {
				g.convs[c] = struct{}{}
			}
		}
		s.builders.put(g.sm.seq, g.b, g.convs)
	}
	return nil
}

// payloadBlocks encodes the payloads of span rows into compressed blocks
// of about blockTarget bytes (between traces where possible), setting
// each row's pblock (index in the result), off and n.
func (s *Store) payloadBlocks(rows []*spanRow) [][]byte {
	var blocks [][]byte
	buf := make([]byte, 0, blockTarget+blockTarget/4)
	for k, r := range rows {
		if k > 0 && len(buf) >= blockTarget && !bytes.Equal(r.traceID, rows[k-1].traceID) {
			blocks = append(blocks, s.codec.pack(buf))
			buf = buf[:0]
		}
		r.pblock, r.off = len(blocks), len(buf)
		buf = append(buf, r.payload...)
		r.n = len(r.payload)
	}
	if len(buf) > 0 {
		blocks = append(blocks, s.codec.pack(buf))
	}
	return blocks
}

// writeCompactBlocks stores the compact blocks of the rows in inBlock and
// lists each in trace_blocks for its traces.
func (s *Store) writeCompactBlocks(ctx context.Context, tx *sql.Tx, rows []spanRow, blocks [][]byte, inBlock map[*spanRow]bool, firstBlock int64, groups map[string]*traceGroup) error {
	if len(inBlock) == 0 {
		return nil
	}
	total := make([]int, len(blocks))
	used := make([][]*spanRow, len(blocks))
	for i := range rows {
		r := &rows[i]
		total[r.block]++
		if inBlock[r] {
			used[r.block] = append(used[r.block], r)
		}
	}
	tb := s.newBulkInsert(tx, traceBlocksHead, 2)
	sb := s.newBulkInsert(tx, spanBlocksHead, 2)
	id := firstBlock
	for i, data := range blocks {
		rs := used[i]
		if len(rs) == 0 {
			continue
		}
		if len(rs) < total[i] {
			sort.SliceStable(rs, func(a, b int) bool {
				if c := bytes.Compare(rs[a].traceID, rs[b].traceID); c != 0 {
					return c < 0
				}
				return rs[a].span.Project < rs[b].span.Project
			})
			var segs []compactSeg
			for k, r := range rs {
				if k == 0 || !bytes.Equal(r.traceID, rs[k-1].traceID) || r.span.Project != rs[k-1].span.Project {
					segs = append(segs, compactSeg{traceID: r.traceID, project: r.span.Project})
				}
				segs[len(segs)-1].rows = append(segs[len(segs)-1].rows, r)
			}
			data = s.codec.packDense(encodeCompact(segs))
		}
		sb.args = append(sb.args, id, data)
		if err := sb.rowAdded(ctx); err != nil {
			return fmt.Errorf("insert span blocks: %w", err)
		}
		var last *traceGroup
		for _, r := range rs {
			g := groups[groupKey(r.span.Project, r.traceID)]
			if g == last {
				continue
			}
			last = g
			tb.args = append(tb.args, g.sm.seq, id)
			if err := tb.rowAdded(ctx); err != nil {
				return fmt.Errorf("list span blocks: %w", err)
			}
		}
		id++
	}
	if err := sb.flush(ctx); err != nil {
		return fmt.Errorf("insert span blocks: %w", err)
	}
	if err := tb.flush(ctx); err != nil {
		return fmt.Errorf("list span blocks: %w", err)
	}
	return nil
}

// readLightSpans reads the stored spans of trace seq (hex id traceID),
// their lightSpanCols.
func readLightSpans(ctx context.Context, q *sql.Stmt, seq int64, traceID string) ([]store.Span, error) {
	rs, err := q.QueryContext(ctx, seq)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var spans []store.Span
	for rs.Next() {
		sp, err := scanLightSpan(rs, traceID)
		if err != nil {
			return nil, err
		}
		spans = append(spans, sp)
	}
	return spans, rs.Err()
}

// bulkInsert runs an INSERT of many rows per statement: with modernc, a
// statement execution costs far more than binding one more row's values.
// Callers append a row's values to args, then call rowAdded. The prepared
// statements (for bulkChunks rows) are cached on the store, so a large
// INSERT is parsed once per store, not once per transaction.
type bulkInsert struct {
	s    *Store
	tx   *sql.Tx
	head string // "INSERT INTO t (cols) VALUES "
	cols int
	args []any
}

// bulkChunks are the row counts of the prepared statements, largest first:
// a full chunk is bulkChunks[0] rows, a remainder uses the smaller ones.
var bulkChunks = [...]int{64, 16, 4, 1}

type bulkKey struct {
	head string
	rows int
}

// The multi-row inserts writeRows uses, by head, with their column counts.
const (
	spansHead       = `INSERT INTO spans (` + spanCols + `) VALUES `
	traceBlocksHead = `INSERT OR IGNORE INTO trace_blocks (trace_seq, block_id) VALUES `
	spanBlocksHead  = `INSERT INTO span_blocks (id, data) VALUES `
	callsHead       = `INSERT INTO trace_calls (` + callCols + `) VALUES `
)

var bulkHeads = []struct {
	head string
	cols int
}{{spansHead, spanColCount}, {insertSummaryHead, summaryColCount}, {callsHead, callColCount}, {searchTermsHead, 3}, {traceBlocksHead, 2}, {spanBlocksHead, 2}}

// prepareBulk prepares the multi-row inserts once per store. It must run
// outside a transaction: the writer has a single connection, which an open
// transaction holds. Called under writeMu, which guards the cache.
func (s *Store) prepareBulk(ctx context.Context) error {
	if s.bulkStmts != nil {
		return nil
	}
	stmts := map[bulkKey]*sql.Stmt{}
	for _, h := range bulkHeads {
		for _, rows := range bulkChunks {
			st, err := s.writer.PrepareContext(ctx, bulkQuery(h.head, h.cols, rows))
			if err != nil {
				for _, st := range stmts {
					st.Close()
				}
				return fmt.Errorf("prepare %d-row insert: %w", rows, err)
			}
			stmts[bulkKey{h.head, rows}] = st
		}
	}
	s.bulkStmts = stmts
	return nil
}

func (s *Store) newBulkInsert(tx *sql.Tx, head string, cols int) *bulkInsert {
	return &bulkInsert{s: s, tx: tx, head: head, cols: cols, args: make([]any, 0, cols*bulkChunks[0])}
}

func bulkQuery(head string, cols, rows int) string {
	var q strings.Builder
	q.Grow(len(head) + rows*(2*cols+2))
	q.WriteString(head)
	for r := range rows {
		if r > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('(')
		for c := range cols {
			if c > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('?')
		}
		q.WriteByte(')')
	}
	return q.String()
}

// exec inserts the first rows rows of args.
func (b *bulkInsert) exec(ctx context.Context, rows int) error {
	st := b.s.bulkStmts[bulkKey{b.head, rows}]
	if st == nil {
		return fmt.Errorf("no prepared insert of %d rows for %q", rows, b.head)
	}
	n := rows * b.cols
	_, err := b.tx.StmtContext(ctx, st).ExecContext(ctx, b.args[:n]...)
	rest := copy(b.args, b.args[n:])
	clear(b.args[rest:]) // drop references to inserted values
	b.args = b.args[:rest]
	return err
}

func (b *bulkInsert) rowAdded(ctx context.Context) error {
	if len(b.args) < b.cols*bulkChunks[0] {
		return nil
	}
	return b.exec(ctx, bulkChunks[0])
}

// flush inserts the rows not inserted yet.
func (b *bulkInsert) flush(ctx context.Context) error {
	for _, rows := range bulkChunks {
		for len(b.args) >= rows*b.cols {
			if err := b.exec(ctx, rows); err != nil {
				return err
			}
		}
	}
	return nil
}

// sharedTable describes a table of values many spans share, stored once
// each and referred to by id: resource attributes and scope data.
type sharedTable struct {
	what   string // for errors
	insert string // INSERT OR IGNORE of (hash, data)
	lookup string // id by hash
	// row returns a span row's hash and packed data; data is nil when the
	// span has none.
	row   func(r *spanRow) ([16]byte, []byte)
	cache func(s *Store) map[[16]byte]int64
}

var (
	sharedResources = &sharedTable{
		what:   "resource attributes",
		insert: `INSERT OR IGNORE INTO resources (hash, attrs) VALUES (?, ?)`,
		lookup: `SELECT id FROM resources WHERE hash = ?`,
		row:    func(r *spanRow) ([16]byte, []byte) { return r.resHash, r.resAttrs },
		cache:  func(s *Store) map[[16]byte]int64 { return s.resourceIDs },
	}
	sharedScopes = &sharedTable{
		what:   "scope data",
		insert: `INSERT OR IGNORE INTO scopes (hash, data) VALUES (?, ?)`,
		lookup: `SELECT id FROM scopes WHERE hash = ?`,
		row:    func(r *spanRow) ([16]byte, []byte) { return r.scHash, r.scData },
		cache:  func(s *Store) map[[16]byte]int64 { return s.scopeIDs },
	}
)

// resolveShared returns the row id of every distinct value of table t in
// rows, inserting the ones not stored yet.
func (s *Store) resolveShared(ctx context.Context, tx *sql.Tx, t *sharedTable, rows []spanRow) (map[[16]byte]int64, error) {
	ids := map[[16]byte]int64{}
	cache := t.cache(s)
	for i := range rows {
		hash, data := t.row(&rows[i])
		if data == nil {
			continue
		}
		if _, ok := ids[hash]; ok {
			continue
		}
		if id, ok := cache[hash]; ok {
			ids[hash] = id
			continue
		}
		if _, err := tx.ExecContext(ctx, t.insert, hash[:], data); err != nil {
			return nil, fmt.Errorf("insert %s: %w", t.what, err)
		}
		var id int64
		if err := tx.QueryRowContext(ctx, t.lookup, hash[:]).Scan(&id); err != nil {
			return nil, fmt.Errorf("look up %s: %w", t.what, err)
		}
		ids[hash] = id
	}
	// Remember them only once the transaction commits; on failure
	// WriteSpans clears the cache. Bound the cache: resources and scopes
	// are few in practice, but a sender could vary them per batch.
	if len(cache) > 4096 {
		clear(cache)
	}
	for h, id := range ids {
		cache[h] = id
	}
	return ids, nil
}

// summary is one row of the traces table, being merged with new spans. Its
// figures are store.Summarize's over the trace's stored spans (read in
// writeRows) and the new ones; only the index columns below (the tag rows,
// names_lower) and the model labels, which no span column holds, are kept
// up by merging.
type summary struct {
	exists  bool
	seq     int64
	compact bool // its spans are in compact blocks

	spanCount int64 // as stored: a cached builder holding as many spans is current

	labels, services map[string]struct{}
	names            map[string]struct{} // lower-cased
	oldTags          map[tagKey]struct{}
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

// add merges a new span into the index columns.
func (sm *summary) add(sp *store.Span) {
	if sp.ServiceName != "" {
		sm.services[sp.ServiceName] = struct{}{}
	}
	if sp.Name != "" {
		sm.names[normName(sp.Name)] = struct{}{}
	}
	if l, ok := sp.Attributes.String(semconv.AttrModelLabel); ok && l != "" {
		sm.labels[l] = struct{}{}
	}
}

// lightSpanCols are the typed columns store.Summarize reads, in
// lightSpan's order.
const lightSpanCols = `span_id, parent_span_id, name, start_ns, end_ns, status_code, service_name,
	operation, request_model, response_model, agent_name, has_usage, input_tokens, output_tokens,
	cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd`

// scanLightSpan reads one row of lightSpanCols into a span of trace traceID
// (hex).
func scanLightSpan(rs *sql.Rows, traceID string) (store.Span, error) {
	var sp store.Span
	var id, parent []byte
	var startNS, endNS int64
	var cost sql.NullFloat64
	if err := rs.Scan(&id, &parent, &sp.Name, &startNS, &endNS, &sp.StatusCode, &sp.ServiceName,
		&sp.Operation, &sp.RequestModel, &sp.ResponseModel, &sp.AgentName, &sp.HasUsage,
		&sp.InputTokens, &sp.OutputTokens, &sp.CacheReadTokens, &sp.CacheCreationTokens, &sp.ReasoningTokens, &cost); err != nil {
		return sp, err
	}
	sp.TraceID, sp.SpanID = traceID, hex.EncodeToString(id)
	if parent != nil {
		sp.ParentSpanID = hex.EncodeToString(parent)
	}
	sp.StartTime, sp.EndTime = time.Unix(0, startNS).UTC(), time.Unix(0, endNS).UTC()
	if cost.Valid {
		c := cost.Float64
		sp.CostUSD = &c
	}
	return sp, nil
}

// lightSpan is what a new row stores of the fields Summarize reads, exactly
// as scanLightSpan will read them back (times at nanosecond precision in
// UTC, a NaN cost as none), so a trace's summary does not depend on which
// of its spans were in the batch that computed it.
func lightSpan(r *spanRow) store.Span {
	sp := r.span
	out := store.Span{
		TraceID: hex.EncodeToString(r.traceID), SpanID: sp.SpanID, ParentSpanID: sp.ParentSpanID, Name: sp.Name,
		StartTime: time.Unix(0, r.startNS).UTC(), EndTime: time.Unix(0, r.endNS).UTC(),
		StatusCode: sp.StatusCode, ServiceName: sp.ServiceName, Operation: sp.Operation,
		RequestModel: sp.RequestModel, ResponseModel: sp.ResponseModel, AgentName: sp.AgentName,
		HasUsage: sp.HasUsage, InputTokens: sp.InputTokens, OutputTokens: sp.OutputTokens,
		CacheReadTokens: sp.CacheReadTokens, CacheCreationTokens: sp.CacheCreationTokens, ReasoningTokens: sp.ReasoningTokens,
	}
	if c, ok := r.cost.(float64); ok {
		out.CostUSD = &c
	}
	if l, ok := sp.Attributes.String(semconv.AttrModelLabel); ok && l != "" {
		out.Attributes = store.Attributes{semconv.AttrModelLabel: l}
	}
	return out
}

// callCols are trace_calls' columns, in callValues' and scanCall's order.
const callCols = `trace_seq, start_ns, span_id, name, request_model, response_model, flags,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd`

const callColCount = 13

// Flags of a trace_calls row.
const (
	callFailed   = 1
	callHasUsage = 2
)

func callValues(seq int64, c *store.Call) []any {
	id, _ := hex.DecodeString(c.SpanID)
	flags := 0
	if c.Failed {
		flags |= callFailed
	}
	if c.HasUsage {
		flags |= callHasUsage
	}
	var cost any
	if c.CostUSD != nil {
		cost = *c.CostUSD
	}
	return []any{seq, c.Start.UnixNano(), id, c.Name, c.RequestModel, c.ResponseModel, flags,
		c.InputTokens, c.OutputTokens, c.CacheReadTokens, c.CacheCreationTokens, c.ReasoningTokens, cost}
}

// updateCalls applies a builder's deltas to trace_calls.
func (s *Store) updateCalls(ctx context.Context, tx *sql.Tx, seq int64, added, removed []store.Call) error {
	for _, c := range removed {
		id, _ := hex.DecodeString(c.SpanID)
		if _, err := tx.ExecContext(ctx, `DELETE FROM trace_calls WHERE trace_seq = ? AND start_ns = ? AND span_id = ?`, seq, c.Start.UnixNano(), id); err != nil {
			return err
		}
	}
	if len(added) == 0 {
		return nil
	}
	// A migration runs before the bulk inserts are prepared.
	bulk := s.bulkStmts != nil
	ins := s.newBulkInsert(tx, callsHead, callColCount)
	one := callsHead + "(" + strings.Repeat("?,", callColCount-1) + "?)"
	for _, c := range added {
		vals := callValues(seq, &c)
		if !bulk {
			if _, err := tx.ExecContext(ctx, one, vals...); err != nil {
				return err
			}
			continue
		}
		ins.args = append(ins.args, vals...)
		if err := ins.rowAdded(ctx); err != nil {
			return err
		}
	}
	return ins.flush(ctx)
}

// selectSummariesSQL reads summaries; loadSummaries appends the IN list.
const selectSummariesSQL = `SELECT trace_id, project, seq, span_count, model_labels, services, names_lower, agent_names, models, compact
	FROM traces WHERE trace_id IN `

// summaryColsV2 are the summary columns of schema versions 2 to 7 (what
// resummarize, the version 2 migration, writes); summaryCols, written by
// both the insert and the update of a summary after seq and trace_id, adds
// the call groups (version 8).
const (
	summaryColsV2 = `service_name, root_name, agent_names, models, services, names_lower,
	start_ns, end_ns, duration_ns, span_count, error_count, model_calls, tool_calls,
	input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, tokens_total,
	after_root_ns, fragments, failed_model_calls, model_labels`
	summaryCols = summaryColsV2 + `, call_groups`
)

var (
	insertSummaryHead = `INSERT INTO traces (seq, trace_id, project, compact, ` + summaryCols + `) VALUES `
	summaryColCount   = 28
	updateSummarySQL  = `UPDATE traces SET (` + summaryCols + `) =
	(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) WHERE seq = ?`
	updateSummaryV2SQL = `UPDATE traces SET (` + summaryColsV2 + `) =
	(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) WHERE seq = ?`
)

// summaryValues are a summary row's summaryCols values, the strings
// spelled out (version 8's form); names is names_lower's.
func summaryValues(sum *store.TraceSummary, services []string, names string) []any {
	return []any{
		sum.ServiceName, sum.RootName, jsonStrings(sum.AgentNames), jsonStrings(sum.Models), jsonStrings(services), names,
		sum.Start.UnixNano(), sum.End.UnixNano(), int64(sum.Duration), sum.SpanCount, sum.ErrorCount, sum.ModelCalls, sum.ToolCalls,
		sum.InputTokens, sum.OutputTokens, sum.CacheReadTokens, sum.CacheCreationTokens, sum.ReasoningTokens, sum.InputTokens + sum.OutputTokens,
		int64(sum.AfterRoot), sum.Fragments, sum.FailedModelCalls, jsonStrings(sum.ModelLabels), packGroups(sum.Groups, sum.Models),
	}
}

// updateSummaries recomputes the summary of every trace that got new spans,
// with store.Summarize over its stored spans and the new ones, and adds its
// new tag rows. Groups without new spans are left alone.
func (s *Store) updateSummaries(ctx context.Context, tx *sql.Tx, groups []*traceGroup) error {
	ins := s.newBulkInsert(tx, insertSummaryHead, summaryColCount)
	var upd *sql.Stmt
	defer func() {
		if upd != nil {
			upd.Close()
		}
	}()
	var err error
	for _, g := range groups {
		if len(g.inserted) == 0 {
			continue
		}
		sm := g.sm
		light := make([]store.Span, 0, len(g.inserted))
		for _, r := range g.inserted {
			sm.add(r.span)
			light = append(light, lightSpan(r))
		}
		added, removed := g.b.Add(light)
		// A trace in compact blocks keeps no rows of calls: TraceCalls
		// derives them from its spans. One moved to span rows gets all.
		if g.converted != nil {
			added, removed = g.b.Summary().Calls, nil
		}
		if !g.compact {
			if err := s.updateCalls(ctx, tx, sm.seq, added, removed); err != nil {
				return fmt.Errorf("write billed calls of trace %x: %w", g.traceID, err)
			}
		}
		sum := g.b.Figures()
		vals := summaryValues(&sum, sortedKeys(sm.services), namesText(sortedKeys(sm.names)))
		if !s.writeV8 {
			// The strings as ids (names.go), in summaryCols' order.
			for i, l := range [][]string{{sum.ServiceName}, {sum.RootName}, sum.AgentNames, sum.Models, sortedKeys(sm.services)} {
				if vals[i], err = s.strs.encode(ctx, tx, l); err != nil {
					return fmt.Errorf("write summary of trace %x: %w", g.traceID, err)
				}
			}
			if vals[5], err = s.strs.namesValue(ctx, tx, sortedKeys(sm.names)); err != nil {
				return fmt.Errorf("write summary of trace %x: %w", g.traceID, err)
			}
		}
		if sm.exists {
			if upd == nil {
				upd, err = tx.PrepareContext(ctx, updateSummarySQL)
			}
			if err == nil {
				_, err = upd.ExecContext(ctx, append(vals, sm.seq)...)
			}
			if err != nil {
				return fmt.Errorf("write summary of trace %x: %w", g.traceID, err)
			}
		} else {
			ins.args = append(append(ins.args, sm.seq, g.traceID, g.project, g.compact), vals...)
			if err := ins.rowAdded(ctx); err != nil {
				return fmt.Errorf("write trace summaries: %w", err)
			}
		}
		// The tags (service, agent, model) new to the trace go to the
		// search blooms (indexSearch).
		for _, set := range []struct {
			kind int
			vals []string
		}{{tagService, sortedKeys(sm.services)}, {tagAgent, sum.AgentNames}, {tagModel, sum.Models}} {
			for _, v := range set.vals {
				if _, ok := sm.oldTags[tagKey{set.kind, v}]; !ok {
					g.newTags = append(g.newTags, tagKey{set.kind, v})
				}
			}
		}
	}
	if err := ins.flush(ctx); err != nil {
		return fmt.Errorf("write trace summaries: %w", err)
	}
	return nil
}

func newSummary() *summary {
	return &summary{
		labels: map[string]struct{}{}, services: map[string]struct{}{}, names: map[string]struct{}{},
		oldTags: map[tagKey]struct{}{},
	}
}

// loadSummaries sets every group's summary: the stored one, or a fresh one
// for a trace not stored yet. Many traces are read per query.
func (s *Store) loadSummaries(ctx context.Context, tx *sql.Tx, groups []*traceGroup) error {
	const chunk = 256
	byID := make(map[string]*traceGroup, len(groups))
	args := make([]any, 0, chunk)
	for i := 0; i < len(groups); i += chunk {
		part := groups[i:min(i+chunk, len(groups))]
		args = args[:0]
		var q strings.Builder
		q.WriteString(selectSummariesSQL)
		q.WriteByte('(')
		for k, g := range part {
			if k > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('?')
			args = append(args, g.traceID)
			byID[groupKey(g.project, g.traceID)] = g
		}
		q.WriteByte(')')
		if err := s.scanSummaries(ctx, tx, q.String(), args, byID); err != nil {
			return fmt.Errorf("read trace summaries: %w", err)
		}
	}
	for _, g := range groups {
		if g.sm == nil {
			g.sm = newSummary()
		}
	}
	return nil
}

func (s *Store) scanSummaries(ctx context.Context, tx *sql.Tx, q string, args []any, byID map[string]*traceGroup) error {
	type row struct {
		g                               *traceGroup
		sm                              *summary
		labels                          string
		services, names, agents, models any
	}
	var found []row
	rs, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	for rs.Next() {
		r := row{sm: newSummary()}
		var traceID []byte
		var project string
		if err := rs.Scan(&traceID, &project, &r.sm.seq, &r.sm.spanCount, &r.labels, &r.services, &r.names, &r.agents, &r.models, &r.sm.compact); err != nil {
			rs.Close()
			return err
		}
		var ok bool
		if r.g, ok = byID[groupKey(project, traceID)]; ok { // else the same trace id in another project
			found = append(found, r)
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return err
	}
	// The strings are resolved once the rows are read (through the same
	// transaction's connection).
	for _, r := range found {
		sm := r.sm
		sm.exists = true
		for _, l := range []struct {
			kind int
			src  any
			dst  map[string]struct{}
		}{{0, r.labels, sm.labels}, {tagService, r.services, sm.services}, {tagAgent, r.agents, nil}, {tagModel, r.models, nil}} {
			vals, err := s.strs.list(ctx, tx, l.src)
			if err != nil {
				return fmt.Errorf("trace %x: decode stored list: %w", r.g.traceID, err)
			}
			for _, v := range vals {
				if l.dst != nil {
					l.dst[v] = struct{}{}
				}
				if l.kind != 0 {
					sm.oldTags[tagKey{l.kind, v}] = struct{}{}
				}
			}
		}
		if err := s.strs.readNames(ctx, tx, r.names, sm.names); err != nil {
			return fmt.Errorf("trace %x: names: %w", r.g.traceID, err)
		}
		r.g.sm = sm
	}
	return nil
}

func sortedKeys(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// jsonStrings is a stored JSON list: "[]" for none.
func jsonStrings(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l) // []string always marshals
	return string(b)
}

// groupKey identifies a trace within a batch: its project and its id.
func groupKey(project string, traceID []byte) string {
	return project + "\x00" + string(traceID)
}
