package report

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
)

// Evaluate is the same pipeline the golden reports were built by hand with.
func TestEvaluateBuildsTheReportTheGoldenFilesHold(t *testing.T) {
	cases, err := datasets.LoadCases("../testdata/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	load := func(p, src string) Trials {
		tr, err := datasets.LoadTrials(p)
		if err != nil {
			t.Fatal(err)
		}
		return Trials{Source: src, Trials: tr}
	}
	p, err := loadPolicy(t, "../testdata/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := scorer.DefaultConfig()
	got, err := Evaluate(context.Background(), cfg, Inputs{
		Cases:     cases,
		Candidate: load("../testdata/candidate.jsonl", "candidate.jsonl"),
		Baseline:  load("../testdata/baseline.jsonl", "baseline.jsonl"),
		Policy:    p,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := build(t, true, true)
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Fatalf("Evaluate and the hand-built pipeline disagree:\n%s\n%s", gj, wj)
	}
}

func TestEvaluateRejectsAnEmptyTrialsFileAsBadInput(t *testing.T) {
	_, err := Evaluate(context.Background(), scorer.DefaultConfig(), Inputs{Candidate: Trials{Source: "empty.jsonl"}})
	if !errors.Is(err, ErrBadInput) {
		t.Fatalf("empty candidate: %v, want ErrBadInput", err)
	}
	if err == nil || !strings.Contains(err.Error(), "empty.jsonl") {
		t.Fatalf("the error does not name the file: %v", err)
	}
}
