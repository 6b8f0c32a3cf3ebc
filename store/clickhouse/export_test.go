package clickhouse

import (
	"context"
	"strings"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/loomwork/loomwork/store"
)

func parseDSNForTest(dsn string) (*ch.Options, error) { return ch.ParseDSN(dsn) }

// OpenAtVersion opens a store whose schema is migrated up to version only,
// to test later migrations on data written under an older schema.
func OpenAtVersion(ctx context.Context, cfg Config, version int) (*Store, error) {
	return open(ctx, cfg, version)
}

// InsertSpansOnly writes spans the way schema versions 1 and 2 did: one
// insert into spans (version 2's view then fills trace_summaries), without
// the columns version 4 added.
func (s *Store) InsertSpansOnly(ctx context.Context, spans []store.Span) error {
	p := new(PreparedSpans)
	if err := p.encodeWith(spans, false); err != nil {
		return err
	}
	b := &spanBatch{wholeAttrs: true}
	b.fill(p)
	v4 := strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(beforeProjects, typedAttrsColumns)), ",")
	old := strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(v4, envelopeColumns)), ",")
	cols := b.columns()[:len(b.columns())-projectColumnCount]
	return s.insert(ctx, s.spansTable, old, cols[:len(cols)-strings.Count(typedAttrsColumns, ",")-1-strings.Count(envelopeColumns, ",")-1], len(spans))
}

// InsertSpansAtVersion4 writes spans the way schema version 4 did: the
// whole attribute JSON, without the column version 5 added, and their
// trace_index rows.
func (s *Store) InsertSpansAtVersion4(ctx context.Context, spans []store.Span) error {
	p := new(PreparedSpans)
	if err := p.encodeWith(spans, false); err != nil {
		return err
	}
	b := &spanBatch{wholeAttrs: true}
	b.fill(p)
	old := strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(beforeProjects, typedAttrsColumns)), ",")
	cols := b.columns()[:len(b.columns())-projectColumnCount]
	if err := s.insert(ctx, s.spansTable, old, cols[:len(cols)-strings.Count(typedAttrsColumns, ",")-1], len(spans)); err != nil {
		return err
	}
	return s.insert(ctx, s.traceIndexTable, "trace_id, day, start, end", b.traces.columns()[:4], len(b.traces.traceID))
}

// beforeProjects is the insert column list of schema version 5.
var beforeProjects = strings.TrimSuffix(spanColumns, ", "+projectColumns)

const projectColumnCount = 2

// SpoolRecordV2 is spans as a spool record of format version 2, as
// written before format 3: no digest, the attribute JSON whole.
func SpoolRecordV2(spans []store.Span) ([]byte, error) {
	p := new(PreparedSpans)
	if err := p.encodeWith(spans, false); err != nil {
		return nil, err
	}
	return appendSpooled(nil, p, 2), nil
}

// SpoolRecordV3 is spans as a spool record of format version 3, as
// written before format 4: no attribute keys, no model labels.
func SpoolRecordV3(spans []store.Span) ([]byte, error) {
	p := new(PreparedSpans)
	if err := p.encode(spans); err != nil {
		return nil, err
	}
	return appendSpooled(nil, p, 3), nil
}

// DecodeBatch reads a batch AppendBatch encoded, as its own copy in
// memory from the store's pool (the feeder decodes in WriteSpooled
// instead, one record at a time, without a copy).
func (s *Store) DecodeBatch(src []byte) (store.PreparedBatch, error) {
	p := s.preparedSpans()
	if err := p.decodeSpooled(src, true); err != nil {
		s.recycle(p)
		return nil, err
	}
	return p, nil
}

// BlockBytes is how much encoded span data goes into one block of an
// insert.
const BlockBytes = blockBytes
