package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
)

// calcAgentScript is a deterministic agent for `--shell --cmd`: it reads
// "add A and B" on stdin and prints the sum; with CALC_VERSION=2 it gets
// even sums wrong (one too high). Runs label it scripted: it is
// deterministic, so the gate compares it exactly.
const calcAgentScript = `read t; set -- $t; s=$(($2+$4)); if [ "$CALC_VERSION" = 2 ] && [ $((s%2)) -eq 0 ]; then s=$((s+1)); fi; echo "$s"`

// runCalcExperiments runs v1 and v2 (which breaks even-4 and even-6) of the
// calc agent into one trace store, v2 gated against v1, and returns their
// folders and ids.
func runCalcExperiments(t *testing.T, dir, storePath string) (v1, v2, id1, id2 string) {
	t.Helper()
	cases := experimentCases(t, dir)
	v1, v2 = filepath.Join(dir, "v1"), filepath.Join(dir, "v2")
	t.Setenv("CALC_VERSION", "1")
	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--shell", "--cmd", calcAgentScript, "--trials", "2",
		"--out", v1, "--label", "v1", "--name", "calc v1", "--store", storePath, "--trace-wait", "100ms", "--model-label", "scripted")
	if err != nil {
		t.Fatalf("v1: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "saved to the trace store "+storePath) {
		t.Errorf("v1 does not say it saved the experiment to the store:\n%s", errOut)
	}
	t.Setenv("CALC_VERSION", "2")
	out, errOut, err = runLoom(t, "experiment", "run", "--cases", cases, "--shell", "--cmd", calcAgentScript, "--trials", "2",
		"--out", v2, "--label", "v2", "--name", "calc v2", "--store", storePath, "--trace-wait", "100ms", "--model-label", "scripted", "--against", v1)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure {
		t.Fatalf("v2 against v1: got %v, want exit 1\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	for i, d := range []string{v1, v2} {
		b, err := os.ReadFile(filepath.Join(d, "experiment.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec struct{ ID string }
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			id1 = rec.ID
		} else {
			id2 = rec.ID
		}
	}
	return v1, v2, id1, id2
}

// comparisonGateJSON is the comparison and gate part that `experiment
// compare --json` and the compare API both print.
type comparisonGateJSON struct {
	Comparison struct {
		Regressed   []string `json:"regressed"`
		PassRateMDE *float64 `json:"pass_rate_mde"`
	} `json:"comparison"`
	Gate struct {
		Passed bool `json:"passed"`
		Checks []struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
		} `json:"checks"`
	} `json:"gate"`
}

// compareJSON is what `experiment compare --json` prints, as a user's
// script reads it.
type compareJSON struct {
	A, B  string
	Cases []struct {
		CaseID string `json:"case_id"`
		Change string `json:"change"`
		A, B   compareSideJSON
	} `json:"cases"`
	comparisonGateJSON
}

type compareSideJSON struct {
	Passes         int      `json:"passes"`
	Trials         int      `json:"trials"`
	Score          float64  `json:"score"`
	MeanCostUSD    *float64 `json:"mean_cost_usd"`
	MeanDurationMS *float64 `json:"mean_duration_ms"`
	TraceIDs       []string `json:"trace_ids"`
	Answer         string   `json:"answer"`
}

func compareOut(t *testing.T, args ...string) compareJSON {
	t.Helper()
	out, errOut, err := runLoom(t, append([]string{"experiment", "compare", "--json"}, args...)...)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure {
		t.Fatalf("compare %v: got %v, want exit 1 (the gate fails)\n%s\n%s", args, err, out, errOut)
	}
	var c compareJSON
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("compare --json: %v\n%s", err, out)
	}
	return c
}

// An experiment run saves the experiment into its trace store; list, show
// and compare read it back with --store and say what the folders say, even
// once the case file is gone (the store keeps it); push saves a folder
// into another store.
func TestExperimentsSavedToTheStoreReadBackWithStore(t *testing.T) {
	testtier.Slow(t)
	dir := t.TempDir()
	storePath := filepath.Join(dir, "shared.db")
	v1, v2, id1, id2 := runCalcExperiments(t, dir, storePath)

	out, _, err := runLoom(t, "experiment", "list", "--store", storePath, "--json")
	if err != nil {
		t.Fatalf("list --store: %v", err)
	}
	var recs []struct {
		ID      string
		Name    string
		Status  string
		Against *struct {
			ID         string `json:"id"`
			GatePassed *bool  `json:"gate_passed"`
		}
		Summary struct{ Passed, Recorded int }
	}
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != id2 || recs[1].ID != id1 {
		t.Fatalf("list --store: %s; want %s then %s (newest first)", out, id2, id1)
	}
	if a := recs[0].Against; a == nil || a.ID != id1 || a.GatePassed == nil || *a.GatePassed || recs[0].Summary.Passed != 8 || recs[0].Summary.Recorded != 12 {
		t.Errorf("v2 in the store: %+v; want gated against %s and failed, 8 of 12 passed", recs[0], id1)
	}
	out, _, err = runLoom(t, "experiment", "list", "--store", storePath)
	if err != nil || !strings.Contains(out, "calc v1") || !strings.Contains(out, "calc v2") {
		t.Errorf("list --store (text): %v\n%s", err, out)
	}

	fromFolders := compareOut(t, v1, v2)
	if err := os.Remove(filepath.Join(dir, "cases.jsonl")); err != nil {
		t.Fatal(err)
	}
	fromStore := compareOut(t, "--store", storePath, id1, id2)
	if !reflect.DeepEqual(fromFolders, fromStore) {
		t.Errorf("compare --store differs from compare of the folders:\nfolders %+v\nstore   %+v", fromFolders, fromStore)
	}
	if got := strings.Join(fromStore.Comparison.Regressed, ","); got != "even-4,even-6" || fromStore.Gate.Passed {
		t.Errorf("compare --store: regressed %q, gate passed %v; want even-4,even-6 and a failed gate", got, fromStore.Gate.Passed)
	}
	for _, c := range fromStore.Cases {
		if c.CaseID == "even-4" && (c.A.Answer != "4" || c.B.Answer != "5" || c.B.Passes != 0 || c.A.Passes != 2) {
			t.Errorf("even-4: A %+v B %+v; want answers 4 and 5, 2/2 then 0/2 passed", c.A, c.B)
		}
	}

	out, _, err = runLoom(t, "experiment", "show", "--store", storePath, id2)
	if err != nil || !strings.Contains(out, "Experiment "+id2+` "calc v2" (complete)`) || !strings.Contains(out, "in "+storePath) {
		t.Errorf("show --store: %v\n%s", err, out)
	}
	if _, _, err := runLoom(t, "experiment", "show", "--store", storePath, "no-such-id"); err == nil || !strings.Contains(err.Error(), "experiment not found") {
		t.Errorf("show --store of an unknown id: %v, want an error saying it is not found", err)
	}

	other := filepath.Join(dir, "other.db")
	out, _, err = runLoom(t, "experiment", "push", v1, "--store", other)
	if err != nil || !strings.Contains(out, "saved "+v1) {
		t.Fatalf("push: %v\n%s", err, out)
	}
	out, _, err = runLoom(t, "experiment", "list", "--store", other)
	if err != nil || !strings.Contains(out, id1) || strings.Contains(out, id2) {
		t.Errorf("list of the pushed-to store: %v\n%s", err, out)
	}
}
