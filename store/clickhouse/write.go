package clickhouse

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"
	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/column"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// spanColumns is the insert column list; spanBatch appends in this order.
const spanColumns = `trace_id, span_id, parent_span_id, trace_state, name, kind, start, end,
	status_code, status_message, service_name, scope_name, scope_version,
	operation, provider, request_model, response_model, agent_name, conversation_id,
	tool_name, tool_call_id, model_call, has_usage, input_tokens, output_tokens,
	cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd,
	retrieved_docs, cited_docs, attributes, resource_attributes, events, links, ` + envelopeColumns + `,
	` + typedAttrsColumns + `, ` + projectColumns

// envelopeColumns are the columns migration 0004 added, last in spanColumns
// and in spanBatch.columns (so that tests can still write the older schema
// with the columns before them).
const envelopeColumns = `flags, dropped_attributes_count, dropped_events_count, dropped_links_count,
	scope_attributes, scope_dropped_attributes_count, scope_schema_url,
	resource_schema_url, resource_dropped_attributes_count`

// typedAttrsColumns are the columns migration 0005 added, after the
// envelope columns (typedattrs.go).
const typedAttrsColumns = `attributes_in_columns`

// projectColumns are the columns migration 0006 added, last in spanColumns.
const projectColumns = `project, expire_at`

// keysColumn follows spanColumns in an insert that gives the attribute
// keys itself (migration 13: ClickHouse computes them only for an insert
// that does not).
const keysColumn = `attr_keys`

// versionClientKeys is the schema version from which an insert may give
// attr_keys (it was MATERIALIZED before).
const versionClientKeys = 13

// Storable time range: DateTime64(9) holds 1900-01-01 to 2262-04-11.
var (
	minTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC)
)

// spanBatch holds an insert column by column: the driver appends whole
// columns far faster than row by row.
type spanBatch struct {
	traceID, spanID, parentID, traceState, name, kind       []string
	start, end                                              []time.Time
	statusCode, statusMessage, service, scope, scopeVer     []string
	operation, provider, reqModel, respModel, agent, convID []string
	toolName, toolCallID                                    []string
	modelCall, hasUsage                                     []bool
	input, output, cacheRead, cacheCreation, reasoning      []int64
	cost                                                    []*float64
	retrieved, cited                                        [][]string
	attrs, resource, events, links                          []string
	flags, droppedAttrs, droppedEvents, droppedLinks        []uint32
	scopeAttrs, scopeSchema, resSchema                      []string
	scopeDropped, resDropped                                []uint32
	attrsInColumns                                          []uint32
	project                                                 []string
	expireAt                                                []time.Time
	// attrKeys is attr_keys, sent when withKeys (see writeItems).
	attrKeys [][]string
	withKeys bool

	// traces is the insert's trace_index rows.
	traces traceRows

	// attrBuf holds the insert's attribute JSON with the attributes typed
	// columns hold left out (typedattrs.go), which attrs point into; it is
	// sized before the first span goes in and never grows during a fill.
	// scratch is elideTypedAttrs' memory. wholeAttrs (tests writing an
	// older schema) keeps the JSON whole.
	attrBuf, scratch []byte
	wholeAttrs       bool

	// sizer presizes the driver's columns (presizeColumns).
	sizer *sizer
}

// PreparedSpans is a batch checked and encoded for ClickHouse by
// PrepareSpans: the CPU-heavy half of a write, done without holding up other
// writes. WritePrepared consumes it.
type PreparedSpans struct {
	spans []store.Span
	// arena holds the attribute and resource JSON of every span; attrAt
	// and resAt locate each span's documents in it.
	arena []byte
	// buf is the batch's own memory that arena (after encode) or the copy
	// of a spooled record (after decodeSpooled) lives in, kept when the
	// batch is recycled: a fresh buffer of a megabyte per request costs
	// more in zeroing and page faults than the copy into it.
	buf []byte
	// ownSpans and docs back the spans and document ids decodeSpooled
	// reads, kept across reuse like buf (encode's spans are the
	// caller's).
	ownSpans               []store.Span
	docs                   []string
	attrAt, resAt, scopeAt []jsonSpan
	eventAt, linkAt        []jsonSpan
	// events and links are each span's events and links JSON: cut from
	// arena by encode, from the spooled record by decodeSpooled.
	events, links     []string
	resources, scopes map[uintptr]jsonSpan
	traces            traceRows
	// digest identifies the batch by its spans (batchDigest); spooled
	// with it, so an insert's deduplication token needs no decoding.
	digest [32]byte
	// elided: the attribute JSON in arena leaves out what typed columns
	// hold, and attrMask says what (attributes_in_columns). Batches
	// encode makes are; those read from spool records written before
	// format 3 hold the whole JSON, and fill leaves attributes out then.
	elided   bool
	attrMask []uint32
	// keys holds the keys of every span's attribute JSON, keyAt locates
	// each span's; labels is each span's model label (summaries.go).
	// Batches encode makes have them (hasKeys), and so do those read
	// from spool records of format 4; older ones do not, and then
	// ClickHouse computes attr_keys and the label is read from the JSON.
	keys    []string
	keyAt   []jsonSpan
	labels  []string
	hasKeys bool
	// dict and dictIdx are appendSpooled's and decodeSpooled's key
	// dictionary (spool format 4), keyIdx each key's index in it.
	dict    []string
	dictIdx map[string]uint64
	keyIdx  []uint64
}

