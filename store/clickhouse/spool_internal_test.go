package clickhouse

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// columnsOf is what an insert of p would send, with its attr_keys when p
// has them, and its model labels.
func columnsOf(p *PreparedSpans) []any {
	var b spanBatch
	b.fill(p)
	b.withKeys = p.hasKeys
	labels := make([]string, len(p.spans))
	for i := range labels {
		labels[i] = modelLabel(p, i)
	}
	return append(append([]any{labels}, b.columns()...), b.traces.columns()...)
}

func prepareForTest(t testing.TB, spans []store.Span) *PreparedSpans {
	t.Helper()
	p := new(PreparedSpans)
	if err := p.encode(spans); err != nil {
		t.Fatal(err)
	}
	return p
}

// A batch read back from the spool inserts exactly the rows the batch it
// was written from would have inserted: every column, the trace index rows,
// the shared resource JSON, absent and zero costs, empty and absent docs.
func TestSpooledBatchInsertsTheSameRows(t *testing.T) {
	spans := storetest.GenerateTraces(40, 10, 7)
	zero := 0.0
	spans[3].CostUSD = &zero
	spans[4].RetrievedDocs = []string{}
	spans[5].ScopeAttributes = store.Attributes{}
	// Model labels and odd keys (spool format 4 carries both).
	spans[6].Attributes[semconv.AttrModelLabel] = "label"
	spans[7].Attributes["bad\xffkey"], spans[7].Attributes["é"] = "v", 1.5
	spans[8].Attributes = nil
	// Projects and retention (spool format 2): the project and expiry
	// columns and the trace index rows come back the same.
	for i := range spans {
		if spans[i].TraceID[0] < '8' {
			spans[i].Project, spans[i].Retention = "alpha", 72*time.Hour
		}
	}
	p := prepareForTest(t, spans)
	want := columnsOf(p)
	if exp := want[len(want)-1].([]time.Time); slices.Equal(exp, slices.Repeat([]time.Time{keepForever}, len(exp))) {
		t.Fatal("no trace index row has a finite expiry: the test sets no retention")
	}
	enc, err := new(Store).AppendBatch([]byte("prefix"), p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSpooled(enc[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != len(spans) {
		t.Fatalf("decoded %d spans, want %d", got.Len(), len(spans))
	}
	have := columnsOf(got)
	for i := range want {
		if !reflect.DeepEqual(want[i], have[i]) {
			t.Errorf("column %d differs after the spool round trip:\nwant %v\ngot  %v", i, want[i], have[i])
		}
	}
	// The decoder copied the record: clobbering it changes nothing.
	for i := range enc {
		enc[i] = 0
	}
	if again := columnsOf(got); !reflect.DeepEqual(have, again) {
		t.Error("decoded batch changed when the record it came from was overwritten")
	}
}

func TestDecodeBatchRejectsWhatItDidNotWriteNamingTheOffset(t *testing.T) {
	p := prepareForTest(t, storetest.GenerateTraces(3, 4, 1))
	enc, _ := new(Store).AppendBatch(nil, p)
	cases := map[string][]byte{
		"empty":       nil,
		"other magic": append([]byte("XXXX"), enc[4:]...),
		"truncated":   enc[:len(enc)-3],
		"trailing":    append(append([]byte(nil), enc...), 0),
	}
	for name, in := range cases {
		_, err := new(Store).DecodeBatch(in)
		if !errors.Is(err, store.ErrBadSpoolRecord) {
			t.Errorf("%s: err = %v, want ErrBadSpoolRecord", name, err)
		}
	}
}

// A batch decoded into recycled memory (a PreparedSpans that carried a
// larger batch, encoded or decoded, before) inserts exactly what a fresh
// decode inserts, and the recycled batch does not share memory with the
// record it was read from.
func TestDecodeIntoRecycledBatchInsertsTheSameRows(t *testing.T) {
	st := new(Store)
	big, _ := st.AppendBatch(nil, prepareForTest(t, storetest.GenerateTraces(30, 10, 1)))
	small, _ := st.AppendBatch(nil, prepareForTest(t, storetest.GenerateTraces(4, 5, 2)))
	fresh, err := decodeSpooled(small)
	if err != nil {
		t.Fatal(err)
	}
	want := columnsOf(fresh)

	recycled := prepareForTest(t, storetest.GenerateTraces(20, 10, 3)) // encode's memory
	if err := recycled.decodeSpooled(big, true); err != nil {          // then a larger decode's
		t.Fatal(err)
	}
	if err := recycled.decodeSpooled(small, true); err != nil {
		t.Fatal(err)
	}
	if got := columnsOf(recycled); !reflect.DeepEqual(want, got) {
		t.Fatalf("recycled decode inserts other rows than a fresh one")
	}
	for i := range small {
		small[i] = 0
	}
	if got := columnsOf(recycled); !reflect.DeepEqual(want, got) {
		t.Error("recycled batch changed when the record it came from was overwritten")
	}
	// And through the store's pool, as the spooler decodes.
	for range 3 {
		b, err := st.DecodeBatch(big)
		if err != nil {
			t.Fatal(err)
		}
		st.prepared.Put(b.(*PreparedSpans))
	}
}

// fuzzRecycled is one batch every fuzz input is also decoded into, so
// inputs decode into memory earlier inputs left behind.
var fuzzRecycled = new(PreparedSpans)

// FuzzDecodeBatch: any input either fails with ErrBadSpoolRecord or decodes
// to a batch whose re-encoding decodes to the same rows; decoding into
// recycled memory agrees with a fresh decode.
func FuzzDecodeBatch(f *testing.F) {
	for seed := range int64(3) {
		p := prepareForTest(f, storetest.GenerateTraces(2, 3, seed))
		enc, _ := new(Store).AppendBatch(nil, p)
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := decodeSpooled(in)
		rerr := fuzzRecycled.decodeSpooled(in, true)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("fresh decode: %v; recycled decode: %v", err, rerr)
		}
		if err != nil {
			if !errors.Is(err, store.ErrBadSpoolRecord) {
				t.Fatalf("error does not wrap ErrBadSpoolRecord: %v", err)
			}
			if err.Error() != rerr.Error() {
				t.Fatalf("fresh decode: %v; recycled decode: %v", err, rerr)
			}
			return
		}
		cols := columnsOf(p)
		if !reflect.DeepEqual(cols, columnsOf(fuzzRecycled)) {
			t.Fatal("recycled decode inserts other rows than a fresh one")
		}
		enc, err := new(Store).AppendBatch(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := decodeSpooled(enc)
		if err != nil {
			t.Fatalf("re-encoding of an accepted record does not decode: %v", err)
		}
		if !reflect.DeepEqual(cols, columnsOf(q)) {
			t.Fatal("re-encoded batch inserts different rows")
		}
	})
}
