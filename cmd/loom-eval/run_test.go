package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
)

// shippedDatasetAbs is the repository's shipped judged set (absolute).
func shippedDatasetAbs(t *testing.T) string { return datasettest.ShippedDir(t) }

func newTestMain(stdout, stderr *bytes.Buffer, env map[string]string) *Main {
	return &Main{Stdout: stdout, Stderr: stderr, Getenv: func(k string) string { return env[k] }}
}

func TestRunResearchScriptedIsJournaledResumableAndReplayable(t *testing.T) {
	testtier.Slow(t)
	ds := shippedDatasetAbs(t)
	cases, err := filepath.Abs(filepath.Join("..", "..", "baselines", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOOMWORK_DATASET", ds) // replay's registry reads the process environment
	t.Chdir(t.TempDir())             // .loomwork/ caches land here, not in the source tree
	copyIndexCache(t, filepath.Join(".loomwork", "index"))
	ctx := context.Background()
	args := []string{"--agent", "research", "--case", cases, "--case-id", "mkm-156", "--dataset", ds,
		"--journal", "runs.db", "--journal-out", "runs.jsonl", "--deterministic", "--json"}
	var out, errb bytes.Buffer
	m := newTestMain(&out, &errb, map[string]string{})
	if err := m.runRun(ctx, args); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	var res []runner.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(res) != 1 || res[0].RunID != "research-mkm-156-t0" || res[0].ModelLabel != "scripted" || res[0].ModelCalls != 3 ||
		len(res[0].Documents) == 0 || len(res[0].Citations) == 0 {
		t.Fatalf("result = %+v", res)
	}
	for _, d := range append(res[0].Documents, res[0].Citations...) {
		if d == "issue:156" {
			t.Fatalf("the run retrieved or cited its own issue: %+v", res[0])
		}
	}
	// The same command again resumes the recorded run: no model call.
	out.Reset()
	if err := m.runRun(ctx, args); err != nil {
		t.Fatal(err)
	}
	var again []runner.Result
	json.Unmarshal(out.Bytes(), &again)
	if again[0].ModelCalls != 0 || again[0].Reused != 3 || again[0].Answer != res[0].Answer {
		t.Fatalf("resume = %+v", again[0])
	}
	// The exported journal replays with the tools executed again.
	out.Reset()
	if err := m.runReplay(ctx, []string{"--strict", "--json", "runs.jsonl"}); err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	var rep replayOutput
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !rep.OK || len(rep.Reports) != 1 || rep.Reports[0].ToolRuns == 0 ||
		rep.Reports[0].MatchedEvents != rep.Reports[0].RecordedEvents || rep.Reports[0].ModelCalls != 0 {
		t.Fatalf("replay = %s", out.String())
	}
}

func TestRunRejectsBadUsageWithExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--agent", "writer", "--task", "x"},
		{"--agent", "research"},
		{"--agent", "research", "--task", "x", "--case", "c.jsonl"},
		{"--agent", "research", "--task", "x", "--model", "gpt-4o"},
		{"--agent", "research", "--task", "x", "--provider", "openai"},
		{"--agent", "research", "--task", "x", "--provider", "gemini", "--model", "m"},
		{"--agent", "research", "--task", "x", "--context-strategy", "squeeze"},
		{"--agent", "research", "--task", "x", "--context-summarizer", "model"},
		{"--agent", "research", "--task", "x", "--trials", "0"},
		{"--agent", "research", "--case-id", "a", "--task", "x"},
		{"--agent", "coding", "--case", filepath.Join(t.TempDir(), "missing.jsonl")},
		{"--agent", "research", "--task", "x", "--egress", "egress.json"},
		{"--agent", "research", "--task", "x", "--sandbox-pool", "1"},
		{"--agent", "coding", "--task", "x", "--sandbox-pool", "-1"},
		{"--agent", "coding", "--task", "x", "--egress", filepath.Join(t.TempDir(), "missing.json")},
	} {
		var out, errb bytes.Buffer
		err := newTestMain(&out, &errb, nil).runRun(context.Background(), args)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage {
			t.Errorf("%v: want a usage error, got %v", args, err)
		}
	}
}

func TestRunNamesTheBadCaseTag(t *testing.T) {
	dir := t.TempDir()
	cases := filepath.Join(dir, "cases.jsonl")
	os.WriteFile(cases, []byte(`{"id":"a","task":"t","tags":["issue:abc"]}`+"\n"), 0o644)
	var out, errb bytes.Buffer
	err := newTestMain(&out, &errb, nil).runRun(context.Background(), []string{"--agent", "research", "--case", cases})
	if err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "issue:abc") {
		t.Fatalf("err = %v", err)
	}
}

// --scripted-model, --evidence and --policy are refused with exit 2 when
// they cannot apply, each error naming the flag (and the file's line).
func TestRunRefusesBadModelEvidenceAndPolicyFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scripted-model", "obeys-sometimes"}, `--scripted-model must be agent or obeys-everything (got "obeys-sometimes")`},
		{[]string{"--provider", "openai", "--model", "m", "--scripted-model", "obeys-everything"}, "--scripted-model is for --provider scripted"},
		{[]string{"--evidence", file("bad.jsonl", `{"id":"a","text":"t"}`+"\n"+`{"id":"b","txt":"t"}`+"\n")}, `bad.jsonl line 2: json: unknown field "txt"`},
		{[]string{"--evidence", file("dup.jsonl", `{"id":"a","text":"t"}`+"\n"+`{"id":"a","text":"u"}`+"\n")}, `dup.jsonl line 2: id "a" already on line 1`},
		{[]string{"--evidence", file("empty.jsonl", `{"id":"a","text":""}`+"\n")}, "empty.jsonl line 1: id and text must be set"},
		{[]string{"--evidence", file("ok.jsonl", `{"id":"a","text":"t"}`+"\n"), "--context-strategy", "none"}, "--context-strategy none has none"},
		{[]string{"--policy", file("p.json", `{"version":1,"rules":[{"tool":"x","decision":"maybe"}]}`)}, `decision must be allow or deny (got "maybe")`},
		{[]string{"--policy", filepath.Join(dir, "missing.json")}, "run: --policy"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"--agent", "research", "--task", "x", "--journal", filepath.Join(dir, "j.db"), "--no-experiment"}, c.args...)
		err := newTestMain(&out, &errb, nil).runRun(context.Background(), args)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want a usage error saying %q", c.args, err, c.want)
		}
	}
}

// A task the scripted coding policy has no solution for is bad input (exit
// 2, naming what the policy can do), not an operational error: issue 40
// found `run --agent coding --task …` exiting 3.
func TestRunCodingTaskWithoutAScriptedSolutionIsBadInput(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	err := newTestMain(&out, &errb, nil).Run(context.Background(), []string{"run", "--agent", "coding", "--task", "Write a haiku about queues."})
	if code := exitCode(err, &errb); code != ExitUsage {
		t.Fatalf("exit %d (%v), want %d; stderr:\n%s", code, err, ExitUsage, errb.String())
	}
	for _, want := range []string{"no scripted solution for this task", "--case baselines/cases.jsonl"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}
