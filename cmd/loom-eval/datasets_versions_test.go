package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
)

// A case file committed as versions from the CLI, and an experiment on a
// version records that version's digest: the UI names the version from it.
func TestDatasetVersionsFromTheCLIAndAnExperimentOnOne(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "datasets")
	cases := experimentCases(t, dir)
	out, errOut, code := cli(t, "datasets", "commit", "calc", "--cases", cases, "--dir", reg, "--author", "ci", "--note", "the six sums")
	if code != 0 || !strings.Contains(out, "calc v1 committed: 6 cases (+6 added") {
		t.Fatalf("commit: exit %d\n%s%s", code, out, errOut)
	}
	// The same cases again commit nothing (exit 0); a stale parent is
	// refused (exit 1).
	if out, _, code = cli(t, "datasets", "commit", "calc", "--cases", cases, "--dir", reg); code != 0 || !strings.Contains(out, "nothing committed") {
		t.Fatalf("a commit with no change: exit %d\n%s", code, out)
	}
	b, _ := os.ReadFile(cases)
	fewer := filepath.Join(dir, "fewer.jsonl")
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(fewer, []byte(strings.Join(lines[:4], "")), 0o644)
	if _, errOut, code = cli(t, "datasets", "commit", "calc", "--cases", fewer, "--dir", reg, "--parent", "0"); code != ExitFailure {
		t.Fatalf("a commit on a stale parent: exit %d\n%s", code, errOut)
	}
	if out, errOut, code = cli(t, "datasets", "commit", "calc", "--cases", fewer, "--dir", reg); code != 0 || !strings.Contains(out, "-2 removed") {
		t.Fatalf("commit v2: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, code = cli(t, "datasets", "commit", "../calc", "--cases", fewer, "--dir", reg); code != ExitUsage {
		t.Fatalf("a bad name: exit %d", code)
	}

	out, _, code = cli(t, "datasets", "show", "calc@1", "--dir", reg, "--json")
	var shown struct {
		Version   datasets.Version   `json:"version"`
		CasesFile string             `json:"cases_file"`
		History   []datasets.Version `json:"history"`
	}
	if err := json.Unmarshal([]byte(out), &shown); code != 0 || err != nil || shown.Version.Number != 1 || len(shown.History) != 2 {
		t.Fatalf("show calc@1: exit %d %v\n%s", code, err, out)
	}
	if out, _, code = cli(t, "datasets", "list", "--dir", reg); code != 0 || !strings.Contains(out, "calc") || !strings.Contains(out, "v2") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}

	// An experiment on version 1's file records version 1's digest.
	t.Setenv("CALC_VERSION", "1")
	expDir := filepath.Join(dir, "exp")
	if out, errOut, err := runLoom(t, "experiment", "run", "--cases", shown.CasesFile, "--shell", "--cmd", calcAgentScript,
		"--out", expDir, "--model-label", "scripted", "--trace-wait", "100ms"); err != nil {
		t.Fatalf("experiment: %v\n%s%s", err, out, errOut)
	}
	rb, err := os.ReadFile(filepath.Join(expDir, "experiment.json"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := datasets.DecodeExperiment(rb, "experiment.json")
	if err != nil {
		t.Fatal(err)
	}
	if e.Dataset.SHA256 != shown.Version.SHA256 {
		t.Fatalf("the experiment's dataset digest %s is not version 1's %s", e.Dataset.SHA256, shown.Version.SHA256)
	}
}
