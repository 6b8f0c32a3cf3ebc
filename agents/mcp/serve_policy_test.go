package mcp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runtime"
)

// TestServedToolsUnderAPolicy: with an Authorizer, every tools/call is
// decided before the tool runs. The client is untrusted, so a write the
// rules allow is held (and, with no human on an MCP call, not run); a read
// the rules allow runs; a tool the rules do not name is denied. Each
// decision is audited, and the log verifies.
func TestServedToolsUnderAPolicy(t *testing.T) {
	ctx := context.Background()
	var sent, read atomic.Int32
	obj := json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"q":{"type":"string"}}}`)
	tools := []runtime.Tool{
		{Name: "lookup", Parameters: obj, Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
			read.Add(1)
			return runtime.ToolOutput{Content: "found"}, nil
		}},
		{Name: "notify", Parameters: obj, Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
			sent.Add(1)
			return runtime.ToolOutput{Content: "sent"}, nil
		}},
		{Name: "other", Parameters: obj, Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
			return runtime.ToolOutput{Content: "other"}, nil
		}},
	}
	rules, err := policy.ParseRules(strings.NewReader(`{"version": 1, "scope": "srv",
	  "tools": {"notify": {"writes": true, "scope_arg": "to", "scope_prefix": "to:", "scope_type": "email"}},
	  "rules": [{"tool": "lookup", "decision": "allow"}, {"tool": "notify", "scope": "to:*@loomwork.example", "decision": "allow"}]}`), "test")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := policy.NewEngine(rules)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	audit, err := policy.OpenAudit(auditFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := policy.NewGuard(policy.GuardConfig{Engine: e, Rules: rules, Audit: audit})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mcp.NewServer(mcp.ServerConfig{Name: "guarded", Tools: tools, Authorizer: g})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.HTTPHandler("tok"))
	defer hs.Close()
	c := httpClient(t, hs.URL, "tok", nil)

	if out, err := c.Call(ctx, "lookup", json.RawMessage(`{"q":"x"}`)); err != nil || out.Content != "found" {
		t.Fatalf("an allowed read: %+v %v", out, err)
	}
	_, err = c.Call(ctx, "notify", json.RawMessage(`{"to":"team@loomwork.example"}`))
	if err == nil || !strings.Contains(err.Error(), "was not run") || !strings.Contains(err.Error(), "approval") {
		t.Fatalf("a write from the client: %v, want it held and not run", err)
	}
	if _, err := c.Call(ctx, "other", json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "policy denied tool other") {
		t.Fatalf("a tool the rules do not name: %v, want denied", err)
	}
	if sent.Load() != 0 || read.Load() != 1 {
		t.Fatalf("notify ran %d times, lookup %d; want 0 and 1", sent.Load(), read.Load())
	}
	entries := audit.Entries()
	if len(entries) != 3 || audit.Verify() != nil {
		t.Fatalf("%d audit entries (verify: %v), want 3", len(entries), audit.Verify())
	}
	if !strings.Contains(string(entries[1].Data), mcp.ClientOrigin) {
		t.Fatalf("the held write's audit entry does not name the client as the taint's origin: %s", entries[1].Data)
	}
}
