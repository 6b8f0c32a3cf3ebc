package genai

import (
	"encoding/base64"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

var (
	testTraceID = pcommon.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	testStart   = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
)

func spanID(b byte) pcommon.SpanID { return pcommon.SpanID{0, 0, 0, 0, 0, 0, 1, b} }

// newTraces returns traces with one resource (service "agent-svc") and one
// scope, and a function adding spans to it.
func newTraces() (ptrace.Traces, func(name string, id byte, attrs map[string]any) ptrace.Span) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent-svc")
	rs.Resource().Attributes().PutStr("deployment.environment", "test")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("loomwork.test")
	ss.Scope().SetVersion("1.2.3")
	add := func(name string, id byte, attrs map[string]any) ptrace.Span {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(testTraceID)
		s.SetSpanID(spanID(id))
		s.SetName(name)
		s.SetKind(ptrace.SpanKindClient)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(testStart))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(testStart.Add(1500 * time.Millisecond)))
		if err := s.Attributes().FromRaw(attrs); err != nil {
			panic(err)
		}
		return s
	}
	return td, add
}

func mapOne(t *testing.T, attrs map[string]any) store.Span {
	t.Helper()
	td, add := newTraces()
	add("span", 1, attrs)
	spans, rej := MapTraces(td, Options{})
	if len(rej) != 0 || len(spans) != 1 {
		t.Fatalf("MapTraces: %d spans, rejections %v; want 1 span", len(spans), rej)
	}
	return spans[0]
}

