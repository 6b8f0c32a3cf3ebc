package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
)

// TestRunUnderAPolicyJournalsAndAuditsEveryDecision: `run --policy`
// authorizes each tool call of the research agent: reads the file allows
// run, a tool it does not name is denied (the model is told). Every
// decision is in the journal, with the policy (so replay re-decides under
// it without being told, and diverges under none or another), and in the
// audit log, whose chain verifies; a tampered log is refused for appending.
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

// loom-eval policy default prints the built-in policy byte for byte (what
// applies without --policy), which policy check reads back as valid; a bad
// rules file is refused naming the rule.
func TestPolicyCommandPrintsAndChecks(t *testing.T) {
	out, _, code := cli(t, "policy", "default")
	if code != ExitOK || out != string(policy.DefaultJSON()) {
		t.Fatalf("policy default: exit %d\n%s", code, out)
	}
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine.json")
	os.WriteFile(mine, []byte(out), 0o644)
	if out, _, code := cli(t, "policy", "check", mine); code != ExitOK || !strings.Contains(out, "8 rule(s), 0 tool spec(s); valid") {
		t.Fatalf("policy check of the default: exit %d %s", code, out)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1, "rules": [{"tool": "send_email", "decision": "maybe"}]}`), 0o644)
	var o, e bytes.Buffer
	err := newTestMain(&o, &e, nil).Run(context.Background(), []string{"policy", "check", bad})
	if exitCode(err, io.Discard) != ExitUsage || !strings.Contains(err.Error(), `rules[0] (send_email): decision must be allow or deny (got "maybe")`) {
		t.Fatalf("policy check of a bad file: %v", err)
	}
	if _, _, code := cli(t, "policy", "show"); code != ExitUsage {
		t.Fatalf("policy show: exit %d, want a usage error", code)
	}
}

// A run journaled without a policy (before the default policy, or under
// --policy none) and resumed under the default diverges at its first
// decision, and the error says how to resume it; --policy none resumes it.
func TestARunRecordedWithoutAPolicyResumesWithPolicyNone(t *testing.T) {
	testtier.Slow(t)
	ds := datasettest.ShippedDir(t)
	dir := t.TempDir()
	jp := filepath.Join(dir, "j.db")
	common := []string{"run", "--agent", "research", "--task", "Google Analytics with tracking code", "--run-id", "old-1",
		"--dataset", ds, "--index-cache", indexCache(t), "--journal", jp, "--audit", filepath.Join(dir, "audit.jsonl"), "--no-experiment"}
	// Journaled with no policy; running the same run id again resumes it,
	// re-checking every recorded event.
	if _, _, code := cli(t, append(common, "--policy", "none")...); code != ExitOK {
		t.Fatalf("the run without a policy: exit %d", code)
	}
	var o, e bytes.Buffer
	err := newTestMain(&o, &e, nil).Run(context.Background(), common)
	if exitCode(err, io.Discard) != ExitFailure || !strings.Contains(err.Error(), "recorded without a policy: resume it with --policy none") {
		t.Fatalf("resumed under the default policy: %v", err)
	}
	if out, _, code := cli(t, append(common, "--policy", "none", "--json")...); code != ExitOK || !regexp.MustCompile(`"reused_model_answers": [1-9]`).MatchString(out) {
		t.Fatalf("resumed with --policy none: exit %d\n%s", code, out)
	}
}
