package contextlayer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/semconv"
)

// liveModel answers like the gateway does for a live provider.
type liveModel struct {
	resp llm.Response
	err  error
	reqs []llm.Request
}

func (m *liveModel) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	m.reqs = append(m.reqs, req)
	return m.resp, m.err
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func TestModelSummarySpanIsAPricedChatSpanUnderTheCallerMarkedAsTheSummaryOfItsStep(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	u := llm.Usage{InputTokens: 812, OutputTokens: 64, CacheReadTokens: 256, ReasoningTokens: 8}
	model := &liveModel{resp: llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "Searched; read INC-40721."},
		Usage: u, Provider: "openai", Model: "gpt-4o-mini-2024-07-18", Label: llm.LabelLive, StopReason: "stop"}}
	var priced []string
	log := &CallLog{}
	s := ModelSummarizer{Model: model, ModelName: "gpt-4o-mini", Tracer: tp.Tracer("t"), Log: log,
		Price: func(m string, got llm.Usage) (float64, bool) {
			priced = append(priced, m)
			if got != u {
				t.Errorf("priced usage %+v, want %+v", got, u)
			}
			return 0.000321, true
		}}
	ctx, parent := tp.Tracer("t").Start(context.Background(), "invoke_agent research")
	ctx = WithTrigger(ctx, Trigger{RunID: "research-x-t0", Agent: "research", Step: 3})
	text, err := s.Summarize(ctx, []llm.Message{{Role: llm.RoleUser, Content: "q"}, {Role: llm.RoleTool, ToolCallID: "c1", ToolName: "search_docs", Content: "r"}}, 200)
	parent.End()
	if err != nil || text != "Searched; read INC-40721." {
		t.Fatalf("Summarize = %q, %v", text, err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the summary and its parent", len(spans))
	}
	sp := spans[0]
	if sp.Name() != "chat gpt-4o-mini" || sp.SpanKind().String() != "client" || sp.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("span %q kind %v parent %v", sp.Name(), sp.SpanKind(), sp.Parent().SpanID())
	}
	a := spanAttrs(sp)
	want := map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
		"gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.conversation.id": "research-x-t0", "gen_ai.agent.name": "research",
		"gen_ai.usage.input_tokens": int64(812), "gen_ai.usage.output_tokens": int64(64),
		"gen_ai.usage.cache_read.input_tokens": int64(256), "gen_ai.usage.reasoning.output_tokens": int64(8),
		"gen_ai.request.max_tokens": int64(200), "loomwork.model.label": "live", semconv.AttrCost: 0.000321,
		semconv.AttrSummaryCall: true, semconv.AttrSummaryStep: int64(3), semconv.AttrSummaryMessages: int64(2),
	}
	for k, v := range want {
		if got, ok := a[attribute.Key(k)]; !ok || got.AsInterface() != v {
			t.Errorf("%s = %v (present %v), want %v", k, got.AsInterface(), ok, v)
		}
	}
	if len(priced) != 1 || priced[0] != "gpt-4o-mini-2024-07-18" {
		t.Errorf("priced as %v, want the response model", priced)
	}
	calls := log.Calls()
	if len(calls) != 1 || calls[0].Usage != u || calls[0].CostUSD == nil || *calls[0].CostUSD != 0.000321 ||
		calls[0].Step != 3 || calls[0].RunID != "research-x-t0" || calls[0].Model != "gpt-4o-mini-2024-07-18" {
		t.Fatalf("call log = %+v", calls)
	}
}

func TestModelSummaryOfAnUnpricedModelHasNoCostAttributeAndAnUnknownCost(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	model := &liveModel{resp: llm.Response{Message: llm.Message{Content: "short"}, Usage: llm.Usage{InputTokens: 90, OutputTokens: 9},
		Provider: "openai", Model: "qwen2.5-7b-instruct", Label: llm.LabelLive}}
	log := &CallLog{}
	s := ModelSummarizer{Model: model, Tracer: tp.Tracer("t"), Log: log,
		Price: func(string, llm.Usage) (float64, bool) { return 0, false }}
	if _, err := s.Summarize(context.Background(), []llm.Message{{Role: llm.RoleUser, Content: "q"}}, 50); err != nil {
		t.Fatal(err)
	}
	sp := rec.Ended()[0]
	if _, ok := spanAttrs(sp)[semconv.AttrCost]; ok {
		t.Fatal("an unpriced summary call carries a cost attribute (it would read as a known cost)")
	}
	if sp.Name() != "chat qwen2.5-7b-instruct" {
		t.Errorf("routed call's span is named %q, want the answering model", sp.Name())
	}
	if c := log.Calls(); len(c) != 1 || c[0].CostUSD != nil || c[0].Usage.InputTokens != 90 {
		t.Fatalf("call log = %+v, want usage kept and cost unknown", c)
	}
}

func TestModelSummaryCallThatFailsEndsItsSpanInErrorWithoutUsage(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	model := &liveModel{err: errors.New("openai gpt-4o-mini: status 503 (server_error): overloaded")}
	log := &CallLog{}
	s := ModelSummarizer{Model: model, ModelName: "gpt-4o-mini", Tracer: tp.Tracer("t"), Log: log}
	_, err := s.Summarize(context.Background(), []llm.Message{{Role: llm.RoleUser, Content: "q"}}, 50)
	if err == nil || !strings.Contains(err.Error(), "summary model call: openai gpt-4o-mini: status 503") {
		t.Fatalf("err = %v", err)
	}
	sp := rec.Ended()[0]
	a := spanAttrs(sp)
	if sp.Status().Code != codes.Error || a["error.type"].AsString() != "summary_model_error" {
		t.Fatalf("status %v, attrs %v", sp.Status(), a)
	}
	if _, ok := a["gen_ai.usage.input_tokens"]; ok {
		t.Fatal("a failed summary call invented usage")
	}
	if c := log.Calls(); len(c) != 1 || c[0].Err == nil || c[0].Usage != (llm.Usage{}) {
		t.Fatalf("call log = %+v", c)
	}
}

func TestModelSummarizerWithoutTracerOrLogStillSummarises(t *testing.T) {
	model := &liveModel{resp: llm.Response{Message: llm.Message{Content: " kept "}, Label: llm.LabelLive}}
	text, err := ModelSummarizer{Model: model}.Summarize(context.Background(), []llm.Message{{Role: llm.RoleUser, Content: "q"}}, 10)
	if err != nil || text != "kept" {
		t.Fatalf("= %q, %v", text, err)
	}
}
