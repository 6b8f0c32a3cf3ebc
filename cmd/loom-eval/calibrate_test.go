package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
)

func TestCalibrateReportsTheCommittedPolicyAgainstTheOld(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // in-process and pure: reads committed files only
	out, errb, code := cli(t, "calibrate", "--policy", "../../baselines/policy.json", "--against", "../../scorer/calibration/testdata/old-policy.json",
		"--cases", "20", "--trials", "3", "--effects", "0", "--reps", "60", "--format", "markdown")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"| 20 × 3 | +0.00 |", "`../../baselines/policy.json` fails", "`../../scorer/calibration/testdata/old-policy.json` fails", "false alarms ≤ 5.0%", "| holds |"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	// A policy whose false alarms exceed what it states fails (exit 1).
	if _, code, err := scorerCLI(t, "calibrate", "--policy", "../../scorer/calibration/testdata/noisy-policy.json", "--cases", "20", "--trials", "3", "--effects", "0", "--reps", "60"); code != ExitFailure || !strings.Contains(err.Error(), "false alarms") {
		t.Errorf("noisy policy: exit %d: %v", code, err)
	}
	// Correlated designs: flags reach the grid, and need --cases.
	out, errb, code = cli(t, "calibrate", "--policy", "../../baselines/policy.json", "--cases", "20", "--trials", "10", "--icc", "1", "--effects", "0", "--reps", "30", "--format", "markdown")
	if code != ExitOK || !strings.Contains(out, "| 20 × 10, ICC 1 | +0.00 |") {
		t.Errorf("--icc 1: exit %d: %s%s", code, out, errb)
	}
	out, errb, code = cli(t, "calibrate", "--policy", "../../baselines/policy.json", "--cases", "20", "--trials", "3", "--groups", "5", "--shock-sd", "0.5", "--effects", "0", "--reps", "30", "--format", "markdown")
	if code != ExitOK || !strings.Contains(out, "| 20 × 3, 5 groups, shock 0.5 | +0.00 |") {
		t.Errorf("--groups 5 --shock-sd 0.5: exit %d: %s%s", code, out, errb)
	}
	if _, code, err := scorerCLI(t, "calibrate", "--icc", "0.5"); code != ExitUsage || !strings.Contains(err.Error(), "need --cases") {
		t.Errorf("--icc without --cases: exit %d: %v", code, err)
	}
	if _, code, err := scorerCLI(t, "calibrate", "--cases", "20", "--trials", "x"); code != ExitUsage || !strings.Contains(err.Error(), `--trials: "x"`) {
		t.Errorf("bad --trials: exit %d: %v", code, err)
	}
}

func TestPlanSaysHowManyCasesDetectADrop(t *testing.T) {
	testtier.Slow(t)
	t.Chdir("../..") // the baseline names its journals from the repository root
	out, errb, code := cli(t, "plan", "--baseline", "baselines/baseline.trials.jsonl", "--cases", "baselines/cases.jsonl",
		"--policy", "baselines/policy.json", "--effect", "0.3", "--designs", "20,200", "--trials", "3", "--reps", "40", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb)
	}
	var pl struct {
		Rows []struct {
			Cases int     `json:"cases"`
			Power float64 `json:"power"`
		} `json:"rows"`
		Smallest map[string]int `json:"smallest_cases_by_trials"`
	}
	if err := json.Unmarshal([]byte(out), &pl); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(pl.Rows) != 2 || pl.Rows[1].Power < 0.8 || pl.Smallest["3"] == 0 {
		t.Errorf("plan %+v: a 0.3 drop on 200 cases × 3 trials should be found", pl)
	}
	if _, code, err := scorerCLI(t, "plan", "--baseline", "baselines/baseline.trials.jsonl"); code != ExitUsage || !strings.Contains(err.Error(), "--effect") {
		t.Errorf("no --effect: exit %d: %v", code, err)
	}
}