func TestMapTracesMapsCurrentGenAIConventionToTypedFields(t *testing.T) {
	td, add := newTraces()
	parent := add("invoke_agent researcher", 1, map[string]any{
		"gen_ai.operation.name":  "invoke_agent",
		"gen_ai.agent.name":      "researcher",
		"gen_ai.conversation.id": "conv-7",
		semconv.AttrCitations:    []any{"doc-2", "doc-9"},
	})
	parent.SetKind(ptrace.SpanKindInternal)
	parent.Status().SetCode(ptrace.StatusCodeOk)
	chat := add("chat claude-sonnet", 2, map[string]any{
		"gen_ai.operation.name":                    "chat",
		"gen_ai.provider.name":                     "anthropic",
		"gen_ai.request.model":                     "claude-sonnet",
		"gen_ai.response.model":                    "claude-sonnet-20260101",
		"gen_ai.usage.input_tokens":                int64(1200),
		"gen_ai.usage.output_tokens":               int64(300),
		"gen_ai.usage.cache_read.input_tokens":     int64(800),
		"gen_ai.usage.cache_creation.input_tokens": int64(100),
		"gen_ai.usage.reasoning.output_tokens":     int64(42),
		"gen_ai.request.temperature":               0.2,
		"custom.flag":                              true,
	})
	chat.SetParentSpanID(spanID(1))
	chat.Status().SetCode(ptrace.StatusCodeError)
	chat.Status().SetMessage("rate limited")
	ev := chat.Events().AppendEmpty()
	ev.SetName("gen_ai.client.inference.operation.details")
	ev.SetTimestamp(pcommon.NewTimestampFromTime(testStart.Add(time.Second)))
	ev.Attributes().PutStr("gen_ai.input.messages", `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`)
	ev2 := chat.Events().AppendEmpty()
	ev2.SetName("gen_ai.evaluation.result")
	ev2.Attributes().PutStr("gen_ai.evaluation.name", "relevance")
	ev2.Attributes().PutDouble("gen_ai.evaluation.score.value", 0.75)
	link := chat.Links().AppendEmpty()
	link.SetTraceID(pcommon.TraceID{1: 1})
	link.SetSpanID(spanID(9))
	link.Attributes().PutStr("reason", "retry-of")
	tool := add("execute_tool web_search", 3, map[string]any{
		"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name":      "web_search",
		"gen_ai.tool.call.id":   "call_1",
		"gen_ai.tool.type":      "function",
	})
	tool.SetParentSpanID(spanID(1))
	tool.TraceState().FromRaw("vendor=abc")
	retr := add("retrieval docs", 4, map[string]any{
		"gen_ai.operation.name":      "retrieval",
		"gen_ai.retrieval.documents": []any{"doc-1", "doc-2", "doc-3"},
	})
	retr.SetParentSpanID(spanID(1))

	spans, rej := MapTraces(td, Options{})
	if len(rej) != 0 {
		t.Fatalf("unexpected rejections: %v", rej)
	}
	if len(spans) != 4 {
		t.Fatalf("got %d spans, want 4", len(spans))
	}
	res := store.Attributes{"service.name": "agent-svc", "deployment.environment": "test"}
	common := func(s store.Span) store.Span {
		s.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		s.ServiceName = "agent-svc"
		s.ScopeName = "loomwork.test"
		s.ScopeVersion = "1.2.3"
		s.StartTime = testStart
		s.EndTime = testStart.Add(1500 * time.Millisecond)
		s.ResourceAttributes = res
		if s.StatusCode == "" {
			s.StatusCode = store.StatusUnset
		}
		if s.Kind == "" {
			s.Kind = "client"
		}
		return s
	}
	want := []store.Span{
		common(store.Span{
			SpanID: "0000000000000101", Name: "invoke_agent researcher", Kind: "internal",
			StatusCode: store.StatusOK, Operation: "invoke_agent", AgentName: "researcher",
			ConversationID: "conv-7", CitedDocs: []string{"doc-2", "doc-9"},
			Attributes: store.Attributes{
				"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher",
				"gen_ai.conversation.id": "conv-7", semconv.AttrCitations: []any{"doc-2", "doc-9"},
			},
		}),
		common(store.Span{
			SpanID: "0000000000000102", ParentSpanID: "0000000000000101", Name: "chat claude-sonnet",
			StatusCode: store.StatusError, StatusMessage: "rate limited",
			Operation: "chat", Provider: "anthropic", RequestModel: "claude-sonnet", ResponseModel: "claude-sonnet-20260101",
			HasUsage: true, InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 800, CacheCreationTokens: 100, ReasoningTokens: 42,
			Attributes: store.Attributes{
				"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic",
				"gen_ai.request.model": "claude-sonnet", "gen_ai.response.model": "claude-sonnet-20260101",
				"gen_ai.usage.input_tokens": int64(1200), "gen_ai.usage.output_tokens": int64(300),
				"gen_ai.usage.cache_read.input_tokens": int64(800), "gen_ai.usage.cache_creation.input_tokens": int64(100),
				"gen_ai.usage.reasoning.output_tokens": int64(42), "gen_ai.request.temperature": 0.2, "custom.flag": true,
			},
			Events: []store.Event{
				{Time: testStart.Add(time.Second), Name: "gen_ai.client.inference.operation.details",
					Attributes: store.Attributes{"gen_ai.input.messages": `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`}},
				{Time: time.Unix(0, 0).UTC(), Name: "gen_ai.evaluation.result",
					Attributes: store.Attributes{"gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": 0.75}},
			},
			Links: []store.Link{{TraceID: "00010000000000000000000000000000", SpanID: "0000000000000109",
				Attributes: store.Attributes{"reason": "retry-of"}}},
		}),
		common(store.Span{
			SpanID: "0000000000000103", ParentSpanID: "0000000000000101", Name: "execute_tool web_search",
			TraceState: "vendor=abc", Operation: "execute_tool", ToolName: "web_search", ToolCallID: "call_1",
			Attributes: store.Attributes{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "web_search",
				"gen_ai.tool.call.id": "call_1", "gen_ai.tool.type": "function"},
		}),
		common(store.Span{
			SpanID: "0000000000000104", ParentSpanID: "0000000000000101", Name: "retrieval docs",
			Operation: "retrieval", RetrievedDocs: []string{"doc-1", "doc-2", "doc-3"},
			Attributes: store.Attributes{"gen_ai.operation.name": "retrieval",
				"gen_ai.retrieval.documents": []any{"doc-1", "doc-2", "doc-3"}},
		}),
	}
	for i := range want {
		if !reflect.DeepEqual(spans[i], want[i]) {
			t.Errorf("span %d:\n got %#v\nwant %#v", i, spans[i], want[i])
		}
	}
}

