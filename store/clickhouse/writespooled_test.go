package clickhouse_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// WriteSpooled stores spooled records, decoding each only when the insert
// reaches it, exactly once: every span and one trace_index row set per
// trace; the same records again are one insert deduplicated whole; a record
// spooled by version 2 (no digest) goes in the same insert; a record that
// does not decode fails the insert and stores nothing of it.
func TestWriteSpooledStoresEachRecordOnce(t *testing.T) {
	srv := chtest.Start(t)
	s, db := openFresh(t, srv)
	ctx := context.Background()
	record := func(seed int64) ([]byte, int) {
		t.Helper()
		spans := storetest.GenerateTraces(30, 10, seed)
		b, err := s.Prepare(spans)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.AppendBatch(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		return rec, len(spans)
	}
	var recs [][]byte
	want := 0
	for seed := range int64(4) {
		rec, n := record(100 + seed)
		if seed == 2 {
			// The same body as version 2 wrote it: magic, no digest.
			if !strings.HasPrefix(string(rec), "LWC3") {
				t.Fatalf("record starts %q, want the version-3 magic", rec[:4])
			}
			rec = append([]byte("LWC2"), rec[4+32:]...)
		}
		recs = append(recs, rec)
		want += n
	}
	n, err := s.WriteSpooled(ctx, recs)
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Fatalf("WriteSpooled reported %d spans, want %d", n, want)
	}
	spans := func() uint64 { return srv.QueryUint(t, "SELECT count() FROM "+db+".spans") }
	if got := spans(); got != uint64(want) {
		t.Fatalf("%d spans stored, want %d", got, want)
	}
	if got := srv.QueryUint(t, "SELECT uniqExact(trace_id) FROM "+db+".trace_index"); got != uint64(want/10) {
		t.Fatalf("trace_index has %d traces, want %d", got, want/10)
	}
	page, err := s.ListTraces(ctx, store.TraceQuery{Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != want/10 {
		t.Fatalf("ListTraces lists %d traces, want %d", len(page.Traces), want/10)
	}

	// A replay of the same records (a crash before the spool committed
	// its position) is the same insert: dropped whole by the server.
	if _, err := s.WriteSpooled(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if got := spans(); got != uint64(want) {
		t.Fatalf("after the same records again: %d spans stored, want %d", got, want)
	}

	// A record that does not decode fails the insert: the good record
	// before it is not stored either.
	good, _ := record(200)
	bad, _ := record(201)
	bad = bad[:len(bad)-3]
	_, err = s.WriteSpooled(ctx, [][]byte{good, bad})
	if !errors.Is(err, store.ErrBadSpoolRecord) {
		t.Fatalf("WriteSpooled of a truncated record: %v, want ErrBadSpoolRecord", err)
	}
	if !strings.Contains(err.Error(), "spooled record 1 of 2") {
		t.Errorf("error does not name the record: %v", err)
	}
	if got := spans(); got != uint64(want) {
		t.Fatalf("after a failed insert: %d spans stored, want %d", got, want)
	}
}
