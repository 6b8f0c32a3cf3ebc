package clickhouse_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestMigrationToTraceIndexListsWhatAFreshStoreLists writes the same spans
// (traces split across batches, some spans sent twice in different batches)
// into a database at schema version 2, which then migrates to the latest
// version, and into a fresh database through WriteSpans. Every list query
// must return the same summaries from both, and the version 2 view and
// table must be gone.
func TestMigrationToTraceIndexListsWhatAFreshStoreLists(t *testing.T) {
	testtier.Slow(t)
	testtier.NoRace(t, "TestConformance") // single-goroutine: migrations and writes in sequence
	t.Parallel()                          // a database of its own on the shared server
	srv := chtestStart(t)
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
	defer cancel()

	spans := storetest.GenerateTraces(60, 7, 11)
	batches := [][]store.Span{spans[:150], spans[150:300], spans[300:], spans[140:160], spans[:5]}

	oldDB := srv.NewDatabase(t)
	old, err := clickhouse.OpenAtVersion(ctx, clickhouse.Config{DSN: srv.DSN(oldDB)}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range batches {
		if err := old.InsertSpansOnly(ctx, b); err != nil {
			t.Fatalf("version 2 insert %d: %v", i, err)
		}
	}
	old.Shutdown(store.WithDefaultProject(context.Background()))
	migrated := open(t, srv.DSN(oldDB)) // applies version 3

	fresh := open(t, srv.DSN(srv.NewDatabase(t)))
	for i, b := range batches {
		if err := fresh.WriteSpans(ctx, b); err != nil {
			t.Fatalf("fresh write %d: %v", i, err)
		}
	}

	mid := spans[30*7].StartTime // the root of trace 30: traces start 20–100 ms apart
	queries := []store.TraceQuery{
		{Limit: 1000},
		{Limit: 1000, SortBy: store.SortTokens},
		{Limit: 1000, SortBy: store.SortDuration, Ascending: true},
		{Limit: 1000, Start: mid},
		{Limit: 1000, End: mid, Status: store.StatusOK},
		{Limit: 1000, Status: store.StatusError, SortBy: store.SortErrors},
		{Limit: 1000, Model: spans[1].RequestModel},
	}
	for _, q := range queries {
		want, err := fresh.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("fresh ListTraces(%+v): %v", q, err)
		}
		got, err := migrated.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("migrated ListTraces(%+v): %v", q, err)
		}
		if len(want.Traces) == 0 {
			t.Errorf("ListTraces(%+v) is empty; the query proves nothing", q)
		}
		if !reflect.DeepEqual(want.Traces, got.Traces) {
			t.Errorf("ListTraces(%+v): migrated store differs from a fresh one\nfresh:    %+v\nmigrated: %+v", q, want.Traces, got.Traces)
		}
	}
	if n := len(queryStrings(t, srv, "SELECT name FROM system.tables WHERE database = '"+oldDB+"' AND name LIKE 'trace_summaries%'")); n != 0 {
		t.Errorf("%d version 2 summary tables or views remain after the migration", n)
	}
}

