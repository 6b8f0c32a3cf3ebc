package policy_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/loomwork/loomwork/agents/policy"
)

// TestTwoWritersExtendOneChain: two logs open on one file — two commands
// auditing to the default .loomwork/audit.jsonl at once — append
// concurrently; the file holds one chain with every entry, which
// verifies, and each writer's next append follows the other's entries.
// (Before writers caught up under a lock, each extended its own
// in-memory chain and the file forked at the first interleaving.)
func TestTwoWritersExtendOneChain(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := policy.OpenAudit(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.OpenAudit(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	const each = 50
	var wg sync.WaitGroup
	for _, l := range []*policy.AuditLog{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := l.Append("agent:x", "tool_call", map[string]int{"i": i}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := policy.ReadAudit(f, file)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2*each {
		t.Fatalf("%d entries in the file, want %d", len(entries), 2*each)
	}
	if err := policy.VerifyAudit(entries); err != nil {
		t.Fatalf("the file's chain does not verify: %v", err)
	}
	// A third writer opened now continues the same chain.
	c, err := policy.OpenAudit(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := a.Append("agent:x", "tool_call", "last")
	if err != nil || e.Seq != 2*each+1 {
		t.Fatalf("a's next entry: seq %d, %v", e.Seq, err)
	}
	if e, err := c.Append("agent:y", "tool_call", "after"); err != nil || e.Seq != 2*each+2 {
		t.Fatalf("c's entry after a's: seq %d, %v", e.Seq, err)
	}
}
