package clickhouse_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// WriteSpooled stores spooled records, decoding each only when the insert
// reaches it, exactly once: every span and one trace_index row set per
// trace; the same records again are one insert deduplicated whole;
// records spooled by versions 2 (no digest) and 3 (no keys) go in the same
// insert; a record that
// does not decode fails the insert and stores nothing of it.
func TestWriteSpooledStoresEachRecordOnce(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, db := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())
	record := func(seed int64) ([]byte, []store.Span) {
		t.Helper()
		spans := storetest.GenerateTraces(30, 10, seed)
		if seed == 101 {
			// A model label, which a spooled record carries only in its
			// attribute JSON: the summaries list it all the same.
			for i := range spans {
				if spans[i].RequestModel != "" && i%3 == 0 {
					spans[i].Attributes[semconv.AttrModelLabel] = "scripted"
				}
			}
		}
		if seed == 102 {
			// Spooled by version 2: no digest, the attribute JSON whole.
			rec, err := clickhouse.SpoolRecordV2(spans)
			if err != nil {
				t.Fatal(err)
			}
			return rec, spans
		}
		if seed == 103 {
			// Spooled by version 3: no keys, no labels.
			rec, err := clickhouse.SpoolRecordV3(spans)
			if err != nil {
				t.Fatal(err)
			}
			return rec, spans
		}
		b, err := s.Prepare(spans)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.AppendBatch(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		return rec, spans
	}
	var recs [][]byte
	var all []store.Span
	want := 0
	for seed := range int64(4) {
		rec, spans := record(100 + seed)
		if magic := [...]string{"LWC4", "LWC4", "LWC2", "LWC3"}[seed]; !strings.HasPrefix(string(rec), magic) {
			t.Fatalf("record %d starts %q, want %q", seed, rec[:4], magic)
		}
		recs = append(recs, rec)
		all = append(all, spans...)
		want += len(spans)
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
	// The summaries kept at ingest are Summarize's, from either format.
	labelled := 0
	for _, tr := range page.Traces {
		var ss []store.Span
		for _, sp := range all {
			if sp.TraceID == tr.TraceID {
				ss = append(ss, sp)
			}
		}
		w := store.Summarize(ss)
		w.Calls = nil
		if !reflect.DeepEqual(tr, w) {
			t.Fatalf("trace %s listed as\n%+v\nwant\n%+v", tr.TraceID, tr, w)
		}
		if len(tr.ModelLabels) > 0 {
			labelled++
		}
	}
	if labelled == 0 {
		t.Fatal("no listed trace has a model label: the test proves nothing")
	}

	// Every span reads back as written, from either format (the typed
	// attributes left out when encoded, or when a version-2 record was
	// inserted).
	byTrace := map[string]map[string]store.Span{}
	for _, sp := range all {
		if byTrace[sp.TraceID] == nil {
			byTrace[sp.TraceID] = map[string]store.Span{}
		}
		byTrace[sp.TraceID][sp.SpanID] = sp
	}
	for id, spans := range byTrace {
		got, err := s.GetTrace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(spans) {
			t.Fatalf("trace %s: %d spans read, want %d", id, len(got), len(spans))
		}
		for _, g := range got {
			w := spans[g.SpanID]
			gj, _ := g.Attributes.MarshalJSON()
			wj, _ := w.Attributes.MarshalJSON()
			if string(gj) != string(wj) || g.Name != w.Name || g.RequestModel != w.RequestModel || g.InputTokens != w.InputTokens {
				t.Fatalf("span %s/%s reads back as %s (%s, %q, %d), want %s (%s, %q, %d)", id, g.SpanID, gj, g.Name, g.RequestModel, g.InputTokens, wj, w.Name, w.RequestModel, w.InputTokens)
			}
		}
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

// An insert larger than one block goes to the server in several blocks
// and is still one insert: one part (so no more merging than before), the
// same records again are deduplicated whole, and a record that fails to
// decode after a block was sent stores nothing of the insert.
func TestWriteSpooledSendsALargeInsertInBlocksAsOneInsert(t *testing.T) {
	// Serial writes and reads (40, 22, 21 and 41 s under -race in make
	// test): the race detector finds nothing here TestConformance does not.
	testtier.NoRace(t, "TestConformance")
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, db := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())
	var recs [][]byte
	size, want := 0, 0
	for seed := int64(0); size < 3*clickhouse.BlockBytes; seed++ {
		spans := storetest.GenerateTraces(100, 10, 300+seed)
		b, err := s.Prepare(spans)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.AppendBatch(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
		size += len(rec)
		want += len(spans)
	}
	// First a bad record at the end: the blocks before it were sent.
	bad := append([]byte(nil), recs[0]...)
	bad = bad[:len(bad)-3]
	if _, err := s.WriteSpooled(ctx, append(recs[1:len(recs):len(recs)], bad)); !errors.Is(err, store.ErrBadSpoolRecord) {
		t.Fatalf("WriteSpooled ending in a truncated record: %v, want ErrBadSpoolRecord", err)
	}
	spans := func() uint64 { return srv.QueryUint(t, "SELECT count() FROM "+db+".spans") }
	if got := spans(); got != 0 {
		t.Fatalf("an insert that failed after %d MB of blocks stored %d spans, want none", size>>20, got)
	}
	if n, err := s.WriteSpooled(ctx, recs); err != nil || n != want {
		t.Fatalf("WriteSpooled of %d records (%d MB): %d, %v; want %d spans", len(recs), size>>20, n, err, want)
	}
	if got := spans(); got != uint64(want) {
		t.Fatalf("%d spans stored, want %d", got, want)
	}
	if parts := srv.QueryUint(t, "SELECT count() FROM system.parts WHERE database = '"+db+"' AND table = 'spans' AND active"); parts != 1 {
		t.Errorf("the insert made %d parts of spans, want 1 (its blocks squashed into one)", parts)
	}
	if _, err := s.WriteSpooled(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if got := spans(); got != uint64(want) {
		t.Fatalf("after the same records again: %d spans stored, want %d (one insert, deduplicated whole)", got, want)
	}
}

// The attr_keys the store gives (migration 13) are what ClickHouse's
// JSONExtractKeys finds in the attribute JSON stored beside them, whatever
// the keys hold (typed attributes left out, markup, non-ASCII, invalid
// UTF-8, the empty key, no attributes at all), whether the spans went in
// prepared, from spool records of format 4, or, computed by the server,
// from records of format 3.
func TestAttrKeysAreWhatJSONExtractKeysReads(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, db := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())
	odd := func(seed int64) []store.Span {
		spans := storetest.GenerateTraces(20, 5, seed)
		for i := range spans {
			switch i % 5 {
			case 0:
				spans[i].Attributes["bad\xffkey"] = "v"
				spans[i].Attributes["a<b&c>"] = int64(1)
			case 1:
				spans[i].Attributes["é\u2028✓"] = []any{"x", map[string]any{"inner": 1.5}}
				spans[i].Attributes[""] = "the empty key"
			case 2:
				spans[i].Attributes = nil
			case 3:
				spans[i].Attributes[semconv.AttrModelLabel] = "label"
			}
		}
		return spans
	}
	if err := s.WriteSpans(ctx, odd(1)); err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for seed := int64(2); seed <= 3; seed++ {
		b, err := s.Prepare(odd(seed))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.AppendBatch(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if _, err := s.WriteSpooled(ctx, recs); err != nil {
		t.Fatal(err)
	}
	v3, err := clickhouse.SpoolRecordV3(odd(4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteSpooled(ctx, [][]byte{v3}); err != nil {
		t.Fatal(err)
	}
	if n := srv.QueryUint(t, "SELECT count() FROM "+db+".spans"); n != 400 {
		t.Fatalf("%d spans stored, want 400", n)
	}
	if n := srv.QueryUint(t, "SELECT count() FROM "+db+".spans WHERE attr_keys != JSONExtractKeys(attributes)"); n != 0 {
		t.Fatalf("%d spans' attr_keys are not JSONExtractKeys(attributes)", n)
	}
	if n := srv.QueryUint(t, "SELECT count() FROM "+db+".spans WHERE has(attr_keys, 'bad\uFFFDkey') AND has(attr_keys, 'a<b&c>') AND has(attr_keys, 'gen_ai.request.temperature') = 0 OR has(attr_keys, '')"); n == 0 {
		t.Fatal("no span has the odd keys: the test proves nothing")
	}
}