// TestMigrationToOTLPEnvelopeKeepsOldSpansAndStoresNewFields writes spans
// under schema version 3, migrates to the latest version and checks that
// they read back as written, with no envelope fields (the sender's values
// were not kept then), and that spans written afterwards keep theirs.
func TestMigrationToOTLPEnvelopeKeepsOldSpansAndStoresNewFields(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtestStart(t)
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
	defer cancel()
	spans := storetest.GenerateTraces(8, 4, 12)
	before, after := spans[:16], spans[16:]

	db := srv.NewDatabase(t)
	old, err := clickhouse.OpenAtVersion(ctx, clickhouse.Config{DSN: srv.DSN(db)}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.InsertSpansOnly(ctx, before); err != nil {
		t.Fatalf("version 3 insert: %v", err)
	}
	old.Shutdown(store.WithDefaultProject(context.Background()))
	s := open(t, srv.DSN(db)) // applies version 4
	if err := s.WriteSpans(ctx, after); err != nil {
		t.Fatal(err)
	}
	check := func(want []store.Span, envelope bool) {
		t.Helper()
		byTrace := map[string][]store.Span{}
		for _, sp := range want {
			if !envelope {
				sp.Flags, sp.DroppedAttributesCount, sp.DroppedEventsCount, sp.DroppedLinksCount = 0, 0, 0, 0
				sp.ScopeAttributes, sp.ScopeDroppedAttributesCount, sp.ScopeSchemaURL = nil, 0, ""
				sp.ResourceSchemaURL, sp.ResourceDroppedAttributesCount = "", 0
			}
			byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
		}
		for id, w := range byTrace {
			got, err := s.GetTrace(ctx, id)
			if err != nil {
				t.Fatalf("GetTrace(%s): %v", id, err)
			}
			if len(got) != len(w) {
				t.Fatalf("trace %s: %d spans, want %d", id, len(got), len(w))
			}
			for i := range w {
				if got[i].Flags != w[i].Flags || got[i].ScopeSchemaURL != w[i].ScopeSchemaURL ||
					got[i].ResourceSchemaURL != w[i].ResourceSchemaURL || !reflect.DeepEqual(got[i].ScopeAttributes, w[i].ScopeAttributes) ||
					!reflect.DeepEqual(got[i].Links, w[i].Links) || !reflect.DeepEqual(got[i].Attributes, w[i].Attributes) {
					t.Errorf("trace %s span %s (envelope %v):\n got %+v\nwant %+v", id, w[i].SpanID, envelope, got[i], w[i])
				}
			}
		}
	}
	check(before, false)
	check(after, true)
	if after[0].Flags == 0 || after[0].ScopeSchemaURL == "" {
		t.Fatal("generated spans carry no envelope fields; the check proves nothing")
	}
}

// TestMigrationToTypedAttributesKeepsEverySpanReadable writes spans under
// schema version 4 (whole attribute JSON), migrates to the latest version
// and writes more; every span of both reads back equal to what was written,
// and searches on attributes that typed columns now hold find the old and
// the new spans alike.
func TestMigrationToTypedAttributesKeepsEverySpanReadable(t *testing.T) {
	testtier.Slow(t)
	testtier.NoRace(t, "TestConformance") // single-goroutine: migrations and writes in sequence
	t.Parallel()                          // a database of its own on the shared server
	srv := chtestStart(t)
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
	defer cancel()
	spans := storetest.GenerateTraces(40, 6, 13)
	before, after := spans[:120], spans[120:]

	db := srv.NewDatabase(t)
	old, err := clickhouse.OpenAtVersion(ctx, clickhouse.Config{DSN: srv.DSN(db)}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.InsertSpansAtVersion4(ctx, before); err != nil {
		t.Fatalf("version 4 insert: %v", err)
	}
	old.Shutdown(store.WithDefaultProject(context.Background()))
	s := open(t, srv.DSN(db)) // applies version 5
	if err := s.WriteSpans(ctx, after); err != nil {
		t.Fatal(err)
	}
	// Old rows keep their whole JSON; new rows leave typed attributes out.
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".spans WHERE attributes_in_columns = 0 AND attributes != ''"); n < uint64(len(before)) {
		t.Errorf("%d rows with whole attribute JSON, want at least the %d written under version 4", n, len(before))
	}
	if n := queryCount(t, srv, "SELECT count() FROM "+db+".spans WHERE attributes_in_columns != 0"); n == 0 {
		t.Error("no row written after the migration leaves an attribute to its column; the test proves nothing")
	}

	byTrace := map[string][]store.Span{}
	for _, sp := range spans {
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
	}
	for id, want := range byTrace {
		got, err := s.GetTrace(ctx, id)
		if err != nil {
			t.Fatalf("GetTrace(%s): %v", id, err)
		}
		if len(got) != len(want) {
			t.Fatalf("trace %s: %d spans, want %d", id, len(got), len(want))
		}
		gotByID := map[string]store.Span{}
		for _, sp := range got {
			gotByID[sp.SpanID] = sp
		}
		for _, w := range want {
			g := gotByID[w.SpanID]
			wantJSON, _ := w.Attributes.MarshalJSON()
			gotJSON, _ := g.Attributes.MarshalJSON()
			var wantAttrs store.Attributes
			if err := wantAttrs.UnmarshalJSON(wantJSON); err != nil {
				t.Fatal(err)
			}
			if string(gotJSON) != string(wantJSON) || !reflect.DeepEqual(g.Attributes, wantAttrs) {
				t.Errorf("span %s attributes read back as\n%s\nwant\n%s", w.SpanID, gotJSON, wantJSON)
			}
			if g.Operation != w.Operation || g.InputTokens != w.InputTokens || g.ToolCallID != w.ToolCallID ||
				g.ConversationID != w.ConversationID || !reflect.DeepEqual(g.ResourceAttributes, w.ResourceAttributes) {
				t.Errorf("span %s: typed fields read back as %+v, want %+v", w.SpanID, g, w)
			}
		}
	}

	// A string equality on a typed attribute compares the column for new
	// rows and the JSON for old ones.
	conv := after[0].ConversationID
	for _, tc := range []struct {
		expr      string
		in, notIn store.Span
	}{
		{semconv.AttrConversationID + "=" + conv, after[0], before[0]},
		{semconv.AttrConversationID + "!=" + conv, before[0], after[0]},
		{semconv.AttrConversationID + "=" + before[0].ConversationID, before[0], after[0]},
	} {
		q := store.TraceQuery{Limit: 1000}
		if q.Search, err = store.ParseSearch(tc.expr); err != nil {
			t.Fatal(err)
		}
		page, err := s.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("search %s: %v", tc.expr, err)
		}
		found := map[string]bool{}
		for _, tr := range page.Traces {
			found[tr.TraceID] = true
		}
		if !found[tc.in.TraceID] || found[tc.notIn.TraceID] {
			t.Errorf("search %s: finds trace %s %v (want true), trace %s %v (want false)", tc.expr,
				tc.in.TraceID, found[tc.in.TraceID], tc.notIn.TraceID, found[tc.notIn.TraceID])
		}
	}

	// Every generated chat span has its operation and input tokens both as
	// attributes and in typed columns.
	for _, expr := range []string{semconv.AttrOperationName + "=chat", semconv.AttrUsageInputTokens + ">0"} {
		q := store.TraceQuery{Limit: 1000}
		if q.Search, err = store.ParseSearch(expr); err != nil {
			t.Fatal(err)
		}
		page, err := s.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("search %s: %v", expr, err)
		}
		found := map[string]bool{}
		for _, tr := range page.Traces {
			found[tr.TraceID] = true
		}
		for _, sp := range []store.Span{before[0], after[0]} {
			if !found[sp.TraceID] {
				t.Errorf("search %s misses trace %s (written %s the migration)", expr, sp.TraceID,
					map[bool]string{true: "before", false: "after"}[sp.TraceID == before[0].TraceID])
			}
		}
	}
}