func TestMapTracesNormalisesDeprecatedAndThirdPartyNames(t *testing.T) {
	cost := 0.0066
	tests := []struct {
		name  string
		attrs map[string]any
		check func(t *testing.T, s store.Span)
	}{
		{
			name: "deprecated gen_ai.system and prompt/completion tokens",
			attrs: map[string]any{
				"gen_ai.operation.name": "chat", "gen_ai.system": "OpenAI",
				"gen_ai.usage.prompt_tokens": int64(10), "gen_ai.usage.completion_tokens": int64(5),
			},
			check: func(t *testing.T, s store.Span) {
				expect(t, "provider", s.Provider, "openai")
				expect(t, "input", s.InputTokens, int64(10))
				expect(t, "output", s.OutputTokens, int64(5))
				expect(t, "has usage", s.HasUsage, true)
			},
		},
		{
			name: "current names win over deprecated ones whatever their order",
			attrs: map[string]any{
				"gen_ai.usage.prompt_tokens": int64(1), "gen_ai.usage.input_tokens": int64(100),
				"gen_ai.system": "old", "gen_ai.provider.name": "new",
			},
			check: func(t *testing.T, s store.Span) {
				expect(t, "input", s.InputTokens, int64(100))
				expect(t, "provider", s.Provider, "new")
			},
		},
		{
			name: "OpenInference LLM span",
			attrs: map[string]any{
				"openinference.span.kind": "LLM", "llm.system": "anthropic", "llm.provider": "aws",
				"llm.model_name": "claude-haiku", "llm.token_count.prompt": int64(500),
				"llm.token_count.completion": int64(40), "llm.token_count.total": int64(540),
				"llm.token_count.prompt_details.cache_read":    int64(300),
				"llm.token_count.prompt_details.cache_write":   int64(50),
				"llm.token_count.completion_details.reasoning": int64(7),
				"llm.cost.total": cost, "session.id": "sess-1", "agent.name": "helper",
				"llm.input_messages.0.message.role": "user",
			},
			check: func(t *testing.T, s store.Span) {
				expect(t, "operation", s.Operation, "chat")
				expect(t, "provider", s.Provider, "anthropic")
				expect(t, "request model", s.RequestModel, "claude-haiku")
				expect(t, "response model", s.ResponseModel, "claude-haiku")
				expect(t, "input", s.InputTokens, int64(500))
				expect(t, "output", s.OutputTokens, int64(40))
				expect(t, "cache read", s.CacheReadTokens, int64(300))
				expect(t, "cache creation", s.CacheCreationTokens, int64(50))
				expect(t, "reasoning", s.ReasoningTokens, int64(7))
				expect(t, "conversation", s.ConversationID, "sess-1")
				expect(t, "agent", s.AgentName, "helper")
				if s.CostUSD == nil || *s.CostUSD != cost {
					t.Errorf("cost = %v, want %v", s.CostUSD, cost)
				}
				expect(t, "kept attribute", s.Attributes["llm.input_messages.0.message.role"], any("user"))
				expect(t, "kept total", s.Attributes["llm.token_count.total"], any(int64(540)))
			},
		},
		{
			name:  "OpenInference request/response model names",
			attrs: map[string]any{"llm.model_name": "m-resp", "llm.request.model_name": "m-req", "llm.response.model_name": "m-resp2"},
			check: func(t *testing.T, s store.Span) {
				expect(t, "request model", s.RequestModel, "m-req")
				expect(t, "response model", s.ResponseModel, "m-resp2")
			},
		},
		{
			name: "OpenInference retriever with flattened documents",
			attrs: map[string]any{
				"openinference.span.kind":                "RETRIEVER",
				"retrieval.documents.1.document.id":      "b",
				"retrieval.documents.0.document.id":      "a",
				"retrieval.documents.10.document.id":     int64(42),
				"retrieval.documents.0.document.score":   0.9,
				"retrieval.documents.0.document.content": "text",
			},
			check: func(t *testing.T, s store.Span) {
				expect(t, "operation", s.Operation, "retrieval")
				expect(t, "docs", s.RetrievedDocs, []string{"a", "b", "42"})
			},
		},
		{
			name:  "OpenInference tool span",
			attrs: map[string]any{"openinference.span.kind": "TOOL", "tool.name": "calc", "tool.id": "call_9"},
			check: func(t *testing.T, s store.Span) {
				expect(t, "operation", s.Operation, "execute_tool")
				expect(t, "tool", s.ToolName, "calc")
				expect(t, "call id", s.ToolCallID, "call_9")
			},
		},
		{
			name:  "OpenInference embedding and chain kinds",
			attrs: map[string]any{"openinference.span.kind": "EMBEDDING", "embedding.model_name": "text-embedding-3-small"},
			check: func(t *testing.T, s store.Span) {
				expect(t, "operation", s.Operation, "embeddings")
				expect(t, "model", s.RequestModel, "text-embedding-3-small")
			},
		},
		{
			name:  "OpenInference agent kind",
			attrs: map[string]any{"openinference.span.kind": "AGENT"},
			check: func(t *testing.T, s store.Span) { expect(t, "operation", s.Operation, "invoke_agent") },
		},
		{
			name:  "OpenInference chain kind",
			attrs: map[string]any{"openinference.span.kind": "CHAIN"},
			check: func(t *testing.T, s store.Span) { expect(t, "operation", s.Operation, "invoke_workflow") },
		},
		{
			name:  "OpenInference guardrail kind has no operation",
			attrs: map[string]any{"openinference.span.kind": "GUARDRAIL"},
			check: func(t *testing.T, s store.Span) { expect(t, "operation", s.Operation, "") },
		},
		{
			name: "OpenLLMetry legacy chat span",
			attrs: map[string]any{
				"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
				"gen_ai.usage.prompt_tokens": int64(90), "gen_ai.usage.completion_tokens": int64(12),
				"gen_ai.usage.cache_read_input_tokens": int64(64), "gen_ai.usage.cache_creation_input_tokens": int64(3),
				"gen_ai.usage.reasoning_tokens": int64(2), "llm.usage.total_tokens": int64(102),
				"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "hello",
				"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "hi",
			},
			check: func(t *testing.T, s store.Span) {
				expect(t, "operation", s.Operation, "chat")
				expect(t, "input", s.InputTokens, int64(90))
				expect(t, "output", s.OutputTokens, int64(12))
				expect(t, "cache read", s.CacheReadTokens, int64(64))
				expect(t, "cache creation", s.CacheCreationTokens, int64(3))
				expect(t, "reasoning", s.ReasoningTokens, int64(2))
				expect(t, "kept prompt", s.Attributes["gen_ai.prompt.0.content"], any("hello"))
			},
		},
		{
			name:  "OpenLLMetry older llm.usage names",
			attrs: map[string]any{"llm.request.type": "completion", "llm.usage.prompt_tokens": int64(8), "llm.usage.completion_tokens": int64(2)},
			check: func(t *testing.T, s store.Span) {
				expect(t, "operation", s.Operation, "text_completion")
				expect(t, "input", s.InputTokens, int64(8))
				expect(t, "output", s.OutputTokens, int64(2))
			},
		},
		{
			name:  "OpenLLMetry tool entity",
			attrs: map[string]any{"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather"},
			check: func(t *testing.T, s store.Span) {
				expect(t, "operation", s.Operation, "execute_tool")
				expect(t, "tool", s.ToolName, "get_weather")
				expect(t, "agent", s.AgentName, "")
			},
		},
		{
			name:  "OpenLLMetry agent entity",
			attrs: map[string]any{"traceloop.entity.name": "planner", "traceloop.span.kind": "agent"},
			check: func(t *testing.T, s store.Span) {
				expect(t, "operation", s.Operation, "invoke_agent")
				expect(t, "agent", s.AgentName, "planner")
			},
		},
		{
			name:  "OpenLLMetry workflow and task",
			attrs: map[string]any{"traceloop.span.kind": "workflow"},
			check: func(t *testing.T, s store.Span) { expect(t, "operation", s.Operation, "invoke_workflow") },
		},
		{
			name:  "operation aliases are normalised, unknown ones kept lower-cased",
			attrs: map[string]any{"gen_ai.operation.name": " Embedding "},
			check: func(t *testing.T, s store.Span) { expect(t, "operation", s.Operation, "embeddings") },
		},
		{
			name:  "unknown operation kept",
			attrs: map[string]any{"gen_ai.operation.name": "Summarise"},
			check: func(t *testing.T, s store.Span) { expect(t, "operation", s.Operation, "summarise") },
		},
		{
			name:  "explicit operation beats span kinds",
			attrs: map[string]any{"openinference.span.kind": "CHAIN", "gen_ai.operation.name": "chat"},
			check: func(t *testing.T, s store.Span) { expect(t, "operation", s.Operation, "chat") },
		},
		{
			name:  "token counts sent as doubles and strings",
			attrs: map[string]any{"gen_ai.usage.input_tokens": 12.0, "gen_ai.usage.output_tokens": " 7 ", "gen_ai.usage.reasoning.output_tokens": "3.0"},
			check: func(t *testing.T, s store.Span) {
				expect(t, "input", s.InputTokens, int64(12))
				expect(t, "output", s.OutputTokens, int64(7))
				expect(t, "reasoning", s.ReasoningTokens, int64(3))
				expect(t, "kept double", s.Attributes["gen_ai.usage.input_tokens"], any(12.0))
			},
		},
		{
			name:  "unusable token counts are ignored, not guessed",
			attrs: map[string]any{"gen_ai.usage.output_tokens": 1.5, "gen_ai.usage.cache_read.input_tokens": "many"},
			check: func(t *testing.T, s store.Span) {
				expect(t, "has usage", s.HasUsage, false)
				expect(t, "input", s.InputTokens, int64(0))
			},
		},
		{
			name:  "a reported zero is usage",
			attrs: map[string]any{"gen_ai.usage.output_tokens": int64(0)},
			check: func(t *testing.T, s store.Span) { expect(t, "has usage", s.HasUsage, true) },
		},
		{
			name:  "no usage attributes means no usage",
			attrs: map[string]any{"gen_ai.operation.name": "chat", "llm.token_count.total": int64(9)},
			check: func(t *testing.T, s store.Span) {
				expect(t, "has usage", s.HasUsage, false)
				if s.CostUSD != nil {
					t.Errorf("cost = %v, want nil", *s.CostUSD)
				}
			},
		},
		{
			name:  "negative or non-finite cost ignored",
			attrs: map[string]any{"llm.cost.total": -1.0, "gen_ai.usage.cost": math.Inf(1)},
			check: func(t *testing.T, s store.Span) {
				if s.CostUSD != nil {
					t.Errorf("cost = %v, want nil", *s.CostUSD)
				}
			},
		},
		{
			name:  "retrieval documents as a JSON string of objects",
			attrs: map[string]any{"gen_ai.retrieval.documents": `[{"id":"p1","score":0.9},{"id":7},{"text":"no id"}]`},
			check: func(t *testing.T, s store.Span) { expect(t, "docs", s.RetrievedDocs, []string{"p1", "7"}) },
		},
		{
			name: "retrieval documents as an array of maps and JSON object strings",
			attrs: map[string]any{"gen_ai.retrieval.documents": []any{
				map[string]any{"id": "m1", "score": 0.5}, `{"id":"j2"}`, "plain3", int64(4),
			}},
			check: func(t *testing.T, s store.Span) {
				expect(t, "docs", s.RetrievedDocs, []string{"m1", "j2", "plain3", "4"})
			},
		},
		{
			name:  "citations as a JSON array string",
			attrs: map[string]any{semconv.AttrCitations: `["c1","c2"]`},
			check: func(t *testing.T, s store.Span) { expect(t, "cited", s.CitedDocs, []string{"c1", "c2"}) },
		},
		{
			name:  "malformed document JSON keeps the attribute but yields no ids",
			attrs: map[string]any{"gen_ai.retrieval.documents": `[{"id":`},
			check: func(t *testing.T, s store.Span) {
				expect(t, "docs", len(s.RetrievedDocs), 0)
				expect(t, "kept", s.Attributes["gen_ai.retrieval.documents"], any(`[{"id":`))
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, mapOne(t, tc.attrs)) })
	}
}

