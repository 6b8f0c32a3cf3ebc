package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// downgradeTo8 turns a file of this version whose traces are all in span
// rows (written with compactBelow 0) into the file version 8 wrote.
var downgradeTo8 = []string{
	`DROP TABLE span_blocks`, `DROP TABLE trace_blocks`, `DROP TABLE summary_strings`, `DROP TABLE search_ranges`, `ALTER TABLE traces DROP COLUMN compact`,
	`CREATE TABLE trace_tags (kind INTEGER NOT NULL, value TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (kind, value, seq)) WITHOUT ROWID`,
	`INSERT INTO trace_tags SELECT 1, j.value, t.seq FROM traces t, json_each(t.services) j`,
	`INSERT INTO trace_tags SELECT 2, j.value, t.seq FROM traces t, json_each(t.agent_names) j`,
	`INSERT INTO trace_tags SELECT 3, j.value, t.seq FROM traces t, json_each(t.models) j`,
	`DELETE FROM search_keys WHERE kind IN (6, 7, 8)`,
	`DELETE FROM schema_migrations WHERE version = 9`, `PRAGMA user_version = 8`,
}

// A version 8 file upgrades in place: every list, search, session and
// trace reads as before, and searches find the traces stored before the
// upgrade (in span rows) and after it (in compact blocks) alike, also when
// a trace of before gets more spans after.
func TestUpgradeToVersion9KeepsTracesAndSearches(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a file of its own
	ctx := store.WithDefaultProject(context.Background())
	path := filepath.Join(t.TempDir(), "traces.db")
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	s.writeV8 = true // what version 8 wrote
	callID, doc, session := listsData(t, s, 600)
	first, err := s.ListTraces(ctx, store.TraceQuery{Limit: 1, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	qs := listQueries(t, first.Traces[0].Start.Add(3*time.Minute), callID, doc, session)
	type snapshot struct {
		lists  map[string][]store.TraceSummary
		traces map[string][]store.Span
	}
	take := func(st *Store) snapshot {
		snap := snapshot{lists: map[string][]store.TraceSummary{}, traces: map[string][]store.Span{}}
		for name, q := range qs {
			q.Limit = 1000
			page, err := st.ListTraces(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			snap.lists[name] = page.Traces
		}
		for _, tr := range snap.lists["newest"][:20] {
			spans, err := st.GetTrace(ctx, tr.TraceID)
			if err != nil {
				t.Fatal(err)
			}
			snap.traces[tr.TraceID] = spans
		}
		return snap
	}
	want := take(s)
	if len(want.lists["attr_eq_one_trace"]) == 0 || len(want.lists["session"]) != 6 {
		t.Fatalf("fixture problem: %d matches of the selective search, %d turns of %s", len(want.lists["attr_eq_one_trace"]), len(want.lists["session"]), session)
	}
	old := want.lists["newest"][0].TraceID
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range downgradeTo8 {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("make a version 8 file: %s: %v", stmt, err)
		}
	}
	db.Close()

	up, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Shutdown(ctx)
	got := take(up)
	for name := range qs {
		if !reflect.DeepEqual(got.lists[name], want.lists[name]) {
			t.Errorf("%s after the upgrade: %d traces, want %d (or they differ)", name, len(got.lists[name]), len(want.lists[name]))
		}
	}
	if !reflect.DeepEqual(got.traces, want.traces) {
		t.Error("traces read after the upgrade differ")
	}

	// New traces go to compact blocks; one more span of an old trace stays
	// with its trace in span rows. A search by a value of each finds it.
	fresh := storetest.GenerateTraces(3, 10, 91)
	extra := storetest.GenerateTraces(1, 2, 92)[1]
	extra.TraceID, extra.ParentSpanID = old, want.traces[old][0].SpanID
	extra.Attributes[semconv.AttrToolCallID] = "call_after_the_upgrade"
	if err := up.WriteSpans(ctx, append(fresh, extra)); err != nil {
		t.Fatal(err)
	}
	var compact int
	if err := up.reader.QueryRow(`SELECT count(*) FROM traces WHERE compact`).Scan(&compact); err != nil || compact != 3 {
		t.Fatalf("%d traces in compact blocks after writing 3 new ones (%v)", compact, err)
	}
	var freshCall string
	for _, sp := range fresh {
		if sp.ToolCallID != "" {
			freshCall = sp.ToolCallID
			break
		}
	}
	for value, trace := range map[string]string{freshCall: fresh[0].TraceID, "call_after_the_upgrade": old, callID: want.lists["attr_eq_one_trace"][0].TraceID} {
		page, err := up.ListTraces(ctx, store.TraceQuery{Search: mustParse(t, semconv.AttrToolCallID+"="+value)})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Traces) != 1 || page.Traces[0].TraceID != trace {
			t.Errorf("search %s=%s: %d traces, want only %s", semconv.AttrToolCallID, value, len(page.Traces), trace)
		}
	}
	// The tag and text filters find rows of both versions: version 8's
	// spelled out, the new ones as summary string ids.
	root := fresh[0]
	for _, q := range []store.TraceQuery{{Service: root.ServiceName}, {Agent: root.AgentName}, {Model: root.RequestModel}, {Text: root.Name}} {
		q.Limit = store.MaxPageSize
		page, err := up.ListTraces(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var newRow, oldRow bool
		for _, tr := range page.Traces {
			newRow = newRow || tr.TraceID == root.TraceID
			_, kept := want.traces[tr.TraceID]
			oldRow = oldRow || kept
			if tr.TraceID == root.TraceID && (tr.ServiceName != root.ServiceName || tr.RootName != root.Name) {
				t.Errorf("new trace listed as %q/%q, want %q/%q", tr.ServiceName, tr.RootName, root.ServiceName, root.Name)
			}
		}
		if !newRow || !oldRow {
			t.Errorf("%+v: new trace listed %v, a trace of before %v; want both", q, newRow, oldRow)
		}
	}
	spans, err := up.GetTrace(ctx, old)
	if err != nil || len(spans) != len(want.traces[old])+1 {
		t.Fatalf("old trace after one more span: %d spans (%v), want %d", len(spans), err, len(want.traces[old])+1)
	}
}

// A trace written in batches moves from compact blocks to span rows when
// it reaches compactBelow spans, and reads, searches and window reads
// give what they gave before the move.
func TestTraceReachingTheThresholdMovesToSpanRows(t *testing.T) {
	s, _ := openTemp(t)
	s.compactBelow = 100
	ctx := context.Background()
	spans := storetest.GenerateTraces(1, 150, 93)
	if err := s.WriteSpans(ctx, spans[:60]); err != nil {
		t.Fatal(err)
	}
	before, err := s.TraceCalls(ctx, spans[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WriteSpans(ctx, spans[30:90]); err != nil { // overlaps: 30 new
		t.Fatal(err)
	}
	var compact bool
	if err := s.reader.QueryRow(`SELECT compact FROM traces`).Scan(&compact); err != nil || !compact {
		t.Fatalf("90 spans: compact %v (%v), want compact", compact, err)
	}
	if err := s.WriteSpans(ctx, spans[80:]); err != nil {
		t.Fatal(err)
	}
	var rows, blocks int
	if err := s.reader.QueryRow(`SELECT (SELECT compact FROM traces), (SELECT count(*) FROM spans), (SELECT count(*) FROM trace_blocks)`).Scan(&compact, &rows, &blocks); err != nil {
		t.Fatal(err)
	}
	if compact || rows != len(spans) || blocks != 0 {
		t.Fatalf("150 spans: compact %v, %d span rows, %d block refs; want span rows only", compact, rows, blocks)
	}
	got, err := s.GetTrace(ctx, spans[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	checkSpansEqual(t, got, expectedRead(t, spans))
	calls, err := s.TraceCalls(ctx, spans[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) <= len(before) {
		t.Errorf("%d calls after the move, %d before with fewer spans", len(calls), len(before))
	}
	b := store.NewSummaryBuilder()
	b.Add(got)
	if !reflect.DeepEqual(calls, b.Summary().Calls) {
		t.Error("calls after the move differ from the trace's")
	}
	var callID string
	for _, sp := range spans[:60] {
		if sp.ToolCallID != "" {
			callID = sp.ToolCallID
		}
	}
	page, err := s.ListTraces(ctx, store.TraceQuery{Search: mustParse(t, semconv.AttrToolCallID+"="+callID)})
	if err != nil || len(page.Traces) != 1 {
		t.Errorf("search after the move: %d traces (%v), want 1", len(page.Traces), err)
	}
}

// One batch holding small traces (compact blocks) and a trace in span rows
// whose payloads fill several payload blocks stores each where it
// belongs, and every trace reads back as written.
func TestMixedBatchOfCompactAndSpanRowTraces(t *testing.T) {
	s, _ := openTemp(t)
	s.compactBelow = 100
	ctx := context.Background()
	big := storetest.GenerateTraces(3, 150, 94) // three traces in span rows, a payload block each
	for i := range big {
		big[i].Attributes["filler"] = strings.Repeat(fmt.Sprintf("%d-", i), 200) // ~150 KB of payloads a trace
	}
	small := storetest.GenerateTraces(20, 10, 95)
	batch := append(append(append([]store.Span{}, small[:100]...), big...), small[100:]...)
	if err := s.WriteSpans(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var payloadBlocks, spanRows, compact int
	if err := s.reader.QueryRow(`SELECT (SELECT count(*) FROM payload_blocks), (SELECT count(*) FROM spans), (SELECT count(*) FROM traces WHERE compact)`).Scan(&payloadBlocks, &spanRows, &compact); err != nil {
		t.Fatal(err)
	}
	if payloadBlocks != 3 || spanRows != len(big) || compact != 20 {
		t.Fatalf("%d payload blocks, %d span rows, %d compact traces; want 3, %d, 20", payloadBlocks, spanRows, compact, len(big))
	}
	for _, want := range [][]store.Span{big[:150], big[300:], small[:10], small[190:]} {
		got, err := s.GetTrace(ctx, want[0].TraceID)
		if err != nil {
			t.Fatal(err)
		}
		checkSpansEqual(t, got, expectedRead(t, want))
	}
}

// Search over compact blocks agrees with store.TraceMatchesSearch where an
// attribute equal to the span's typed field is left out of the payload,
// where the attribute differs from the field (in the payload), and where
// it is a number or missing.
func TestSearchFindsAttributesLeftOutOfThePayload(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	base := storetest.GenerateTraces(6, 3, 96)
	set := func(trace int, toolCallID string, attr any) {
		for i := trace * 3; i < trace*3+3; i++ {
			sp := &base[i]
			sp.ToolCallID = toolCallID
			if attr == nil {
				delete(sp.Attributes, semconv.AttrToolCallID)
			} else {
				sp.Attributes[semconv.AttrToolCallID] = attr
			}
		}
	}
	set(0, "same", "same")     // left out of the payload
	set(1, "field", "payload") // kept: differs from the field
	set(2, "42", int64(42))    // kept: a number
	set(3, "only-field", nil)  // no attribute at all
	set(4, "", "")             // left out: both empty
	set(5, "true", true)       // kept: a boolean
	if err := s.WriteSpans(ctx, base); err != nil {
		t.Fatal(err)
	}
	byTrace := map[string][]store.Span{}
	for _, sp := range base {
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
	}
	for _, expr := range []string{"same", "field", "payload", "42", "only-field", `""`, "true"} {
		clauses := mustParse(t, semconv.AttrToolCallID+"="+expr)
		for _, c := range [][]store.SearchClause{clauses, mustParse(t, semconv.AttrToolCallID), mustParse(t, semconv.AttrToolCallID+"!="+expr)} {
			want := map[string]bool{}
			for id, spans := range byTrace {
				if store.TraceMatchesSearch(spans, c) {
					want[id] = true
				}
			}
			page, err := s.ListTraces(ctx, store.TraceQuery{Search: c})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, tr := range page.Traces {
				got[tr.TraceID] = true
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("search %v: %d traces, want %d", c, len(got), len(want))
			}
		}
	}
}

// A comparison few traces satisfy is answered from the chunks whose
// search range reaches it (it would otherwise test every trace's spans);
// one most satisfy walks. Both find what store.TraceMatchesSearch finds.
func TestRareComparisonsDriveFromSearchRanges(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	spans := storetest.GenerateTraces(3000, 4, 97) // 12 chunks: more than selectiveRows traces
	spans[6001].Attributes["gen_ai.request.max_tokens"] = int64(999_999)
	for lo := 0; lo < len(spans); lo += 500 {
		if err := s.WriteSpans(ctx, spans[lo:lo+500]); err != nil {
			t.Fatal(err)
		}
	}
	byTrace := map[string][]store.Span{}
	for _, sp := range spans {
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
	}
	for expr, via := range map[string]string{
		"gen_ai.request.max_tokens>500000":  "drive search ranges",
		"gen_ai.request.max_tokens>=999999": "drive search ranges",
		"gen_ai.request.max_tokens>2000000": "drive search ranges",
		"gen_ai.request.max_tokens<=4096":   "walk traces_by_start",
	} {
		q := store.TraceQuery{Search: mustParse(t, expr), Limit: store.MaxPageSize}
		p, err := s.planList(ctx, &q, "")
		if err != nil {
			t.Fatal(err)
		}
		p.release()
		if got := strings.SplitN(p.via, " (", 2)[0]; got != via {
			t.Errorf("%s: planned %q, want %q", expr, p.via, via)
		}
		want := 0
		for _, tr := range byTrace {
			if store.TraceMatchesSearch(tr, q.Search) {
				want++
			}
		}
		page, err := s.ListTraces(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Traces) != min(want, store.MaxPageSize) {
			t.Errorf("%s: %d traces, want %d", expr, len(page.Traces), want)
		}
	}
}
