package sqlite

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/loomwork/loomwork/store"
)

// Compact span blocks (migration 0009, issue 36). A trace below
// bigTraceSpans spans keeps no row per span: its spans live in
// span_blocks, each block the spans of several traces of one batch,
// stored column by column and compressed together (zstd) — ids as raw
// bytes, times as deltas, strings through the block's own dictionary,
// integers as varints, and the payload JSON of codec.go after them (less
// the attributes that repeat a typed field). A trace's blocks are listed
// in trace_blocks. The per-span rows, their indexes and the per-value
// search rows cost ~700 bytes a span (GenerateTraces data) where a block
// costs ~64; reading a small trace decompresses its block (~0.3 ms) and
// decodes its own spans.
//
// A block (before compression):
//
//	version byte (compactVersion)
//	segments: count, then per segment trace id (16 bytes), project
//	  (string), span count — the spans follow in segment order
//	time units of start deltas and durations (nanoseconds, uvarints)
//	resources, scopes: count, then 16-byte hashes (resources.hash,
//	  scopes.hash), which spans refer to by position + 1 (0: none)
//	dictionary: count, then strings
//	span ids (8 bytes each)
//	columns (uvarint length, bytes), each covering every span of the
//	  block in order: parents (0 none, 1 an id in the parent
//	  id column, k+2 the span id of the segment's k-th span); parent
//	  ids (8 bytes each, for the 1s); start times (zig-zag varint
//	  deltas from the previous span's, in the start unit); durations
//	  (zig-zag varints, in the duration unit);
//	  the string fields (dictionary positions); bits (1 has usage, 2
//	  has a cost); costs (float64 bits, for the 2s); the five token
//	  counts (zig-zag varints); resource and scope refs; payload lengths
//	payloads (appendPayload's JSON), concatenated
//
// A string is its uvarint length and bytes; a varint Go's
// binary.AppendVarint (zig-zag) or AppendUvarint.

// compactVersion is the first byte of a compact block's plain form.
const compactVersion = 1

// The string fields of a span, in column order.
const nStrCols = 16

func strFields(sp *store.Span) [nStrCols]*string {
	return [nStrCols]*string{&sp.TraceState, &sp.Name, &sp.Kind, &sp.StatusCode, &sp.StatusMessage, &sp.ServiceName,
		&sp.ScopeName, &sp.ScopeVersion, &sp.Operation, &sp.Provider, &sp.RequestModel, &sp.ResponseModel,
		&sp.AgentName, &sp.ConversationID, &sp.ToolName, &sp.ToolCallID}
}

const (
	bitUsage = 1
	bitCost  = 2
)

// compactSeg is a segment of a block being encoded: one trace's spans.
type compactSeg struct {
	traceID []byte
	project string
	rows    []*spanRow
}