// jsonSpan locates one JSON document in PreparedSpans.arena.
type jsonSpan struct{ from, to int }

// presizeColumns gives the driver's columns their final size in one
// allocation each before the real values go in. The driver appends value
// by value, and past small sizes a Go slice grows by 1.25×, so a column of
// N bytes otherwise allocates about 5N and copies about 4N: measured, the
// largest client cost of a write (attribute JSON is ~0.5 KB a span; the
// 16-byte position of every value of every String column was, before
// they were presized too, three quarters of the driver's allocations).
//
// The only public way in is the column's Decode, and z feeds it (sizer):
// ch-go's DecodeColumn allocates a column's rows before it reads the first
// one, and a String column's byte buffer for the first value's length
// when that is long, then fails at the first read it cannot make. The
// error is ignored and the column reset, which keeps the capacity: it is
// empty again before the real append, whatever happened.
func presizeColumns(cols []column.Interface, data []any, rows int, z *sizer) {
	if rows < 256 {
		return
	}
	for i, c := range cols {
		if i >= len(data) {
			break
		}
		switch col := c.(type) {
		case *column.String:
			total := 0
			if vals, ok := data[i].([]string); ok && len(vals) > 0 {
				for _, v := range vals {
					total += len(v)
				}
				if rows > len(vals) {
					// data is the first part of a longer insert
					// (writeItems): the rest is assumed alike, with a
					// little to spare.
					total = int(float64(total) * float64(rows) / float64(len(vals)) * 1.05)
				}
			}
			if col.Rows() == 0 {
				z.decode(col, rows, total)
				col.Reset()
			}
		case *column.Int64, *column.UInt32, *column.DateTime64, *column.Bool:
			if col.Rows() == 0 {
				z.decode(col.(decodingColumn), rows, 0)
				col.(interface{ Reset() }).Reset()
			}
		}
	}
}

// decodingColumn is a driver column that reads itself from the wire.
type decodingColumn interface {
	Decode(*proto.Reader, int) error
}

// sizer is the source presizeColumns has columns decode from: the first
// value's length and then nothing. A String column told its first value
// is the whole column's bytes long allocates that at once, without the
// copy of a filler value of that size that sized it before (3% of serve's
// CPU at ingest: BenchmarkIngest's profile); any other column allocates
// its rows and fails at the first read. It replaced a source of endless
// zero bytes, which made the driver read a length for every row of every
// String column: 5–7% of serve's CPU for a capacity that the allocation
// alone provides.
type sizer struct {
	pending []byte // what Read gives next
	r       *proto.Reader
	lenBuf  [binary.MaxVarintLen64]byte
}

func newSizer() *sizer {
	z := &sizer{}
	z.r = proto.NewReader(z)
	return z
}

func (z *sizer) Read(p []byte) (int, error) {
	if len(z.pending) == 0 {
		return 0, io.EOF
	}
	n := copy(p, z.pending)
	z.pending = z.pending[n:]
	return n, nil
}

// decode has c decode rows values, the first of them bytes long, from a
// source that ends after that length (small lengths are not given: the
// driver would allocate length × rows for them).
func (z *sizer) decode(c decodingColumn, rows, bytes int) {
	z.pending = nil
	if bytes >= 4096 {
		z.pending = binary.AppendUvarint(z.lenBuf[:0], uint64(bytes))
	}
	// Only an optimisation: the error is the end of the source.
	_ = c.Decode(z.r, rows)
	z.pending = nil
}

func (b *spanBatch) columns() []any {
	cols := []any{
		b.traceID, b.spanID, b.parentID, b.traceState, b.name, b.kind, b.start, b.end,
		b.statusCode, b.statusMessage, b.service, b.scope, b.scopeVer,
		b.operation, b.provider, b.reqModel, b.respModel, b.agent, b.convID,
		b.toolName, b.toolCallID, b.modelCall, b.hasUsage, b.input, b.output,
		b.cacheRead, b.cacheCreation, b.reasoning, b.cost,
		b.retrieved, b.cited, b.attrs, b.resource, b.events, b.links,
		b.flags, b.droppedAttrs, b.droppedEvents, b.droppedLinks,
		b.scopeAttrs, b.scopeDropped, b.scopeSchema,
		b.resSchema, b.resDropped,
		b.attrsInColumns,
		b.project, b.expireAt,
	}
	if b.withKeys {
		cols = append(cols, b.attrKeys)
	}
	return cols
}

