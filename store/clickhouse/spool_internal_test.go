package clickhouse

import (
	"errors"
	"reflect"
	"testing"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// columnsOf is what an insert of p would send.
func columnsOf(p *PreparedSpans) []any {
	var b spanBatch
	b.fill([]*PreparedSpans{p}, len(p.spans))
	return append(b.columns(), b.traces.columns()...)
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
	p := prepareForTest(t, spans)
	want := columnsOf(p)
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

// FuzzDecodeBatch: any input either fails with ErrBadSpoolRecord or decodes
// to a batch whose re-encoding decodes to the same rows.
func FuzzDecodeBatch(f *testing.F) {
	for seed := range int64(3) {
		p := prepareForTest(f, storetest.GenerateTraces(2, 3, seed))
		enc, _ := new(Store).AppendBatch(nil, p)
		f.Add(enc)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := decodeSpooled(in)
		if err != nil {
			if !errors.Is(err, store.ErrBadSpoolRecord) {
				t.Fatalf("error does not wrap ErrBadSpoolRecord: %v", err)
			}
			return
		}
		cols := columnsOf(p)
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
