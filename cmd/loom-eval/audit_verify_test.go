package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/policy"
)

// TestAuditVerifyChecksSignaturesWithTheMachinesKeyOrTheOneGiven: audit
// verify checks a signed log with the machine's key (and says so, in text
// and JSON), refuses it under another key naming the entry, checks only the
// chain with --unsigned, and refuses --key with --unsigned.
func TestAuditVerifyChecksSignaturesWithTheMachinesKeyOrTheOneGiven(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := openAudit(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"allow", "require_approval"} {
		if _, err := l.Append("agent:research", "tool_call", map[string]string{"decision": d}); err != nil {
			t.Fatal(err)
		}
	}
	key, err := loadAuditKey()
	if err != nil {
		t.Fatal(err)
	}
	if out, _, code := cli(t, "audit", "verify", file); code != ExitOK || !strings.Contains(out, "2 entries, chain verifies, every entry signed with key "+key.ID()) {
		t.Fatalf("verify with the machine's key: exit %d\n%s", code, out)
	}
	out, _, code := cli(t, "audit", "verify", "--json", file)
	var v struct {
		OK     bool   `json:"ok"`
		Signed bool   `json:"signed"`
		Key    string `json:"key"`
	}
	if code != ExitOK || json.Unmarshal([]byte(out), &v) != nil || !v.OK || !v.Signed || v.Key != key.ID() {
		t.Fatalf("verify --json: exit %d %+v\n%s", code, v, out)
	}

	other := filepath.Join(t.TempDir(), "other.key")
	if _, err := policy.LoadAuditKey(other); err != nil {
		t.Fatal(err)
	}
	out, _, code = cli(t, "audit", "verify", "--key", other, "--json", file)
	var bad struct {
		OK      bool   `json:"ok"`
		Line    int    `json:"line"`
		Problem string `json:"problem"`
	}
	if code != ExitFailure || json.Unmarshal([]byte(out), &bad) != nil || bad.OK || bad.Line != 1 || !strings.Contains(bad.Problem, "signed with another key") {
		t.Fatalf("verify --key OTHER: exit %d %+v\n%s", code, bad, out)
	}
	if out, _, code := cli(t, "audit", "verify", "--unsigned", file); code != ExitOK || !strings.Contains(out, "signatures not checked") {
		t.Fatalf("verify --unsigned: exit %d\n%s", code, out)
	}
	if _, _, code := cli(t, "audit", "verify", "--unsigned", "--key", other, file); code != ExitUsage {
		t.Fatalf("--key with --unsigned: exit %d, want %d", code, ExitUsage)
	}
	missing := filepath.Join(t.TempDir(), "missing.key")
	if _, _, code := cli(t, "audit", "verify", "--key", missing, file); code != ExitUsage {
		t.Fatalf("--key naming no file: exit %d, want %d", code, ExitUsage)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("audit verify made a key file: verifying must never make one")
	}
}