// WriteSpans stores spans with one INSERT into spans and one into
// trace_index (a row per trace in the batch). It returns nil only once
// ClickHouse has written the parts (and, under a cluster, the shards have
// them). A span that is already stored is not stored again in a way readers
// can see: an identical re-sent block is dropped by insert deduplication,
// anything else is collapsed by merges and at read time, and trace
// summaries use only idempotent aggregates. A batch with an invalid span is
// rejected whole, before anything is sent.
func (s *Store) WriteSpans(ctx context.Context, spans []store.Span) error {
	if err := s.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write spans: %w", err)
	}
	if len(spans) == 0 {
		return nil
	}
	p, err := s.PrepareSpans(spans)
	if err != nil {
		return err
	}
	return s.WritePrepared(ctx, p)
}

// PrepareSpans checks spans and encodes their attribute JSON without
// touching the connection, so callers can run it concurrently (one per
// incoming request) while another insert is in flight. It fails, naming
// the span, for the spans WriteSpans would reject.
func (s *Store) PrepareSpans(spans []store.Span) (*PreparedSpans, error) {
	if err := s.preparable(); err != nil {
		return nil, err
	}
	p := s.preparedSpans()
	if err := p.encode(spans); err != nil {
		s.recycle(p)
		return nil, fmt.Errorf("write spans: %w", err)
	}
	return p, nil
}

// WritePrepared stores prepared batches with one INSERT into spans and one
// into trace_index, with WriteSpans' guarantees. It consumes the batches:
// their memory is reused once it returns.
func (s *Store) WritePrepared(ctx context.Context, batches ...*PreparedSpans) error {
	defer func() {
		for _, p := range batches {
			if p != nil {
				s.recycle(p)
			}
		}
	}()
	if err := s.usable(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write spans: %w", err)
	}
	items := make([]insertItem, len(batches))
	n := 0
	for i, p := range batches {
		items[i] = insertItem{p: p, digest: p.digest, keys: p.hasKeys}
		n += len(p.spans)
	}
	if n == 0 {
		return nil
	}
	return s.unavailable(ctx, s.writeItems(ctx, items, n))
}

// WriteSpooled stores records AppendBatch encoded with one INSERT into
// spans and one into trace_index, exactly as WriteBatches would store the
// batches they were encoded from, and returns how many spans they
// hold. It decodes each record only when its turn in the insert comes,
// into memory the next one reuses: an insert of a hundred thousand spans
// never has them all decoded at once (the garbage collector would scan
// them all, and the memory limit would hold fewer). The spans' strings
// point into recs, which must stay unchanged until it returns. A record
// it cannot read fails the whole insert (nothing is stored) with an error
// wrapping store.ErrBadSpoolRecord that names the record.
func (s *Store) WriteSpooled(ctx context.Context, recs [][]byte) (int, error) {
	if err := s.usable(); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("write spans: %w", err)
	}
	items := make([]insertItem, 0, len(recs))
	var legacy []*PreparedSpans
	defer func() {
		for _, p := range legacy {
			s.recycle(p)
		}
	}()
	n := 0
	for i, rec := range recs {
		d := &spoolDecoder{buf: rec}
		h := readSpoolHeader(d)
		if d.err != nil {
			return 0, fmt.Errorf("write spans: spooled record %d of %d: %w", i, len(recs), d.err)
		}
		if h.version < 3 {
			// Spooled by an older version, without the digest the
			// token needs: decoded now.
			p := s.preparedSpans()
			if err := p.decodeSpooled(rec, false); err != nil {
				s.recycle(p)
				return 0, fmt.Errorf("write spans: spooled record %d of %d: %w", i, len(recs), err)
			}
			legacy = append(legacy, p)
			items = append(items, insertItem{p: p, digest: p.digest})
		} else {
			items = append(items, insertItem{rec: rec, digest: h.digest, keys: h.version >= 4})
		}
		n += h.spans
	}
	if n == 0 {
		return 0, nil
	}
	// A server that could not be reached wraps store.ErrUnavailable: the
	// spool feeder tells an outage from a batch the server refuses.
	return n, s.unavailable(ctx, s.writeItems(ctx, items, n))
}

// preparedSpans is a batch from the pool, whose memory an earlier batch
// may have grown; recycle gives one back once nothing reads it.
func (s *Store) preparedSpans() *PreparedSpans {
	p, _ := s.prepared.Get().(*PreparedSpans)
	if p == nil {
		p = new(PreparedSpans)
	}
	return p
}

