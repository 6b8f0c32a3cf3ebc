package runtime_test

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/semconv"
)

// runRecorded runs the bookkeeper script with capture set and returns the
// ended spans.
func runRecorded(t *testing.T, capture bool, task runtime.Task) []sdktrace.ReadOnlySpan {
	t.Helper()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	m, err := scripted.New(bookScript())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Model: m, Journal: openJournal(t, ""), TracerProvider: tp, Clock: fakeClock(), CaptureContent: capture})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Run(ctx, bookkeeper.Agent(), task); err != nil {
		t.Fatal(err)
	}
	return rec.Ended()
}

func rootOf(t *testing.T, spans []sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == "invoke_agent bookkeeper" {
			return s
		}
	}
	t.Fatal("no invoke_agent span")
	return nil
}

func TestRootSpanCarriesCaseAndTrial(t *testing.T) {
	spans := runRecorded(t, false, runtime.Task{RunID: "run-c", Input: "Book the team lunch.", CaseID: "case-7", Trial: 2})
	ra := attrs(rootOf(t, spans))
	if ra[semconv.AttrCaseID].AsString() != "case-7" || ra[semconv.AttrTrial].AsInt64() != 2 {
		t.Fatalf("root attributes = %v, want case case-7 trial 2", ra)
	}
	// A free-text task names no case: the root says nothing about one.
	ra = attrs(rootOf(t, runRecorded(t, false, runtime.Task{RunID: "run-f", Input: "Book the team lunch."})))
	if _, ok := ra[semconv.AttrCaseID]; ok {
		t.Fatalf("a run without a case carries %s: %v", semconv.AttrCaseID, ra)
	}
	if _, ok := ra[semconv.AttrTrial]; ok {
		t.Fatalf("a run without a case carries %s: %v", semconv.AttrTrial, ra)
	}
}

type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Response  *string         `json:"response"`
}

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason"`
}

func messagesAttr(t *testing.T, s sdktrace.ReadOnlySpan, key string) []message {
	t.Helper()
	v, ok := attrs(s)[key]
	if !ok {
		t.Fatalf("span %s has no %s: %v", s.Name(), key, attrs(s))
	}
	var ms []message
	if err := json.Unmarshal([]byte(v.AsString()), &ms); err != nil {
		t.Fatalf("span %s: %s is not GenAI JSON: %v\n%s", s.Name(), key, err, v.AsString())
	}
	return ms
}

func TestChatSpansCarryMessagesWhenCaptureIsOn(t *testing.T) {
	spans := runRecorded(t, true, runtime.Task{RunID: "run-on", Input: "Book the team lunch.", CaseID: "c", Model: "gpt-x"})
	var chats []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "chat gpt-x" {
			chats = append(chats, s)
		}
	}
	if len(chats) != 4 {
		t.Fatalf("%d chat spans, want 4", len(chats))
	}
	// The first call: the user's task in, a tool call out.
	in := messagesAttr(t, chats[0], semconv.AttrInputMessages)
	if len(in) != 1 || in[0].Role != "user" || len(in[0].Parts) != 1 || in[0].Parts[0].Type != "text" || in[0].Parts[0].Content != "Book the team lunch." {
		t.Fatalf("first input messages = %+v", in)
	}
	out := messagesAttr(t, chats[0], semconv.AttrOutputMessages)
	if len(out) != 1 || out[0].Role != "assistant" || len(out[0].Parts) != 1 || out[0].Parts[0].Type != "tool_call" ||
		out[0].Parts[0].ID != "c1" || out[0].Parts[0].Name != "search_policy" || string(out[0].Parts[0].Arguments) != `{"query":"meals"}` {
		t.Fatalf("first output messages = %+v", out)
	}
	// The second call was sent the tool's result.
	in = messagesAttr(t, chats[1], semconv.AttrInputMessages)
	last := in[len(in)-1]
	if len(in) != 3 || last.Role != "tool" || last.Parts[0].Type != "tool_call_response" || last.Parts[0].ID != "c1" || last.Parts[0].Response == nil {
		t.Fatalf("second input messages = %+v", in)
	}
	// The last call answered in text.
	out = messagesAttr(t, chats[3], semconv.AttrOutputMessages)
	if out[0].Parts[0].Type != "text" || out[0].Parts[0].Content != "Booked 25.00 EUR of meals [doc:policy/meals]." {
		t.Fatalf("last output messages = %+v", out)
	}
	sys := attrs(chats[0])[semconv.AttrSystemInstructions].AsString()
	var sp []part
	if err := json.Unmarshal([]byte(sys), &sp); err != nil || len(sp) != 1 || sp[0].Type != "text" || sp[0].Content == "" {
		t.Fatalf("system instructions = %q (%v)", sys, err)
	}
}

func TestChatSpansCarryNoContentWhenCaptureIsOff(t *testing.T) {
	for _, s := range runRecorded(t, false, runtime.Task{RunID: "run-off", Input: "Book the team lunch.", CaseID: "c"}) {
		for _, kv := range s.Attributes() {
			if semconv.IsContentKey(string(kv.Key)) {
				t.Fatalf("span %s carries content %s with capture off", s.Name(), kv.Key)
			}
		}
	}
}
