package grade_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/report"
)

const (
	outageTask      = "Why did checkout fail, and what fixes it?"
	outageReference = "The connection pool ran dry, so requests hit the timeout; raise the pool size."
	outageRubric    = `Prefer the answer that names "connection pool" and "timeout".`
)

// judgedSuite grades answers (one trial each, of one case with a pairwise
// grader against the reference and a model grader) with judge, scores
// them and returns the suite and its text report.
func judgedSuite(t *testing.T, judge grade.Judge, samples int, answers ...string) (*scorer.Suite, string) {
	t.Helper()
	c := datasets.Case{ID: "outage", Task: outageTask, Graders: []datasets.Grader{
		{Type: datasets.GraderPairwise, Name: "vs_reference", Rubric: outageRubric, Reference: outageReference},
		{Type: datasets.GraderModel, Name: "rubric", Rubric: `The answer must name "connection pool" and "timeout".`, Samples: &samples},
	}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var trials []datasets.Trial
	for i, a := range answers {
		tr := answered(a)
		tr.CaseID, tr.Trial, tr.ModelLabel = "outage", i, datasets.LabelScripted
		trials = append(trials, tr)
	}
	cases := []datasets.Case{c}
	if _, err := grade.Trials(context.Background(), grade.Env{Judge: judge}, cases, trials); err != nil {
		t.Fatal(err)
	}
	s, err := scorer.Score(cases, trials, scorer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := report.Write(&b, report.Text, &report.Report{Suite: s}); err != nil {
		t.Fatal(err)
	}
	return s, b.String()
}

// A judge with nothing but position bias (it always prefers the first
// response; it passes an answer it reads before the rubric) decides
// nothing: garbage, a wrong answer and even the reference itself are
// undecided and fail closed, and the suite prints a position-bias rate
// of 1 and a self-disagreement rate of 1 with their intervals.
func TestPositionBiasedJudgeFailsGarbageAndWrongAnswers(t *testing.T) {
	biased := grade.ScriptedJudge{Model: "scripted-position-biased", Decide: grade.PositionBiasedJudge}
	answers := []string{"x", "The disk filled up; delete old logs.", outageReference}
	for len(answers) < 12 {
		answers = append(answers, "x")
	}
	s, text := judgedSuite(t, biased, 2, answers...)
	res := s.Cases[0].Results
	for i, tr := range res {
		for _, g := range tr.Grades {
			if g.Passed || g.Score != 0 || !strings.HasPrefix(g.Reason, "undecided: the ") || g.Judge.ModelLabel != datasets.LabelScripted {
				t.Errorf("trial %d (%q) grade %s: %+v", i, answers[i], g.Name, g)
			}
		}
		if tr.Passed {
			t.Errorf("trial %d (%q) passed", i, answers[i])
		}
	}
	if r := res[0].Grades[1].Reason; r != "undecided: the samples disagree (1 of 2 samples pass: rubric first fail 0, answer first pass 1), counted against the answer" {
		t.Errorf("model grade reason: %q", r)
	}
	pb, sd := s.Judge.PositionBias, s.Judge.SelfDisagreement
	if pb == nil || pb.K != 12 || pb.N != 12 || pb.Rate != 1 || !(pb.Lower > 0.7 && pb.Upper == 1) {
		t.Errorf("position bias %+v", pb)
	}
	if sd == nil || sd.K != 12 || sd.N != 12 || sd.Rate != 1 {
		t.Errorf("self-disagreement %+v", sd)
	}
	for _, want := range []string{
		"judge        position bias: the two orders disagreed on 12 of 12 pairwise grades, 1.000 [0.758, 1.000] (95% Wilson) (undecided: failed)",
		"judge        self-consistency: the samples split on 12 of 12 model grades, 1.000 [0.758, 1.000] (95% Wilson) (undecided: failed)",
		"scripted-position-biased",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	t.Logf("\n%s", text)

	// The rule judge, on the same answers: the reference ties itself and
	// passes, the others lose in both orders; its orders never disagree.
	s, _ = judgedSuite(t, grade.ScriptedJudge{}, 2, answers[:3]...)
	got := []bool{}
	for _, tr := range s.Cases[0].Results {
		got = append(got, tr.Grades[0].Passed)
	}
	if fmt.Sprint(got) != "[false false true]" || s.Judge.PositionBias.K != 0 || s.Judge.SelfDisagreement.K != 0 {
		t.Errorf("rule judge: pairwise passes %v, position bias %+v, self-disagreement %+v", got, s.Judge.PositionBias, s.Judge.SelfDisagreement)
	}
}

// A judge answering at random disagrees with itself across orders about
// two times in three (a pair agrees only on A/B, B/A or tie/tie of nine),
// and its three samples split three times in four (all above or all below
// 0.5 is 1/4); what it passes is what chance passes, and the suite says
// so with the rates.
func TestRandomJudgeShowsItsDisagreement(t *testing.T) {
	random := grade.ScriptedJudge{Model: "scripted-random", Decide: grade.RandomJudge(rand.New(rand.NewPCG(1, 2)))}
	answers := make([]string, 200)
	for i := range answers {
		answers[i] = "x"
	}
	s, text := judgedSuite(t, random, 3, answers...)
	// The checks use 99.9% intervals: a seeded draw outside the 95% one
	// happens one seed in twenty.
	around := func(r *scorer.WilsonRate, p float64) bool {
		w := scorer.Wilson(r.K, r.N, 0.999)
		return w.Lower < p && p < w.Upper
	}
	pb, sd := s.Judge.PositionBias, s.Judge.SelfDisagreement
	if pb == nil || pb.N != 200 || !around(pb, 2.0/3) {
		t.Errorf("position bias %+v, want an interval around 2/3", pb)
	}
	if sd == nil || sd.N != 200 || !around(sd, 0.75) {
		t.Errorf("self-disagreement %+v, want an interval around 3/4", sd)
	}
	passed := 0
	for _, tr := range s.Cases[0].Results {
		if tr.Grades[0].Passed {
			passed++
		}
	}
	// Pairwise passes need both orders to agree on a win or a tie: 2/9.
	if !around(scorer.Wilson(passed, 200, 0.95), 2.0/9) {
		t.Errorf("garbage passed pairwise %d/200 times, want about 2/9", passed)
	}
	if !strings.Contains(text, "position bias: the two orders disagreed on") {
		t.Errorf("report:\n%s", text)
	}
}

// A rescore needs no model: a recorded model or pairwise grade is decided
// again from its recorded replies. A verdict recorded under the old rule
// (orders that disagree counted as a passing tie) fails now, with no judge
// configured; a grade that records no replies is kept as it was.
func TestRescoreRedecidesFromTheRecordedReplies(t *testing.T) {
	biased := grade.ScriptedJudge{Model: "scripted-position-biased", Decide: grade.PositionBiasedJudge}
	c := datasets.Case{ID: "c", Task: outageTask, Graders: []datasets.Grader{
		{Type: datasets.GraderPairwise, Name: "vs_reference", Rubric: outageRubric, Reference: outageReference},
		{Type: datasets.GraderModel, Name: "rubric", Rubric: `Say "pool".`},
	}}
	gs := gradeOne(t, grade.Env{Judge: biased}, c, answered("x"))
	// Forge the old rule's verdicts on the recorded replies.
	gs[0].Passed, gs[0].Score, gs[0].Reason = true, 0.5, "the orders disagree: position bias, counted as a tie"
	gs[1].Passed, gs[1].Score, gs[1].Reason = true, 1, "recorded as a pass"
	tr := answered("x")
	tr.ModelLabel = datasets.LabelScripted
	tr.Grades = gs
	trials := []datasets.Trial{tr}
	sum, err := grade.Trials(context.Background(), grade.Env{}, []datasets.Case{c}, trials)
	if err != nil {
		t.Fatalf("a rescore without a judge: %v", err)
	}
	got := trials[0].Grades
	if sum.Recorded != 2 || sum.Redecided != 2 || got[0].Passed || got[1].Passed ||
		!strings.HasPrefix(got[0].Reason, "undecided: the orders disagree") || !strings.HasPrefix(got[1].Reason, "undecided: the samples disagree") {
		t.Errorf("summary %+v, grades %+v", sum, got)
	}
	// A grade from before replies were recorded keeps its verdict.
	tr = answered("x")
	tr.ModelLabel = datasets.LabelScripted
	tr.Grades = []datasets.Grade{{Name: "vs_reference", Type: datasets.GraderPairwise, Passed: true, Score: 0.5, Reason: "old",
		Judge: &datasets.JudgeUsage{ModelLabel: "live", Calls: 2}}, {Name: "rubric", Type: datasets.GraderModel, Passed: true, Score: 1, Reason: "old"}}
	trials = []datasets.Trial{tr}
	sum, err = grade.Trials(context.Background(), grade.Env{}, []datasets.Case{c}, trials)
	if err != nil || sum.Redecided != 0 || !trials[0].Grades[0].Passed || trials[0].Grades[0].Reason != "old" {
		t.Errorf("legacy grade: %v %+v %+v", err, sum, trials[0].Grades)
	}
	// Recorded with two samples, the grader now asks three: decided on the
	// two, with a note.
	three := 3
	c.Graders[1].Samples = &three
	tr = answered("x")
	tr.ModelLabel = datasets.LabelScripted
	tr.Grades = gs
	trials = []datasets.Trial{tr}
	sum, err = grade.Trials(context.Background(), grade.Env{}, []datasets.Case{c}, trials)
	if err != nil || len(sum.Notes) != 1 || !strings.Contains(sum.Notes[0], "2 judge samples recorded, the grader asks 3") {
		t.Errorf("samples changed: %v %+v", err, sum)
	}
}
