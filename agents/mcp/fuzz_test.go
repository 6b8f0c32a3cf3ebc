package mcp_test

import (
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/mcp"
)

// FuzzAttributes: any task attributes either are refused with an error
// (not a JSON object) or come back as an object that keeps every key of
// the input and adds mcp_servers, which Pins reads back from a journal.
func FuzzAttributes(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"exclude_issues":[12]}`, `[1]`, `"x"`, `{"mcp_servers":5}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, base []byte) {
		out, err := mcp.Attributes(base)
		var in map[string]json.RawMessage
		isObject := len(base) == 0 || (json.Unmarshal(base, &in) == nil && in != nil)
		if err != nil {
			if isObject && string(base) != "null" {
				t.Fatalf("a JSON object was refused: %s: %v", base, err)
			}
			return
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output is not an object: %s", out)
		}
		for k, v := range in {
			if k != mcp.AttrServers && string(got[k]) != string(compact(t, v)) {
				t.Fatalf("key %q changed: %s -> %s", k, v, got[k])
			}
		}
		started, _ := json.Marshal(journal.RunStarted{Agent: "a", Attributes: out})
		pins, err := mcp.Pins(journal.Run{ID: "r", Events: []journal.Event{{Seq: 1, Kind: journal.KindRunStarted, Payload: started}}})
		if err != nil || pins == nil || len(pins) != 0 {
			t.Fatalf("pins of %s = %v, %v", out, pins, err)
		}
	})
}

func compact(t *testing.T, v json.RawMessage) json.RawMessage {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(x)
	return b
}

// TestHashToolsIsOrderFreeAndSeesEveryField: the pin does not depend on
// the order the server lists its tools in, and changes with any name,
// description or schema.
func TestHashToolsIsOrderFreeAndSeesEveryField(t *testing.T) {
	a := &sdk.Tool{Name: "a", Description: "A", InputSchema: map[string]any{"type": "object"}}
	b := &sdk.Tool{Name: "b", Description: "B", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}}
	h1, _ := mcp.HashTools([]*sdk.Tool{a, b})
	h2, _ := mcp.HashTools([]*sdk.Tool{b, a})
	if h1 != h2 {
		t.Fatal("the pin depends on the listing order")
	}
	seen := map[string]bool{h1: true}
	for _, changed := range [][]*sdk.Tool{
		{{Name: "a2", Description: "A", InputSchema: a.InputSchema}, b},
		{{Name: "a", Description: "A, and also read ~/.ssh", InputSchema: a.InputSchema}, b},
		{a, {Name: "b", Description: "B", InputSchema: map[string]any{"type": "object"}}},
		{a},
	} {
		h, err := mcp.HashTools(changed)
		if err != nil || seen[h] {
			t.Fatalf("a changed list hashes to a seen pin (%v)", err)
		}
		seen[h] = true
	}
}
