package experiment

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/report"
)

const referenceCases = `{"id": "sum", "task": "add 1 and 2", "graders": [{"type": "number", "name": "the sum", "expected": 3}]}
{"id": "other", "task": "add 2 and 2", "graders": [{"type": "number", "name": "the sum", "expected": 4}]}
`

func referenceTrial(caseID string, n int, answer string) datasets.Trial {
	ok := true
	return datasets.Trial{CaseID: caseID, Trial: n, ModelLabel: datasets.LabelScripted, Agent: "research", Success: &ok,
		TraceID: strings.Repeat("a", 31) + string(rune('0'+n)), Transcript: &datasets.Transcript{Task: "add 1 and 2", Answer: answer}}
}

func referenceConfig(t *testing.T, dir string) ReferenceConfig {
	t.Helper()
	path := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(path, []byte(referenceCases), 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := datasets.LoadCases(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	return ReferenceConfig{Root: filepath.Join(dir, "exps"), CasesFile: path, Cases: cases, Agent: "research", Command: "run", Model: "scripted",
		Trials: []datasets.Trial{referenceTrial("sum", 1, "4"), referenceTrial("sum", 0, "3")}, Score: scorer.DefaultConfig(),
		GitDir: dir, Now: func() time.Time { return now }, Rand: func() uint32 { return 0xbeef }}
}

// TestWriteReferenceRecordsTheAttemptedCasesGradedAsExperimentRunDoes: the
// record has experiment run's fields; the trials are graded (trial 1
// answered 4, not 3) and sorted; a run of one case of two keeps that case
// (not the file, whose other case has no trials) as its case file and
// names the file it came from; Load and Evaluate read the folder back.
func TestWriteReferenceRecordsTheAttemptedCasesGradedAsExperimentRunDoes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := referenceConfig(t, dir)
	rec, out, err := WriteReference(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if out != filepath.Join(dir, "exps", "20260501-120000-beef") || rec.ID != "20260501-120000-beef" {
		t.Fatalf("folder %s, id %s", out, rec.ID)
	}
	if err := rec.Validate(); err != nil {
		t.Fatal(err)
	}
	if rec.Status != datasets.ExperimentComplete || rec.Trials != 2 || rec.Cases != 1 || rec.Summary != (datasets.ExperimentSummary{Expected: 2, Recorded: 2, Passed: 1}) ||
		rec.Target != (datasets.ExperimentTarget{Kind: TargetReference, Description: "reference agent research (scripted)"}) ||
		rec.Agent.Label != "research" || rec.Agent.Params["command"] != "run" || rec.ModelLabel != datasets.LabelScripted {
		t.Fatalf("record = %+v", rec)
	}
	if rec.Dataset.Path != filepath.Join(out, CasesFile) || rec.Agent.Params["cases_from"] != cfg.CasesFile || rec.Agent.Params["cases_from_sha256"] == "" {
		t.Fatalf("dataset = %+v, params %v", rec.Dataset, rec.Agent.Params)
	}
	side, err := Load(ctx, out, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(side.Trials) != 2 || side.Trials[0].Trial != 0 || len(side.Trials[0].Grades) != 1 || !side.Trials[0].Grades[0].Passed || side.Trials[1].Grades[0].Passed {
		t.Fatalf("trials = %+v", side.Trials)
	}
	cases, err := CasesOf(side)
	if err != nil || len(cases) != 1 || cases[0].ID != "sum" {
		t.Fatalf("the folder's cases = %+v (%v)", cases, err)
	}
	rep, err := Evaluate(ctx, scorer.DefaultConfig(), cases, rec.Dataset.Path, side, nil, nil, report.Inputs{})
	if err != nil || rep.Suite.NTrials != 2 || len(rep.Suite.CasesWithoutTrials) != 0 {
		t.Fatalf("evaluate: %v %+v", err, rep)
	}

	// The same folder again is refused: one command's trials, one record.
	cfg.Dir = out
	if _, _, err := WriteReference(ctx, cfg); !errors.Is(err, ErrExperimentExists) {
		t.Fatalf("second write into %s: %v, want ErrExperimentExists", out, err)
	}
}

func TestWriteReferenceWithoutACaseFileKeepsTheTrialsOwnTasks(t *testing.T) {
	dir := t.TempDir()
	cfg := referenceConfig(t, dir)
	cfg.CasesFile, cfg.Cases, cfg.Command, cfg.Model = "", nil, "replay", "replayed journals"
	rec, out, err := WriteReference(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := datasets.LoadCases(filepath.Join(out, CasesFile))
	if err != nil || len(cases) != 1 || cases[0].ID != "sum" || cases[0].Task != "add 1 and 2" || len(cases[0].Graders) != 0 {
		t.Fatalf("cases = %+v (%v)", cases, err)
	}
	if rec.Summary.Passed != 2 || rec.Target.Description != "reference agent research (replayed journals)" || rec.Agent.Params["cases_from"] != "" {
		t.Fatalf("record = %+v", rec)
	}
}

func TestWriteReferenceRefusesTrialsTheCasesDoNotHold(t *testing.T) {
	dir := t.TempDir()
	cfg := referenceConfig(t, dir)
	cfg.Trials = append(cfg.Trials, referenceTrial("nope", 0, "1"))
	if _, _, err := WriteReference(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `case "nope"`) {
		t.Fatalf("err = %v, want the unknown case named", err)
	}
	cfg = referenceConfig(t, dir)
	cfg.Trials = append(cfg.Trials, referenceTrial("sum", 0, "3"))
	if _, _, err := WriteReference(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), `trial 0 of case "sum" is there twice`) {
		t.Fatalf("err = %v, want the duplicate named", err)
	}
	cfg = referenceConfig(t, dir)
	cfg.Agent, cfg.Trials = "", nil
	if _, _, err := WriteReference(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "agent, command and model") || !strings.Contains(err.Error(), "trials: none") {
		t.Fatalf("err = %v, want every problem named", err)
	}
	if _, err := os.Stat(cfg.Root); !os.IsNotExist(err) {
		t.Fatalf("a refused record left %s behind", cfg.Root)
	}
}