func (s *Store) recycle(p *PreparedSpans) {
	p.spans = nil
	s.prepared.Put(p)
}

// insertItem is one batch of an insert: decoded (p), or a spooled record
// (rec) decoded when the insert reaches it.
type insertItem struct {
	p      *PreparedSpans
	rec    []byte
	digest [32]byte
	keys   bool // its spans' attribute keys are known (PreparedSpans.hasKeys)
}

// blockBytes is how much encoded span data (spooled records, or prepared
// JSON) goes into one block of an insert.
const blockBytes = 8 << 20

// ClickHouse's defaults of min_insert_block_size_rows and _bytes, which
// writeItems raises for inserts larger than that.
const (
	defaultMinInsertRows  = 1048449
	defaultMinInsertBytes = 268402944
)

// size is the item's encoded size: its record, or its prepared JSON.
func (it insertItem) size() int {
	if it.p != nil {
		return len(it.p.arena)
	}
	return len(it.rec)
}

// writeItems sends one INSERT of the n spans of items into spans, batch
// by batch (the driver copies each batch's values into its own columns,
// so the batch's memory is free again at once), then their trace_index
// rows.
func (s *Store) writeItems(ctx context.Context, items []insertItem, n int) error {
	if err := s.flushPendingIndex(ctx); err != nil {
		return fmt.Errorf("write spans: %w", err)
	}
	readCtx := ctx
	var light lightBatch
	b, _ := s.batches.Get().(*spanBatch)
	if b == nil {
		b = new(spanBatch)
	}
	defer s.batches.Put(b)
	// The deduplication token names the insert by its spans' identities, so
	// an OTLP retry of the same batches is dropped whole by the server
	// (within the last non_replicated_deduplication_window / replicated
	// window blocks) without hashing the block's data; the first copy wins,
	// as in the embedded store. Each table deduplicates on its own, so one
	// token serves both inserts. optimize_on_insert=0 skips collapsing
	// duplicates inside the block (ReplacingMergeTree's insert-time merge,
	// ~1 CPU-µs a span on the server): reads collapse copies anyway, and
	// merges do later. low_cardinality_allow_in_native_format=0 has the
	// server take the LowCardinality columns as plain strings and build
	// their dictionaries itself: the driver's LowCardinality append hashes
	// every value through an interface map, 8% of ingest CPU in the
	// profile; 1.5-2 CPU-µs a span less end to end, ClickHouse's CPU
	// unchanged (BenchmarkIngest -ingest.spool).
	//
	// The spans go in blocks of about blockBytes each (below), and the
	// min_insert_block_size settings have the server squash them all into
	// one block before it writes anything: the insert makes parts as large
	// as one block of the whole insert did, stores nothing unless it
	// completes (a record that fails to decode halfway aborts it), and
	// its deduplication token names the same single block on a retry.
	total := 0
	for _, it := range items {
		total += it.size()
	}
	ctx = ch.Context(ctx, ch.WithSettings(ch.Settings{
		"insert_deduplicate":                     1,
		"insert_deduplication_token":             insertToken(items),
		"optimize_on_insert":                     0,
		"low_cardinality_allow_in_native_format": 0,
		"min_insert_block_size_rows":             max(n, defaultMinInsertRows),
		"min_insert_block_size_bytes":            max(4*total, defaultMinInsertBytes),
	}))
	if b.sizer == nil {
		b.sizer = newSizer()
	}
	// Spans first: a failure between the two inserts leaves spans without
	// their index row (the trace is not listed yet, GetTrace finds it), never
	// an index row of spans that are not there. The sender's retry (nothing
	// was acknowledged) writes the row; if none comes, the held rows are
	// written before the next write, or Start's repair finds them (repair.go).
	//
	// The insert gives attr_keys, the keys of each span's attribute JSON
	// that encode wrote (store.Attributes.AppendStorableJSONKeys), when
	// every batch of it has them: ClickHouse's JSONExtractKeys parsed each
	// span's JSON again for them, ~3 CPU-µs a span, 9% of the insert's CPU
	// on the agent load (docs/bench-ingest.md). A batch from an older
	// spool record has none, and then the server computes them, as before.
	b.withKeys = s.schema >= versionClientKeys
	for _, it := range items {
		b.withKeys = b.withKeys && it.keys
	}
	columns := spanColumns
	if b.withKeys {
		columns += ", " + keysColumn
	}
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.spansTable+" ("+columns+")")
	if err != nil {
		return fmt.Errorf("write spans: prepare insert into %s: %w", s.spansTable, err)
	}
	sent := false
	defer func() {
		if !sent {
			_ = batch.Abort()
		}
	}()
	b.traces.reset()
	var scratch *PreparedSpans
	defer func() {
		if scratch != nil {
			s.recycle(scratch)
		}
	}()
	presized := false
	block := 0 // bytes of the items in the block being built
	for k, it := range items {
		p := it.p
		size := it.size()
		if p == nil {
			if scratch == nil {
				scratch = s.preparedSpans()
			}
			if err := scratch.decodeSpooled(it.rec, false); err != nil {
				return fmt.Errorf("write spans: spooled record %d of %d: %w", k, len(items), err)
			}
			p = scratch
		}
		if len(p.spans) == 0 {
			continue
		}
		b.fill(p)
		if s.summariesOn() {
			s.summaries.mu.Lock()
			light.collect(&s.summaries, p)
			s.summaries.mu.Unlock()
		}
		cols := b.columns()
		if !presized {
			// Sized for the first block from its first batch; later
			// blocks reuse the columns' memory.
			rows := min(n, max(len(p.spans), int(int64(len(p.spans))*blockBytes/int64(max(size, 1)))))
			presizeColumns(batch.Columns(), cols, rows, b.sizer)
			presized = true
		}
		for i, col := range cols {
			if err := batch.Column(i).Append(col); err != nil {
				return fmt.Errorf("write spans: insert into %s: column %d: %w", s.spansTable, i, err)
			}
		}
		// A block is sent once it holds blockBytes of batches; the server
		// squashes the blocks of one INSERT into parts of
		// min_insert_block_size_rows/bytes, so the insert still makes
		// parts as large as before, while the driver holds one block's
		// columns (and reuses their memory) instead of the whole insert's.
		if block += size; block >= blockBytes && k < len(items)-1 {
			if err := batch.Flush(); err != nil {
				return fmt.Errorf("write spans: insert into %s: send a block: %w", s.spansTable, err)
			}
			block = 0
		}
	}
	sent = true
	if err := batch.Send(); err != nil {
		return fmt.Errorf("write spans: insert %d rows into %s: %w", n, s.spansTable, err)
	}
	// The summaries first: the lists read them alone. Whatever fails
	// after the spans is held and written before the next write, in case
	// this write is never retried.
	if s.summariesOn() {
		if err := s.writeSummaries(readCtx, &light); err != nil {
			s.pending.hold(&b.traces)
			return fmt.Errorf("write spans: %w", err)
		}
	}
	if err := s.insert(ctx, s.traceIndexTable, traceIndexColumns, b.traces.columns(), len(b.traces.traceID)); err != nil {
		s.pending.hold(&b.traces) // written before the next write, if this one is never retried
		return fmt.Errorf("write spans: trace index: %w", err)
	}
	return nil
}

