package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// expectedRead is what GetTrace must return for written spans: the same
// spans ordered by start time then span id, times in UTC and attribute maps
// as their JSON decodes (e.g. a []string value reads back as []any).
func expectedRead(t *testing.T, written []store.Span) []store.Span {
	t.Helper()
	roundTrip := func(a store.Attributes) store.Attributes {
		if a == nil {
			return nil
		}
		b, err := a.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var out store.Attributes
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := make([]store.Span, len(written))
	for i, sp := range written {
		sp.StartTime, sp.EndTime = sp.StartTime.UTC(), sp.EndTime.UTC()
		sp.Attributes = roundTrip(sp.Attributes)
		sp.ResourceAttributes = roundTrip(sp.ResourceAttributes)
		sp.Events = slices.Clone(sp.Events)
		for j := range sp.Events {
			sp.Events[j].Time = sp.Events[j].Time.UTC()
			sp.Events[j].Attributes = roundTrip(sp.Events[j].Attributes)
		}
		sp.Links = slices.Clone(sp.Links)
		for j := range sp.Links {
			sp.Links[j].Attributes = roundTrip(sp.Links[j].Attributes)
		}
		want[i] = sp
	}
	slices.SortFunc(want, func(a, b store.Span) int {
		if c := a.StartTime.Compare(b.StartTime); c != 0 {
			return c
		}
		return strings.Compare(a.SpanID, b.SpanID)
	})
	return want
}

func checkSpansEqual(t *testing.T, got, want []store.Span) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("GetTrace returned %d spans, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("span %d (%s) differs:\ngot  %#v\nwant %#v", i, want[i].SpanID, got[i], want[i])
		}
	}
}

// A trace large enough to span many payload blocks, written in batches
// interleaved with small traces (so its blocks are shared with other
// traces' spans, and some spans of it start at the same instant), reads
// back complete, exact and in order — through the parallel decoding path,
// with both blocks of several chunks and blocks shared with small traces.
func TestGetTraceOfManyBlocksReadsEverySpanExactlyInOrder(t *testing.T) {
	testtier.Slow(t)
	// Order and completeness of one big read; reading while another
	// process writes is race-checked there.
	testtier.NoRace(t, "TestReadOnlyProcessReadsWhileAnotherWrites")
	t.Parallel() // a file of its own; CPU in SQLite and the decoder
	s, _ := openTemp(t)
	ctx := context.Background()
	// make test's trace has 3,000 spans in 3 payload blocks (over
	// parallelSpans, so decoding is parallel, and more than one block);
	// the long tier's 6,000 in 6.
	big := storetest.GenerateTraces(1, testtier.Pick(3000, 6000), 21)
	// Equal start times: the order must fall back to the span id.
	for i := 100; i < 140; i++ {
		big[i].StartTime = big[99].StartTime
	}
	small := storetest.GenerateTraces(60, 10, 22)
	for i := 0; i < len(big); i += 1000 {
		batch := append(slices.Clone(big[i:min(i+1000, len(big))]), small[i/10:i/10+100]...)
		if err := s.WriteSpans(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if len(big) < parallelSpans {
		t.Fatalf("the big trace has %d spans; the test needs at least %d to cover parallel decoding", len(big), parallelSpans)
	}
	got, err := s.GetTrace(ctx, big[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	checkSpansEqual(t, got, expectedRead(t, big))
	gotSmall, err := s.GetTrace(ctx, small[30].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	checkSpansEqual(t, gotSmall, expectedRead(t, small[30:40]))
}

// Every span gets its own resource attribute map, and decoded strings do
// not tie one GetTrace result to another: changing what one call returned
// changes nothing else.
func TestGetTraceResultsAreIndependentCopies(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	spans := storetest.GenerateTraces(1, 40, 23)
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	first, err := s.GetTrace(ctx, spans[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	first[0].ResourceAttributes["service.name"] = "changed"
	first[0].Attributes["gen_ai.operation.name"] = "changed"
	if first[1].ResourceAttributes["service.name"] == "changed" {
		t.Error("spans of one result share a resource attribute map")
	}
	second, err := s.GetTrace(ctx, spans[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	checkSpansEqual(t, second, expectedRead(t, spans))
}

// A corrupt payload is an error naming the trace and span, not a panic or
// a silently partial trace: in a payload block of span rows and in a
// compact block alike.
func TestGetTraceReportsCorruptPayloadBlock(t *testing.T) {
	for _, tc := range []struct {
		layout       string
		compactBelow int
		table        string
	}{{"compact blocks", bigTraceSpans, "span_blocks"}, {"span rows", 0, "payload_blocks"}} {
		t.Run(tc.layout, func(t *testing.T) {
			s, _ := openTemp(t)
			s.compactBelow = tc.compactBelow
			ctx := context.Background()
			spans := storetest.GenerateTraces(1, 10, 24)
			if err := s.WriteSpans(ctx, spans); err != nil {
				t.Fatal(err)
			}
			// Same length, so every span's offsets stay inside the block:
			// the first attribute map becomes an array.
			var packed []byte
			if err := s.reader.QueryRow(`SELECT data FROM ` + tc.table).Scan(&packed); err != nil {
				t.Fatal(err)
			}
			raw, err := s.codec.unpack(packed)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(raw, []byte(`{"a":{`))
			if i < 0 {
				t.Fatalf("no attribute map in %q", raw)
			}
			raw[i+5] = '['
			if _, err := s.writer.Exec(`UPDATE `+tc.table+` SET data = ?`, append([]byte{encRaw}, raw...)); err != nil {
				t.Fatal(err)
			}
			_, err = s.GetTrace(ctx, spans[0].TraceID)
			if err == nil || !strings.Contains(err.Error(), spans[0].TraceID) || !strings.Contains(err.Error(), "expected an object") {
				t.Fatalf("GetTrace of a corrupt payload = %v, want an error naming the trace and what is wrong", err)
			}
		})
	}
}

// A compact block cut short anywhere is an error naming the trace, not a
// panic or a silently partial trace.
func TestGetTraceReportsTruncatedCompactBlock(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	spans := storetest.GenerateTraces(1, 10, 26)
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	var packed []byte
	if err := s.reader.QueryRow(`SELECT data FROM span_blocks`).Scan(&packed); err != nil {
		t.Fatal(err)
	}
	raw, err := s.codec.unpack(packed)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 20, len(raw) / 3, len(raw) / 2, len(raw) - 1} {
		if _, err := s.writer.Exec(`UPDATE span_blocks SET data = ?`, append([]byte{encRaw}, raw[:n]...)); err != nil {
			t.Fatal(err)
		}
		_, err := s.GetTrace(ctx, spans[0].TraceID)
		if err == nil || !strings.Contains(err.Error(), spans[0].TraceID) {
			t.Fatalf("block cut to %d of %d bytes: GetTrace = %v, want an error naming the trace", n, len(raw), err)
		}
	}
}

// Payload offsets that point outside their block, even ones whose sum
// overflows, are an error naming the span, not a panic.
func TestGetTraceReportsPayloadOutsideItsBlock(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	s.compactBelow = 0 // span rows carry payload offsets
	spans := storetest.GenerateTraces(1, 10, 25)
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{1 << 40, 9223372036854775800} {
		if _, err := s.writer.Exec(`UPDATE spans SET payload_off = ?`, off); err != nil {
			t.Fatal(err)
		}
		_, err := s.GetTrace(ctx, spans[0].TraceID)
		if err == nil || !strings.Contains(err.Error(), "outside block") {
			t.Fatalf("payload_off %d: GetTrace = %v, want an error saying the payload is outside its block", off, err)
		}
	}
}
