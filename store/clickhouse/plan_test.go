package clickhouse

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// granulesRe reads "Granules: selected/total" of EXPLAIN indexes = 1.
var granulesRe = regexp.MustCompile(`Granules: (\d+)/(\d+)`)

// explainGranules returns, for each table an EXPLAIN indexes = 1 of q
// reads, the granules it selects after every index and the table's total.
func explainGranules(t *testing.T, s *Store, q string, args ...any) (selected, total int, plan string) {
	t.Helper()
	rows, err := s.query(store.WithDefaultProject(context.Background()), "EXPLAIN indexes = 1 "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	var first, last []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		b.WriteString(l + "\n")
		if m := granulesRe.FindStringSubmatch(l); m != nil {
			if first == nil {
				first = m
			}
			last = m
		}
	}
	if last == nil {
		t.Fatalf("explain of %s shows no granules:\n%s", q, b.String())
	}
	// Each index step reads "selected/entering"; the first step enters
	// with the whole table.
	selected, _ = strconv.Atoi(last[1])
	total, _ = strconv.Atoi(first[2])
	return selected, total, b.String()
}

// spanSubqueries splits a page query's "trace_id IN (SELECT …)" subqueries
// on spans out of its SQL, each with its arguments (taken in order of
// their placeholders).
func spanSubqueries(sql string, args []any) (subs []string, subArgs [][]any) {
	at := 0 // placeholders before the current position
	for i := 0; i < len(sql); {
		j := strings.Index(sql[i:], "trace_id IN (SELECT")
		if j < 0 {
			break
		}
		start := i + j + len("trace_id IN (")
		at += strings.Count(sql[i:start], "?")
		depth, end := 1, start
		for ; end < len(sql) && depth > 0; end++ {
			switch sql[end] {
			case '(':
				depth++
			case ')':
				depth--
			}
		}
		sub := sql[start : end-1]
		n := strings.Count(sub, "?")
		if strings.Contains(sub, ".spans") {
			subs = append(subs, sub)
			subArgs = append(subArgs, args[at:at+n])
		}
		at += n
		i = end
	}
	return subs, subArgs
}

