package scorer

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/stats"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

func fp(v float64) *float64 { return &v }
func ip(v int64) *int64     { return &v }
func bp(v bool) *bool       { return &v }

func testConfig() Config {
	cfg := DefaultConfig()
	return cfg
}

var researchCase = datasets.Case{
	ID: "c", Task: "t", ExpectedTools: []string{"search", "fetch"}, RequiredEvidence: []string{"docs/a.md"},
	Budgets: datasets.Budgets{MS: fp(1000), USD: fp(0.01), Tokens: ip(5000)},
}

func goodTrial() datasets.Trial {
	return datasets.Trial{CaseID: "c", ModelLabel: "scripted", TraceID: "x", Success: bp(true),
		ToolsCalled: []string{"search", "fetch"}, EvidenceRetrieved: []string{"docs/a.md"}, EvidenceCited: []string{"docs/a.md"},
		DurationMS: fp(500), CostUSD: fp(0.001), Tokens: ip(1000)}
}

func mustScore(t *testing.T, c datasets.Case, tr datasets.Trial) TrialScore {
	t.Helper()
	ts, err := ScoreTrial(&c, &tr, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestPerfectTrialScoresOneAndPasses(t *testing.T) {
	ts := mustScore(t, researchCase, goodTrial())
	if ts.Score != 1 || !ts.Passed || len(ts.Reasons) != 0 {
		t.Fatalf("score %v passed %v reasons %v", ts.Score, ts.Passed, ts.Reasons)
	}
}

func TestFinishingWithoutCitingTheRequiredEvidenceIsAFailure(t *testing.T) {
	tr := goodTrial()
	tr.EvidenceCited = nil
	ts := mustScore(t, researchCase, tr)
	if ts.Passed || ts.Success || !ts.Finished || ts.Outcome != OutcomeEvidenceCited {
		t.Errorf("finished, cited nothing: passed %v success %v finished %v outcome %q; want a finished run whose outcome failed",
			ts.Passed, ts.Success, ts.Finished, ts.Outcome)
	}
	// The only partial credit left is the evidence it retrieved: tools and
	// budgets count for nothing when the outcome failed.
	w := DefaultWeights
	den := w.Success + w.EvidenceCited + w.EvidenceRetrieved + w.ToolPrecision + w.ToolRecall + w.Budgets
	if want := w.EvidenceRetrieved / den; math.Abs(ts.Score-want) > 1e-12 {
		t.Errorf("score = %v, want %v (the retrieved-evidence weight only)", ts.Score, want)
	}
	if *ts.EvidenceRetrieved != 1 || *ts.EvidenceCited != 0 || !*ts.RetrievedOK || *ts.CitedOK {
		t.Errorf("retrieved %v cited %v, want 1 and 0 reported separately", *ts.EvidenceRetrieved, *ts.EvidenceCited)
	}
	if !strings.Contains(strings.Join(ts.Reasons, ";"), "retrieved (1) but never cited") {
		t.Errorf("reasons %v do not say the evidence was retrieved but not cited", ts.Reasons)
	}
}

func TestEmptyWorkScoresZero(t *testing.T) {
	// Called the expected tools, stayed in every budget, said it finished,
	// found nothing: the old scorer gave this 0.65.
	tr := goodTrial()
	tr.EvidenceRetrieved, tr.EvidenceCited = nil, nil
	ts := mustScore(t, researchCase, tr)
	if ts.Score != 0 || ts.Passed {
		t.Errorf("empty work: score %v passed %v, want 0 and failed", ts.Score, ts.Passed)
	}
}

func TestADivergedReplayFailsWhateverItClaims(t *testing.T) {
	tr := goodTrial()
	tr.Divergence = "tool_result_mismatch: step 2 search_docs"
	ts := mustScore(t, researchCase, tr)
	if ts.Passed || ts.Finished || ts.Divergence == "" {
		t.Fatalf("diverged trial: passed %v finished %v", ts.Passed, ts.Finished)
	}
	if !strings.Contains(strings.Join(ts.Reasons, ";"), "replay diverged: tool_result_mismatch") {
		t.Errorf("reasons %v do not name the divergence", ts.Reasons)
	}
}

func TestSuiteReportsEvidenceRatesAndAgentsWithIntervals(t *testing.T) {
	cases := []datasets.Case{researchCase, {ID: "d", Task: "t", RequiredEvidence: []string{"docs/b.md"}}, {ID: "e", Task: "t"}}
	var trials []datasets.Trial
	for i := range 2 {
		a := goodTrial()
		a.Trial, a.Agent = i, "research"
		d := goodTrial()
		d.CaseID, d.Trial, d.Agent = "d", i, "research"
		d.EvidenceRetrieved, d.EvidenceCited = []string{"docs/b.md"}, nil // retrieved, never cited
		e := datasets.Trial{CaseID: "e", Trial: i, ModelLabel: "scripted", TraceID: "x", Success: bp(i == 0), Agent: "coding"}
		trials = append(trials, a, d, e)
	}
	s, err := Score(cases, trials, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if s.EvidenceCases != 2 || s.EvidenceRetrieved.Estimate != 1 || s.EvidenceCited.Estimate != 0.5 || s.RetrievedNotCited.Estimate != 0.5 {
		t.Errorf("evidence over %d cases: retrieved %+v cited %+v retrieved-not-cited %+v", s.EvidenceCases, s.EvidenceRetrieved, s.EvidenceCited, s.RetrievedNotCited)
	}
	if s.EvidenceCited.Lower >= 0.5 || s.EvidenceCited.Upper <= 0.5 {
		t.Errorf("cited interval %+v does not bracket its estimate", s.EvidenceCited)
	}
	if len(s.Agents) != 2 || s.Agents[0].Agent != "coding" || s.Agents[0].Cases != 1 || s.Agents[0].EvidenceCases != 0 ||
		s.Agents[1].Agent != "research" || s.Agents[1].Cases != 2 || s.Agents[1].PassRate.Estimate != 0.5 {
		t.Errorf("agents %+v", s.Agents)
	}
	if !reflect.DeepEqual(s.FlakyCases, []string{"e"}) {
		t.Errorf("flaky cases %v, want [e]", s.FlakyCases)
	}
	if !strings.Contains(strings.Join(s.Notes, ";"), "1 of 3 cases define no outcome") {
		t.Errorf("notes %v do not say which cases have no outcome", s.Notes)
	}
}

func TestToolPrecisionAndRecallUseDistinctTools(t *testing.T) {
	tr := goodTrial()
	tr.ToolsCalled = []string{"search", "search", "search", "shell"}
	ts := mustScore(t, researchCase, tr)
	if *ts.ToolPrecision != 0.5 || *ts.ToolRecall != 0.5 {
		t.Errorf("precision %v recall %v, want 0.5 and 0.5", *ts.ToolPrecision, *ts.ToolRecall)
	}
	if !ts.Passed {
		t.Error("tool mistakes alone should lower the score, not fail the trial")
	}
}

func TestUnknownCostGivesUnknownVerdictNotPass(t *testing.T) {
	tr := goodTrial()
	tr.CostUSD = nil
	ts := mustScore(t, researchCase, tr)
	var v BudgetVerdict
	for _, b := range ts.Budgets {
		if b.Budget == "usd" {
			v = b
		}
	}
	if v.Verdict != VerdictUnknown || ts.Passed {
		t.Fatalf("usd verdict %q passed %v; want unknown and not passed", v.Verdict, ts.Passed)
	}
	tr.CostUSD = fp(0.02)
	ts = mustScore(t, researchCase, tr)
	if ts.Budgets[1].Verdict != VerdictFail || ts.Passed {
		t.Fatalf("over-budget cost: verdict %q passed %v", ts.Budgets[1].Verdict, ts.Passed)
	}
}

func TestEvidenceMatchAnyNeedsOneCitation(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "t", RequiredEvidence: []string{"a", "b"}, EvidenceMatch: datasets.EvidenceAny}
	tr := datasets.Trial{CaseID: "c", ModelLabel: "live", TraceID: "x", Success: bp(true), EvidenceCited: []string{"b"}}
	ts := mustScore(t, c, tr)
	if !ts.Passed || ts.Score != 1-DefaultWeights.EvidenceRetrieved/(DefaultWeights.Success+DefaultWeights.EvidenceCited+DefaultWeights.EvidenceRetrieved) {
		t.Errorf("any-mode: passed %v score %v", ts.Passed, ts.Score)
	}
	c.EvidenceMatch = ""
	if ts := mustScore(t, c, tr); ts.Passed {
		t.Error("all-mode passed with one of two required ids cited")
	}
}

func TestCaseWithoutExpectationsScoresOnSuccessAlone(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "t"}
	ok := mustScore(t, c, datasets.Trial{CaseID: "c", ModelLabel: "live", TraceID: "x", Success: bp(true)})
	bad := mustScore(t, c, datasets.Trial{CaseID: "c", ModelLabel: "live", TraceID: "x", Success: bp(false)})
	if ok.Score != 1 || !ok.Passed || bad.Score != 0 || bad.Passed {
		t.Errorf("ok %v/%v bad %v/%v", ok.Score, ok.Passed, bad.Score, bad.Passed)
	}
}

func inlineSpans(scripted bool) []store.Span {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	root := store.Span{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "r", Name: "invoke_agent", Operation: "invoke_agent", StartTime: t0, EndTime: t0.Add(800 * time.Millisecond)}
	tool := store.Span{TraceID: root.TraceID, SpanID: "t", ParentSpanID: "r", Name: "execute_tool search", Operation: "execute_tool", ToolName: "search",
		StartTime: t0.Add(10 * time.Millisecond), EndTime: t0.Add(100 * time.Millisecond), RetrievedDocs: []string{"docs/a.md"}}
	chat := store.Span{TraceID: root.TraceID, SpanID: "c", ParentSpanID: "r", Name: "chat", Operation: "chat", RequestModel: "gpt-4o-mini",
		HasUsage: true, InputTokens: 2000, OutputTokens: 100, StartTime: t0.Add(100 * time.Millisecond), EndTime: t0.Add(700 * time.Millisecond),
		CitedDocs: []string{"docs/a.md"}}
	if scripted {
		chat.Attributes = store.Attributes{semconv.AttrModelLabel: "scripted"}
	}
	return []store.Span{root, tool, chat}
}

func TestInlineSpansFillWhatTheTrialLeavesOut(t *testing.T) {
	tr := datasets.Trial{CaseID: "c", ModelLabel: "scripted", Spans: inlineSpans(true)}
	ts := mustScore(t, researchCase, tr)
	if !ts.Success || *ts.DurationMS != 800 || *ts.Tokens != 2100 || ts.CostUSD == nil || *ts.EvidenceCited != 1 || *ts.ToolRecall != 0.5 {
		t.Fatalf("derived trial score %+v", ts)
	}
	if want := (2000*0.15 + 100*0.60) / 1e6; math.Abs(*ts.CostUSD-want) > 1e-15 {
		t.Errorf("cost %v, want %v", *ts.CostUSD, want)
	}
	tr.ModelLabel = "live"
	if _, err := ScoreTrial(&researchCase, &tr, testConfig()); err == nil || !strings.Contains(err.Error(), "scripted") {
		t.Errorf("a trial labelled live with scripted spans: err = %v", err)
	}
}

func TestTrialForUnknownCaseIsAnErrorWithItsLine(t *testing.T) {
	tr := goodTrial()
	tr.CaseID, tr.Line = "nope", 7
	_, err := Score([]datasets.Case{researchCase}, []datasets.Trial{tr}, testConfig())
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "line 7") {
		t.Fatalf("err = %v", err)
	}
}

