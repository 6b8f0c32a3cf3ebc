package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
)

// runWithStderr runs loom-eval in-process and returns its exit code and
// what it wrote on stdout and stderr.
func runWithStderr(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = exitCode(m.Run(context.Background(), args), &errb)
	return code, out.String(), errb.String()
}

// wantLines fails unless stderr holds every line fragment, in order.
func wantLines(t *testing.T, what, stderr string, fragments ...string) {
	t.Helper()
	rest := stderr
	for _, f := range fragments {
		i := strings.Index(rest, f)
		if i < 0 {
			t.Errorf("%s: stderr lacks %q (after the lines before it):\n%s", what, f, stderr)
			return
		}
		rest = rest[i+len(f):]
	}
}

// The long commands issue 40 found silent for 30–150 s print progress
// lines on stderr while they work, in the style of ablate, ci and suite
// run ("COMMAND: …"); stdout keeps the result alone, JSON included.
// score and gate grade trials whose verdicts are not recorded (here model
// graders through the scripted judge; hidden tests in the sandbox alike).
func TestScoreAndGateSayWhichTrialsTheyGrade(t *testing.T) {
	t.Chdir("../..")
	trials, cases := "scorer/grade/testdata/judged.trials.jsonl", "scorer/grade/testdata/judged.cases.jsonl"
	code, stdout, stderr := runWithStderr(t, "score", trials, "--cases", cases, "--judge", "scripted", "--json")
	if code != ExitOK || !strings.HasPrefix(stdout, "{") {
		t.Fatalf("score: exit %d\n%s%s", code, stdout, stderr)
	}
	wantLines(t, "score", stderr, "grade: running the code and model graders of 3 trial(s)", "grade: 1/3 trials graded (case outage trial 0:", "grade: 3/3 trials graded")
	code, _, stderr = runWithStderr(t, "gate", "--policy", "baselines/policy.json", "--cases", cases, "--candidate", trials, "--baseline", trials, "--judge", "scripted")
	if code != ExitOK {
		t.Fatalf("gate: exit %d\n%s", code, stderr)
	}
	wantLines(t, "gate", stderr, "grade: 3/3 trials graded", "grade: 3/3 trials graded")
	// Recorded verdicts are kept: nothing runs, nothing is said.
	if code, _, stderr = runWithStderr(t, "score", "baselines/baseline.trials.jsonl", "--cases", "baselines/cases.jsonl"); code != ExitOK || strings.Contains(stderr, "grade:") {
		t.Errorf("recorded verdicts: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestContextSaysWhichStrategyItMeasures(t *testing.T) {
	code, stdout, stderr := runWithStderr(t, "context", "--estimate", "--budgets", "2000,4000", "--json")
	if code != ExitOK || !strings.HasPrefix(stdout, "[") {
		t.Fatalf("context: exit %d\n%s%s", code, stdout, stderr)
	}
	wantLines(t, "context", stderr, "context: counting tokens with estimate(bytes/4)", "context: truncate at 2000 tokens (1/8)", "context: shrink+summarise+pins at 4000 tokens (8/8)")
}

func TestReplaySaysWhichRunItReplays(t *testing.T) {
	t.Chdir("../..")
	code, stdout, stderr := runWithStderr(t, "replay", "--rescore", "baselines/journals/research.jsonl", "--json")
	if code != ExitOK || !strings.HasPrefix(stdout, "{") {
		t.Fatalf("replay: exit %d\n%s%s", code, stdout, stderr)
	}
	wantLines(t, "replay", stderr, "replay: 42 run(s) in 1 journal(s)", "replay: 1/42 research-mkm-156-t0 (case mkm-156 trial 0): RESCORED", "replay: 42/42 ")
}

func TestMemoryAblateSaysWhichArmItRuns(t *testing.T) {
	testtier.Slow(t) // the research agent over the judged set, five times
	code, _, stderr := runWithStderr(t, "memory-ablate", "--limit", "2", "--dataset", datasettest.ShippedDir(t),
		"--index-cache", indexCache(t), "--workdir", filepath.Join(t.TempDir(), "work"))
	if code != ExitOK {
		t.Fatalf("memory-ablate: exit %d\n%s", code, stderr)
	}
	wantLines(t, "memory-ablate", stderr, "memory-ablate: 2 tasks", "memory-ablate: memory off (1/5)…", "memory-ablate:   memory off: ", "memory-ablate: memory on (verify), stale (5/5)…")
}