// TestListQueryPlansPrune states, with EXPLAIN indexes = 1 on generated
// data, what every list query reads: the traces table by the primary key's
// project (here a quarter of the table: the other project's granules are
// skipped), and, for a search, spans through the skip indexes and the
// hour of the primary key, bounded to a few granules for a rare value, a
// rare key, an evidence id, a tool call id and a time window. It fails
// when a change loses an index.
func TestListQueryPlansPrune(t *testing.T) {
	// Serial reads of a few thousand traces: the race detector slowed it
	// to minutes (356 s, 173 s, 86 s) and finds nothing TestConformance
	// does not.
	testtier.NoRace(t, "TestConformance")
	testtier.Slow(t)
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := Open(store.WithDefaultProject(ctx), Config{DSN: srv.DSN(srv.NewDatabase(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	// The default project: 4,000 traces over ~12 hours; another project
	// three times as many (its granules are what the key skips).
	var callID, doc, respID string
	for c := 0; c < 4; c++ {
		spans := storetest.GenerateTraces(1000, 10, int64(60+c))
		for i := range spans {
			shift := time.Duration(c) * 3 * time.Hour
			spans[i].StartTime, spans[i].EndTime = spans[i].StartTime.Add(shift), spans[i].EndTime.Add(shift)
			for e := range spans[i].Events {
				spans[i].Events[e].Time = spans[i].Events[e].Time.Add(shift)
			}
			if c == 2 && i == 5000 {
				spans[i].Attributes["test.rare_key"] = "x"
			}
		}
		if c == 1 {
			for _, sp := range spans[4000:] {
				if id, ok := sp.Attributes.String(semconv.AttrToolCallID); ok && callID == "" {
					callID = id
				}
				if id, ok := sp.Attributes.String(semconv.AttrResponseID); ok && respID == "" {
					respID = id
				}
				if len(sp.RetrievedDocs) > 0 && doc == "" {
					doc = sp.RetrievedDocs[0]
				}
			}
		}
		if err := s.WriteSpans(store.WithDefaultProject(ctx), spans); err != nil {
			t.Fatal(err)
		}
		other := storetest.GenerateTraces(3000, 10, int64(70+c))
		for i := range other {
			other[i].Project = "other"
		}
		if err := s.WriteSpans(store.WithProject(ctx, "other"), other); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.conn.Exec(ctx, "OPTIMIZE TABLE "+s.summaryTable+" FINAL"); err != nil {
		t.Fatal(err)
	}
	search := func(expr string) []store.SearchClause {
		c, err := store.ParseSearch(expr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	pc := "project = ''"
	mid := time.Date(2026, 3, 1, 15, 0, 0, 0, time.UTC)
	queries := map[string]store.TraceQuery{
		"newest": {}, "service": {Service: "agent-api"}, "agent": {Agent: "coding-agent"}, "model": {Model: "gpt-4o"},
		"status_error": {Status: store.StatusError}, "min_duration": {MinDuration: 15 * time.Second},
		"time_range": {Start: mid, End: mid.Add(time.Hour)}, "text": {Text: "fetch_url"},
		"session": {Session: "conv_0123456789ab"}, "sort_tokens": {SortBy: store.SortTokens}, "sort_duration_asc": {SortBy: store.SortDuration, Ascending: true},
		"sort_spans": {SortBy: store.SortSpans}, "sort_errors": {SortBy: store.SortErrors},
	}
	for name, q := range queries {
		p, err := s.planList(&q, pc, window{})
		if err != nil {
			t.Fatal(err)
		}
		sel, total, plan := explainGranules(t, s, p.sql, p.args...)
		t.Logf("%s: traces table, %d of %d granules", name, sel, total)
		// The default project's rows are a quarter of the table.
		if sel*3 > total+3 {
			t.Errorf("%s reads %d of %d granules of the traces table, want about a quarter (the primary key's project):\n%s", name, sel, total, plan)
		}
	}
	// Searches: each subquery on spans, bounded. Whether a key is set
	// reads trace_attrs alone (migration 12); an ordered comparison of a
	// typed integer reads it in place of the typed column's spans, and the
	// spans whose JSON holds the key (a non-integer value), which the
	// key's skip index finds: none here. The other clauses read no
	// trace_attrs.
	for _, c := range []struct {
		name, expr string
		max        int  // granules of spans read by a subquery, at most
		spans      int  // subqueries on spans (-1: at least one)
		attrs      bool // trace_attrs is read
	}{
		{"tool_call_id", semconv.AttrToolCallID + "=" + callID, 2, -1, false},
		{"response_id_json", semconv.AttrResponseID + "=" + respID, 3, -1, false},
		{"evidence", "evidence:" + doc, 3, -1, false},
		{"rare_key", "test.rare_key", 0, 0, true},
		{"tokens_above", semconv.AttrUsageInputTokens + ">4000", 1, 1, true},
	} {
		q := store.TraceQuery{Search: search(c.expr)}
		p, err := s.planList(&q, pc, window{})
		if err != nil {
			t.Fatal(err)
		}
		subs, subArgs := spanSubqueries(p.sql, p.args)
		if c.spans < 0 && len(subs) == 0 || c.spans >= 0 && len(subs) != c.spans {
			t.Fatalf("%s: %d subqueries on spans, want %d (-1: at least one), in %s", c.name, len(subs), c.spans, p.sql)
		}
		if read := strings.Contains(p.sql, s.attrsTable); read != c.attrs {
			t.Errorf("%s: trace_attrs read: %v, want %v:\n%s", c.name, read, c.attrs, p.sql)
		}
		for i, sub := range subs {
			sel, total, plan := explainGranules(t, s, sub, subArgs[i]...)
			t.Logf("%s: spans subquery %d, %d of %d granules", c.name, i, sel, total)
			if sel > c.max || total < 10 {
				t.Errorf("%s: a subquery reads %d of %d granules of spans, want at most %d:\n%s\n%s", c.name, sel, total, c.max, sub, plan)
			}
		}
		page, err := s.ListTraces(store.WithDefaultProject(ctx), q)
		if err != nil || len(page.Traces) == 0 {
			t.Errorf("%s: %d traces, %v: the plan proves little", c.name, len(page.Traces), err)
		}
	}
	// A search's first window reads the last hours' spans only.
	var newest time.Time
	if err := s.queryRow(ctx, "SELECT max(start) FROM "+s.summaryTable+" WHERE "+pc).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	q := store.TraceQuery{Search: search(semconv.AttrOperationName + "=chat")}
	p, err := s.planList(&q, pc, window{from: newest.Add(-firstWindow)})
	if err != nil {
		t.Fatal(err)
	}
	subs, subArgs := spanSubqueries(p.sql, p.args)
	for i, sub := range subs {
		sel, total, plan := explainGranules(t, s, sub, subArgs[i]...)
		t.Logf("first window: spans subquery %d, %d of %d granules", i, sel, total)
		if sel*3 > total {
			t.Errorf("first window: a subquery reads %d of %d granules of spans, want the last hours' (the primary key's hour):\n%s\n%s", sel, total, sub, plan)
		}
	}
}