func expect[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

func TestMapTracesKeepsEveryAttributeWithItsExactType(t *testing.T) {
	td, add := newTraces()
	s := add("s", 1, nil)
	a := s.Attributes()
	a.PutStr("str", "x")
	a.PutInt("int", 3)
	a.PutDouble("double", 3.0)
	a.PutBool("bool", false)
	a.PutEmptyBytes("bytes").FromRaw([]byte{0, 1, 2, 255})
	sl := a.PutEmptySlice("slice")
	sl.AppendEmpty().SetInt(1)
	sl.AppendEmpty().SetStr("two")
	m := a.PutEmptyMap("map")
	m.PutDouble("nan", math.NaN())
	m.PutDouble("inf", math.Inf(-1))
	m.PutEmpty("nil")
	a.PutStr("bad.utf8", "ok\xffok")

	spans, _ := MapTraces(td, Options{})
	want := store.Attributes{
		"str": "x", "int": int64(3), "double": 3.0, "bool": false,
		"bytes":    base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}),
		"slice":    []any{int64(1), "two"},
		"map":      map[string]any{"nan": "NaN", "inf": "-Inf", "nil": nil},
		"bad.utf8": "ok\uFFFDok",
	}
	expect(t, "attributes", spans[0].Attributes, want)

	// What the mapping produces is exactly what store.Attributes' JSON
	// encoding round-trips, so a backend returns what was mapped.
	b, err := spans[0].Attributes.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back store.Attributes
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	expect(t, "round trip", back, want)
}

