package collector_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/loomwork/loomwork/store"
)

// keepingWriter keeps the spans it is given, as they are.
type keepingWriter struct {
	mu    sync.Mutex
	spans [][]store.Span
}

func (w *keepingWriter) WriteSpans(_ context.Context, spans []store.Span) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans = append(w.spans, spans)
	return nil
}

// The buffer a gRPC request is read into is reused for later requests:
// the spans decoded from a request must not change when it is. Request A's
// spans, kept by the writer, still read as A after request B of the same
// size (so B gets A's buffer) was decoded.
func TestSpansOutliveTheRequestBufferTheyCameFrom(t *testing.T) {
	// One P: sync.Pool then hands request B the buffer request A gave
	// back (with more, A's may sit in another P's private slot).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w := &keepingWriter{}
	srv := startServer(t, w, nil)
	conn := dialGRPC(t, srv.GRPCAddr())
	request := func(fill byte, traceByte byte) []byte {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "svc-"+strings.Repeat(string(fill), 12))
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range 20 {
			sp := ss.Spans().AppendEmpty()
			sp.SetTraceID(pcommon.TraceID{traceByte, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, byte(i + 1)})
			sp.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, byte(i + 1)})
			sp.SetName("chat " + strings.Repeat(string(fill), 8))
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(time.Unix(1_700_000_000, 0)))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(time.Unix(1_700_000_001, 0)))
			sp.Attributes().PutStr("gen_ai.input.messages", strings.Repeat(string(fill), 20_000))
			sp.Attributes().PutStr("k", strings.Repeat(string(fill), 5))
			sp.Events().AppendEmpty().Attributes().PutStr("exception.message", strings.Repeat(string(fill), 300))
		}
		b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := request('a', 0xaa), request('b', 0xbb)
	if len(a) != len(b) {
		t.Fatalf("requests of %d and %d bytes: want the same size, so the second reuses the first's buffer", len(a), len(b))
	}
	if err := invokeRaw(conn, a); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	snapshot, err := json.Marshal(w.spans)
	w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(snapshot), strings.Repeat("a", 20_000)) {
		t.Fatal("request A's attribute is not among the written spans")
	}
	for range 5 {
		if err := invokeRaw(conn, b); err != nil {
			t.Fatal(err)
		}
	}
	w.mu.Lock()
	after, _ := json.Marshal(w.spans[:1])
	w.mu.Unlock()
	before, _ := json.Marshal(json.RawMessage(snapshot))
	var first []json.RawMessage
	if err := json.Unmarshal(before, &first); err != nil {
		t.Fatal(err)
	}
	if string(after) != "["+string(first[0])+"]" {
		t.Fatal("request A's spans changed after later requests were read")
	}
}
