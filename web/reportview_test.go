package web

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/report"
)

// writeGradedReport writes graded.json: case "refund" is graded by a
// model grader and requires evidence it does not grade itself — trial 0
// (trace A) passes and cites the page, trial 1 (trace B) fails the grader,
// trial 2 (no trace) passes its grader without citing the page; "lookup"
// requires evidence and no trial cites it; "greet" passes every trial. It
// returns the graded trials.
func writeGradedReport(t testing.TB, dir string) []datasets.Trial {
	t.Helper()
	yes := true
	ev := "docs/billing/refunds.md#annual-plans"
	cases := []datasets.Case{
		{ID: "greet", Task: "Say hello."},
		{ID: "lookup", Task: "Find the retry policy.", RequiredEvidence: []string{"docs/retries.md"}},
		{ID: "refund", Task: supportTask, RequiredEvidence: []string{ev},
			Graders: []datasets.Grader{{Type: datasets.GraderModel, Name: "answer_correct", Rubric: "The answer says a full refund is possible (30-day window)."}}},
	}
	var trials []datasets.Trial
	for k := 0; k < 3; k++ {
		trials = append(trials,
			datasets.Trial{CaseID: "greet", Trial: k, ModelLabel: "scripted", Success: &yes},
			datasets.Trial{CaseID: "lookup", Trial: k, ModelLabel: "scripted", Success: &yes, EvidenceRetrieved: []string{"docs/faq.md"}},
		)
		pass := k != 1
		tr := datasets.Trial{CaseID: "refund", Trial: k, ModelLabel: "scripted", Success: &yes, TraceID: []string{supportTraceA, supportTraceB, ""}[k],
			EvidenceRetrieved: [][]string{{ev}, {"blog/2023-refund-changes.md"}, {ev}}[k],
			Grades: []datasets.Grade{{Name: "answer_correct", Type: datasets.GraderModel, Required: true, Passed: pass, Score: map[bool]float64{true: 1}[pass],
				Reason: []string{"says a full refund is possible within 30 days", "says no refund after 14 days", "says a full refund is possible"}[k]}}}
		switch k {
		case 0:
			tr.EvidenceCited = []string{ev}
		case 1:
			tr.EvidenceCited = []string{"blog/2023-refund-changes.md"}
		}
		trials = append(trials, tr)
	}
	suite, err := scorer.Score(cases, trials, scorer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "graded.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := report.Write(f, report.JSON, &report.Report{Suite: suite}); err != nil {
		t.Fatal(err)
	}
	return trials
}

func TestReportPageShowsFailingCasesFirstAndVerdictsThatAgreeWithTheEvidence(t *testing.T) {
	st, _ := seeded(t)
	files := FileSources{ReportsDir: t.TempDir(), RunsDir: t.TempDir()}
	writeGradedReport(t, files.ReportsDir)
	ts := newFilesServer(t, st, files)
	code, page := get(t, ts, "/reports/graded.json")
	if code != 200 {
		t.Fatalf("report page: %d", code)
	}
	order := regexp.MustCompile(`<section class="card case" id="case-([^"]+)"`).FindAllStringSubmatch(page, -1)
	var ids []string
	for _, m := range order {
		ids = append(ids, m[1])
	}
	if strings.Join(ids, ",") != "lookup,refund,greet" {
		t.Fatalf("cases in order %v, want the failing ones (lookup, refund) first", ids)
	}
	trial := func(caseID string, n string) string {
		i := strings.Index(page, `id="case-`+caseID+`"`)
		j := strings.Index(page[i:], `data-trial="`+n+`"`)
		k := strings.Index(page[i+j:], "</tr>")
		return page[i+j : i+j+k]
	}
	// No green pass beside evidence that was not cited: refund trial 2
	// passed its grader, which decides, and did not cite the page.
	t1 := trial("refund", "2")
	if !strings.Contains(t1, `class="warn verdict-word">pass`) || !strings.Contains(t1, "but evidence cited failed (not part of the outcome)") ||
		!strings.Contains(t1, `class="check-fail aside"`) || strings.Contains(t1, `class="pass verdict-word"`) {
		t.Fatalf("refund trial 2:\n%s", t1)
	}
	if t0 := trial("refund", "0"); !strings.Contains(t0, `class="pass verdict-word">pass`) || !strings.Contains(t0, "grader answer_correct") {
		t.Fatalf("refund trial 0:\n%s", t0)
	}
	t2 := trial("refund", "1")
	if !strings.Contains(t2, `class="fail verdict-word">fail`) || !strings.Contains(t2, "grader answer_correct failed") ||
		!strings.Contains(t2, "/compare?a="+supportTraceB+"&amp;b="+supportTraceA) || !strings.Contains(t2, "/traces/"+supportTraceB) {
		t.Fatalf("refund trial 1:\n%s", t2)
	}
	// The evidence rule's own failure: red, with the reason beside it.
	l0 := trial("lookup", "0")
	if !strings.Contains(l0, `class="fail verdict-word">fail`) || !strings.Contains(l0, "required evidence neither retrieved nor cited") ||
		strings.Contains(l0, `verdict-word">pass`) || !strings.Contains(l0, `class="check-fail"`) {
		t.Fatalf("lookup trial 0:\n%s", l0)
	}
	if !strings.Contains(l0, "/labels/new?report=graded.json&amp;case=lookup&amp;trial=0") || !strings.Contains(l0, "no trace or run here") {
		t.Fatalf("lookup trial 0 links:\n%s", l0)
	}
}

func TestTrialVerdictNeverGreenBesideAFailedCheck(t *testing.T) {
	no, yes, half := false, true, 0.0
	for name, ts := range map[string]scorer.TrialScore{
		"graders decide, evidence not cited": {Finished: true, Success: true, Passed: true, Outcome: scorer.OutcomeGraders, CitedOK: &no, EvidenceCited: &half,
			Grades: []datasets.Grade{{Name: "g", Required: true, Passed: true}}},
		"a report that contradicts itself": {Finished: true, Success: true, Passed: true, Outcome: scorer.OutcomeEvidenceCited, CitedOK: &no, EvidenceCited: &half,
			Reasons: []string{"required evidence neither retrieved nor cited"}},
		"an optional grader failed": {Finished: true, Success: true, Passed: true, Outcome: scorer.OutcomeGraders,
			Grades: []datasets.Grade{{Name: "g", Required: true, Passed: true}, {Name: "style", Passed: false}}},
		"a budget unknown": {Finished: true, Success: true, Passed: true, Outcome: scorer.OutcomeEvidenceCited, CitedOK: &yes,
			Budgets: []scorer.BudgetVerdict{{Budget: "usd", Limit: 0.05, Verdict: scorer.VerdictUnknown}}},
	} {
		v := trialVerdict(&ts)
		if v.Class == "pass" {
			t.Errorf("%s: green %q beside %+v", name, v.Word, v.Checks)
		}
		if v.But == "" {
			t.Errorf("%s: no word on what failed", name)
		}
	}
}

func newFilesServer(t *testing.T, st TraceReader, files FileSources) *httptest.Server {
	t.Helper()
	srv, err := New(Config{}, Deps{Traces: st, Files: &files})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}
