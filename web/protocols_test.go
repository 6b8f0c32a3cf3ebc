package web

import (
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// TestMCPAndA2ASpansOnTheTracePage: the spans agents/mcp and agents/a2a
// emit (the OpenTelemetry MCP conventions, the A2A task id and state) are
// in the trace's waterfall and their attributes in the span panel.
func TestMCPAndA2ASpansOnTheTracePage(t *testing.T) {
	const trace = "5bf92f3577b34da6a3ce929d0e0e4736"
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
	span := func(id, parent, name, kind string, from, to int, attrs store.Attributes) store.Span {
		return store.Span{TraceID: trace, SpanID: id, ParentSpanID: parent, Name: name, Kind: kind, ServiceName: "loom-eval-run",
			StartTime: at(from), EndTime: at(to), StatusCode: store.StatusOK, Attributes: attrs,
			ResourceAttributes: store.Attributes{"service.name": "loom-eval-run"}}
	}
	failed := span("b000000000000004", "b000000000000001", "tools/call no_such_tool", "client", 40, 45, store.Attributes{
		semconv.AttrMCPMethodName: "tools/call", semconv.AttrToolName: "no_such_tool", semconv.AttrErrorType: "-32602",
		semconv.AttrRPCResponseStatusCode: "-32602", semconv.AttrJSONRPCRequestID: "7"})
	failed.StatusCode = store.StatusError
	spans := []store.Span{
		span("b000000000000001", "", "invoke_agent research", "internal", 0, 100, store.Attributes{semconv.AttrOperationName: semconv.OpInvokeAgent}),
		span("b000000000000002", "b000000000000001", "execute_tool search_docs", "internal", 10, 30, store.Attributes{semconv.AttrOperationName: semconv.OpExecuteTool, semconv.AttrToolName: "search_docs"}),
		span("b000000000000003", "b000000000000002", "tools/call search_docs", "client", 12, 28, store.Attributes{
			semconv.AttrMCPMethodName: "tools/call", semconv.AttrToolName: "search_docs", semconv.AttrOperationName: semconv.OpExecuteTool,
			semconv.AttrJSONRPCRequestID: "3", semconv.AttrMCPSessionID: "SESS42", semconv.AttrNetworkTransport: "pipe",
			semconv.AttrMCPServerName: "docs", semconv.AttrMCPToolsHash: "sha256:abc"}),
		failed,
		span("b000000000000005", "b000000000000001", "a2a message/send coding", "client", 50, 90, store.Attributes{
			semconv.AttrA2ATaskID: "task-9", semconv.AttrA2ATaskState: "completed", semconv.AttrA2AAgentURL: "http://127.0.0.1:1/a2a"}),
	}
	st := openStore(t)
	if err := st.WriteSpans(t.Context(), spans); err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, st, Config{})
	code, body := get(t, ts, "/traces/"+trace)
	if code != 200 {
		t.Fatalf("trace page: status %d", code)
	}
	for _, w := range []string{"tools/call search_docs", "tools/call no_such_tool", "a2a message/send coding"} {
		if !strings.Contains(body, w) {
			t.Errorf("waterfall lacks %q", w)
		}
	}
	for id, want := range map[string][]string{
		"b000000000000003": {"mcp.method.name", "jsonrpc.request.id", "mcp.session.id", "SESS42", "network.transport", "loomwork.mcp.tools_hash"},
		"b000000000000004": {"error.type", "-32602", "rpc.response.status_code"},
		"b000000000000005": {"loomwork.a2a.task.id", "task-9", "loomwork.a2a.task.state", "completed"},
	} {
		code, body := get(t, ts, "/traces/"+trace+"/spans/"+id+"?fragment=1")
		if code != 200 {
			t.Fatalf("span %s: status %d", id, code)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("span %s: panel lacks %q", id, w)
			}
		}
	}
}
