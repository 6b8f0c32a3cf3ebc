package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runSecurityEvalArgs runs `loom-eval security-eval args` and returns its
// output, the message the binary prints and its exit code.
func runSecurityEvalArgs(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), append([]string{"security-eval"}, args...))
	code = exitCode(err, &errb)
	return out.String(), errb.String(), code
}

// securityEvalCases writes a cases file whose one case no reference agent
// runs: security-eval sets the agents up and finds no trial to run.
func securityEvalCases(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(path, []byte(`{"id":"c1","task":"say hello","tags":["neither"]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSecurityEvalRefusesExtraArgumentsAndAgentsListedTwice(t *testing.T) {
	dir := t.TempDir()
	cases := securityEvalCases(t, dir)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cases", cases, "--agents", "coding", "docs/policy.md"}, `security-eval: unexpected arguments ["docs/policy.md"]`},
		{[]string{"--cases", cases, "--agents", "coding, coding"}, "security-eval: --agents: coding is listed twice"},
		{[]string{"--cases", cases, "--agents", "coding,bogus"}, `security-eval: --agents: unknown agent "bogus"`},
	} {
		_, stderr, code := runSecurityEvalArgs(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("security-eval %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, ExitUsage, tc.want)
		}
	}
}

// TestSecurityEvalCreatesAMissingWorkFolder: --work names a folder that
// does not exist yet; security-eval creates it (it used to fail with
// SQLite's "unable to open database file").
func TestSecurityEvalCreatesAMissingWorkFolder(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "scratch", "security-eval")
	jsonOut := filepath.Join(dir, "trials.jsonl")
	_, stderr, code := runSecurityEvalArgs(t, "--cases", securityEvalCases(t, dir), "--agents", "coding", "--work", work, "--json", jsonOut)
	if code != ExitOK {
		t.Fatalf("security-eval --work %s: exit %d\n%s", work, code, stderr)
	}
	if _, err := os.Stat(filepath.Join(work, "security-eval.journal.db")); err != nil {
		t.Errorf("no journal in the --work folder: %v", err)
	}
	if _, err := os.Stat(jsonOut); err != nil {
		t.Errorf("--json: %v", err)
	}

	// A --work that cannot be a folder is refused, naming the flag.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runSecurityEvalArgs(t, "--cases", securityEvalCases(t, dir), "--agents", "coding", "--work", filepath.Join(file, "sub"))
	if code != ExitUsage || !strings.Contains(stderr, "security-eval: --work "+filepath.Join(file, "sub")) {
		t.Errorf("--work under a file: exit %d, stderr %q", code, stderr)
	}
}