func TestMapTracesRejectsSpansWithInvalidIDsOneByOne(t *testing.T) {
	td, add := newTraces()
	add("good-1", 1, nil)
	add("zero-trace", 2, nil).SetTraceID(pcommon.TraceID{})
	add("zero-span", 3, nil).SetSpanID(pcommon.SpanID{})
	self := add("self-parent", 4, nil)
	self.SetParentSpanID(spanID(4))
	add("good-2", 5, nil)

	spans, rej := MapTraces(td, Options{})
	if len(spans)+len(rej) != td.SpanCount() {
		t.Fatalf("%d spans + %d rejections != %d sent", len(spans), len(rej), td.SpanCount())
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	expect(t, "kept", names, []string{"good-1", "good-2"})
	want := []Rejection{
		{SpanName: "zero-trace", SpanID: "0000000000000102", Reason: ReasonEmptyTraceID},
		{SpanName: "zero-span", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Reason: ReasonEmptySpanID},
		{SpanName: "self-parent", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "0000000000000104", Reason: ReasonSelfParent},
	}
	expect(t, "rejections", rej, want)
	msg := RejectionSummary(rej)
	for _, part := range []string{"3 span(s) rejected", `"zero-trace"`, ReasonEmptyTraceID, ReasonEmptySpanID} {
		if !strings.Contains(msg, part) {
			t.Errorf("summary %q lacks %q", msg, part)
		}
	}
}

// A negative token count would corrupt every sum it enters: the span is
// rejected (partial_success), naming the attribute and the value, and the
// spans beside it are kept.
func TestMapTracesRejectsNegativeTokenCountsNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		key string
		v   any
	}{
		{"gen_ai.usage.input_tokens", int64(-5)},
		{"gen_ai.usage.output_tokens", -2.0},
		{"llm.token_count.prompt", " -7 "},
		{"gen_ai.usage.cache_read.input_tokens", "-1.0"},
	} {
		td, add := newTraces()
		add("good", 1, map[string]any{"gen_ai.usage.input_tokens": int64(3)})
		add("bad", 2, map[string]any{tc.key: tc.v})
		spans, rej := MapTraces(td, Options{})
		if len(spans) != 1 || spans[0].Name != "good" || len(rej) != 1 {
			t.Fatalf("%s=%v: kept %d spans, %d rejections; want the good span kept and the bad one rejected", tc.key, tc.v, len(spans), len(rej))
		}
		if rej[0].SpanName != "bad" || !strings.Contains(rej[0].Reason, tc.key+" is negative") {
			t.Errorf("%s=%v: rejection %+v does not name the field", tc.key, tc.v, rej[0])
		}
	}
}

