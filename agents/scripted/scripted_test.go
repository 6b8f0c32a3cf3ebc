package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/llm"
)

const script = `{"model":"m1","turns":[
 {"tool_calls":[{"id":"a","name":"calc","arguments":{"x":1}}],"usage":{"input_tokens":10,"output_tokens":2}},
 {"content":"done","usage":{"input_tokens":20,"output_tokens":3},"expect":{"last_role":"tool","tool_error":false,"tools_offered":true}}
]}`

func userReq() llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Tools: []llm.ToolSpec{{Name: "calc"}}}
}

func TestScriptedAnswersAreLabelledAndChosenByConversation(t *testing.T) {
	s, err := Parse(strings.NewReader(script), "s.json")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := New(s)
	resp, err := m.Complete(context.Background(), userReq())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Label != "scripted" || resp.Provider != "scripted" || resp.Model != "m1" || resp.StopReason != "tool_calls" ||
		len(resp.Message.ToolCalls) != 1 || resp.Usage.InputTokens != 10 {
		t.Fatalf("resp = %+v", resp)
	}
	req := userReq()
	req.Messages = append(req.Messages, resp.Message, llm.Message{Role: llm.RoleTool, ToolCallID: "a", Content: "1"})
	// A fresh model (a new process) answers the same conversation the same way.
	m2, _ := New(s)
	resp2, err := m2.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp2.Message.Content != "done" || resp2.StopReason != "stop" || m2.Calls() != 1 {
		t.Fatalf("resp2 = %+v", resp2)
	}
	req.Messages = append(req.Messages, resp2.Message, llm.Message{Role: llm.RoleUser, Content: "more?"})
	if _, err := m2.Complete(context.Background(), req); !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "the script has 2 turns and the conversation asks for turn 3") {
		t.Fatalf("err = %v", err)
	}
}

func TestScriptedModelRefusesADivergedConversation(t *testing.T) {
	s, _ := Parse(strings.NewReader(script), "s.json")
	m, _ := New(s)
	base := userReq()
	call := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "calc", Arguments: json.RawMessage(`{"x":1}`)}}}
	cases := map[string]struct {
		msgs  []llm.Message
		tools bool
		want  string
	}{
		"unanswered call":   {[]llm.Message{base.Messages[0], call, {Role: llm.RoleUser, Content: "?"}}, true, "tool call"},
		"other call id":     {[]llm.Message{base.Messages[0], {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "zz", Name: "calc"}}}, {Role: llm.RoleTool, ToolCallID: "zz"}}, true, "made tool calls [zz], the script's turn 1 made [a]"},
		"error observation": {[]llm.Message{base.Messages[0], call, {Role: llm.RoleTool, ToolCallID: "a", IsError: true}}, true, "is_error=false"},
		"tools withheld":    {[]llm.Message{base.Messages[0], call, {Role: llm.RoleTool, ToolCallID: "a"}}, false, "expects tools to be offered"},
	}
	for name, tc := range cases {
		req := llm.Request{Messages: tc.msgs}
		if tc.tools {
			req.Tools = base.Tools
		}
		_, err := m.Complete(context.Background(), req)
		if !errors.Is(err, ErrDiverged) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

func TestParseRejectsBadScriptsNamingTheField(t *testing.T) {
	for doc, want := range map[string]string{
		`{"turns":[]}`: "the script has no turns",
		`{"turns":[{"content":"x","usage":{},"bogus":1}]}`:                         `unknown field "bogus"`,
		`{"turns":[{"tool_calls":[{"id":"a","name":"t"},{"id":"a","name":"t"}]}]}`: `turns[0].tool_calls[1].id: "a" already used in turns[0]`,
		`{"turns":[{"tool_calls":[{"id":"a","name":"","arguments":{}}]}]}`:         `turns[0].tool_calls[0].name: must be set`,
		`{"turns":[{"tool_calls":[{"id":"a","name":"t","arguments":[1]}]}]}`:       `turns[0].tool_calls[0].arguments: must be a JSON object`,
		`{"turns":[{}]}`: `turns[0]: neither content nor tool_calls`,
	} {
		_, err := Parse(strings.NewReader(doc), "bad.json")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("%s: err = %v, want %q", doc, err, want)
		}
	}
}

func TestFuncModelIsLabelledScripted(t *testing.T) {
	m := NewFunc("", func(req llm.Request, turn int) (Turn, error) { return Turn{Content: "x"}, nil })
	resp, err := m.Complete(context.Background(), userReq())
	if err != nil || resp.Label != llm.LabelScripted || resp.Model != DefaultModel || m.Label() != "scripted" {
		t.Fatalf("resp = %+v, %v", resp, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(script))
	f.Add([]byte(`{"turns":[{"content":"x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(strings.NewReader(string(b)), "fuzz")
		if err != nil {
			return
		}
		m, err := New(s)
		if err != nil {
			t.Fatalf("a parsed script does not build a model: %v", err)
		}
		m.Complete(context.Background(), userReq())
	})
}
