package research_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/memory"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
)

var recallScope = memory.Scope{Tenant: "t", Agent: research.Name, Namespace: "docs"}

func recallStore(t *testing.T) *memory.Store {
	t.Helper()
	ctx := context.Background()
	st, err := memory.Open(ctx, memory.Config{Path: filepath.Join(t.TempDir(), "m.db"), HalfLife: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Shutdown(ctx) })
	for _, r := range []memory.Record{
		{Key: "ep-1", Kind: memory.Episodic, Salience: 0.7, Written: time.Unix(0, 0), SourceRuns: []string{"run-1"}, Provenance: "run-1#9",
			Text: `run run-1: answer -> task "Syntax highlight not working": From the documentation I read: [docs/reference/code-blocks.md#usage]`},
		{Key: "proc-1", Kind: memory.Procedural, Salience: 0.9, Written: time.Unix(0, 0), Text: "when read_doc fails, call read_doc again with corrected arguments"},
	} {
		if _, _, err := st.Write(ctx, recallScope, r); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestRecallBringsRecordsWithProvenanceAndIgnoresFunctionWords(t *testing.T) {
	st := recallStore(t)
	ctx := context.Background()
	if q := research.RecallQuery("How to get syntax highlighting working with the theme?\nbody"); q != "syntax highlighting theme" {
		t.Fatalf("recall query %q", q)
	}
	docs, scored, err := research.Recall(ctx, st, recallScope, "Syntax highlight broken\n\nbody text", research.RecallConfig{}, time.Unix(3600, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].ID != "memory:ep-1" || scored[0].Record.Key != "ep-1" {
		t.Fatalf("recalled %+v", docs)
	}
	if got := strings.Join(docs[0].Provenance, " "); got != "memory:t/research/docs/ep-1 run-1 run-1#9" {
		t.Fatalf("provenance %q", got)
	}
	// A title sharing only function words with the procedure recalls nothing.
	if docs, _, _ := research.Recall(ctx, st, recallScope, "Crash with the again", research.RecallConfig{}, time.Unix(3600, 0)); len(docs) != 0 {
		t.Fatalf("function words recalled %+v", docs)
	}
	// Below the threshold (decayed for 10 days at a 1-day half-life): nothing.
	if docs, _, _ := research.Recall(ctx, st, recallScope, "Syntax highlight broken", research.RecallConfig{}, time.Unix(10*86400, 0)); len(docs) != 0 {
		t.Fatalf("a decayed record was recalled: %+v", docs)
	}
}

// turn asks the scripted policy for its next turn on msgs, with memory.
func turn(t *testing.T, mode, system string, msgs []llm.Message) llm.Response {
	t.Helper()
	p := research.Policy(research.PolicyConfig{Recall: mode})
	resp, err := p.Complete(context.Background(), llm.Request{System: system, Messages: msgs, Tools: []llm.ToolSpec{{Name: "search_docs"}, {Name: "read_doc"}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestPolicyUsesRecalledMemoryByMode(t *testing.T) {
	system := research.System + "\n\n" + runtime.MemoryHeader + "\n\n[memory:ep-1 · run-1]\nrun run-1: answer -> [docs/reference/code-blocks.md#usage]"
	task := []llm.Message{{Role: llm.RoleUser, Content: "Syntax highlight broken"}}
	// Trust: read the recalled section first, no search.
	r := turn(t, research.RecallTrust, system, task)
	if len(r.Message.ToolCalls) != 1 || r.Message.ToolCalls[0].Name != "read_doc" || !strings.Contains(string(r.Message.ToolCalls[0].Arguments), "code-blocks.md#usage") {
		t.Fatalf("trust: %+v", r.Message.ToolCalls)
	}
	// Verify: search first ...
	r = turn(t, research.RecallVerify, system, task)
	if len(r.Message.ToolCalls) != 1 || r.Message.ToolCalls[0].Name != "search_docs" {
		t.Fatalf("verify: %+v", r.Message.ToolCalls)
	}
	// ... then read the hit the memory cites first, and only hits.
	hits := `{"query":"q","hits":[{"rank":1,"id":"docs/a.md#x","kind":"doc"},{"rank":2,"id":"docs/b.md#y","kind":"doc"},{"rank":3,"id":"docs/c.md#z","kind":"doc"},{"rank":4,"id":"docs/reference/code-blocks.md#other","kind":"doc"}]}`
	call := llm.ToolCall{ID: "call_search_1", Name: "search_docs", Arguments: json.RawMessage(`{"query":"q"}`)}
	msgs := append(task, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
		llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, ToolName: "search_docs", Content: hits})
	r = turn(t, research.RecallVerify, system, msgs)
	var ids []string
	for _, c := range r.Message.ToolCalls {
		var a struct{ ID string }
		json.Unmarshal(c.Arguments, &a)
		ids = append(ids, a.ID)
	}
	if strings.Join(ids, " ") != "docs/reference/code-blocks.md#other docs/a.md#x docs/b.md#y" {
		t.Fatalf("verify reads %v", ids)
	}
	// Without memory the same search reads the top three.
	r = turn(t, research.RecallVerify, research.System, msgs)
	if len(r.Message.ToolCalls) != 3 || !strings.Contains(string(r.Message.ToolCalls[2].Arguments), "docs/c.md#z") {
		t.Fatalf("no memory: %+v", r.Message.ToolCalls)
	}
}