func TestMapTracesTruncatesOversizedValuesWithMarkerAndOriginalSize(t *testing.T) {
	const limit = 100
	td, add := newTraces()
	big := strings.Repeat("é", 80) // 160 bytes, 2 bytes per rune
	s := add("s", 1, map[string]any{
		"gen_ai.input.messages": big,
		"small":                 "fits",
		"vector":                []any{1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5},
		"gen_ai.agent.name":     strings.Repeat("a", 150),
	})
	s.Attributes().PutEmptyBytes("blob").FromRaw(make([]byte, 300))
	ev := s.Events().AppendEmpty()
	ev.Attributes().PutStr("gen_ai.output.messages", strings.Repeat("x", 500))
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("process.command_line", strings.Repeat("y", 101))

	spans, _ := MapTraces(td, Options{MaxAttrBytes: limit})
	a := spans[0].Attributes

	got := a["gen_ai.input.messages"].(string)
	wantPrefix := strings.Repeat("é", 50) // 100 bytes fit exactly
	if got != wantPrefix+TruncationMarker(160) {
		t.Errorf("truncated string = %q", got)
	}
	expect(t, "recorded size", a[semconv.AttrTruncatedPrefix+"gen_ai.input.messages"], any(int64(160)))
	expect(t, "small kept", a["small"], any("fits"))
	if _, ok := a[semconv.AttrTruncatedPrefix+"small"]; ok {
		t.Error("a value within the limit was marked truncated")
	}
	vec := a["vector"].([]any)
	if len(vec) != 13 || vec[12] != TruncationMarker(14*8) {
		t.Errorf("truncated array = %#v", vec)
	}
	expect(t, "array size", a[semconv.AttrTruncatedPrefix+"vector"], any(int64(112)))
	blob := a["blob"].(string)
	if !strings.HasSuffix(blob, TruncationMarker(400)) || len(blob) != limit+len(TruncationMarker(400)) {
		t.Errorf("truncated bytes = %q", blob)
	}
	if n := len(spans[0].AgentName); n > limit+len(TruncationMarker(150)) {
		t.Errorf("typed agent name is %d bytes, over the limit", n)
	}
	ea := spans[0].Events[0].Attributes
	expect(t, "event attr size", ea[semconv.AttrTruncatedPrefix+"gen_ai.output.messages"], any(int64(500)))
	ra := spans[0].ResourceAttributes
	expect(t, "resource attr size", ra[semconv.AttrTruncatedPrefix+"process.command_line"], any(int64(101)))

	// A negative limit disables truncation.
	spans, _ = MapTraces(td, Options{MaxAttrBytes: -1})
	expect(t, "untruncated", spans[0].Attributes["gen_ai.input.messages"], any(big))
}

