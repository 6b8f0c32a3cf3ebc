package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

func TestScratchPlans(t *testing.T) {
	ctx := store.WithDefaultProject(context.Background())
	s, err := Open(ctx, Config{Path: filepath.Join(t.TempDir(), "t.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	if err := s.WriteSpans(ctx, storetest.GenerateTraces(3000, 10, 1)); err != nil {
		t.Fatal(err)
	}
	s.writer.Exec("ANALYZE")
	qs := []store.TraceQuery{{}, {Service: "agent-api"}, {Agent: "coding-agent"}, {Model: "gpt-4o"}, {Status: "error"}, {Status: "ok"}, {MinDuration: 10 * time.Second},
		{Start: time.Date(2026, 3, 1, 9, 1, 0, 0, time.UTC), End: time.Date(2026, 3, 1, 9, 2, 0, 0, time.UTC)}, {Text: "web_search"},
		{SortBy: "duration"}, {SortBy: "tokens", Ascending: true}, {SortBy: "spans"}, {SortBy: "errors"},
		{Search: mustParseS("gen_ai.request.model=gpt-4o")}, {Search: mustParseS("gen_ai.usage.input_tokens>4000")}, {Session: "x"}}
	for _, q := range qs {
		p, err := planQuery(&q, "")
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.reader.Query("EXPLAIN QUERY PLAN "+p.sql, p.args...)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("== %+v\n", q.SortBy+" "+q.Service+q.Agent+q.Model+q.Status+q.Text+q.Session+fmt.Sprint(q.MinDuration, q.Search))
		for rows.Next() {
			var id, parent, nu int
			var detail string
			rows.Scan(&id, &parent, &nu, &detail)
			fmt.Println("   ", detail)
		}
		rows.Close()
	}
}

func mustParseS(s string) []store.SearchClause {
	c, err := store.ParseSearch(s)
	if err != nil {
		panic(err)
	}
	return c
}