// insert sends one INSERT of rows given column by column (the trace
// index, and tests writing older schemas; spans go through writeItems).
func (s *Store) insert(ctx context.Context, table, columns string, data []any, rows int) error {
	batch, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+table+" ("+columns+")")
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", table, err)
	}
	for i, col := range data {
		if err := batch.Column(i).Append(col); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("insert into %s: column %d: %w", table, i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("insert %d rows into %s: %w", rows, table, err)
	}
	return nil
}

// resize returns s with length n and every element zero, reusing its
// array when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// encode checks spans and encodes their JSON into p, reusing p's memory
// from an earlier batch. The attribute JSON leaves out what typed columns
// hold (typedattrs.go).
func (p *PreparedSpans) encode(spans []store.Span) error {
	return p.encodeWith(spans, true)
}

// encodeWith is encode; without elide the attribute JSON is whole (for
// tests that write schemas older than version 5).
func (p *PreparedSpans) encodeWith(spans []store.Span, elide bool) error {
	n := len(spans)
	p.spans = spans
	p.elided = elide
	p.attrMask = resize(p.attrMask, n)
	p.events, p.links = resize(p.events, n), resize(p.links, n)
	// Attribute JSON for the whole batch goes into one buffer, sliced per
	// span when the insert is built: no allocation per span. Spans from one
	// OTLP resource share one map, so each resource map is encoded once,
	// keyed by its identity (every span stays reachable during the call, so
	// an address cannot be reused for another map).
	if cap(p.buf) == 0 {
		p.buf = make([]byte, 0, 1024*n)
	}
	arena := p.buf[:0]
	p.attrAt, p.resAt, p.scopeAt = resize(p.attrAt, n), resize(p.resAt, n), resize(p.scopeAt, n)
	p.eventAt, p.linkAt = resize(p.eventAt, n), resize(p.linkAt, n)
	p.keys, p.keyAt, p.labels, p.hasKeys = p.keys[:0], resize(p.keyAt, n), resize(p.labels, n), elide
	if p.resources == nil {
		p.resources, p.scopes = map[uintptr]jsonSpan{}, map[uintptr]jsonSpan{}
	}
	clear(p.resources)
	clear(p.scopes)
	defer func() { p.arena, p.buf = arena, arena }()
	for i := range spans {
		sp := &spans[i]
		// The depth rule of the span's own, resource and scope attributes
		// is applied by AppendStorableJSON as it encodes them (each map
		// walked once, and a shared one once per batch); failing it,
		// CheckStorable gives the error its words.
		if store.CheckStorableExceptAttributes(sp) != nil {
			// CheckStorable's own error: an attribute nested too deep
			// besides comes first in it.
			return invalidSpan(i, sp, validateSpan(sp))
		}
		var err error
		if sp.Attributes != nil {
			from, kfrom := len(arena), len(p.keys)
			if elide {
				arena, p.keys, p.attrMask[i], err = appendElidedJSON(arena, p.keys, sp)
			} else {
				arena, err = sp.Attributes.AppendStorableJSON(arena, nil)
			}
			if err != nil {
				return encodeFailed(i, sp, "attributes", err)
			}
			p.attrAt[i], p.keyAt[i] = jsonSpan{from, len(arena)}, jsonSpan{kfrom, len(p.keys)}
			p.labels[i], _ = sp.Attributes.String(semconv.AttrModelLabel)
		}
		if sp.ResourceAttributes != nil {
			key := reflect.ValueOf(sp.ResourceAttributes).Pointer()
			at, ok := p.resources[key]
			if !ok {
				from := len(arena)
				if arena, err = sp.ResourceAttributes.AppendStorableJSON(arena, nil); err != nil {
					return encodeFailed(i, sp, "resource attributes", err)
				}
				at = jsonSpan{from, len(arena)}
				p.resources[key] = at
			}
			p.resAt[i] = at
		}
		if sp.ScopeAttributes != nil {
			// Shared by the spans of one OTLP scope, like resource maps.
			key := reflect.ValueOf(sp.ScopeAttributes).Pointer()
			at, ok := p.scopes[key]
			if !ok {
				from := len(arena)
				if arena, err = sp.ScopeAttributes.AppendStorableJSON(arena, nil); err != nil {
					return encodeFailed(i, sp, "scope attributes", err)
				}
				at = jsonSpan{from, len(arena)}
				p.scopes[key] = at
			}
			p.scopeAt[i] = at
		}
		// Events and links go into the arena too; their strings are
		// cut once it has stopped growing.
		p.eventAt[i], p.linkAt[i] = jsonSpan{}, jsonSpan{}
		if len(sp.Events) > 0 {
			from := len(arena)
			if arena, err = store.AppendEventsJSON(arena, sp.Events); err != nil {
				return fmt.Errorf("span %d (%s/%s): events: %w", i, sp.TraceID, sp.SpanID, err)
			}
			p.eventAt[i] = jsonSpan{from, len(arena)}
		}
		if len(sp.Links) > 0 {
			from := len(arena)
			if arena, err = store.AppendLinksJSON(arena, sp.Links); err != nil {
				return fmt.Errorf("span %d (%s/%s): links: %w", i, sp.TraceID, sp.SpanID, err)
			}
			p.linkAt[i] = jsonSpan{from, len(arena)}
		}
	}
	all := unsafe.String(unsafe.SliceData(arena), len(arena))
	for i := range spans {
		p.events[i] = all[p.eventAt[i].from:p.eventAt[i].to]
		p.links[i] = all[p.linkAt[i].from:p.linkAt[i].to]
	}
	p.traces.build(spans)
	p.digest = batchDigest(spans)
	return nil
}

