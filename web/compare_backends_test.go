package web

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store/clickhouse"
)

// TestCompareAndLabelsReadTheSameOnBothStores runs the comparison API and
// the label form's trace lookup on the embedded store and on a real
// ClickHouse, and wants the same bytes from both.
func TestCompareAndLabelsReadTheSameOnBothStores(t *testing.T) {
	testtier.Slow(t) // ClickHouse
	a, b := supportTraces()
	spans := append(append(a, b...), hostileTrace()...)
	answers := map[string][]string{}
	for _, backend := range []string{"sqlite", "clickhouse"} {
		var st TraceReader
		switch backend {
		case "sqlite":
			s := openStore(t)
			if err := s.WriteSpans(context.Background(), spans); err != nil {
				t.Fatal(err)
			}
			st = s
		case "clickhouse":
			srv := chtest.Start(t) // skips locally without ClickHouse, fails in CI
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := clickhouse.Open(ctx, clickhouse.Config{DSN: srv.DSN(srv.NewDatabase(t))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Shutdown(context.Background()) })
			if err := s.WriteSpans(ctx, spans); err != nil {
				t.Fatal(err)
			}
			st = s
		}
		srv, err := New(Config{}, Deps{Traces: st, Labels: filepath.Join(t.TempDir(), "labels.jsonl")})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		for _, path := range []string{
			"/api/v1/compare?a=" + supportTraceA[:9] + "&b=" + supportTraceB[:9],
			"/api/v1/compare?a=" + supportTraceB + "&b=" + hostileTraceID[:8],
		} {
			code, body := get(t, ts, path)
			if code != 200 {
				t.Fatalf("%s %s: %d %s", backend, path, code, body)
			}
			answers[path] = append(answers[path], body)
		}
		code, form := get(t, ts, "/labels/new?trace="+supportTraceB[:9])
		if code != 200 || !strings.Contains(form, `name="case_id" value="refund-annual-plan" readonly`) || !strings.Contains(form, `name="trial" value="1"`) {
			t.Fatalf("%s: label form %d", backend, code)
		}
		ts.Close()
	}
	for path, bodies := range answers {
		if len(bodies) == 2 && bodies[0] != bodies[1] {
			t.Errorf("%s differs between the stores:\nsqlite:     %s\nclickhouse: %s", path, bodies[0], bodies[1])
		}
	}
}
