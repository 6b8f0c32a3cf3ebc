package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runtime"
)

// BenchmarkEngineAuthorize is the engine's decision alone (rules matched,
// taint looked up): the reference rules and tracker.
func BenchmarkEngineAuthorize(b *testing.B) {
	r, _ := policy.ParseRules(strings.NewReader(mailRules), "bench")
	e, _ := policy.NewEngine(r)
	tr := policy.NewTracker()
	tr.MarkUntrusted("result:c1", "tool:search_docs")
	tr.Propagate([]string{"result:c1"}, "message:2")
	tr.Propagate([]string{"message:2"}, "body")
	req := policy.Request{Tool: "send_email", Scope: "to:ops@loomwork.example", ArgumentIDs: []string{"body", "to"}, Writes: true}
	b.ReportAllocs()
	for b.Loop() {
		if v := e.Authorize(req, tr); v.Decision != policy.RequireApproval {
			b.Fatal(v)
		}
	}
}

// BenchmarkGuardAuthorize is what the runtime pays per tool call: the taint
// rebuilt from a 20-message conversation (10 tool results scanned by the
// injection detector), the decision, and a span (no-op provider).
func BenchmarkGuardAuthorize(b *testing.B) {
	r, _ := policy.ParseRules(strings.NewReader(mailRules), "bench")
	e, _ := policy.NewEngine(r)
	g, _ := policy.NewGuard(policy.GuardConfig{Engine: e, Rules: r})
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "why do checkouts time out?"}}
	for i := 1; i <= 10; i++ {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "search_docs"}}},
			llm.Message{Role: llm.RoleTool, ToolCallID: id, ToolName: "search_docs", Content: strings.Repeat("Checkout timeouts trace to the pool size. ", 40) + planted})
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleAssistant})
	call := runtime.AuthCall{RunID: "r", Agent: "mailer", Step: 11, Call: llm.ToolCall{ID: "c11", Name: "send_email"},
		Arguments: json.RawMessage(`{"to":"ops@loomwork.example","body":"customer list"}`), Messages: msgs}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		a, err := g.Authorize(ctx, call)
		if err != nil || a.Allow {
			b.Fatal(a, err)
		}
	}
}
