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

// listsData writes agent traces, conversations and one long trace into s
// and returns probe values for selective searches.
func listsData(t *testing.T, s store.Store, traces int) (callID, doc, session string) {
	t.Helper()
	ctx := store.WithDefaultProject(context.Background())
	spans := storetest.GenerateTraces(traces, 10, 88)
	conv := storetest.GenerateConversation("conv-lists", 6, 8, 89, spans[0].StartTime.Add(time.Minute), 30*time.Second)
	long := storetest.GenerateTraces(1, 3000, 90)
	for lo := 0; lo < len(spans); lo += 500 {
		if err := s.WriteSpans(ctx, spans[lo:min(lo+500, len(spans))]); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range [][]store.Span{conv, long[1500:], long[:1500]} {
		if err := s.WriteSpans(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, sp := range spans[len(spans)/2:] {
		if id, ok := sp.Attributes.String(semconv.AttrToolCallID); ok && callID == "" {
			callID = id
		}
		if len(sp.RetrievedDocs) > 0 && doc == "" {
			doc = sp.RetrievedDocs[0]
		}
	}
	return callID, doc, "conv-lists"
}

// listQueries are the list queries of issue 36: newest, each filter, the
// attribute searches, each sort both ways, a session.
func listQueries(t *testing.T, mid time.Time, callID, doc, session string) map[string]store.TraceQuery {
	search := func(expr string) []store.SearchClause {
		c, err := store.ParseSearch(expr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	qs := map[string]store.TraceQuery{
		"newest":            {},
		"service":           {Service: "agent-api"},
		"agent":             {Agent: "coding-agent"},
		"model":             {Model: "gpt-4o"},
		"model_rare":        {Model: "no-such-model"},
		"status_error":      {Status: store.StatusError},
		"status_ok":         {Status: store.StatusOK},
		"min_duration":      {MinDuration: 15 * time.Second},
		"min_duration_rare": {MinDuration: time.Hour},
		"time_range":        {Start: mid, End: mid.Add(time.Minute)},
		"text":              {Text: "fetch_url"},
		"attr_eq_common":    {Search: search(semconv.AttrRequestModel + "=gpt-4o")},
		"attr_eq_one_trace": {Search: search(semconv.AttrToolCallID + "=" + callID)},
		"attr_gt":           {Search: search(semconv.AttrUsageInputTokens + ">4000")},
		"attr_exists":       {Search: search("error.type")},
		"evidence":          {Search: search("evidence:" + doc)},
		"session":           {Session: session},
		"sessioned_tokens":  {Session: session, SortBy: store.SortTokens},
	}
	for _, k := range []string{store.SortStart, store.SortDuration, store.SortSpans, store.SortErrors, store.SortTokens} {
		qs["sort_"+k] = store.TraceQuery{SortBy: k}
		qs["sort_"+k+"_asc"] = store.TraceQuery{SortBy: k, Ascending: true}
	}
	return qs
}

// TestListQueryPlansUseIndexes states the query plan of every list query
// at 5,000 traces: a page walks the sort key's index (traces_by_*), or
// drives from a selective filter's index or set, and never scans traces
// or spans; the session list walks sessions_by_last. It fails when a
// change loses an index.
func TestListQueryPlansUseIndexes(t *testing.T) {
	// Serial reads of a few thousand traces: the race detector slowed it
	// to minutes (356 s, 173 s, 86 s) and finds nothing TestConformance
	// does not.
	testtier.NoRace(t, "TestConformance")
	testtier.Slow(t)
	t.Parallel() // a file of its own
	ctx := store.WithDefaultProject(context.Background())
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	callID, doc, session := listsData(t, s, 5000)
	first, err := s.ListTraces(ctx, store.TraceQuery{Limit: 1, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	mid := first.Traces[0].Start.Add(3 * time.Minute)
	// The index or set each query's selective filter drives from ("" for
	// none): the plan drives from it when it matches at most
	// selectiveRows traces, and otherwise walks the sort key's index.
	drives := map[string]string{
		"service": "tag blooms", "agent": "tag blooms", "model": "tag blooms", "model_rare": "tag blooms",
		"status_error": "traces_by_errors", "status_ok": "traces_by_errors",
		"min_duration": "traces_by_duration", "min_duration_rare": "traces_by_duration",
		"attr_eq_common": "search blooms", "attr_eq_one_trace": "search blooms", "attr_exists": "search blooms",
		"evidence": "search blooms", "session": "session_turns", "sessioned_tokens": "session_turns",
	}
	seen := map[string]bool{}
	for name, q := range listQueries(t, mid, callID, doc, session) {
		p, err := s.planList(ctx, &q, "")
		if err != nil {
			t.Fatal(err)
		}
		all := q
		all.Limit = store.MaxPageSize
		matches := 0
		for {
			page, err := s.ListTraces(ctx, all)
			if err != nil {
				t.Fatal(err)
			}
			matches += len(page.Traces)
			if all.PageToken = page.NextPageToken; all.PageToken == "" {
				break
			}
		}
		want := "walk " + sortIndexes[p.SortBy].index
		if d := drives[name]; d != "" && matches <= selectiveRows {
			want = "drive " + d
		}
		got := strings.SplitN(p.via, " (", 2)[0]
		// A bloom is a candidate set: a rare value's drive is certain,
		// a common one may walk though it matches few traces.
		if got != want && !(strings.HasSuffix(drives[name], " blooms") && got == "walk traces_by_start" && matches > 50) {
			t.Errorf("%s (%d matches): planned %q, want %q", name, matches, p.via, want)
		}
		seen[got] = true
		plan := explain(t, s.reader, p.sql, p.args...)
		for _, line := range plan {
			// A full scan reads "SCAN <table>" with no index; a scan of a
			// covering index or a subquery's result is not one.
			for _, table := range []string{"traces", "spans", "search_terms", "tb", "trace_blocks", "span_blocks"} {
				if (line == "SCAN "+table || strings.HasPrefix(line, "SCAN "+table+" ")) && !strings.Contains(line, "INDEX") {
					t.Errorf("%s: full scan %q in plan\n%s", name, line, strings.Join(plan, "\n"))
				}
			}
		}
		// A search clause tests a trace by its own keys: a trace in compact
		// blocks by the blocks its trace_blocks range lists, one in span
		// rows by its search terms.
		if len(q.Search) > 0 {
			for _, probe := range []string{"SEARCH tb USING PRIMARY KEY (trace_seq=?)", "SEARCH span_blocks USING INTEGER PRIMARY KEY (rowid=?)",
				"SEARCH search_terms USING PRIMARY KEY (key_id=? AND seq=?"} {
				if !slicesContains(plan, probe) {
					t.Errorf("%s: no %q in plan\n%s", name, probe, strings.Join(plan, "\n"))
				}
			}
		}
		if strings.HasPrefix(p.via, "walk ") {
			if idx := strings.TrimPrefix(p.via, "walk "); !strings.Contains(plan[0], "INDEX "+idx) || slicesContains(plan, "USE TEMP B-TREE FOR ORDER BY") {
				t.Errorf("%s: walk of %s is not an ordered index walk:\n%s", name, idx, strings.Join(plan, "\n"))
			}
		}
		page, err := s.ListTraces(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Traces) == 0 && name != "model_rare" && name != "min_duration_rare" {
			t.Errorf("%s: empty page: the plan proves little", name)
		}
	}
	for _, way := range []string{"walk traces_by_start", "drive tag blooms", "drive traces_by_duration", "drive search blooms", "drive session_turns", "walk traces_by_tokens"} {
		if !seen[way] {
			t.Errorf("no query planned %q: the fixture does not cover it", way)
		}
	}
	plan := explain(t, s.reader, fmt.Sprintf(sessionsSQL, ""), "", 51)
	if len(plan) != 1 || !strings.Contains(plan[0], "sessions_by_last") {
		t.Errorf("sessions list plan:\n%s\nwant a walk of sessions_by_last", strings.Join(plan, "\n"))
	}
}

func slicesContains(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// explain returns the EXPLAIN QUERY PLAN lines of q.
func explain(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	return out
}

// A store written before version 8 (no call groups, sort indexes,
// sessions or blooms) upgrades in place: after the migration every list
// query, the session list and each trace's calls read what a store
// written at version 8 reads. Version 8 only adds, so the older file is
// made from a current one by removing what it added.
func TestUpgradeToVersion8KeepsListsAndSessions(t *testing.T) {
	// Serial reads of a few thousand traces: the race detector slowed it
	// to minutes (356 s, 173 s, 86 s) and finds nothing TestConformance
	// does not.
	testtier.NoRace(t, "TestConformance")
	testtier.Slow(t)
	t.Parallel() // a file of its own
	ctx := store.WithDefaultProject(context.Background())
	path := filepath.Join(t.TempDir(), "traces.db")
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	s.writeV8 = true // what version 8 wrote
	callID, doc, session := listsData(t, s, 1200)
	first, err := s.ListTraces(ctx, store.TraceQuery{Limit: 1, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	qs := listQueries(t, first.Traces[0].Start.Add(3*time.Minute), callID, doc, session)
	type snapshot struct {
		lists    map[string][]store.TraceSummary
		sessions []store.SessionSummary
		calls    map[string][]store.Call
	}
	take := func(st *Store) snapshot {
		snap := snapshot{lists: map[string][]store.TraceSummary{}, calls: map[string][]store.Call{}}
		for name, q := range qs {
			q.Limit = 1000
			page, err := st.ListTraces(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			snap.lists[name] = page.Traces
		}
		for tok := ""; ; {
			p, err := st.ListSessions(ctx, store.SessionQuery{Limit: 1000, PageToken: tok})
			if err != nil {
				t.Fatal(err)
			}
			snap.sessions = append(snap.sessions, p.Sessions...)
			if tok = p.NextPageToken; tok == "" {
				break
			}
		}
		for _, tr := range snap.lists["newest"] {
			c, err := st.TraceCalls(ctx, tr.TraceID)
			if err != nil {
				t.Fatal(err)
			}
			snap.calls[tr.TraceID] = c
		}
		return snap
	}
	want := take(s)
	if len(want.lists["attr_eq_one_trace"]) == 0 || len(want.sessions) < 100 || len(want.lists["session"]) != 6 {
		t.Fatalf("fixture problem: %d matches of the selective search, %d sessions, %d turns of %s",
			len(want.lists["attr_eq_one_trace"]), len(want.sessions), len(want.lists["session"]), session)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range append(downgradeTo8[:len(downgradeTo8):len(downgradeTo8)],
		`DROP INDEX traces_by_start`, `DROP INDEX traces_by_duration`, `DROP INDEX traces_by_spans`,
		`DROP INDEX traces_by_errors`, `DROP INDEX traces_by_tokens`,
		`CREATE INDEX traces_by_start ON traces (start_ns, trace_id)`,
		`CREATE INDEX traces_by_project_start ON traces (project, start_ns)`,
		`ALTER TABLE traces DROP COLUMN call_groups`,
		`DROP TABLE session_turns`, `DROP TABLE sessions`, `DROP TABLE search_blooms`,
		`DELETE FROM schema_migrations WHERE version = 8`, `PRAGMA user_version = 7`,
	) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("make a version 7 file: %s: %v", stmt, err)
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
	if !reflect.DeepEqual(got.sessions, want.sessions) {
		t.Errorf("sessions after the upgrade differ: %d, want %d", len(got.sessions), len(want.sessions))
	}
	if !reflect.DeepEqual(got.calls, want.calls) {
		t.Error("trace calls after the upgrade differ")
	}
}

// Every field of a call group survives its stored form, and a field added
// to store.CallGroup fails here until packGroups stores it.
func TestPackGroups(t *testing.T) {
	var g store.CallGroup
	v := reflect.ValueOf(&g).Elem()
	ints := 0
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int64:
			f.SetInt(int64(i+1) * -12345678901)
			ints++
		case reflect.String:
			f.SetString(fmt.Sprintf("model-%d", i))
		default:
			t.Fatalf("CallGroup.%s is a %s: packGroups does not store it", v.Type().Field(i).Name, f.Kind())
		}
	}
	if n := len(groupInts(&g)); n != ints {
		t.Fatalf("groupInts stores %d of CallGroup's %d integers", n, ints)
	}
	models := []string{"m", g.ResponseModel}
	for _, gs := range [][]store.CallGroup{nil, {g}, {g, {RequestModel: "m", Calls: 1}}} {
		got, err := decodeGroups(string(packGroups(gs, models)), models)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, gs) {
			t.Errorf("round trip of %+v gave %+v", gs, got)
		}
	}
	if _, err := decodeGroups(string(packGroups([]store.CallGroup{g}, models)[:20]), models); err == nil {
		t.Error("truncated groups decoded without an error")
	}
}