// invalidSpan is encode's error for span i of a batch, which
// CheckStorable refuses (err).
func invalidSpan(i int, sp *store.Span, err error) error {
	return fmt.Errorf("span %d (trace_id %q, span_id %q): %w", i, sp.TraceID, sp.SpanID, err)
}

// encodeFailed is encode's error for span i, whose what failed to encode
// with err: for an attribute nested too deep, CheckStorable's error (as
// when encode checked spans before encoding them), else err.
func encodeFailed(i int, sp *store.Span, what string, err error) error {
	if errors.Is(err, store.ErrTooDeep) {
		if verr := validateSpan(sp); verr != nil {
			return invalidSpan(i, sp, verr)
		}
	}
	return fmt.Errorf("span %d (%s/%s): %s: %w", i, sp.TraceID, sp.SpanID, what, err)
}

// fill builds columns of p's spans, reusing b's memory from an earlier
// fill, and adds p's trace_index rows to b.traces.
func (b *spanBatch) fill(p *PreparedSpans) {
	n := len(p.spans)
	b.traceID, b.spanID, b.parentID = resize(b.traceID, n), resize(b.spanID, n), resize(b.parentID, n)
	b.traceState, b.name, b.kind = resize(b.traceState, n), resize(b.name, n), resize(b.kind, n)
	b.start, b.end = resize(b.start, n), resize(b.end, n)
	b.statusCode, b.statusMessage, b.service = resize(b.statusCode, n), resize(b.statusMessage, n), resize(b.service, n)
	b.scope, b.scopeVer = resize(b.scope, n), resize(b.scopeVer, n)
	b.operation, b.provider, b.reqModel = resize(b.operation, n), resize(b.provider, n), resize(b.reqModel, n)
	b.respModel, b.agent, b.convID = resize(b.respModel, n), resize(b.agent, n), resize(b.convID, n)
	b.toolName, b.toolCallID = resize(b.toolName, n), resize(b.toolCallID, n)
	b.modelCall, b.hasUsage = resize(b.modelCall, n), resize(b.hasUsage, n)
	b.input, b.output, b.cacheRead = resize(b.input, n), resize(b.output, n), resize(b.cacheRead, n)
	b.cacheCreation, b.reasoning = resize(b.cacheCreation, n), resize(b.reasoning, n)
	b.cost = resize(b.cost, n)
	b.retrieved, b.cited = resize(b.retrieved, n), resize(b.cited, n)
	b.attrs, b.resource, b.events, b.links = resize(b.attrs, n), resize(b.resource, n), resize(b.events, n), resize(b.links, n)
	b.flags, b.droppedAttrs = resize(b.flags, n), resize(b.droppedAttrs, n)
	b.droppedEvents, b.droppedLinks = resize(b.droppedEvents, n), resize(b.droppedLinks, n)
	b.scopeAttrs, b.scopeDropped, b.scopeSchema = resize(b.scopeAttrs, n), resize(b.scopeDropped, n), resize(b.scopeSchema, n)
	b.resSchema, b.resDropped = resize(b.resSchema, n), resize(b.resDropped, n)
	b.attrsInColumns = resize(b.attrsInColumns, n)
	b.project, b.expireAt = resize(b.project, n), resize(b.expireAt, n)
	b.attrKeys = resize(b.attrKeys, n)
	// A batch read from a spool record older than format 3 holds the
	// whole attribute JSON: typed attributes are left out here, on a copy.
	arenas := 0
	if !p.elided {
		arenas = len(p.arena)
	}
	if cap(b.attrBuf) < arenas {
		b.attrBuf = make([]byte, 0, arenas+arenas/4)
	}
	b.attrBuf = b.attrBuf[:0]
	// The arena is not written again until this insert has been sent
	// (the driver copies every value into its own column buffers) and
	// the PreparedSpans is reused, so the strings share its memory
	// instead of copying tens of megabytes per insert. No string cut
	// from it may outlive the insert.
	all := unsafe.String(unsafe.SliceData(p.arena), len(p.arena))
	for i := range p.spans {
		sp := &p.spans[i]
		b.traceID[i], b.spanID[i], b.parentID[i] = sp.TraceID, sp.SpanID, sp.ParentSpanID
		b.traceState[i], b.name[i], b.kind[i] = sp.TraceState, sp.Name, sp.Kind
		b.start[i], b.end[i] = sp.StartTime, sp.EndTime
		b.statusCode[i], b.statusMessage[i] = sp.StatusCode, sp.StatusMessage
		b.service[i], b.scope[i], b.scopeVer[i] = sp.ServiceName, sp.ScopeName, sp.ScopeVersion
		b.operation[i], b.provider[i] = sp.Operation, sp.Provider
		b.reqModel[i], b.respModel[i] = sp.RequestModel, sp.ResponseModel
		b.agent[i], b.convID[i] = sp.AgentName, sp.ConversationID
		b.toolName[i], b.toolCallID[i] = sp.ToolName, sp.ToolCallID
		b.modelCall[i] = semconv.IsModelCallOperation(sp.Operation)
		b.hasUsage[i] = sp.HasUsage
		b.input[i], b.output[i] = sp.InputTokens, sp.OutputTokens
		b.cacheRead[i], b.cacheCreation[i], b.reasoning[i] = sp.CacheReadTokens, sp.CacheCreationTokens, sp.ReasoningTokens
		b.cost[i] = sp.CostUSD
		b.retrieved[i], b.cited[i] = nonNil(sp.RetrievedDocs), nonNil(sp.CitedDocs)
		if js := all[p.attrAt[i].from:p.attrAt[i].to]; p.elided {
			b.attrs[i], b.attrsInColumns[i] = js, p.attrMask[i]
		} else {
			b.attrs[i], b.attrsInColumns[i] = b.attributes(js, sp)
		}
		b.resource[i] = all[p.resAt[i].from:p.resAt[i].to]
		b.events[i], b.links[i] = p.events[i], p.links[i]
		b.flags[i], b.droppedAttrs[i] = sp.Flags, sp.DroppedAttributesCount
		b.droppedEvents[i], b.droppedLinks[i] = sp.DroppedEventsCount, sp.DroppedLinksCount
		b.scopeAttrs[i] = all[p.scopeAt[i].from:p.scopeAt[i].to]
		b.scopeDropped[i], b.scopeSchema[i] = sp.ScopeDroppedAttributesCount, sp.ScopeSchemaURL
		b.resSchema[i], b.resDropped[i] = sp.ResourceSchemaURL, sp.ResourceDroppedAttributesCount
		b.project[i], b.expireAt[i] = sp.Project, p.traces.expiryOf(sp)
		if p.hasKeys {
			b.attrKeys[i] = p.keys[p.keyAt[i].from:p.keyAt[i].to:p.keyAt[i].to]
		}
		if b.attrKeys[i] == nil {
			b.attrKeys[i] = noKeys
		}
	}
	b.traces.add(&p.traces)
}

