package conversation_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/loomwork/loomwork/scorer/conversation"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// exported drops the unexported bookkeeping so conversations compare by
// what they say.
func exported(c conversation.Conversation) conversation.Conversation {
	return conversation.Conversation{Input: c.Input, Output: c.Output, Sources: c.Sources}
}

func text(s string) conversation.Part { return conversation.Part{Kind: conversation.Text, Text: s} }

func check(t *testing.T, got conversation.Conversation, want conversation.Conversation) {
	t.Helper()
	if !reflect.DeepEqual(exported(got), want) {
		g, _ := json.MarshalIndent(exported(got), "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Fatalf("conversation:\n%s\nwant:\n%s", g, w)
	}
}

// The weather example of the GenAI convention's content documentation, as
// the OTel SDKs send it: JSON text in three attributes.
const (
	genAISystem = `[{"type":"text","content":"You are a helpful bot"}]`
	genAIInput  = `[{"role":"user","parts":[{"type":"text","content":"Weather in Paris?"}]},` +
		`{"role":"assistant","parts":[{"type":"tool_call","id":"call_VSPygqKTWdrhaFErNvMV18Yl","name":"get_weather","arguments":{"location":"Paris","days":3}}]},` +
		`{"role":"tool","parts":[{"type":"tool_call_response","id":"call_VSPygqKTWdrhaFErNvMV18Yl","response":"rainy, 57°F"}]}]`
	genAIOutput = `[{"role":"assistant","parts":[{"type":"reasoning","content":"The tool answered."},` +
		`{"type":"text","content":"The weather in Paris is currently rainy with a temperature of 57°F."}],"finish_reason":"stop"}]`
)

var weather = conversation.Conversation{
	Input: []conversation.Message{
		{Role: "system", Parts: []conversation.Part{text("You are a helpful bot")}},
		{Role: "user", Parts: []conversation.Part{text("Weather in Paris?")}},
		{Role: "assistant", Parts: []conversation.Part{{Kind: conversation.ToolCall, ID: "call_VSPygqKTWdrhaFErNvMV18Yl", Name: "get_weather", Arguments: `{"days":3,"location":"Paris"}`}}},
		{Role: "tool", Parts: []conversation.Part{{Kind: conversation.ToolResult, ID: "call_VSPygqKTWdrhaFErNvMV18Yl", Response: "rainy, 57°F"}}},
	},
	Output: []conversation.Message{{Role: "assistant", FinishReason: "stop", Parts: []conversation.Part{
		{Kind: conversation.Reasoning, Text: "The tool answered."},
		text("The weather in Paris is currently rainy with a temperature of 57°F."),
	}}},
}

func TestGenAIAttributes(t *testing.T) {
	s := store.Span{Operation: semconv.OpChat, Attributes: store.Attributes{
		semconv.AttrSystemInstructions: genAISystem, semconv.AttrInputMessages: genAIInput, semconv.AttrOutputMessages: genAIOutput,
		semconv.AttrRequestModel: "gpt-4o"}}
	c := conversation.FromSpan(&s)
	want := weather
	want.Sources = []string{semconv.AttrSystemInstructions, semconv.AttrInputMessages, semconv.AttrOutputMessages}
	check(t, c, want)
	for _, k := range []string{semconv.AttrSystemInstructions, semconv.AttrInputMessages, semconv.AttrOutputMessages} {
		if !c.ShowsAttribute(k) {
			t.Errorf("ShowsAttribute(%s) = false", k)
		}
	}
	if c.ShowsAttribute(semconv.AttrRequestModel) {
		t.Error("the model attribute is not content")
	}
	if got := c.Input[1].Text(); got != "Weather in Paris?" {
		t.Errorf("user text %q", got)
	}
}

// A structured AnyValue (not JSON text) is read the same way: the collector
// keeps it as []any / map[string]any.
func TestGenAIStructuredValue(t *testing.T) {
	var in, out, sys any
	for _, x := range []struct {
		src string
		dst *any
	}{{genAIInput, &in}, {genAIOutput, &out}, {genAISystem, &sys}} {
		dec := json.NewDecoder(strings.NewReader(x.src))
		dec.UseNumber()
		if err := dec.Decode(x.dst); err != nil {
			t.Fatal(err)
		}
	}
	s := store.Span{Attributes: store.Attributes{semconv.AttrSystemInstructions: sys, semconv.AttrInputMessages: in, semconv.AttrOutputMessages: out}}
	want := weather
	want.Sources = []string{semconv.AttrSystemInstructions, semconv.AttrInputMessages, semconv.AttrOutputMessages}
	check(t, conversation.FromSpan(&s), want)
}

func TestInferenceDetailsEvent(t *testing.T) {
	s := store.Span{Operation: semconv.OpChat, Events: []store.Event{
		{Name: "exception", Attributes: store.Attributes{semconv.AttrInputMessages: `[{"role":"user","parts":[{"type":"text","content":"not this one"}]}]`}},
		{Name: semconv.EventInferenceOperationDetails, Attributes: store.Attributes{
			semconv.AttrSystemInstructions: genAISystem, semconv.AttrInputMessages: genAIInput, semconv.AttrOutputMessages: genAIOutput}},
	}}
	c := conversation.FromSpan(&s)
	want := weather
	want.Sources = []string{"event " + semconv.EventInferenceOperationDetails}
	check(t, c, want)
	if !c.ShowsEventAttribute(semconv.AttrInputMessages) || c.ShowsAttribute(semconv.AttrInputMessages) {
		t.Error("the messages came from the event, not the span's attributes")
	}
}

// OpenInference's OpenAI instrumentation: flattened messages, a multi-part
// user message with an image, a tool call and its result, and the request
// and response bodies in input.value / output.value (which the flattened
// messages take precedence over).
func TestOpenInferenceFlattened(t *testing.T) {
	s := store.Span{Attributes: store.Attributes{
		"openinference.span.kind":                                                 "LLM",
		"llm.input_messages.0.message.role":                                       "system",
		"llm.input_messages.0.message.content":                                    "You are a weather assistant.",
		"llm.input_messages.1.message.role":                                       "user",
		"llm.input_messages.1.message.contents.0.message_content.type":            "text",
		"llm.input_messages.1.message.contents.0.message_content.text":            "What's the weather in Boston?",
		"llm.input_messages.1.message.contents.1.message_content.type":            "image",
		"llm.input_messages.1.message.contents.1.message_content.image.image.url": "https://example.com/boston.png",
		"llm.input_messages.2.message.role":                                       "assistant",
		"llm.input_messages.2.message.tool_calls.0.tool_call.id":                  "call_abc",
		"llm.input_messages.2.message.tool_calls.0.tool_call.function.name":       "get_current_weather",
		"llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments":  `{"location": "Boston, MA", "unit": "fahrenheit"}`,
		"llm.input_messages.10.message.role":                                      "user",
		"llm.input_messages.10.message.content":                                   "and tomorrow?",
		"llm.input_messages.3.message.role":                                       "tool",
		"llm.input_messages.3.message.content":                                    `{"temperature": 72}`,
		"llm.input_messages.3.message.tool_call_id":                               "call_abc",
		"llm.output_messages.0.message.role":                                      "assistant",
		"llm.output_messages.0.message.content":                                   "It is 72°F in Boston.",
		"llm.output_messages.0.message.tool_calls.0.tool_call.id":                 "call_def",
		"llm.output_messages.0.message.tool_calls.0.tool_call.function.name":      "get_forecast",
		"llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": `{"location": "Boston, MA"}`,
		"input.value":     `{"messages": [{"role": "user", "content": "ignored"}], "model": "gpt-4o"}`,
		"input.mime_type": "application/json",
		"output.value":    `{"choices": [{"message": {"role": "assistant", "content": "ignored"}}]}`,
	}}
	c := conversation.FromSpan(&s)
	check(t, c, conversation.Conversation{
		Input: []conversation.Message{
			{Role: "system", Parts: []conversation.Part{text("You are a weather assistant.")}},
			{Role: "user", Parts: []conversation.Part{text("What's the weather in Boston?"), {Kind: conversation.Other, Type: "image", Text: "https://example.com/boston.png"}}},
			{Role: "assistant", Parts: []conversation.Part{{Kind: conversation.ToolCall, ID: "call_abc", Name: "get_current_weather", Arguments: `{"location": "Boston, MA", "unit": "fahrenheit"}`}}},
			{Role: "tool", Parts: []conversation.Part{{Kind: conversation.ToolResult, ID: "call_abc", Response: `{"temperature": 72}`}}},
			{Role: "user", Parts: []conversation.Part{text("and tomorrow?")}},
		},
		Output: []conversation.Message{{Role: "assistant", Parts: []conversation.Part{
			text("It is 72°F in Boston."),
			{Kind: conversation.ToolCall, ID: "call_def", Name: "get_forecast", Arguments: `{"location": "Boston, MA"}`},
		}}},
		Sources: []string{"llm.input_messages.*", "llm.output_messages.*"},
	})
	if !c.ShowsAttribute("llm.input_messages.1.message.contents.1.message_content.image.image.url") || c.ShowsAttribute("input.value") || c.ShowsAttribute("openinference.span.kind") {
		t.Error("ShowsAttribute should name exactly the flattened keys read")
	}
}

// OpenInference spans without flattened messages (chains, agents, and LLM
// spans of instrumentations that send only the bodies): input.value and
// output.value, as a chat request and completion, or as plain text.
func TestOpenInferenceValues(t *testing.T) {
	s := store.Span{Attributes: store.Attributes{
		"input.value":  `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Name a prime."}]}]}`,
		"output.value": `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"pick","arguments":"{\"n\":7}"}}]},"finish_reason":"tool_calls"}]}`,
	}}
	check(t, conversation.FromSpan(&s), conversation.Conversation{
		Input: []conversation.Message{
			{Role: "system", Parts: []conversation.Part{text("Be brief.")}},
			{Role: "user", Parts: []conversation.Part{text("Name a prime.")}},
		},
		Output: []conversation.Message{{Role: "assistant", FinishReason: "tool_calls", Parts: []conversation.Part{
			{Kind: conversation.ToolCall, ID: "call_1", Name: "pick", Arguments: `{"n":7}`}}}},
		Sources: []string{"input.value", "output.value"},
	})
	plain := store.Span{Attributes: store.Attributes{"input.value": "What is the capital of France?", "output.value": "Paris."}}
	check(t, conversation.FromSpan(&plain), conversation.Conversation{
		Input:   []conversation.Message{{Role: "user", Parts: []conversation.Part{text("What is the capital of France?")}}},
		Output:  []conversation.Message{{Role: "assistant", Parts: []conversation.Part{text("Paris.")}}},
		Sources: []string{"input.value", "output.value"},
	})
}

// OpenLLMetry (Traceloop's OpenAI instrumentation): gen_ai.prompt.<i>.* and
// gen_ai.completion.<i>.*, with tool calls in the history and the answer.
func TestOpenLLMetryFlattened(t *testing.T) {
	s := store.Span{Attributes: store.Attributes{
		"gen_ai.prompt.0.role":                   "system",
		"gen_ai.prompt.0.content":                "You answer from the docs.",
		"gen_ai.prompt.1.role":                   "user",
		"gen_ai.prompt.1.content":                "How do I enable retries?",
		"gen_ai.prompt.2.role":                   "assistant",
		"gen_ai.prompt.2.tool_calls.0.id":        "call_s1",
		"gen_ai.prompt.2.tool_calls.0.name":      "search_docs",
		"gen_ai.prompt.2.tool_calls.0.arguments": `{"query":"retries"}`,
		"gen_ai.prompt.3.role":                   "tool",
		"gen_ai.prompt.3.content":                "docs/retries.md: set retry: true",
		"gen_ai.prompt.3.tool_call_id":           "call_s1",
		"gen_ai.prompt.4.role":                   "user",
		"gen_ai.prompt.4.content":                `[{"type":"text","text":"Thanks, and backoff?"},{"type":"image_url","image_url":{"url":"https://example.com/x.png"}}]`,
		"gen_ai.completion.0.role":               "assistant",
		"gen_ai.completion.0.content":            "Set retry: true; backoff doubles.",
		"gen_ai.completion.0.finish_reason":      "stop",
		"gen_ai.request.model":                   "gpt-4o",
	}}
	c := conversation.FromSpan(&s)
	check(t, c, conversation.Conversation{
		Input: []conversation.Message{
			{Role: "system", Parts: []conversation.Part{text("You answer from the docs.")}},
			{Role: "user", Parts: []conversation.Part{text("How do I enable retries?")}},
			{Role: "assistant", Parts: []conversation.Part{{Kind: conversation.ToolCall, ID: "call_s1", Name: "search_docs", Arguments: `{"query":"retries"}`}}},
			{Role: "tool", Parts: []conversation.Part{{Kind: conversation.ToolResult, ID: "call_s1", Response: "docs/retries.md: set retry: true"}}},
			{Role: "user", Parts: []conversation.Part{text("Thanks, and backoff?"), {Kind: conversation.Other, Type: "image_url", Text: "https://example.com/x.png"}}},
		},
		Output:  []conversation.Message{{Role: "assistant", FinishReason: "stop", Parts: []conversation.Part{text("Set retry: true; backoff doubles.")}}},
		Sources: []string{"gen_ai.prompt.*", "gen_ai.completion.*"},
	})
	if c.ShowsAttribute("gen_ai.request.model") || !c.ShowsAttribute("gen_ai.prompt.2.tool_calls.0.arguments") {
		t.Error("ShowsAttribute should name exactly the flattened keys read")
	}
}

func TestNoContent(t *testing.T) {
	s := store.Span{Operation: semconv.OpChat, Attributes: store.Attributes{semconv.AttrRequestModel: "gpt-4o", semconv.AttrUsageInputTokens: int64(10)}}
	if c := conversation.FromSpan(&s); !c.Empty() || len(c.Sources) != 0 {
		t.Fatalf("a span without content: %+v", exported(c))
	}
	bad := store.Span{Attributes: store.Attributes{semconv.AttrInputMessages: `[{"role":"user","parts":[`, "llm.input_messages.x.message.role": "user"}}
	if c := conversation.FromSpan(&bad); !c.Empty() || c.ShowsAttribute(semconv.AttrInputMessages) {
		t.Fatalf("unreadable content must stay a raw attribute: %+v", exported(c))
	}
}

// FuzzShapes: whatever the texts and arguments, a conversation written in
// any of the four shapes reads back with every message's role and text and
// every tool call's name and arguments, in order.
func FuzzShapes(f *testing.F) {
	f.Add("Weather in Paris?", "It is rainy.", "get_weather", `{"location":"Paris"}`, uint8(0))
	f.Add("<script>x</script>", "ünïcode ✓\nline", "a.b", "not json", uint8(1))
	f.Add("", "[1,2]", "", "{}", uint8(2))
	f.Fuzz(func(t *testing.T, user, answer, tool, args string, shape uint8) {
		var s store.Span
		js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
		switch shape % 4 {
		case 0, 1:
			// OTLP strings are UTF-8; JSON would replace invalid bytes.
			if !utf8.ValidString(user) || !utf8.ValidString(answer) || !utf8.ValidString(tool) || !utf8.ValidString(args) {
				return
			}
			in := js([]any{
				map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "content": user}}},
				map[string]any{"role": "assistant", "parts": []any{map[string]any{"type": "tool_call", "id": "c1", "name": tool, "arguments": args}}},
			})
			out := js([]any{map[string]any{"role": "assistant", "parts": []any{map[string]any{"type": "text", "content": answer}}}})
			a := store.Attributes{semconv.AttrInputMessages: in, semconv.AttrOutputMessages: out}
			if shape%4 == 0 {
				s.Attributes = a
			} else {
				s.Events = []store.Event{{Name: semconv.EventInferenceOperationDetails, Attributes: a}}
			}
		case 2:
			s.Attributes = store.Attributes{
				"llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": user,
				"llm.input_messages.1.message.role": "assistant", "llm.input_messages.1.message.tool_calls.0.tool_call.id": "c1",
				"llm.input_messages.1.message.tool_calls.0.tool_call.function.name":      tool,
				"llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": args,
				"llm.output_messages.0.message.role":                                     "assistant", "llm.output_messages.0.message.content": answer,
			}
		case 3:
			s.Attributes = store.Attributes{
				"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": user,
				"gen_ai.prompt.1.role": "assistant", "gen_ai.prompt.1.tool_calls.0.id": "c1",
				"gen_ai.prompt.1.tool_calls.0.name": tool, "gen_ai.prompt.1.tool_calls.0.arguments": args,
				"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": answer,
			}
			// OpenLLMetry writes a multi-part message's content as a JSON
			// list of parts, so a text that is one is read as parts.
			if strings.HasPrefix(strings.TrimSpace(user), "[") || strings.HasPrefix(strings.TrimSpace(answer), "[") {
				return
			}
		}
		c := conversation.FromSpan(&s)
		if len(c.Input) != 2 || len(c.Output) != 1 {
			t.Fatalf("shape %d: %d input and %d output messages, want 2 and 1: %+v", shape%4, len(c.Input), len(c.Output), exported(c))
		}
		if c.Input[0].Role != "user" || c.Input[0].Text() != user {
			t.Fatalf("shape %d: user message %+v, want %q", shape%4, c.Input[0], user)
		}
		if c.Output[0].Role != "assistant" || c.Output[0].Text() != answer {
			t.Fatalf("shape %d: answer %+v, want %q", shape%4, c.Output[0], answer)
		}
		p := c.Input[1].Parts
		if len(p) != 1 || p[0].Kind != conversation.ToolCall || p[0].Name != tool || p[0].Arguments != args || p[0].ID != "c1" {
			t.Fatalf("shape %d: tool call %+v, want %q(%q)", shape%4, p, tool, args)
		}
	})
}

