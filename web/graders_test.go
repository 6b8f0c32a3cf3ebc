package web

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/report"
)

// A graded report: the page lists each grader's pass rate with its
// interval, the judge's usage apart from the agent's, and every trial's
// verdicts, escaped.
func TestReportPageShowsGradersTheJudgeAndEachTrialsVerdicts(t *testing.T) {
	value := "2.33"
	c := datasets.Case{ID: "mean", Task: "mean of 1, 2, 4", Graders: []datasets.Grader{
		{Type: datasets.GraderNumber, Name: "printed_mean", Expected: ptrF(2.3333), AbsTol: ptrF(0.005)},
		{Type: datasets.GraderModel, Name: "explains", Rubric: `Says "mean".`, Required: ptrBool(false)},
		{Type: datasets.GraderContains, Name: "says_value", Value: &value, Required: ptrBool(true)},
	}}
	cost := 0.0
	var trials []datasets.Trial
	for k, pass := range []bool{true, false, true} {
		trials = append(trials, datasets.Trial{CaseID: "mean", Trial: k, ModelLabel: "scripted", Success: ptrBool(true), TraceID: hostileTraceID,
			Grades: []datasets.Grade{
				{Name: "printed_mean", Type: datasets.GraderNumber, Passed: pass, Score: map[bool]float64{true: 1}[pass], Reason: "read <i>2.4</i> from the answer"},
				{Name: "explains", Type: datasets.GraderModel, Passed: true, Score: 1, Reason: "mentions 1 of 1 rubric phrases",
					Judge: &datasets.JudgeUsage{ModelLabel: "scripted", Model: "scripted-judge", Calls: 1, InputTokens: 40, OutputTokens: 10, CostUSD: &cost}},
				{Name: "says_value", Type: datasets.GraderContains, Passed: true, Score: 1, Reason: "ok"},
			}})
	}
	suite, err := scorer.Score([]datasets.Case{c}, trials, scorer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	files := FileSources{RunsDir: t.TempDir(), ReportsDir: t.TempDir(), AblationsDir: t.TempDir()}
	f, err := os.Create(filepath.Join(files.ReportsDir, "graded.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := report.Write(f, report.JSON, &report.Report{Suite: suite}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, _ := seeded(t)
	srv, err := New(Config{}, Deps{Traces: st, Files: &files})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	code, body := get(t, ts, "/reports/graded.json")
	if code != 200 {
		t.Fatalf("report page: %d", code)
	}
	for _, want := range []string{`id="graders"`, "printed_mean", "2/3", "optional", "Judge: 3 calls, 120 input + 30 output tokens", "(not in the agent's cost) <span class=\"badge scripted\"",
		"grader printed_mean failed: read &lt;i&gt;2.4&lt;/i&gt; from the answer", `<span class="fail">✗</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("report page lacks %q", want)
		}
	}
	if strings.Contains(body, "<i>2.4</i>") {
		t.Error("a grader's reason is not escaped")
	}
}

func ptrF(v float64) *float64 { return &v }
