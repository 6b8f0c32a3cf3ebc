package providertest

import (
	"net/http"
	"strings"
	"testing"
)

func TestOpenAIFakeEnforcesBothOrderingRules(t *testing.T) {
	cases := map[string]string{
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c1","content":"x"}]}`:                                                                                                          "preceeding message with 'tool_calls'",
		`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"next"}]}`: "did not have response messages: c1",
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c2","content":"x"}]}`:               "'tool_call_id' of 'c2' not found",
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":{}}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}`:                 "expected a string",
	}
	h := http.Header{"Authorization": {"Bearer k"}}
	for body, want := range cases {
		r := checkOpenAI("k", h, []byte(body))
		if r == nil || r.Status != 400 || !strings.Contains(r.Body, want) || !strings.Contains(r.Body, `"type":"invalid_request_error"`) {
			t.Errorf("%s\n → %+v, want 400 containing %q", body, r, want)
		}
	}
	ok := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"user","content":"go on"}]}`
	if r := checkOpenAI("k", h, []byte(ok)); r != nil {
		t.Fatalf("valid conversation refused: %s", r.Body)
	}
	if r := checkOpenAI("k", http.Header{}, []byte(ok)); r == nil || r.Status != 401 {
		t.Fatal("missing key accepted")
	}
}

func TestAnthropicFakeEnforcesBothOrderingRules(t *testing.T) {
	h := http.Header{"X-Api-Key": {"k"}, "Anthropic-Version": {"2023-06-01"}}
	cases := map[string]string{
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`:                                                                  "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: t1. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.",
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":"next"}]}`: "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t1.",
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`:                  "max_tokens: Field required",
		`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`: "messages.0.role",
	}
	for body, want := range cases {
		r := checkAnthropic("k", h, []byte(body))
		if r == nil || r.Status != 400 || !strings.Contains(r.Body, want) || !strings.Contains(r.Body, `"type":"error"`) {
			t.Errorf("%s\n → %+v, want 400 containing %q", body, r, want)
		}
	}
	ok := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"},{"type":"text","text":"go"}]}]}`
	if r := checkAnthropic("k", h, []byte(ok)); r != nil {
		t.Fatalf("valid conversation refused: %s", r.Body)
	}
}