// encodeCompact returns the plain (uncompressed) block of segs.
func encodeCompact(segs []compactSeg) []byte {
	n := 0
	for _, sg := range segs {
		n += len(sg.rows)
	}
	var head []byte
	head = append(head, compactVersion)
	head = binary.AppendUvarint(head, uint64(len(segs)))
	for _, sg := range segs {
		head = append(head, sg.traceID...)
		head = appendStr(head, sg.project)
		head = binary.AppendUvarint(head, uint64(len(sg.rows)))
	}
	resIdx := map[[16]byte]uint64{}
	scIdx := map[[16]byte]uint64{}
	var resList, scList [][16]byte
	dict := map[string]uint64{}
	var dictList []string
	ids := make([]byte, 0, 8*n)
	var parents, parentIDs, starts, durs, bits, costs, toks, refs, lens []byte
	startDeltas, durations := make([]int64, 0, n), make([]int64, 0, n)
	var strCols [nStrCols][]byte
	var payloads []byte
	prevStart := int64(0)
	for _, sg := range segs {
		local := make(map[[8]byte]int, len(sg.rows))
		for k, r := range sg.rows {
			var id [8]byte
			copy(id[:], r.spanID)
			if _, ok := local[id]; !ok {
				local[id] = k
			}
		}
		for _, r := range sg.rows {
			sp := r.span
			ids = append(ids, r.spanID...)
			switch {
			case r.parentID == nil:
				parents = append(parents, 0)
			default:
				var pid [8]byte
				copy(pid[:], r.parentID)
				if k, ok := local[pid]; ok {
					parents = binary.AppendUvarint(parents, uint64(k)+2)
				} else {
					parents = append(parents, 1)
					parentIDs = append(parentIDs, r.parentID...)
				}
			}
			startDeltas = append(startDeltas, r.startNS-prevStart)
			prevStart = r.startNS
			durations = append(durations, r.endNS-r.startNS)
			for c, f := range strFields(sp) {
				i, ok := dict[*f]
				if !ok {
					i = uint64(len(dictList))
					dict[*f] = i
					dictList = append(dictList, *f)
				}
				strCols[c] = binary.AppendUvarint(strCols[c], i)
			}
			var b byte
			if sp.HasUsage {
				b |= bitUsage
			}
			if c, ok := r.cost.(float64); ok {
				b |= bitCost
				costs = binary.LittleEndian.AppendUint64(costs, math.Float64bits(c))
			}
			bits = append(bits, b)
			for _, t := range [...]int64{sp.InputTokens, sp.OutputTokens, sp.CacheReadTokens, sp.CacheCreationTokens, sp.ReasoningTokens} {
				toks = binary.AppendVarint(toks, t)
			}
			ref := func(data []byte, h [16]byte, idx map[[16]byte]uint64, list *[][16]byte) uint64 {
				if data == nil {
					return 0
				}
				i, ok := idx[h]
				if !ok {
					i = uint64(len(*list))
					idx[h] = i
					*list = append(*list, h)
				}
				return i + 1
			}
			refs = binary.AppendUvarint(refs, ref(r.resAttrs, r.resHash, resIdx, &resList))
			refs = binary.AppendUvarint(refs, ref(r.scData, r.scHash, scIdx, &scList))
			p := r.payload
			lens = binary.AppendUvarint(lens, uint64(len(p)))
			payloads = append(payloads, p...)
		}
	}
	// Times in the block's units: many senders' clocks tick in
	// microseconds or milliseconds, and a varint of nanoseconds spends
	// 10 or 20 bits a value on zeros.
	startUnit, durUnit := timeUnit(startDeltas), timeUnit(durations)
	for _, d := range startDeltas {
		starts = binary.AppendVarint(starts, d/startUnit)
	}
	for _, d := range durations {
		durs = binary.AppendVarint(durs, d/durUnit)
	}
	out := head
	out = binary.AppendUvarint(out, uint64(startUnit))
	out = binary.AppendUvarint(out, uint64(durUnit))
	for _, l := range [][][16]byte{resList, scList} {
		out = binary.AppendUvarint(out, uint64(len(l)))
		for _, h := range l {
			out = append(out, h[:]...)
		}
	}
	out = binary.AppendUvarint(out, uint64(len(dictList)))
	for _, s := range dictList {
		out = appendStr(out, s)
	}
	out = append(out, ids...)
	for _, col := range [][]byte{parents, parentIDs, starts, durs} {
		out = appendBytes(out, col)
	}
	for _, col := range strCols {
		out = appendBytes(out, col)
	}
	for _, col := range [][]byte{bits, costs, toks, refs, lens} {
		out = appendBytes(out, col)
	}
	return append(out, payloads...)
}

