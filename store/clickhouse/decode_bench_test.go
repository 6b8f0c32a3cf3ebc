package clickhouse

import (
	"testing"

	"github.com/loomwork/loomwork/store/storetest"
)

// BenchmarkDecodeBatch decodes a spooled record of 1,000 spans and
// recycles the batch, as the spool feeder and WritePrepared do.
func BenchmarkDecodeBatch(b *testing.B) {
	st := new(Store)
	p := new(PreparedSpans)
	if err := p.encode(storetest.GenerateTraces(100, 10, 1)); err != nil {
		b.Fatal(err)
	}
	rec, err := st.AppendBatch(nil, p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := st.DecodeBatch(rec)
		if err != nil {
			b.Fatal(err)
		}
		q := d.(*PreparedSpans)
		q.spans = nil
		st.prepared.Put(q)
	}
}

// BenchmarkEncodeBatch prepares 1,000 agent-shaped spans for an insert or
// the spool, as Prepare does for each request: checking them and encoding
// their JSON, in memory an earlier batch grew.
func BenchmarkEncodeBatch(b *testing.B) {
	spans := storetest.GenerateTraces(100, 10, 1)
	p := new(PreparedSpans)
	b.ReportAllocs()
	for b.Loop() {
		if err := p.encode(spans); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendSpooled writes a prepared batch of 1,000 agent-shaped
// spans as a spool record, as each acknowledged request is.
func BenchmarkAppendSpooled(b *testing.B) {
	p := new(PreparedSpans)
	if err := p.encode(storetest.GenerateTraces(100, 10, 1)); err != nil {
		b.Fatal(err)
	}
	var rec []byte
	b.ReportAllocs()
	for b.Loop() {
		rec = appendSpooled(rec[:0], p, 4)
	}
	b.SetBytes(int64(len(rec)))
}