// FuzzAnyBytes: no value in any content attribute or key makes FromSpan
// panic, and a value that is not JSON is only ever shown whole, as text.
func FuzzAnyBytes(f *testing.F) {
	for _, s := range []string{genAIInput, genAIOutput, genAISystem, `{"messages":[{"role":"user","content":"x"}]}`, `[[[[`, `{"choices":[1]}`, `"str"`, `null`, `[{"type":"blob","content":"AAAA"}]`} {
		f.Add(s, "0.message.role")
	}
	f.Fuzz(func(t *testing.T, data, suffix string) {
		a := store.Attributes{}
		for _, k := range []string{semconv.AttrSystemInstructions, semconv.AttrInputMessages, semconv.AttrOutputMessages, "input.value", "output.value"} {
			a[k] = data
		}
		for _, p := range []string{"llm.input_messages.", "llm.output_messages.", "gen_ai.prompt.", "gen_ai.completion."} {
			a[p+suffix] = data
			a[p+"0.message.content"] = data
			a[p+"0.content"] = data
		}
		s := store.Span{Attributes: a, Events: []store.Event{{Name: semconv.EventInferenceOperationDetails, Attributes: a}}}
		c := conversation.FromSpan(&s)
		if json.Valid([]byte(data)) {
			return // JSON escapes make a decoded text differ from the bytes sent
		}
		for _, m := range append(c.Input, c.Output...) {
			for _, p := range m.Parts {
				if p.Kind == conversation.Text && p.Text != data {
					t.Fatalf("text %q is not the input %q", p.Text, data)
				}
			}
		}
	})
}