// timeUnit is the greatest common divisor of vs (1 when all are 0), at
// most 1e9 (a second).
func timeUnit(vs []int64) int64 {
	g := uint64(0)
	for _, v := range vs {
		u := uint64(v)
		if v < 0 {
			u = -u
		}
		for u != 0 {
			g, u = u, g%u
		}
		if g == 1 {
			return 1
		}
	}
	if g == 0 || g > 1e9 {
		return 1
	}
	return int64(g)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// cspan is one span of a decoded compact block: its typed fields (span
// ids, times and the string fields set; TraceID not), where its payload
// is, and its resource and scope refs (hash positions + 1, 0: none).
type cspan struct {
	span             store.Span
	startNS, endNS   int64
	payOff, payLen   int
	resRef, scopeRef int
}

// nCols is the number of columns of a compact block.
const nCols = 4 + nStrCols + 5

// ccursor is a position in every column of a block: where a segment's
// spans start.
type ccursor struct {
	cols      [nCols]creader
	prevStart int64
}

// cseg is a decoded segment: one trace's spans in a block.
type cseg struct {
	traceID    [16]byte
	project    string
	start, end int // spans start..end-1 of the block
	at         ccursor
}

// cblock is a decoded compact block: its header and where each segment's
// spans are in the columns, which segSpans decodes. Its strings are
// substrings of the plain block unless the block was decoded to copy
// them.
type cblock struct {
	plain              string
	share              bool
	segs               []cseg
	resources          [][16]byte
	scopes             [][16]byte
	dict               []string
	ids                string
	startUnit, durUnit int64
	payBase            int
	payOffs            []int // span i's payload is payOffs[i]:payOffs[i+1] after payBase
}

var errShortBlock = errors.New("compact block truncated")

type creader struct {
	b   string
	pos int
	err error
}

func (r *creader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint([]byte(r.b[r.pos:min(len(r.b), r.pos+binary.MaxVarintLen64)]))
	if n <= 0 {
		r.err = errShortBlock
		return 0
	}
	r.pos += n
	return v
}

func (r *creader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint([]byte(r.b[r.pos:min(len(r.b), r.pos+binary.MaxVarintLen64)]))
	if n <= 0 {
		r.err = errShortBlock
		return 0
	}
	r.pos += n
	return v
}

func (r *creader) take(n uint64) string {
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)-r.pos) {
		r.err = errShortBlock
		return ""
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

func (r *creader) str() string { return r.take(r.uvarint()) }

// count reads a count that cannot exceed what the rest of the block could
// hold at min bytes an item (a corrupt count must not allocate wildly).
func (r *creader) count(min int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)-r.pos)/uint64(max(min, 1)) {
		r.err = errShortBlock
		return 0
	}
	return int(n)
}

