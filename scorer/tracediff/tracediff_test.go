package tracediff

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/stepdiff"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

type builder struct {
	tid   string
	spans []store.Span
	at    time.Duration
	n     int
}

func newTrace(tid string) *builder {
	b := &builder{tid: tid}
	b.spans = append(b.spans, store.Span{TraceID: tid, SpanID: "0000000000000001", Name: "invoke_agent support", Operation: semconv.OpInvokeAgent,
		StartTime: t0, EndTime: t0.Add(10 * time.Second), StatusCode: store.StatusOK})
	b.n = 1
	return b
}

func (b *builder) id() string {
	b.n++
	return "00000000000000" + string(rune('a'+b.n/16)) + string("0123456789abcdef"[b.n%16])
}

func (b *builder) chat(answer, toolCalls string) *builder {
	out := `[{"role":"assistant","parts":[`
	var parts []string
	if answer != "" {
		parts = append(parts, `{"type":"text","content":"`+answer+`"}`)
	}
	if toolCalls != "" {
		parts = append(parts, toolCalls)
	}
	out += strings.Join(parts, ",") + `]}]`
	s := store.Span{TraceID: b.tid, SpanID: b.id(), ParentSpanID: "0000000000000001", Name: "chat gpt-4o", Operation: semconv.OpChat,
		RequestModel: "gpt-4o", StartTime: t0.Add(b.at), EndTime: t0.Add(b.at + 800*time.Millisecond), StatusCode: store.StatusOK,
		HasUsage: true, InputTokens: 900, OutputTokens: 60, Attributes: store.Attributes{semconv.AttrOutputMessages: out}}
	b.at += time.Second
	b.spans = append(b.spans, s)
	return b
}

func (b *builder) tool(name, args, result string) *builder {
	s := store.Span{TraceID: b.tid, SpanID: b.id(), ParentSpanID: "0000000000000001", Name: "execute_tool " + name, Operation: semconv.OpExecuteTool,
		ToolName: name, StartTime: t0.Add(b.at), EndTime: t0.Add(b.at + 300*time.Millisecond), StatusCode: store.StatusUnset,
		Attributes: store.Attributes{semconv.AttrToolCallArguments: args, semconv.AttrToolCallResult: result}}
	b.at += time.Second
	b.spans = append(b.spans, s)
	return b
}

func fields(d stepdiff.FieldDiff) string { return d.Field }

func TestTwoTracesDivergingAtAToolCall(t *testing.T) {
	a := newTrace("aaaa").
		chat("", `{"type":"tool_call","name":"search_docs","arguments":{"query":"refund window"}}`).
		tool("search_docs", `{"query": "refund window"}`, `["policy/refunds#window"]`).
		chat("Refunds are accepted within 30 days.", "").spans
	b := newTrace("bbbb").
		chat("", `{"type":"tool_call","name":"search_docs","arguments":{"query":"refund"}}`).
		tool("search_docs", `{"query":"refund"}`, `["blog/refund-stories"]`).
		chat("Refunds are accepted within 14 days.", "").spans
	r := Compare(a, b)
	if len(r.A) != 3 || len(r.B) != 3 || len(r.Rows) != 3 {
		t.Fatalf("steps %d/%d rows %d", len(r.A), len(r.B), len(r.Rows))
	}
	if r.First != 0 || !slices.Equal(mapf(r.Rows[0].Diffs, fields), []string{FieldToolCalls}) {
		t.Fatalf("first divergence: row %d %+v", r.First, r.Rows[r.First].Diffs)
	}
	if got := mapf(r.Rows[1].Diffs, fields); !slices.Equal(got, []string{FieldArguments, FieldResult}) {
		t.Fatalf("tool row differs in %v", got)
	}
	// JSON arguments compare in canonical form: the spacing of A's does not count.
	if d := r.Rows[1].Diffs[0]; d.A != `{"query":"refund window"}` || d.B != `{"query":"refund"}` {
		t.Fatalf("arguments %q / %q", d.A, d.B)
	}
	if got := mapf(r.Rows[2].Diffs, fields); !slices.Equal(got, []string{FieldAnswer}) {
		t.Fatalf("answer row differs in %v", got)
	}
	if len(r.Notes) != 0 {
		t.Fatalf("notes %q", r.Notes)
	}
}

