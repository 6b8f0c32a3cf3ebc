package clickhouse_test

import (
	"context"
	"errors"
	"testing"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestProjectsFailClosed: the ClickHouse schema has no project column yet,
// so a span of a named project is refused (CheckSpan, WriteSpans) and a
// read scoped to a named project is an error, never the default project's
// traces.
func TestProjectsFailClosed(t *testing.T) {
	srv := chtestStart(t)
	s, _ := openFresh(t, srv)
	ctx := context.Background()
	spans := storetest.GenerateTraces(1, 3, 5)
	if err := s.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	id := spans[0].TraceID
	named := store.WithProject(ctx, "alpha")
	if _, err := s.GetTrace(named, id); !errors.Is(err, clickhouse.ErrProjectsUnsupported) {
		t.Errorf("GetTrace for project alpha: %v", err)
	}
	if _, err := s.ResolveTraceID(named, id[:8]); !errors.Is(err, clickhouse.ErrProjectsUnsupported) {
		t.Errorf("ResolveTraceID for project alpha: %v", err)
	}
	if _, err := s.ListTraces(named, store.TraceQuery{}); !errors.Is(err, clickhouse.ErrProjectsUnsupported) {
		t.Errorf("ListTraces for project alpha: %v", err)
	}
	if _, err := s.ListSessions(named, store.SessionQuery{}); !errors.Is(err, clickhouse.ErrProjectsUnsupported) {
		t.Errorf("ListSessions for project alpha: %v", err)
	}
	other := storetest.GenerateTraces(1, 2, 6)
	other[0].Project = "alpha"
	if err := s.CheckSpan(&other[0]); !errors.Is(err, clickhouse.ErrProjectsUnsupported) {
		t.Errorf("CheckSpan of an alpha span: %v", err)
	}
	if err := s.WriteSpans(ctx, other); !errors.Is(err, clickhouse.ErrProjectsUnsupported) {
		t.Errorf("WriteSpans of an alpha span: %v", err)
	}
	// The default project still reads as before.
	if got, err := s.GetTrace(ctx, id); err != nil || len(got) != 3 {
		t.Errorf("default project: %d spans, %v", len(got), err)
	}
}