func TestMapTracesSharesNothingMutableBetweenResources(t *testing.T) {
	td := ptrace.NewTraces()
	for i, svc := range []string{"a", "b"} {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", svc)
		s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetTraceID(testTraceID)
		s.SetSpanID(spanID(byte(i + 1)))
	}
	spans, _ := MapTraces(td, Options{})
	expect(t, "services", []string{spans[0].ServiceName, spans[1].ServiceName}, []string{"a", "b"})
	expect(t, "kinds", spans[0].Kind, "unspecified")
	expect(t, "status", spans[0].StatusCode, store.StatusUnset)

	// Writing through one resource's spans reaches neither the other
	// resource's spans nor the OTLP input.
	spans[0].ResourceAttributes["service.name"] = "changed"
	spans[0].ResourceAttributes["added"] = "x"
	spans[0].Attributes = store.Attributes{"k": "v"}
	expect(t, "other resource", spans[1].ResourceAttributes["service.name"], any("b"))
	if _, ok := spans[1].ResourceAttributes["added"]; ok {
		t.Error("a key added to one resource's attributes appeared on another's")
	}
	if v, _ := td.ResourceSpans().At(0).Resource().Attributes().Get("service.name"); v.Str() != "a" {
		t.Errorf("the input's resource changed to %q", v.Str())
	}
	again, _ := MapTraces(td, Options{})
	expect(t, "mapped again", again[0].ResourceAttributes["service.name"], any("a"))
	if len(again[0].Attributes) != 0 {
		t.Errorf("mapping again sees attributes written into an earlier result: %v", again[0].Attributes)
	}
}

func TestReadJSONReadsDocumentsAndJSONLinesAndNamesTheBadLine(t *testing.T) {
	doc, err := os.ReadFile("testdata/agent_trace.json")
	if err != nil {
		t.Fatal(err)
	}
	spans, rej, err := ReadJSON(strings.NewReader(string(doc)), "agent_trace.json", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 3 || len(rej) != 0 {
		t.Fatalf("got %d spans, %d rejections; want 3, 0", len(spans), len(rej))
	}
	expect(t, "chat usage", []int64{spans[1].InputTokens, spans[1].OutputTokens}, []int64{1200, 85})

	compact := strings.ReplaceAll(strings.ReplaceAll(string(doc), "\n", ""), "  ", "")
	lines := compact + "\n\n" + compact + "\n"
	spans, _, err = ReadJSON(strings.NewReader(lines), "two.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "spans from two lines", len(spans), 6)

	_, _, err = ReadJSON(strings.NewReader(compact+"\n{\"resourceSpans\": [}\n"), "bad.jsonl", Options{})
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2:") {
		t.Fatalf("error = %v, want one naming bad.jsonl:2", err)
	}
	_, _, err = ReadJSON(strings.NewReader("  "), "empty.json", Options{})
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("error = %v, want empty-file error", err)
	}
}

