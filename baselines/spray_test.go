package baselines_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/retrieval/judged"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
)

// researchPasses grades and scores trials against the committed cases
// (recorded code verdicts are kept: nothing here needs the sandbox) and
// returns the research trials and cases that passed.
func researchPasses(t *testing.T, cases []datasets.Case, trials []datasets.Trial) (trialsPassed, casesPassed, nTrials, nCases int) {
	t.Helper()
	if _, err := grade.Trials(context.Background(), grade.Env{}, cases, trials); err != nil {
		t.Fatal(err)
	}
	s, err := scorer.Score(cases, trials, scorer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Cases {
		if !slices.Contains(c.Tags, "research") {
			continue
		}
		nCases++
		nTrials += c.Trials
		trialsPassed += c.Passes
		if c.Passes > 0 {
			casesPassed++
		}
	}
	return trialsPassed, casesPassed, nTrials, nCases
}

// TestCitationSprayFailsEveryResearchCase is the attack of issue 33: every
// research trial of the committed baseline cites every id of the corpus
// (every page and every issue but its own, 352 ids). Before citation
// precision it passed all 14 research cases on every trial; now no trial
// passes, while the honest trials keep their verdicts but one (mkm-156
// trial 0 cites the judged page beside two unjudged ones: precision 1/3).
// Citing everything each trial retrieved does not pay either: fewer trials
// pass than honestly.
func TestCitationSprayFailsEveryResearchCase(t *testing.T) {
	t.Chdir("..")
	cases, err := datasets.LoadCases("baselines/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	load := func() []datasets.Trial {
		trials, err := datasets.LoadTrials("baselines/baseline.trials.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		return trials
	}
	ds, err := judged.Load(datasetDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	corpus, err := ds.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, d := range corpus.Docs() {
		if !slices.Contains(all, d.Unit()) {
			all = append(all, d.Unit())
		}
	}

	honestPassed, _, n, nc := researchPasses(t, cases, load())
	if nc != 14 || n != 42 {
		t.Fatalf("baseline: %d research cases, %d trials; want 14 and 42", nc, n)
	}

	spray := load()
	for i := range spray {
		if spray[i].Agent != "research" {
			continue
		}
		own := "issue:" + strings.TrimPrefix(spray[i].CaseID, "mkm-")
		spray[i].EvidenceCited = slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == own })
		spray[i].Grades = nil
	}
	tp, cp, _, _ := researchPasses(t, cases, spray)
	t.Logf("citing all %d corpus ids: %d of %d research trials pass, %d of %d cases", len(all)-1, tp, n, cp, nc)
	if tp != 0 || cp != 0 {
		t.Errorf("the spray passes %d trials over %d research cases, want 0", tp, cp)
	}

	broad := load()
	for i := range broad {
		if broad[i].Agent == "research" {
			broad[i].EvidenceCited = slices.Clone(broad[i].EvidenceRetrieved)
			broad[i].Grades = nil
		}
	}
	bp, _, _, _ := researchPasses(t, cases, broad)
	t.Logf("honest: %d of %d research trials pass; citing everything retrieved: %d", honestPassed, n, bp)
	if bp > honestPassed {
		t.Errorf("citing everything retrieved passes %d trials, more than the honest %d", bp, honestPassed)
	}
	if honestPassed != 25 {
		t.Errorf("honest research trials passing: %d, want 25 (26 before citation precision, less mkm-156 trial 0)", honestPassed)
	}
}