// TestMigrationToTraceSummariesListsWhatAFreshStoreLists writes the same
// spans (a long trace in batches, children before parents, conversations,
// some spans sent twice) into a database at schema version 7, which then
// migrates to the latest version (summarising every stored trace), and
// into a fresh database. Every list query, the session list and each
// trace's calls must read the same from both.
func TestMigrationToTraceSummariesListsWhatAFreshStoreLists(t *testing.T) {
	// Serial writes and reads (40, 22, 21 and 41 s under -race in make
	// test): the race detector finds nothing here TestConformance does not.
	testtier.NoRace(t, "TestConformance")
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtestStart(t)
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 3*time.Minute)
	defer cancel()
	spans := storetest.GenerateTraces(300, 8, 21)
	conv := storetest.GenerateConversation("conv-upgrade", 5, 6, 22, spans[0].StartTime.Add(time.Minute), 20*time.Second)
	long := storetest.GenerateTraces(1, 5000, 23)
	slices.Reverse(long)
	batches := [][]store.Span{spans[:900], spans[900:], conv, long[:2500], long[2500:], spans[880:920]}

	oldDB := srv.NewDatabase(t)
	old, err := clickhouse.OpenAtVersion(ctx, clickhouse.Config{DSN: srv.DSN(oldDB)}, 7)
	if err != nil {
		t.Fatal(err)
	}
	fresh := open(t, srv.DSN(srv.NewDatabase(t)))
	defer fresh.Shutdown(store.WithDefaultProject(context.Background()))
	for i, b := range batches {
		if err := old.WriteSpans(ctx, b); err != nil {
			t.Fatalf("version 7 write %d: %v", i, err)
		}
		if err := fresh.WriteSpans(ctx, b); err != nil {
			t.Fatalf("fresh write %d: %v", i, err)
		}
	}
	old.Shutdown(store.WithDefaultProject(context.Background()))
	migrated := open(t, srv.DSN(oldDB)) // applies version 9: summarises the stored traces
	defer migrated.Shutdown(store.WithDefaultProject(context.Background()))

	search := func(expr string) []store.SearchClause {
		c, err := store.ParseSearch(expr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	queries := []store.TraceQuery{
		{Limit: 1000},
		{Limit: 1000, SortBy: store.SortTokens},
		{Limit: 1000, SortBy: store.SortSpans, Ascending: true},
		{Limit: 1000, Status: store.StatusError, SortBy: store.SortErrors},
		{Limit: 1000, Model: spans[1].RequestModel, Text: "chat"},
		{Limit: 1000, MinDuration: 10 * time.Second, Service: spans[0].ServiceName},
		{Limit: 1000, Search: search(semconv.AttrUsageInputTokens + ">3000")},
		{Limit: 1000, Session: "conv-upgrade"},
	}
	for _, q := range queries {
		want, err := fresh.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("fresh ListTraces(%+v): %v", q, err)
		}
		got, err := migrated.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("migrated ListTraces(%+v): %v", q, err)
		}
		if len(want.Traces) == 0 {
			t.Errorf("ListTraces(%+v) is empty; the query proves nothing", q)
		}
		if !reflect.DeepEqual(want.Traces, got.Traces) {
			t.Errorf("ListTraces(%+v): migrated store differs from a fresh one\nfresh:    %d traces\nmigrated: %d traces", q, len(want.Traces), len(got.Traces))
		}
	}
	ws, err := fresh.ListSessions(ctx, store.SessionQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	gs, err := migrated.ListSessions(ctx, store.SessionQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws.Sessions) < 100 || !reflect.DeepEqual(ws, gs) {
		t.Errorf("sessions: migrated %d, fresh %d (or they differ)", len(gs.Sessions), len(ws.Sessions))
	}
	for _, id := range []string{long[0].TraceID, spans[0].TraceID} {
		wc, err := fresh.TraceCalls(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		gc, err := migrated.TraceCalls(ctx, id)
		if err != nil || !reflect.DeepEqual(wc, gc) || len(wc) == 0 {
			t.Errorf("TraceCalls(%s): migrated %d calls (%v), fresh %d", id, len(gc), err, len(wc))
		}
	}
}

// Version 11 changes the codecs of the span text columns and the part
// format in place: spans written before it and after it read back alike,
// also once merged into one part, and the table says what it now uses.
func TestMigrationToSpanTextCodecsKeepsEverySpanReadable(t *testing.T) {
	testtier.Slow(t)
	testtier.NoRace(t, "TestConformance") // single-goroutine: migrations and writes in sequence
	t.Parallel()                          // a database of its own on the shared server
	srv := chtestStart(t)
	ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
	defer cancel()
	spans := storetest.GenerateTraces(30, 6, 17)
	before, after := spans[:90], spans[90:]

	db := srv.NewDatabase(t)
	old, err := clickhouse.OpenAtVersion(ctx, clickhouse.Config{DSN: srv.DSN(db)}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := old.WriteSpans(ctx, before); err != nil {
		t.Fatalf("version 7 write: %v", err)
	}
	old.Shutdown(store.WithDefaultProject(context.Background()))
	codec := func() string {
		return strings.Join(queryStrings(t, srv, "SELECT concat(name, ' ', compression_codec) FROM system.columns WHERE database = '"+db+
			"' AND table = 'spans' AND name IN ('attributes', 'events') ORDER BY name"), ", ")
	}
	if got := codec(); got != "attributes CODEC(ZSTD(1)), events CODEC(ZSTD(1))" {
		t.Fatalf("before the migration: %s", got)
	}
	s := open(t, srv.DSN(db)) // applies version 11
	if err := s.WriteSpans(ctx, after); err != nil {
		t.Fatal(err)
	}
	if got := codec(); got != "attributes CODEC(ZSTD(2)), events CODEC(ZSTD(2))" {
		t.Errorf("after the migration: %s", got)
	}
	ddl := strings.Join(queryStrings(t, srv, "SELECT create_table_query FROM system.tables WHERE database = '"+db+"' AND name = 'spans'"), "")
	for _, want := range []string{"max_compress_block_size = 4194304", "min_bytes_for_wide_part = 268435456"} {
		if !strings.Contains(ddl, want) {
			t.Errorf("spans lacks %s:\n%s", want, ddl)
		}
	}
	check := func(when string) {
		t.Helper()
		byTrace := map[string][]store.Span{}
		for _, sp := range spans {
			byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
		}
		for id, want := range byTrace {
			got, err := s.GetTrace(ctx, id)
			if err != nil || len(got) != len(want) {
				t.Fatalf("%s: GetTrace(%s): %d spans, %v; want %d", when, id, len(got), err, len(want))
			}
			gotByID := map[string]store.Span{}
			for _, sp := range got {
				gotByID[sp.SpanID] = sp
			}
			for _, w := range want {
				g := gotByID[w.SpanID]
				wj, _ := w.Attributes.MarshalJSON()
				gj, _ := g.Attributes.MarshalJSON()
				if string(gj) != string(wj) || len(g.Events) != len(w.Events) || g.Name != w.Name {
					t.Fatalf("%s: span %s reads back as %s (%d events), want %s (%d events)", when, w.SpanID, gj, len(g.Events), wj, len(w.Events))
				}
			}
		}
	}
	check("old and new parts")
	if err := execSQL(srv, "OPTIMIZE TABLE "+db+".spans FINAL"); err != nil {
		t.Fatal(err)
	}
	check("merged into one part")
}
