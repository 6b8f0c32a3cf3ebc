package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestSearchBackfillIndexesTracesStoredBeforeTheIndex simulates a store
// upgraded to the search index: its traces have no search terms and the
// migration's backfill mark is set (as 0003 leaves a non-empty store).
// A read-only open refuses searches with a clear error until a writable
// open has indexed every trace; then every search answers as it does for
// traces written with the index, in chunks (more traces than one chunk).
func TestSearchBackfillIndexesTracesStoredBeforeTheIndex(t *testing.T) {
	// Serial writes and reads (40, 22, 21 and 41 s under -race in make
	// test): the race detector finds nothing here TestConformance does not.
	testtier.NoRace(t, "TestConformance")
	testtier.Slow(t)
	t.Parallel() // a file of its own
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "traces.db")
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	s.writeV8 = true // span rows and search terms, as the versions that backfill wrote
	spans := storetest.GenerateTraces(backfillChunk+40, 4, 5)
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	queries := []store.TraceQuery{
		{Search: mustParse(t, "gen_ai.request.model=gpt-4o gen_ai.usage.input_tokens>2000"), Limit: 1000},
		{Search: mustParse(t, `name:"execute_tool web_search"`), Limit: 1000},
		{Session: spans[len(spans)-1].ConversationID},
	}
	var want [][]store.TraceSummary
	for _, q := range queries {
		p, err := s.ListTraces(ctx, q)
		if err != nil || len(p.Traces) == 0 {
			t.Fatalf("ListTraces before: %d traces, %v", len(p.Traces), err)
		}
		want = append(want, p.Traces)
	}
	s.Shutdown(ctx)

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM search_terms; DELETE FROM search_keys; INSERT INTO search_backfill SELECT max(seq) + 1 FROM traces`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro, err := Open(ctx, Config{Path: path, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.ListTraces(ctx, queries[0]); !errors.Is(err, errSearchBackfill) {
		t.Errorf("search before the backfill: %v; want the backfill error", err)
	}
	if _, err := ro.ListTraces(ctx, store.TraceQuery{}); err != nil {
		t.Errorf("a list without search before the backfill: %v", err)
	}
	ro.Shutdown(ctx)

	s, err = Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	for i, q := range queries {
		p, err := s.ListTraces(ctx, q)
		if err != nil {
			t.Fatalf("ListTraces after the backfill: %v", err)
		}
		if len(p.Traces) != len(want[i]) {
			t.Fatalf("query %d: %d traces after the backfill, %d before", i, len(p.Traces), len(want[i]))
		}
		for j := range p.Traces {
			if p.Traces[j].TraceID != want[i][j].TraceID {
				t.Fatalf("query %d: trace %d is %s after the backfill, %s before", i, j, p.Traces[j].TraceID, want[i][j].TraceID)
			}
		}
	}
}

func mustParse(t *testing.T, expr string) []store.SearchClause {
	t.Helper()
	c, err := store.ParseSearch(expr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
