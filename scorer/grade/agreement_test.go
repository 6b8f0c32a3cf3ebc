package grade

import (
	"math"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
)

var (
	agreementMini = &datasets.JudgeUsage{ModelLabel: "live", Provider: "openai", Model: "gpt-4o-mini-2024-07-18", Calls: 1}
	agreementBig  = &datasets.JudgeUsage{ModelLabel: "live", Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", Calls: 1}
)

// agreementTrial is trial n of case c with the given grades.
func agreementTrial(c string, n int, grades ...datasets.Grade) datasets.Trial {
	return datasets.Trial{CaseID: c, Trial: n, ModelLabel: "scripted", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Grades: grades, Line: n + 1}
}

func modelGrade(passed bool, judge *datasets.JudgeUsage) datasets.Grade {
	return datasets.Grade{Name: "helpful", Type: datasets.GraderModel, Required: true, Passed: passed, Judge: judge}
}

func TestAgreementPairsLabelsWithGradesPerGrader(t *testing.T) {
	// helpful: ten labelled trials. Grader vs labeler: both pass 4, only
	// the grader 2, only the labeler 1, both fail 3. By hand: p_o = 7/10;
	// the grader passes 6/10, the labeler 5/10, p_e = .6·.5 + .4·.5 = .5,
	// κ = (.7 − .5)/.5 = .4.
	pairs := []struct{ grader, human bool }{
		{true, true}, {true, true}, {true, true}, {true, true},
		{true, false}, {true, false},
		{false, true},
		{false, false}, {false, false}, {false, false},
	}
	var trials []datasets.Trial
	var labels []datasets.Label
	for i, p := range pairs {
		code := datasets.Grade{Name: "tests_pass", Type: datasets.GraderCode, Passed: i%2 == 0}
		trials = append(trials, agreementTrial("c1", i, modelGrade(p.grader, agreementMini), code))
		labels = append(labels, datasets.Label{CaseID: "c1", Trial: i, Grader: "helpful", Passed: p.human, Labeler: "ana", Line: i + 1})
	}
	// Graded trials nobody labelled are not in the sample.
	trials = append(trials, agreementTrial("c1", 10, modelGrade(true, agreementMini)), agreementTrial("c1", 11, modelGrade(false, agreementMini)))
	// tests_pass: trials 0 and 1 labelled by two people, agreeing with the
	// code grader on trial 0 (passed), one of them not on trial 1 (failed).
	labels = append(labels,
		datasets.Label{CaseID: "c1", Trial: 0, Grader: "tests_pass", Passed: true, Labeler: "ana"},
		datasets.Label{CaseID: "c1", Trial: 0, Grader: "tests_pass", Passed: true, Labeler: "ben"},
		datasets.Label{CaseID: "c1", Trial: 1, Grader: "tests_pass", Passed: false, Labeler: "ana"},
		datasets.Label{CaseID: "c1", Trial: 1, Grader: "tests_pass", Passed: true, Labeler: "ben"},
	)

	got, err := Agreement(labels, trials, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Grader != "helpful" || got[1].Grader != "tests_pass" {
		t.Fatalf("rows %+v, want helpful then tests_pass", got)
	}
	h := got[0]
	want := Confusion{BothPass: 4, GraderOnly: 2, HumanOnly: 1, BothFail: 3, GraderPassed: 6, HumanPassed: 5, Disagreements: 3}
	if h.N != 10 || h.Trials != 10 || h.Confusion != want || math.Abs(h.Agreement-0.7) > 1e-12 {
		t.Errorf("helpful: n %d, trials %d, confusion %+v, agreement %v", h.N, h.Trials, h.Confusion, h.Agreement)
	}
	if h.Kappa == nil || h.Kappa.Estimate == nil || math.Abs(*h.Kappa.Estimate-0.4) > 1e-12 || h.Kappa.Level != 0.95 ||
		!(h.Kappa.Lower < 0.4 && h.Kappa.Upper > 0.4) {
		t.Errorf("helpful κ %+v, want 0.4 inside its interval", h.Kappa)
	}
	if h.Judge != "live openai/gpt-4o-mini-2024-07-18" || len(h.ByJudge) != 0 || len(h.Types) != 1 || h.Types[0] != "model" {
		t.Errorf("helpful judge %q, by judge %d rows, types %v", h.Judge, len(h.ByJudge), h.Types)
	}
	c := got[1]
	if c.N != 4 || c.Trials != 2 || c.Confusion.BothPass != 2 || c.Confusion.HumanOnly != 1 || c.Confusion.BothFail != 1 || c.Judge != "" {
		t.Errorf("tests_pass: %+v", c)
	}
}

func TestAgreementBreaksDownByJudgeModelAndCountsErrors(t *testing.T) {
	var trials []datasets.Trial
	var labels []datasets.Label
	// Trials 0–5 judged by the mini model (agreeing on all six), 6–11 by
	// the big one (disagreeing on 6, 7), 12 a judge answer that was no
	// verdict.
	for i := range 12 {
		judge, human := agreementMini, i%2 == 0
		passed := human
		if i >= 6 {
			judge = agreementBig
			if i < 8 {
				passed = !human
			}
		}
		trials = append(trials, agreementTrial("c", i, modelGrade(passed, judge)))
		labels = append(labels, datasets.Label{CaseID: "c", Trial: i, Grader: "helpful", Passed: human})
	}
	errored := modelGrade(false, agreementBig)
	errored.Error = "the judge's answer is not a verdict: no JSON object"
	trials = append(trials, agreementTrial("c", 12, errored))
	labels = append(labels, datasets.Label{CaseID: "c", Trial: 12, Grader: "helpful", Passed: true})

	got, err := Agreement(labels, trials, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("rows %+v", got)
	}
	all := got[0]
	if all.N != 12 || all.Errored != 1 || all.Judge != "" || all.Confusion.Disagreements != 2 || len(all.ByJudge) != 2 {
		t.Fatalf("all judges: n %d, errored %d, judge %q, disagreements %d, %d judge rows", all.N, all.Errored, all.Judge, all.Confusion.Disagreements, len(all.ByJudge))
	}
	big, mini := all.ByJudge[0], all.ByJudge[1] // sorted: "live anthropic/…" < "live openai/…"
	if big.Judge != "live anthropic/claude-sonnet-4-5-20250929" || big.N != 6 || big.Errored != 1 || big.Confusion.Disagreements != 2 {
		t.Errorf("anthropic row %+v", big)
	}
	if mini.Judge != "live openai/gpt-4o-mini-2024-07-18" || mini.N != 6 || mini.Agreement != 1 || *mini.Kappa.Estimate != 1 || mini.Kappa.Level != 0.9 {
		t.Errorf("openai row %+v", mini)
	}
}

func TestAgreementRefusesLabelsThatPairWithNoGrade(t *testing.T) {
	trials := []datasets.Trial{agreementTrial("c", 0, modelGrade(true, agreementMini)), agreementTrial("c", 1)}
	labels := []datasets.Label{
		{CaseID: "c", Trial: 0, Grader: "helpful", Passed: true, Line: 1},
		{CaseID: "c", Trial: 0, Grader: "helpfull", Passed: true, Line: 2},
		{CaseID: "c", Trial: 7, Grader: "helpful", Passed: true, Line: 3},
		{CaseID: "c", Trial: 1, Grader: "helpful", Passed: true, Line: 4},
	}
	_, err := Agreement(labels, trials, 0.95)
	if err == nil {
		t.Fatal("labels without grades were accepted")
	}
	for _, want := range []string{
		"3 of 4 labels pair with no grade",
		`label on line 2 (trial 0 of case "c", grader "helpfull"): the trial (line 1) has no grade "helpfull" (its grades: "helpful")`,
		`label on line 3 (trial 7 of case "c", grader "helpful"): no such trial`,
		`label on line 4 (trial 1 of case "c", grader "helpful"): the trial (line 2) has no grade "helpful" (its grades: none: the trial carries no grades`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}

	for _, c := range []struct {
		labels []datasets.Label
		trials []datasets.Trial
		level  float64
		want   string
	}{
		{nil, trials, 0.95, "no labels"},
		{labels[:1], trials, 0, "level"},
		{labels[:1], append(trials, trials[0]), 0.95, `trial 0 of case "c" appears twice`},
	} {
		if _, err := Agreement(c.labels, c.trials, c.level); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}