// noKeys is attr_keys of a span without attributes.
var noKeys = []string{}

// attributes returns the attribute JSON to store for sp, whose whole JSON
// is js, and its attributes_in_columns. The result points into b.attrBuf,
// which fill sized to hold every span's JSON, so appending never moves it.
func (b *spanBatch) attributes(js string, sp *store.Span) (string, uint32) {
	if b.wholeAttrs || js == "" {
		return js, 0
	}
	from := len(b.attrBuf)
	b.attrBuf = append(b.attrBuf, js...)
	var short []byte
	var mask uint32
	short, mask, b.scratch = elideTypedAttrs(b.attrBuf[from:], sp, b.scratch)
	if mask == 0 {
		b.attrBuf = b.attrBuf[:from]
		return js, 0
	}
	b.attrBuf = b.attrBuf[:from+len(short)]
	return unsafe.String(unsafe.SliceData(short), len(short)), mask
}

// batchDigest identifies a batch by the ordered (project, trace id, span
// id, start, end) of its spans.
func batchDigest(spans []store.Span) [32]byte {
	h := sha256.New()
	var buf [8]byte
	for i := range spans {
		sp := &spans[i]
		if sp.Project != "" {
			// The same spans sent by two projects are two batches. A 0
			// byte cannot occur in the hex ids.
			binary.LittleEndian.PutUint64(buf[:], uint64(len(sp.Project)))
			h.Write([]byte{0})
			h.Write(buf[:])
			h.Write([]byte(sp.Project))
		}
		h.Write([]byte(sp.TraceID))
		h.Write([]byte(sp.SpanID))
		binary.LittleEndian.PutUint64(buf[:], uint64(sp.StartTime.UnixNano()))
		h.Write(buf[:])
		binary.LittleEndian.PutUint64(buf[:], uint64(sp.EndTime.UnixNano()))
		h.Write(buf[:])
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// insertToken is the deduplication token of an insert of items, from
// their digests in order: the same batches in the same order are the same
// insert, however they reached it (prepared, or read back from the spool).
func insertToken(items []insertItem) string {
	h := sha256.New()
	for i := range items {
		h.Write(items[i].digest[:])
	}
	return "loomwork-v2-" + hex.EncodeToString(h.Sum(nil))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func validateSpan(sp *store.Span) error {
	return store.CheckStorable(sp) // the one rule for every store
}

// notHex[c] is 1 unless c is a lower-case hex digit.
var notHex = func() (t [256]byte) {
	for c := range t {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			t[c] = 1
		}
	}
	return t
}()

// checkID accepts n bytes as lower-case hex, not all zero (OTLP's invalid
// id).
func checkID(id string, n int) error {
	if len(id) != 2*n {
		return fmt.Errorf("%q is not %d lower-case hex digits", id, 2*n)
	}
	// Every span's three ids pass here twice (prepare, and the spool's
	// decode): one pass without branches for the common case, the
	// slower one below only to say what is wrong.
	var bad, nonZero byte
	for i := 0; i < len(id); i++ {
		bad |= notHex[id[i]]
		nonZero |= id[i] ^ '0'
	}
	if bad == 0 && nonZero != 0 {
		return nil
	}
	zero := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("%q is not %d lower-case hex digits (bad character at offset %d)", id, 2*n, i)
		}
		if c != '0' {
			zero = false
		}
	}
	if zero {
		return fmt.Errorf("%q: the all-zero id is invalid", id)
	}
	return nil
}

func checkTime(t time.Time) error {
	if t.Before(minTime) || !t.Before(maxTime) {
		return fmt.Errorf("%s is outside the storable range (1900-01-01 to 2262-04-11); is it unset?", t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
