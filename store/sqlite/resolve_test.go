package sqlite

import (
	"context"
	"strings"
	"testing"
)

// TestResolveTraceIDIsARangeScanOfTheTraceIDIndex checks that resolving a
// prefix reads only the matching part of the trace id index, never the
// whole traces table.
func TestResolveTraceIDIsARangeScanOfTheTraceIDIndex(t *testing.T) {
	s, _ := openTemp(t)
	rows, err := s.reader.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+resolveSQL, []byte{1}, []byte{2}, "", 6)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(plan, "; ")
	if !strings.Contains(got, "SEARCH traces USING COVERING INDEX") || !strings.Contains(got, "trace_id>? AND trace_id<?") || strings.Contains(got, "TEMP B-TREE") {
		t.Fatalf("query plan %q; want a covering range search of the trace id index, no sort", got)
	}
}
