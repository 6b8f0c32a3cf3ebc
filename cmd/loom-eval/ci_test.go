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

	"github.com/loomwork/loomwork/baselines/ci"
	"github.com/loomwork/loomwork/baselines/ci/citest"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
)

func runCICmd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	ds := datasettest.ShippedDir(t)
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == datasets.DatasetEnv {
			return ds
		}
		return ""
	}}
	err = m.Run(context.Background(), append([]string{"ci"}, args...))
	return out.String(), errb.String(), err
}

func exitCodeOf(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		return ExitRuntimeErr
	}
	return ExitOK
}

func TestCICommandRejectsBadUsageAndBadInput(t *testing.T) {
	empty := t.TempDir()
	badPolicy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(badPolicy, []byte(`{"min_delta_lowr": -0.01}`), 0o644); err != nil {
		t.Fatal(err)
	}
	noCases := t.TempDir()
	if err := os.WriteFile(filepath.Join(noCases, "policy.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "junit"}, "--format must be one of text, json, markdown"},
		{[]string{"--baselines", filepath.Join(empty, "nope")}, "not a folder"},
		{[]string{"--baselines", empty}, "read policy"},
		{[]string{"--baselines", empty, "--policy", badPolicy}, "min_delta_lowr"},
		{[]string{"--baselines", noCases}, "cases.jsonl"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		_, stderr, err := runCICmd(t, tc.args...)
		if exitCodeOf(err) != ExitUsage || !strings.Contains(err.Error()+stderr, tc.want) {
			t.Errorf("ci %v: exit %d, err %v; want exit 2 naming %q", tc.args, exitCodeOf(err), err, tc.want)
		}
	}
}

// The command end to end on a one-case research baseline (no sandbox is
// started): against a baseline that claims the case cited its judged page,
// it exits 1 naming the gate and the case, with JSON on stdout, progress on
// stderr and the work files kept in --out. (Passing on the committed
// baselines is what scripts/baselines.sh check shows in make test.)
func TestCICommandFailsTheGateNamingTheCase(t *testing.T) {
	testtier.Slow(t)
	t.Parallel()        // its own folders, index copy and environment (runCICmd)
	const c = "mkm-812" // no trial retrieves its judged page
	dir := citest.Subset(t, "../../baselines", c)
	trials, err := datasets.LoadTrials(filepath.Join(dir, "baseline.trials.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	cases, err := datasets.LoadCases(filepath.Join(dir, "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// A baseline from a better world: every trial cited the judged page.
	for i := range trials {
		trials[i].EvidenceRetrieved = append(trials[i].EvidenceRetrieved, cases[0].RequiredEvidence[0])
		trials[i].EvidenceCited = append(trials[i].EvidenceCited, cases[0].RequiredEvidence[0])
	}
	citest.WriteJSONL(t, filepath.Join(dir, "baseline.trials.jsonl"), trials)

	out := t.TempDir()
	stdout, stderr, err := runCICmd(t, "--baselines", dir, "--json", "--out", out, "--index-cache", indexCache(t))
	if exitCodeOf(err) != ExitFailure {
		t.Fatalf("exit %d (%v), want 1\n%s%s", exitCodeOf(err), err, stdout, stderr)
	}
	if !strings.Contains(err.Error(), "FAILED: gate (") || strings.Contains(err.Error(), "replay (") {
		t.Fatalf("err = %v, want the gate (only) named", err)
	}
	var res ci.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if res.Passed || !res.Replay.Passed || res.Replay.Runs != 3 || res.Fresh.Unchanged != 3 || res.Gate.Passed ||
		len(res.Gate.Worse) != 1 || res.Gate.Worse[0].CaseID != c || res.Gate.Policy != filepath.Join(dir, "policy.json") {
		t.Fatalf("result = %s", stdout)
	}
	for _, want := range []string{"ci: strict replay of 3 run(s)", "ci: fresh run: research agent, scripted policy, 1 case(s) × 3 trial(s)", "ci: gate: policy "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress lacks %q:\n%s", want, stderr)
		}
	}
	for _, f := range []string{"fresh.trials.jsonl", "replay.trials.jsonl", "fresh/research.jsonl"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("--out: %v", err)
		}
	}
}

// --record writes the recipe's derived baselines from the current code:
// on unchanged code they are the committed ones (here a one-case subset's:
// its rollups and judge verdicts, and the whole rerank.json).
func TestCICommandRecordWritesTheDerivedBaselines(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // its own folders, index copy and environment (runCICmd)
	dir := citest.Subset(t, "../../baselines", "mkm-812")
	want := map[string][]byte{}
	for _, f := range []string{ci.RollupsFile, ci.RerankFile, ci.JudgeFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want[f] = b
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, err := runCICmd(t, "--baselines", dir, "--record", "--index-cache", indexCache(t))
	if err != nil {
		t.Fatalf("ci --record: %v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "ci: recorded "+filepath.Join(dir, ci.RollupsFile)+" (3 run(s), 2 SDK trace(s))") {
		t.Fatalf("stdout = %s", stdout)
	}
	for f, w := range want {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w) {
			t.Errorf("%s recorded:\n%s\nwant the committed:\n%s", f, got, w)
		}
	}
}