func mapf[T, U any](xs []T, f func(T) U) []U {
	var out []U
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func TestStepsIgnoreSpanOrderAggregatesAndNonSteps(t *testing.T) {
	b := newTrace("cccc").chat("hello", "").tool("lookup", `{"id":1}`, "ok").chat("bye", "")
	// An OpenInference LLM span wrapping the provider's call is an
	// aggregate: the leaf is the step.
	wrapper := b.spans[1]
	wrapper.SpanID, wrapper.Name = "00000000000000ff", "ChatOpenAI"
	b.spans[1].ParentSpanID = wrapper.SpanID
	spans := append(b.spans, wrapper)
	want := Steps(spans)
	if len(want) != 3 || want[0].Ref != b.spans[1].SpanID {
		t.Fatalf("steps %+v", want)
	}
	r := rand.New(rand.NewPCG(1, 1))
	for k := 0; k < 20; k++ {
		shuffled := slices.Clone(spans)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if d := Compare(spans, shuffled); !d.Identical() {
			t.Fatalf("the same trace in another span order differs: %+v", d.Rows)
		}
	}
}

func TestOpenInferenceAndOpenLLMetryOutputs(t *testing.T) {
	oi := store.Span{SpanID: "1", Operation: semconv.OpChat, RequestModel: "gpt-4o-mini", Attributes: store.Attributes{
		"llm.output_messages.0.message.role":                                      "assistant",
		"llm.output_messages.0.message.content":                                   "Let me look.",
		"llm.output_messages.0.message.tool_calls.0.tool_call.function.name":      "get_weather",
		"llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": `{"city": "Oslo"}`,
	}}
	ol := store.Span{SpanID: "2", Operation: semconv.OpChat, RequestModel: "gpt-4o-mini", Attributes: store.Attributes{
		semconv.AttrCompletionPrefix + "0.role":                   "assistant",
		semconv.AttrCompletionPrefix + "0.content":                "Let me look.",
		semconv.AttrCompletionPrefix + "0.tool_calls.0.name":      "get_weather",
		semconv.AttrCompletionPrefix + "0.tool_calls.0.arguments": `{"city":"Oslo"}`,
	}}
	so, sl := Steps([]store.Span{oi}), Steps([]store.Span{ol})
	if len(so) != 1 || len(sl) != 1 {
		t.Fatal("no step")
	}
	for _, s := range [][]stepdiff.Step{so, sl} {
		if f, _ := s[0].Field(FieldToolCalls); f.Value != `get_weather({"city":"Oslo"})` {
			t.Fatalf("tool calls %q", f.Value)
		}
		if f, _ := s[0].Field(FieldAnswer); f.Value != "Let me look." {
			t.Fatalf("answer %q", f.Value)
		}
	}
	if d := stepdiff.Compare(so, sl, stepdiff.Codes{}); !d.Identical() {
		t.Fatalf("the two instrumentations' spellings of one call differ: %+v", d.Rows)
	}
}

func TestTracesWithoutContentSaySo(t *testing.T) {
	a := []store.Span{{TraceID: "a", SpanID: "1", Name: "execute_tool search", Operation: semconv.OpExecuteTool, ToolName: "search"}}
	r := Compare(a, nil)
	if len(r.Notes) != 2 || !strings.Contains(r.Notes[0], "no captured content") || !strings.Contains(r.Notes[1], "nothing to align") {
		t.Fatalf("notes %q", r.Notes)
	}
	if r.OnlyA != 1 || r.First != 0 {
		t.Fatalf("rows %+v", r.Rows)
	}
}