// suiteTrials spreads n trials over five cases a..e; case j passes its
// first j+extra trials, so cases differ.
func suiteTrials(n int, extra int) []datasets.Trial {
	var out []datasets.Trial
	for i := 0; i < n; i++ {
		tr := goodTrial()
		tr.CaseID = string(rune('a' + i%5))
		tr.Trial = i / 5
		tr.Success = bp(tr.Trial < i%5+extra)
		out = append(out, tr)
	}
	return out
}

func TestSuiteIsReproducible(t *testing.T) {
	trials := suiteTrials(40, 1)
	a, _ := Score(nil, trials, testConfig())
	b, _ := Score(nil, trials, testConfig())
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatal("same input, different suite reports")
	}
	// The interval is stats.MeanInterval of the per-case means, at the
	// configured level and the suite's trials per case.
	c, _ := Score(nil, trials, testConfig())
	var means []float64
	for _, cr := range c.Cases {
		means = append(means, cr.MeanScore)
	}
	want, _ := stats.MeanInterval(means, float64(c.NTrials)/float64(c.NCases), 0.95)
	if *c.MeanScore != want {
		t.Errorf("mean score interval %+v, want %+v", *c.MeanScore, want)
	}
}

func TestSuiteAggregatesPassAtKAndCost(t *testing.T) {
	trials := suiteTrials(40, 2) // 8 trials per case; 2+3+4+5+6 = 20 succeed
	s, err := Score(nil, trials, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if s.NCases != 5 || s.NTrials != 40 || len(s.Notes) == 0 {
		t.Fatalf("suite %+v", s)
	}
	for _, c := range s.Cases {
		for _, kv := range c.PassAtK {
			if kv.K == 1 && math.Abs(kv.Value-c.PassRate) > 1e-12 {
				t.Errorf("case %s pass@1 %v != pass rate %v", c.CaseID, kv.Value, c.PassRate)
			}
		}
	}
	if s.TotalCostUSD == nil || math.Abs(*s.TotalCostUSD-0.04) > 1e-12 || math.Abs(*s.CostPerSuccessUSD-0.04/20) > 1e-12 {
		t.Errorf("total %v per success %v", s.TotalCostUSD, s.CostPerSuccessUSD)
	}
	if s.ModelLabels["scripted"] != 40 {
		t.Errorf("model labels %v", s.ModelLabels)
	}
}

func TestCompareReportsFlipsAndMissingCasesSeparately(t *testing.T) {
	cases := []datasets.Case{{ID: "a", Task: "t"}, {ID: "b", Task: "t"}, {ID: "c", Task: "t"}, {ID: "only-base", Task: "t"}, {ID: "only-cand", Task: "t"}}
	mk := func(id string, ok bool) datasets.Trial {
		return datasets.Trial{CaseID: id, ModelLabel: "scripted", TraceID: "x", Success: bp(ok), DurationMS: fp(100), CostUSD: fp(0.01)}
	}
	base, _ := Score(cases, []datasets.Trial{mk("a", true), mk("b", false), mk("c", true), mk("only-base", true)}, testConfig())
	cand, _ := Score(cases, []datasets.Trial{mk("a", false), mk("b", true), mk("c", true), mk("only-cand", false)}, testConfig())
	cmp, err := Compare(base, cand, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cmp.NewFailures, []string{"a"}) || !reflect.DeepEqual(cmp.Fixed, []string{"b"}) {
		t.Errorf("new failures %v fixed %v", cmp.NewFailures, cmp.Fixed)
	}
	if !reflect.DeepEqual(cmp.MissingFromBaseline, []string{"only-cand"}) || !reflect.DeepEqual(cmp.MissingFromCandidate, []string{"only-base"}) {
		t.Errorf("missing from baseline %v, from candidate %v", cmp.MissingFromBaseline, cmp.MissingFromCandidate)
	}
	if cmp.McNemar.Regressed != 1 || cmp.McNemar.Fixed != 1 || cmp.McNemar.PValue != 1 {
		t.Errorf("mcnemar %+v", cmp.McNemar)
	}
	if len(cmp.Pairs) != 3 || cmp.MeanDelta == nil || cmp.MeanDelta.Estimate != 0 || cmp.MeanDelta.SampleSize != 3 {
		t.Errorf("pairs %d delta %+v", len(cmp.Pairs), cmp.MeanDelta)
	}
	if cmp.CostChangePct == nil || *cmp.CostChangePct != 0 {
		t.Errorf("cost change %v", cmp.CostChangePct)
	}
}

// Regression: the suite's mean-score and pass-rate intervals once pointed at
// the same variable, so the mean score silently showed the pass rate.
func TestSuiteMeanScoreAndPassRateAreDistinctMeasurements(t *testing.T) {
	c := researchCase
	good := goodTrial()
	partial := goodTrial()
	partial.Trial = 1
	partial.EvidenceCited = nil // succeeds, high score, does not pass
	s, err := Score([]datasets.Case{c}, []datasets.Trial{good, partial}, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if s.PassRate.Estimate != 0.5 {
		t.Fatalf("pass rate %v, want 0.5", s.PassRate.Estimate)
	}
	want := s.Cases[0].MeanScore
	if math.Abs(s.MeanScore.Estimate-want) > 1e-12 || s.MeanScore.Estimate <= 0.5 {
		t.Fatalf("suite mean score %v, want the case mean %v (above the pass rate)", s.MeanScore.Estimate, want)
	}
	if s.MeanScore == s.PassRate {
		t.Fatal("mean score and pass rate share one interval")
	}
}
