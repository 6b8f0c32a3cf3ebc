package policy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loomwork/loomwork/agents/policy"
)

func testKey(t *testing.T, fill byte) *policy.AuditKey {
	t.Helper()
	k, err := policy.NewAuditKey([]byte(strings.Repeat(string(rune(fill)), 32)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signedLog writes five entries to a log signed with key and returns its
// file and entries.
func signedLog(t *testing.T, key *policy.AuditKey) (string, []policy.AuditEntry) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := policy.OpenAudit(file, clock(), policy.SignedWith(key))
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range []string{"allow", "require_approval", "deny", "allow", "allow"} {
		if _, err := l.Append("agent:ops", "tool_call", map[string]any{"n": i, "verdict": map[string]string{"decision": d}}); err != nil {
			t.Fatal(err)
		}
	}
	return file, l.Entries()
}

// TestSignedAuditRefusesARechainedForgery: whoever can write the log can
// rewrite a decision and recompute every hash after it, which the chain
// alone accepts; the entries' signatures refuse it, and a log signed with
// another key, or unsigned, is refused naming the entry.
func TestSignedAuditRefusesARechainedForgery(t *testing.T) {
	key := testKey(t, 'k')
	file, es := signedLog(t, key)
	for _, e := range es {
		if e.Key != key.ID() || len(e.MAC) != 64 {
			t.Fatalf("entry %d: key %q mac %q, want signed with %s", e.Seq, e.Key, e.MAC, key.ID())
		}
	}
	if err := policy.VerifyAuditSigned(es, key); err != nil {
		t.Fatalf("the log as written: %v", err)
	}
	if _, err := policy.OpenAudit(file, nil, policy.SignedWith(key)); err != nil {
		t.Fatalf("reopen with its key: %v", err)
	}

	// Flip decision 2 to allow and recompute every hash from there, as a
	// forger without the key can: with the old signatures kept, and with
	// them dropped.
	rechain := func(keepMAC bool) []policy.AuditEntry {
		out := append([]policy.AuditEntry(nil), es...)
		out[1].Data = json.RawMessage(strings.Replace(string(out[1].Data), "require_approval", "allow", 1))
		for i := 1; i < len(out); i++ {
			out[i].Prev = out[i-1].Hash
			out[i].Hash = policy.HashEntryForTest(out[i])
			if !keepMAC {
				out[i].Key, out[i].MAC = "", ""
			}
		}
		return out
	}
	for _, c := range []struct {
		name    string
		entries []policy.AuditEntry
		want    string
	}{
		{"rechained, signatures kept", rechain(true), "line 2 (entry seq 2): signature does not match: forged"},
		{"rechained, signatures dropped", rechain(false), "line 2 (entry seq 2): unsigned"},
	} {
		if err := policy.VerifyAudit(c.entries); err != nil {
			t.Fatalf("%s: the chain alone refuses it (%v): the case no longer shows what signatures add", c.name, err)
		}
		if err := policy.VerifyAuditSigned(c.entries, key); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := policy.VerifyAuditSigned(es, testKey(t, 'o')); err == nil || !strings.Contains(err.Error(), "line 1 (entry seq 1): signed with another key") {
		t.Errorf("verified with another key: %v", err)
	}

	// A forgery written to the file is refused at open: nothing is
	// appended to it.
	var b strings.Builder
	for _, e := range rechain(true) {
		line, _ := json.Marshal(e)
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.OpenAudit(file, nil, policy.SignedWith(key)); err == nil || !strings.Contains(err.Error(), "signature does not match") {
		t.Errorf("open of a forged log: %v, want refused", err)
	}

	// An unsigned log (made without a key) is refused by a signed open,
	// with what to do.
	plain := filepath.Join(t.TempDir(), "plain.jsonl")
	pl, _ := policy.OpenAudit(plain, clock())
	pl.Append("agent:ops", "tool_call", map[string]string{"x": "y"})
	if _, err := policy.OpenAudit(plain, nil, policy.SignedWith(key)); err == nil || !strings.Contains(err.Error(), "move an old log aside") {
		t.Errorf("signed open of an unsigned log: %v", err)
	}
}

// TestAuditKeyFileIsMadeOnceOwnerOnlyAndRefusedWhenOthersCanRead: the key
// file is created with a random secret, mode 600, in a 700 folder; a
// second load reads the same key; processes creating it at once end with
// one key; a file others can read is refused.
func TestAuditKeyFileIsMadeOnceOwnerOnlyAndRefusedWhenOthersCanRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg", "loomwork", "audit.key")
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			k, err := policy.LoadAuditKey(path)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = k.ID()
		})
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("concurrent first loads made different keys: %v", ids)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Errorf("key folder mode %v, want 700", di.Mode().Perm())
	}
	again, err := policy.LoadAuditKey(path)
	if err != nil || again.ID() != ids[0] {
		t.Errorf("reload: %v, %v; want key %s", again, err, ids[0])
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.LoadAuditKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a world-readable key: %v, want refused", err)
	}
	if _, err := policy.NewAuditKey([]byte("short")); err == nil {
		t.Error("a 5-byte key was accepted")
	}
	p, err := policy.DefaultAuditKeyPath(func(k string) string { return map[string]string{"HOME": "/home/u"}[k] })
	if err != nil || p != "/home/u/.config/loomwork/audit.key" {
		t.Errorf("default key path: %q, %v", p, err)
	}
	p, _ = policy.DefaultAuditKeyPath(func(k string) string {
		return map[string]string{"HOME": "/home/u", "LOOMWORK_AUDIT_KEY": "/k"}[k]
	})
	if p != "/k" {
		t.Errorf("$LOOMWORK_AUDIT_KEY ignored: %q", p)
	}
}

// TestAuditKeyFilesThatAreNotKeysAreRefusedNamingTheFile: a key file that
// is not hex, or holds too short a secret, is refused naming the file; the
// default path follows $XDG_CONFIG_HOME, and with no home at all says what
// to set; generated keys differ.
func TestAuditKeyFilesThatAreNotKeysAreRefusedNamingTheFile(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"not-hex.key": "zz not hex\n", "short.key": "00ff00ff\n"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := policy.LoadAuditKey(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
	}
	p, err := policy.DefaultAuditKeyPath(func(k string) string {
		return map[string]string{"HOME": "/home/u", "XDG_CONFIG_HOME": "/xdg"}[k]
	})
	if err != nil || p != "/xdg/loomwork/audit.key" {
		t.Errorf("with $XDG_CONFIG_HOME: %q, %v", p, err)
	}
	if _, err := policy.DefaultAuditKeyPath(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), policy.EnvAuditKey) {
		t.Errorf("no home: %v, want an error naming $%s", err, policy.EnvAuditKey)
	}
	a, errA := policy.GenerateAuditKey()
	b, errB := policy.GenerateAuditKey()
	if errA != nil || errB != nil || a.ID() == b.ID() {
		t.Errorf("two generated keys: %v %v, ids %s %s", errA, errB, a.ID(), b.ID())
	}
}