// decodeCompact parses a plain compact block's header and checks every
// span's columns, noting where each segment starts (segSpans decodes a
// segment's spans: a reader wants one trace of the block, or a few).
// plain must not change afterwards: the result's strings share its
// memory unless share is false, when they are copied (a small trace read
// from a block of many must not keep the whole block alive).
func decodeCompact(plain []byte, share bool) (*cblock, error) {
	b := &cblock{plain: unsafe.String(unsafe.SliceData(plain), len(plain)), share: share}
	r := &creader{b: b.plain}
	if v := r.take(1); r.err != nil || v[0] != compactVersion {
		return nil, fmt.Errorf("compact block: unknown version")
	}
	nsegs := r.count(18)
	total := 0
	for range nsegs {
		var sg cseg
		copy(sg.traceID[:], r.take(16))
		sg.project = r.str()
		if !share {
			sg.project = strings.Clone(sg.project)
		}
		n := int(r.uvarint())
		sg.start, sg.end = total, total+n
		total += n
		b.segs = append(b.segs, sg)
	}
	if r.err == nil && total > len(r.b)/8 {
		r.err = errShortBlock
	}
	b.startUnit, b.durUnit = int64(r.uvarint()), int64(r.uvarint())
	if r.err == nil && (b.startUnit < 1 || b.startUnit > 1e9 || b.durUnit < 1 || b.durUnit > 1e9) {
		return nil, fmt.Errorf("compact block: time units %d, %d out of range", b.startUnit, b.durUnit)
	}
	for _, l := range []*[][16]byte{&b.resources, &b.scopes} {
		n := r.count(16)
		for range n {
			var h [16]byte
			copy(h[:], r.take(16))
			*l = append(*l, h)
		}
	}
	b.dict = make([]string, r.count(1))
	for i := range b.dict {
		b.dict[i] = r.str()
		if !share {
			b.dict[i] = strings.Clone(b.dict[i])
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("compact block header: %w", r.err)
	}
	b.ids = r.take(uint64(8 * total))
	var cur ccursor
	for i := range cur.cols {
		cur.cols[i] = creader{b: r.str()}
	}
	if r.err != nil {
		return nil, fmt.Errorf("compact block columns: %w", r.err)
	}
	b.payBase = r.pos
	b.payOffs = make([]int, total+1)
	for k := range b.segs {
		sg := &b.segs[k]
		sg.at = cur
		for i := sg.start; i < sg.end; i++ {
			n, err := b.span(&cur, sg, i, nil)
			if err != nil {
				return nil, err
			}
			b.payOffs[i+1] = b.payOffs[i] + n
		}
	}
	if b.payOffs[total] > len(b.plain)-b.payBase {
		return nil, fmt.Errorf("compact block: payloads run past the end (%d > %d)", b.payOffs[total], len(b.plain)-b.payBase)
	}
	return b, nil
}

// span reads span i (of segment sg) at cur, into c unless c is nil, and
// returns its payload's length.
func (b *cblock) span(cur *ccursor, sg *cseg, i int, c *cspan) (int, error) {
	cols := &cur.cols
	parents, parentIDs, starts, durs := &cols[0], &cols[1], &cols[2], &cols[3]
	strc := cols[4 : 4+nStrCols]
	bits, costs, toks, refs, lens := &cols[4+nStrCols], &cols[5+nStrCols], &cols[6+nStrCols], &cols[7+nStrCols], &cols[8+nStrCols]
	var sp *store.Span
	if c != nil {
		sp = &c.span
		sp.SpanID = hex.EncodeToString([]byte(b.ids[8*i : 8*i+8]))
	}
	switch p := parents.uvarint(); {
	case p == 0:
	case p == 1:
		id := parentIDs.take(8)
		if sp != nil {
			sp.ParentSpanID = hex.EncodeToString([]byte(id))
		}
	case p-2 < uint64(sg.end-sg.start):
		if sp != nil {
			k := sg.start + int(p-2)
			sp.ParentSpanID = hex.EncodeToString([]byte(b.ids[8*k : 8*k+8]))
		}
	default:
		return 0, fmt.Errorf("compact block: span %d: parent ref %d out of range", i, p)
	}
	startNS := cur.prevStart + starts.varint()*b.startUnit
	cur.prevStart = startNS
	endNS := startNS + durs.varint()*b.durUnit
	var fields [nStrCols]*string
	if sp != nil {
		c.startNS, c.endNS = startNS, endNS
		sp.StartTime, sp.EndTime = time.Unix(0, startNS).UTC(), time.Unix(0, endNS).UTC()
		fields = strFields(sp)
	}
	for k := range strc {
		d := strc[k].uvarint()
		if d >= uint64(len(b.dict)) {
			return 0, fmt.Errorf("compact block: span %d: string %d out of range", i, d)
		}
		if sp != nil {
			*fields[k] = b.dict[d]
		}
	}
	bt := bits.take(1)
	var cost []byte
	if bits.err == nil && bt[0]&bitCost != 0 {
		cost = []byte(costs.take(8))
	}
	var tok [5]int64
	for k := range tok {
		tok[k] = toks.varint()
	}
	res, scope := int(refs.uvarint()), int(refs.uvarint())
	if res < 0 || res > len(b.resources) || scope < 0 || scope > len(b.scopes) {
		return 0, fmt.Errorf("compact block: span %d: resource or scope ref out of range", i)
	}
	n := lens.uvarint()
	for k := range cols {
		if cols[k].err != nil {
			return 0, fmt.Errorf("compact block column %d: %w", k, cols[k].err)
		}
	}
	if n > uint64(len(b.plain)) {
		return 0, fmt.Errorf("compact block: span %d: payload of %d bytes", i, n)
	}
	if sp != nil {
		sp.HasUsage = bt[0]&bitUsage != 0
		if cost != nil {
			v := math.Float64frombits(binary.LittleEndian.Uint64(cost))
			sp.CostUSD = &v
		}
		sp.InputTokens, sp.OutputTokens, sp.CacheReadTokens, sp.CacheCreationTokens, sp.ReasoningTokens = tok[0], tok[1], tok[2], tok[3], tok[4]
		c.resRef, c.scopeRef = res, scope
		c.payOff, c.payLen = b.payOffs[i], int(n)
	}
	return int(n), nil
}

// segSpans decodes segment k's spans.
func (b *cblock) segSpans(k int) ([]cspan, error) {
	sg := &b.segs[k]
	cur := sg.at
	out := make([]cspan, sg.end-sg.start)
	for i := sg.start; i < sg.end; i++ {
		if _, err := b.span(&cur, sg, i, &out[i-sg.start]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// segIndex returns the position of the trace's segment, or -1.
func (b *cblock) segIndex(traceID []byte, project string) int {
	for i := range b.segs {
		if bytes.Equal(b.segs[i].traceID[:], traceID) && b.segs[i].project == project {
			return i
		}
	}
	return -1
}

// segPayloads is the payloads of a segment's spans, back to back.
func (b *cblock) segPayloads(sg *cseg) []byte {
	if sg.start == sg.end {
		return nil
	}
	from, to := b.payBase+b.payOffs[sg.start], b.payBase+b.payOffs[sg.end]
	return unsafe.Slice(unsafe.StringData(b.plain[from:]), to-from)
}

// payload is the payload JSON of a span of the block.
func (b *cblock) payload(c *cspan) string {
	return b.plain[b.payBase+c.payOff : b.payBase+c.payOff+c.payLen]
}

// storedSpan is a span read from compact blocks.
type storedSpan struct {
	span           store.Span
	startNS, endNS int64
	res, scope     *[16]byte // resources.hash, scopes.hash; nil: none
	payload        string    // appendPayload's JSON
}

// readCompact reads the spans of compact trace seq (id traceID of
// project) from its blocks, in no particular order: their typed fields,
// and with full their payloads, resource attributes and scope data too.
func (s *Store) readCompact(ctx context.Context, tx *sql.Tx, seq int64, traceID []byte, project string, full bool) ([]storedSpan, error) {
	rows, err := tx.QueryContext(ctx, `SELECT block_id FROM trace_blocks WHERE trace_seq = ?`, seq)
	if err != nil {
		return nil, fmt.Errorf("list span blocks: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list span blocks: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list span blocks: %w", err)
	}
	hexID := hex.EncodeToString(traceID)
	var out []storedSpan
	found := 0
	var d payloadDecoder
	consume := func(id int64, packed []byte) error {
		found++
		plain, err := s.codec.unpackOwned(packed)
		if err != nil {
			return fmt.Errorf("span block %d: %w", id, err)
		}
		b, err := decodeCompact(plain, false)
		if err != nil {
			return fmt.Errorf("span block %d: %w", id, err)
		}
		k := b.segIndex(traceID, project)
		if k < 0 {
			return fmt.Errorf("span block %d holds no spans of the trace", id)
		}
		cs, err := b.segSpans(k)
		if err != nil {
			return fmt.Errorf("span block %d: %w", id, err)
		}
		for i := range cs {
			c := &cs[i]
			st := storedSpan{span: c.span, startNS: c.startNS, endNS: c.endNS}
			st.span.TraceID = hexID
			if c.resRef > 0 {
				st.res = &b.resources[c.resRef-1]
			}
			if c.scopeRef > 0 {
				st.scope = &b.scopes[c.scopeRef-1]
			}
			if full {
				st.payload = strings.Clone(b.payload(c))
				d.reset(st.payload, true)
				if err := d.decode(&st.span); err != nil {
					return fmt.Errorf("span block %d: span %s: %w", id, st.span.SpanID, err)
				}
			}
			out = append(out, st)
		}
		return nil
	}
	for len(ids) > 0 {
		n := min(len(ids), blocksPerQuery)
		if err := s.queryBlobs(ctx, tx, "SELECT id, data FROM span_blocks WHERE id IN ", ids[:n], consume); err != nil {
			return nil, err
		}
		ids = ids[n:]
		if found < n {
			return nil, fmt.Errorf("span blocks of trace %s: %w", hexID, sql.ErrNoRows)
		}
		found = 0
	}
	if full {
		if err := s.readEnvelopes(ctx, tx, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readEnvelopes sets the resource attributes and scope data of spans read
// from compact blocks, each distinct row read and decoded once; every
// span gets its own copy of the maps (callers may modify what they get).
func (s *Store) readEnvelopes(ctx context.Context, tx *sql.Tx, spans []storedSpan) error {
	res := map[[16]byte]store.Attributes{}
	scopes := map[[16]byte]*scopeRec{}
	var d payloadDecoder
	for i := range spans {
		st := &spans[i]
		if st.res != nil {
			a, ok := res[*st.res]
			if !ok {
				var packed []byte
				if err := tx.QueryRowContext(ctx, `SELECT attrs FROM resources WHERE hash = ?`, st.res[:]).Scan(&packed); err != nil {
					return fmt.Errorf("resource %x: %w", st.res[:], err)
				}
				b, err := s.codec.unpack(packed)
				if err != nil {
					return fmt.Errorf("resource %x: %w", st.res[:], err)
				}
				d.reset(string(b), false)
				if err := d.decodeAttributes(&a); err != nil {
					return fmt.Errorf("resource %x: %w", st.res[:], err)
				}
				res[*st.res] = a
			}
			st.span.ResourceAttributes = cloneAttributes(a)
		}
		if st.scope != nil {
			r, ok := scopes[*st.scope]
			if !ok {
				var packed []byte
				if err := tx.QueryRowContext(ctx, `SELECT data FROM scopes WHERE hash = ?`, st.scope[:]).Scan(&packed); err != nil {
					return fmt.Errorf("scope %x: %w", st.scope[:], err)
				}
				b, err := s.codec.unpack(packed)
				if err != nil {
					return fmt.Errorf("scope %x: %w", st.scope[:], err)
				}
				r = new(scopeRec)
				d.reset(string(b), false)
				if err := d.decodeScope(r); err != nil {
					return fmt.Errorf("scope %x: %w", st.scope[:], err)
				}
				scopes[*st.scope] = r
			}
			c := *r
			c.Attributes = cloneAttributes(c.Attributes)
			c.applyTo(&st.span)
		}
	}
	return nil
}

// convertedRows reads the stored spans of compact trace g in full, as
// span rows to insert (g reached bigTraceSpans), resolving their resource
// and scope ids into resIDs and scopeIDs.
func (s *Store) convertedRows(ctx context.Context, tx *sql.Tx, g *traceGroup, resIDs, scopeIDs map[[16]byte]int64) ([]*spanRow, error) {
	stored, err := s.readCompact(ctx, tx, g.sm.seq, g.traceID, g.project, true)
	if err != nil {
		return nil, err
	}
	lookup := func(q string, h [16]byte, ids map[[16]byte]int64) error {
		if _, ok := ids[h]; ok {
			return nil
		}
		var id int64
		if err := tx.QueryRowContext(ctx, q, h[:]).Scan(&id); err != nil {
			return fmt.Errorf("look up %x: %w", h[:], err)
		}
		ids[h] = id
		return nil
	}
	out := make([]*spanRow, len(stored))
	for i := range stored {
		st := &stored[i]
		sp := &st.span
		sp.Project = g.project
		r := &spanRow{span: sp, traceID: g.traceID, startNS: st.startNS, endNS: st.endNS, payload: []byte(st.payload)}
		r.spanID, _ = hex.DecodeString(sp.SpanID)
		if sp.ParentSpanID != "" {
			r.parentID, _ = hex.DecodeString(sp.ParentSpanID)
		}
		if sp.CostUSD != nil && !math.IsNaN(*sp.CostUSD) {
			r.cost = *sp.CostUSD
		}
		if st.res != nil {
			r.resHash, r.resAttrs = *st.res, []byte{}
			if err := lookup(`SELECT id FROM resources WHERE hash = ?`, r.resHash, resIDs); err != nil {
				return nil, fmt.Errorf("resource: %w", err)
			}
		}
		if st.scope != nil {
			r.scHash, r.scData = *st.scope, []byte{}
			if err := lookup(`SELECT id FROM scopes WHERE hash = ?`, r.scHash, scopeIDs); err != nil {
				return nil, fmt.Errorf("scope: %w", err)
			}
		}
		out[i] = r
	}
	return out, nil
}

// compactTrace reads every span of compact trace seq (hex id traceID, of
// ctx's project), with full their payloads and envelopes too, in
// canonical order (start time, then span id).
func (s *Store) compactTrace(ctx context.Context, tx *sql.Tx, seq int64, traceID string, full bool) ([]store.Span, error) {
	id, err := decodeID(traceID, 16)
	if err != nil {
		return nil, err
	}
	project := store.ProjectOf(ctx)
	stored, err := s.readCompact(ctx, tx, seq, id, project, full)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(stored, func(a, b storedSpan) int {
		if c := cmp.Compare(a.startNS, b.startNS); c != 0 {
			return c
		}
		return strings.Compare(a.span.SpanID, b.span.SpanID)
	})
	spans := make([]store.Span, len(stored))
	for i := range stored {
		spans[i] = stored[i].span
		spans[i].Project = project
	}
	return spans, nil
}

// pageAfter returns up to n of spans (in canonical order) after the
// position (afterNS, afterID); afterID "" is the start.
func pageAfter(spans []store.Span, afterNS int64, afterID string, n int) []store.Span {
	i := 0
	if afterID != "" {
		i, _ = slices.BinarySearchFunc(spans, afterNS, func(sp store.Span, ns int64) int {
			return cmp.Compare(sp.StartTime.UnixNano(), ns)
		})
		for i < len(spans) && spans[i].StartTime.UnixNano() == afterNS && spans[i].SpanID <= afterID {
			i++
		}
	}
	out := spans[i:]
	if len(out) > n {
		out = out[:n]
	}
	return slices.Clone(out)
}

// compactNodes answers store.WindowReader.SpanNodes for a whole trace read
// from compact blocks (spans in canonical order).
func compactNodes(spans []store.Span, q store.NodeQuery, limit int) store.NodePage {
	afterNS, afterID, _ := store.DecodeSpanToken(q.PageToken)
	var ids map[string]bool
	if q.IDs != nil {
		ids = make(map[string]bool, len(q.IDs))
		for _, id := range q.IDs {
			ids[id] = true
		}
		limit = len(q.IDs)
	}
	text := store.FoldText(q.Text)
	children := map[string]int64{}
	for i := range spans {
		if p := spans[i].ParentSpanID; p != "" && p != spans[i].SpanID {
			children[p]++
		}
	}
	page := store.NodePage{Nodes: []store.SpanNode{}}
	var lastNS int64
	for _, sp := range pageAfter(spans, afterNS, afterID, len(spans)) {
		n := store.NodeOf(&sp)
		switch {
		case q.Parent != "":
			if sp.ParentSpanID != q.Parent || sp.SpanID == q.Parent {
				continue
			}
		case ids != nil:
			if !ids[sp.SpanID] {
				continue
			}
		default:
			if !n.MatchesText(text) {
				continue
			}
		}
		if len(page.Nodes) == limit {
			last := page.Nodes[limit-1]
			page.NextPageToken = store.EncodeSpanToken(lastNS, last.SpanID)
			break
		}
		n.Children = children[sp.SpanID]
		page.Nodes = append(page.Nodes, n)
		lastNS = sp.StartTime.UnixNano()
	}
	return page
}
