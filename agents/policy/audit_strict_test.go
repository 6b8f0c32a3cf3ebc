package policy_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/loomwork/loomwork/agents/policy"
)

// auditLines writes a 4-entry audit log with AuditLog and returns its lines.
func auditLines(t *testing.T) []string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := policy.OpenAudit(file, clock())
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range []string{"allow", "require_approval", "approval_granted", "allow"} {
		mustAppend(t, l, "agent:a", "tool_call", map[string]any{"i": i, "decision": a})
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// verifyText is what `loom-eval audit verify` does with a file's text.
func verifyText(text string) error {
	es, err := policy.ReadAudit(strings.NewReader(text), "audit.jsonl")
	if err != nil {
		return err
	}
	return policy.VerifyAudit(es)
}

// TestAuditVerifyIsStrict: a log as written verifies; every way of
// changing its text is refused, naming the line — trailing text after an
// entry, two entries joined on one line (the second would otherwise be
// dropped silently, and with it the log's end), a blank line, an unknown
// field, a reordered, deleted or edited entry.
func TestAuditVerifyIsStrict(t *testing.T) {
	lines := auditLines(t)
	join := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	if err := verifyText(join(lines)); err != nil {
		t.Fatalf("the log as written does not verify: %v", err)
	}
	with := func(f func(ls []string) []string) string {
		return join(f(append([]string(nil), lines...)))
	}
	for _, c := range []struct {
		name, text, want string
	}{
		{"trailing text", with(func(ls []string) []string { ls[1] += ` approved-by-mallory`; return ls }), "line 2: data after the entry"},
		{"trailing json", with(func(ls []string) []string { ls[1] += `{}`; return ls }), "line 2: data after the entry"},
		{"trailing space", with(func(ls []string) []string { ls[3] += " "; return ls }), "line 4: data after the entry"},
		{"joined last lines", join(append(lines[:2:2], lines[2]+lines[3])), "line 3: data after the entry"},
		{"joined with a newline escape", join(append(lines[:2:2], lines[2]+`\n`+lines[3])), "line 3: data after the entry"},
		{"blank line", join(append(lines[:2:2], append([]string{""}, lines[2:]...)...)), "line 3: not a JSON object"},
		{"leading text", with(func(ls []string) []string { ls[0] = "x" + ls[0]; return ls }), "line 1: not a JSON object"},
		{"unknown field", with(func(ls []string) []string {
			ls[2] = strings.Replace(ls[2], `{"seq"`, `{"note":"hi","seq"`, 1)
			return ls
		}), `line 3: json: unknown field "note"`},
		{"reordered", join([]string{lines[0], lines[2], lines[1], lines[3]}), "line 2 (entry seq 3): reordered"},
		{"deleted", join([]string{lines[0], lines[1], lines[3]}), "line 3 (entry seq 4): entries 3 missing: dropped"},
		{"edited field", with(func(ls []string) []string {
			ls[1] = strings.Replace(ls[1], `"decision":"require_approval"`, `"decision":"allow"`, 1)
			return ls
		}), "line 2 (entry seq 2): content does not match its hash: edited"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.text == join(lines) {
				t.Fatal("the change did not apply")
			}
			err := verifyText(c.text)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("verify = %v, want an error with %q", err, c.want)
			}
		})
	}
	var ae *policy.AuditError
	if err := verifyText(join([]string{lines[0], lines[2]})); !errors.As(err, &ae) {
		t.Fatalf("a chain error is not an *AuditError: %v", err)
	}
}

// TestAuditLogIsOwnerOnly: the audit log is created 0600, even with a
// umask of 0.
func TestAuditLogIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := policy.OpenAudit(file, clock())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, "a", "x", nil)
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Mode().Perm(); m != 0o600 {
		t.Errorf("audit log mode %v, want 0600", m)
	}
}
