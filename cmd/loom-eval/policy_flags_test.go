package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
)

// TestRunUnderAPolicyJournalsAndAuditsEveryDecision: `run --policy`
// authorizes each tool call of the research agent: reads the file allows
// run, a tool it does not name is denied (the model is told). Every
// decision is in the journal (so replay needs the same policy: without it
// the replay diverges at the first decision) and in the audit log, whose
// chain verifies; a tampered log is refused for appending.
func TestRunUnderAPolicyJournalsAndAuditsEveryDecision(t *testing.T) {
	testtier.Slow(t)
	ds := datasettest.ShippedDir(t)
	dir := t.TempDir()
	rules := filepath.Join(dir, "policy.json")
	os.WriteFile(rules, []byte(`{"version": 1, "scope": "docs", "rules": [{"tool": "search_docs", "decision": "allow", "note": "reads are safe"}]}`), 0o644)
	audit := filepath.Join(dir, "audit", "log.jsonl")
	out, errOut, code := cli(t, "run", "--agent", "research", "--task", "Google Analytics with tracking code", "--run-id", "pol-1",
		"--dataset", ds, "--index-cache", indexCache(t), "--journal", filepath.Join(dir, "j.db"), "--journal-out", filepath.Join(dir, "out.jsonl"),
		"--policy", rules, "--audit", audit, "--no-experiment", "--json")
	if code != ExitOK {
		t.Fatalf("run --policy: exit %d\n%s%s", code, out, errOut)
	}
	journal, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if n := strings.Count(string(journal), `"kind":"policy_decision"`); n < 2 ||
		!strings.Contains(string(journal), `"decision":"allow"`) || !strings.Contains(string(journal), `"decision":"deny"`) {
		t.Fatalf("the journal holds %d decisions, want search_docs allowed and read_doc denied:\n%s", n, journal)
	}
	log, _ := os.ReadFile(audit)
	if got, want := strings.Count(string(log), "\n"), strings.Count(string(journal), `"kind":"policy_decision"`); got != want {
		t.Fatalf("%d audit entries for %d journaled decisions", got, want)
	}
	if out, _, code := cli(t, "audit", "verify", audit); code != ExitOK || !strings.Contains(out, "chain verifies") {
		t.Fatalf("audit verify: exit %d %s", code, out)
	}
	if _, _, code := cli(t, "replay", filepath.Join(dir, "out.jsonl"), "--policy", rules); code != ExitOK {
		t.Fatalf("replay --policy of the run: exit %d", code)
	}
	// The journal records its policy: a replay told nothing re-decides
	// under it; told none, or the default policy, it diverges at the
	// decisions (the default allows read_doc, which the file denied).
	if out, _, code := cli(t, "replay", filepath.Join(dir, "out.jsonl"), "--json"); code != ExitOK || !strings.Contains(out, `"policy": "recorded `+rules+`"`) {
		t.Fatalf("replay with no flag: exit %d, want 0 under the recorded policy\n%s", code, out)
	}
	for _, p := range []string{"none", "default"} {
		if _, _, code := cli(t, "replay", filepath.Join(dir, "out.jsonl"), "--policy", p); code == ExitOK {
			t.Fatalf("replay --policy %s does not diverge at the journaled decisions", p)
		}
	}
	// A log edited after the fact is not appended to: the next run refuses.
	os.WriteFile(audit, []byte(strings.Replace(string(log), `"decision":"deny"`, `"decision":"allow"`, 1)), 0o600)
	if _, _, code := cli(t, "run", "--agent", "research", "--task", "x", "--dataset", ds, "--journal", filepath.Join(dir, "j2.db"),
		"--policy", rules, "--audit", audit, "--no-experiment"); code != ExitFailure {
		t.Fatalf("run appending to a tampered audit log: exit %d, want %d", code, ExitFailure)
	}
}