func TestMapTracesKeepsFlagsDroppedCountsScopeAttributesAndSchemaURLs(t *testing.T) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.SetSchemaUrl("https://opentelemetry.io/schemas/1.26.0")
	rs.Resource().Attributes().PutStr("service.name", "agent-svc")
	rs.Resource().SetDroppedAttributesCount(2)
	// Two scopes under one resource: each keeps its own data.
	ss := rs.ScopeSpans().AppendEmpty()
	ss.SetSchemaUrl("https://opentelemetry.io/schemas/1.37.0")
	ss.Scope().SetName("loomwork.agents")
	ss.Scope().Attributes().PutStr("team", "search")
	ss.Scope().Attributes().PutInt("replica", 2)
	ss.Scope().Attributes().PutEmptySlice("regions").AppendEmpty().SetStr("eu-west-1")
	ss.Scope().SetDroppedAttributesCount(1)
	other := rs.ScopeSpans().AppendEmpty()
	other.Scope().SetName("bare")

	s := ss.Spans().AppendEmpty()
	s.SetTraceID(testTraceID)
	s.SetSpanID(spanID(1))
	s.SetParentSpanID(spanID(9))
	s.SetFlags(0x301) // sampled, parent known to be remote
	s.SetDroppedAttributesCount(3)
	s.SetDroppedEventsCount(4)
	s.SetDroppedLinksCount(5)
	e := s.Events().AppendEmpty()
	e.SetName("exception")
	e.SetDroppedAttributesCount(6)
	l := s.Links().AppendEmpty()
	l.SetTraceID(pcommon.TraceID{1: 1})
	l.SetSpanID(spanID(7))
	l.SetFlags(0x100) // not sampled, linked span known local
	l.SetDroppedAttributesCount(7)
	s2 := ss.Spans().AppendEmpty()
	s2.SetTraceID(testTraceID)
	s2.SetSpanID(spanID(2))
	b := other.Spans().AppendEmpty()
	b.SetTraceID(testTraceID)
	b.SetSpanID(spanID(3))
	b.SetFlags(math.MaxUint32)

	spans, rej := MapTraces(td, Options{})
	if len(rej) != 0 || len(spans) != 3 {
		t.Fatalf("MapTraces: %d spans, rejections %v", len(spans), rej)
	}
	got := spans[0]
	expect(t, "flags", got.Flags, uint32(0x301))
	remote, known := got.RemoteParent()
	expect(t, "remote parent", [2]bool{remote, known}, [2]bool{true, true})
	expect(t, "dropped", [3]uint32{got.DroppedAttributesCount, got.DroppedEventsCount, got.DroppedLinksCount}, [3]uint32{3, 4, 5})
	expect(t, "event dropped", got.Events[0].DroppedAttributesCount, uint32(6))
	expect(t, "link", got.Links[0], store.Link{TraceID: "00010000000000000000000000000000", SpanID: "0000000000000107", Flags: 0x100, DroppedAttributesCount: 7})
	expect(t, "scope attributes", got.ScopeAttributes, store.Attributes{"team": "search", "replica": int64(2), "regions": []any{"eu-west-1"}})
	expect(t, "scope dropped", got.ScopeDroppedAttributesCount, uint32(1))
	expect(t, "scope schema", got.ScopeSchemaURL, "https://opentelemetry.io/schemas/1.37.0")
	expect(t, "resource schema", got.ResourceSchemaURL, "https://opentelemetry.io/schemas/1.26.0")
	expect(t, "resource dropped", got.ResourceDroppedAttributesCount, uint32(2))

	expect(t, "second span of the scope", [2]any{spans[1].Flags, spans[1].ScopeSchemaURL}, [2]any{uint32(0), "https://opentelemetry.io/schemas/1.37.0"})
	expect(t, "second span scope attributes", spans[1].ScopeAttributes, got.ScopeAttributes)
	bare := spans[2]
	expect(t, "other scope", [3]any{bare.ScopeAttributes == nil, bare.ScopeSchemaURL, bare.ResourceSchemaURL}, [3]any{true, "", "https://opentelemetry.io/schemas/1.26.0"})
	expect(t, "all flag bits", bare.Flags, uint32(math.MaxUint32))
}

// Attribute keys are bounded too: a 1 MiB key is stored as its first
// MaxAttrKeyBytes bytes with a marker (its size and a hash of it), two long
// keys sharing their first KiB stay two attributes, and short keys are
// untouched; with truncation off, keys are kept whole.
func TestMapTracesBoundsAttributeKeys(t *testing.T) {
	td, add := newTraces()
	long1 := strings.Repeat("k", 1<<20)
	long2 := strings.Repeat("k", 1<<20-1) + "z"
	add("s", 1, map[string]any{long1: "one", long2: "two", "short": "kept"})
	spans, _ := MapTraces(td, Options{})
	a := spans[0].Attributes
	if len(a) != 3 || a["short"] != "kept" {
		t.Fatalf("attributes: %d keys, short=%v", len(a), a["short"])
	}
	values := map[any]bool{}
	for k, v := range a {
		if k == "short" {
			continue
		}
		if len(k) > MaxAttrKeyBytes+80 || !strings.HasPrefix(k, strings.Repeat("k", MaxAttrKeyBytes)) ||
			!strings.Contains(k, "[key truncated by loomwork: 1048576 bytes, sha256 ") {
			t.Errorf("bounded key is %d bytes: %.80q…%q", len(k), k, k[max(0, len(k)-60):])
		}
		values[v] = true
	}
	if !values["one"] || !values["two"] {
		t.Errorf("two long keys sharing a beginning did not stay two attributes: %v", values)
	}
	spans, _ = MapTraces(td, Options{MaxAttrBytes: -1})
	if _, ok := spans[0].Attributes[long1]; !ok {
		t.Error("with truncation off a long key was changed")
	}
}
