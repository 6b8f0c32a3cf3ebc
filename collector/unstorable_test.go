package collector_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/store"
)

// nested sets key on m to a map nested depth levels deep (the innermost
// holding a string).
func nested(m pcommon.Map, key string, depth int) {
	inner := m.PutEmptyMap(key)
	for range depth - 1 {
		inner = inner.PutEmptyMap("k")
	}
	inner.PutStr("leaf", "x")
}

// unstorableRequest is one request of seven spans, one trace each: three a
// store can hold and four it never can — a 2,000-level nested attribute
// (issue 36: it failed the whole request), a 40-level one, a start of
// 2^64−1 ns (which SQLite accepted and ClickHouse refused) and an end
// before 1900. It returns the request, the good spans' trace ids and
// the bad spans' span ids.
func unstorableRequest(seed uint64) (ptrace.Traces, []string, map[string]string) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "unstorable")
	ss := rs.ScopeSpans().AppendEmpty()
	start := time.Now().Add(-time.Hour)
	var good []string
	bad := map[string]string{}
	for i := range 7 {
		sp := ss.Spans().AppendEmpty()
		var tid [16]byte
		tid[0], tid[7], tid[15] = 0x36, byte(seed), byte(i+1)
		sid := [8]byte{0x44, byte(seed), 0, 0, 0, 0, 0, byte(i + 1)}
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		sp.SetName(fmt.Sprintf("span %d", i))
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
		sp.Attributes().PutStr("gen_ai.request.model", "model-a")
		why := ""
		switch i {
		case 1:
			nested(sp.Attributes(), "deep", 2000)
			why = "nested deeper than"
		case 3:
			nested(sp.Attributes(), "deep", 40)
			why = "nested deeper than"
		case 4:
			sp.SetStartTimestamp(pcommon.Timestamp(math.MaxUint64))
			why = "start_time"
		case 6:
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Date(1800, 1, 1, 0, 0, 0, 0, time.UTC)))
			why = "end_time"
		default:
			good = append(good, sp.TraceID().String())
			continue
		}
		bad[sp.SpanID().String()] = why
	}
	return td, good, bad
}

// TestUnstorableSpansAreRejectedAlone: a span no store can hold is
// rejected alone, through partial_success naming it and why, and the
// spans beside it are stored — over gRPC, OTLP/HTTP protobuf and
// OTLP/HTTP JSON, on both stores, by one rule (store.CheckStorable).
func TestUnstorableSpansAreRejectedAlone(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			env := b.setup(t)
			st := env.open(t)
			t.Cleanup(func() { st.Shutdown(context.Background()) })
			srv := startServer(t, st, nil)
			for i, via := range []string{"grpc", "http protobuf", "http json"} {
				t.Run(via, func(t *testing.T) {
					td, good, bad := unstorableRequest(uint64(10*len(b.name) + i))
					req := ptraceotlp.NewExportRequestFromTraces(td)
					var resp ptraceotlp.ExportResponse
					switch via {
					case "grpc":
						var err error
						if resp, err = exportGRPC(t, srv, td); err != nil {
							t.Fatalf("export: %v; want OK with partial_success", err)
						}
					case "http protobuf":
						body, err := req.MarshalProto()
						if err != nil {
							t.Fatal(err)
						}
						r, out := postOTLP(t, srv, "application/x-protobuf", body, nil)
						if r.StatusCode != http.StatusOK {
							t.Fatalf("status %d: %s; want 200 with partial_success", r.StatusCode, out)
						}
						resp = ptraceotlp.NewExportResponse()
						if err := resp.UnmarshalProto(out); err != nil {
							t.Fatal(err)
						}
					case "http json":
						body, err := req.MarshalJSON()
						if err != nil {
							t.Fatal(err)
						}
						r, out := postOTLP(t, srv, "application/json", body, nil)
						if r.StatusCode != http.StatusOK {
							t.Fatalf("status %d: %.300s; want 200 with partial_success", r.StatusCode, out)
						}
						resp = ptraceotlp.NewExportResponse()
						if err := resp.UnmarshalJSON(out); err != nil {
							t.Fatal(err)
						}
					}
					ps := resp.PartialSuccess()
					t.Logf("partial_success: %d rejected: %.400s", ps.RejectedSpans(), ps.ErrorMessage())
					if ps.RejectedSpans() != int64(len(bad)) {
						t.Errorf("rejected_spans = %d, want the %d unstorable spans", ps.RejectedSpans(), len(bad))
					}
					// The message lists the first three: each named, with why.
					named := 0
					for sid, why := range bad {
						if strings.Contains(ps.ErrorMessage(), sid) {
							named++
							if !strings.Contains(ps.ErrorMessage(), why) {
								t.Errorf("error_message names span %s but not why (%q): %.400s", sid, why, ps.ErrorMessage())
							}
						}
					}
					if named < 3 {
						t.Errorf("error_message names %d of the rejected spans, want 3: %.400s", named, ps.ErrorMessage())
					}
					ctx := store.WithDefaultProject(context.Background())
					waitFor(t, "the good spans stored", 30*time.Second, func() bool {
						for _, id := range good {
							if spans, err := st.GetTrace(ctx, id); err != nil || len(spans) != 1 {
								return false
							}
						}
						return true
					})
				})
			}
		})
	}
}
