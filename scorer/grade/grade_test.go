package grade_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

func f64(v float64) *float64 { return &v }
func str(s string) *string   { return &s }
func boolp(b bool) *bool     { return &b }

// gradeOne grades one trial against one case and returns its grades.
func gradeOne(t *testing.T, env grade.Env, c datasets.Case, tr datasets.Trial) []datasets.Grade {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("case: %v", err)
	}
	if tr.ModelLabel == "" {
		tr.ModelLabel = datasets.LabelScripted
	}
	trials := []datasets.Trial{tr}
	if _, err := grade.Trials(context.Background(), env, []datasets.Case{c}, trials); err != nil {
		t.Fatal(err)
	}
	return trials[0].Grades
}

func answered(answer string) datasets.Trial {
	return datasets.Trial{CaseID: "c", TraceID: "t", Success: boolp(true), Transcript: &datasets.Transcript{Answer: answer}}
}

// The classic trap (docs/scoring.md, "Graders"): a grader pinned to the
// digits of the reference value rejects a correct answer that rounds.
func TestNumberToleranceTrap(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "What is the mean latency in ms?", Graders: []datasets.Grader{
		{Type: datasets.GraderEquals, Name: "pinned_digits", Value: str("96.124991")},
		{Type: datasets.GraderNumber, Name: "exact_number", Expected: f64(96.124991)},
		{Type: datasets.GraderNumber, Name: "within_0.005", Expected: f64(96.124991), AbsTol: f64(0.005)},
		{Type: datasets.GraderNumber, Name: "within_0.01pct", Expected: f64(96.124991), RelTol: f64(1e-4)},
	}}
	gs := gradeOne(t, grade.Env{}, c, answered("The mean latency is 96.12 ms."))
	want := map[string]bool{"pinned_digits": false, "exact_number": false, "within_0.005": true, "within_0.01pct": true}
	for _, g := range gs {
		if g.Passed != want[g.Name] {
			t.Errorf("%s: passed=%v, want %v (%s)", g.Name, g.Passed, want[g.Name], g.Reason)
		}
	}
	if r := gs[2].Reason; r != "read 96.12 from the answer; |96.12 - 96.124991| = 0.004991 within abs_tol 0.005" {
		t.Errorf("tolerance reason: %q", r)
	}
	// An answer off by more than the tolerance fails, and says by how much.
	gs = gradeOne(t, grade.Env{}, c, answered("about 96.2"))
	if gs[2].Passed || !strings.Contains(gs[2].Reason, "outside abs_tol 0.005") {
		t.Errorf("96.2 must fail a 0.005 tolerance: %+v", gs[2])
	}
	// A number written with separators and a unit still reads.
	for text, v := range map[string]float64{"1,234.5 ms": 1234.5, "-3e2": -300, "x=7, y=.5": 0.5, "42": 42} {
		got, _, err := grade.ReadNumber(text, "")
		if err != nil || got != v {
			t.Errorf("ReadNumber(%q) = %v, %v; want %v", text, got, err, v)
		}
	}
	if _, _, err := grade.ReadNumber("no digits here", ""); err == nil {
		t.Error("ReadNumber without a number must fail")
	}
}

func TestTextGraders(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "t", Graders: []datasets.Grader{
		{Type: datasets.GraderEquals, Name: "eq", Value: str("Paris"), IgnoreCase: true},
		{Type: datasets.GraderContains, Name: "has", Value: str("capital")},
		{Type: datasets.GraderRegex, Name: "re", Pattern: `^\s*PARIS\b`, IgnoreCase: true},
		{Type: datasets.GraderJSONSchema, Name: "tool_json", Target: "tool_result:lookup",
			Schema: json.RawMessage(`{"type":"object","required":["city","population"],"properties":{"population":{"type":"integer","minimum":0}}}`)},
		{Type: datasets.GraderContains, Name: "file", Target: "file:notes.md", Value: str("Seine")},
		{Type: datasets.GraderContains, Name: "missing_tool", Target: "tool_result:nope", Value: str("x"), Required: boolp(false)},
	}}
	tr := datasets.Trial{CaseID: "c", TraceID: "t", Success: boolp(true), Transcript: &datasets.Transcript{
		Answer: " paris ",
		ToolCalls: []datasets.ToolCall{
			{Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`), Result: `{"city":"Paris","population":-1}`},
			{Name: "lookup", Arguments: json.RawMessage(`{"q":"Paris"}`), Result: `{"city":"Paris","population":2102650}`},
		},
		Files: map[string]string{"notes.md": "on the Seine"},
	}}
	gs := gradeOne(t, grade.Env{}, c, tr)
	want := map[string]bool{"eq": true, "has": false, "re": true, "tool_json": true, "file": true, "missing_tool": false}
	for _, g := range gs {
		if g.Passed != want[g.Name] {
			t.Errorf("%s: passed=%v, want %v (%s %s)", g.Name, g.Passed, want[g.Name], g.Reason, g.Error)
		}
	}
	if gs[5].Reason != "tool nope was never called" || gs[5].Required {
		t.Errorf("missing target: %+v", gs[5])
	}
	// The schema grader reads the LAST lookup result; the first one
	// (population -1) would fail it.
	tr.Transcript.ToolCalls = tr.Transcript.ToolCalls[:1]
	gs = gradeOne(t, grade.Env{}, c, tr)
	if gs[3].Passed || !strings.Contains(gs[3].Reason, "does not validate") {
		t.Errorf("schema violation not caught: %+v", gs[3])
	}
	// A schema that reaches outside itself ($ref to a file) is a grader
	// error, and nothing is read.
	c.Graders[3].Schema = json.RawMessage(`{"$ref": "file:///etc/passwd"}`)
	gs = gradeOne(t, grade.Env{}, c, tr)
	if gs[3].Passed || !strings.Contains(gs[3].Error, `no URLLoader registered for "file:///etc/passwd"`) {
		t.Errorf("a file $ref must be refused: %+v", gs[3])
	}
	// No transcript at all: answer graders fail and say why.
	gs = gradeOne(t, grade.Env{}, c, datasets.Trial{CaseID: "c", TraceID: "t", Success: boolp(true)})
	if gs[0].Passed || !strings.HasPrefix(gs[0].Reason, "no transcript") {
		t.Errorf("no transcript: %+v", gs[0])
	}
}

func TestToolCalledGrader(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "t", Graders: []datasets.Grader{
		{Type: datasets.GraderToolCalled, Name: "searched", Tool: "search"},
		{Type: datasets.GraderToolCalled, Name: "searched_checkout", Tool: "search", Pattern: `"q":"[^"]*checkout`},
		{Type: datasets.GraderToolCalled, Name: "no_deploy", Tool: "deploy", Min: f64(0), Max: f64(0)},
		{Type: datasets.GraderToolCalled, Name: "at_most_one_search", Tool: "search", Max: f64(1)},
	}}
	tr := datasets.Trial{CaseID: "c", TraceID: "t", Success: boolp(true), Transcript: &datasets.Transcript{Answer: "a", ToolCalls: []datasets.ToolCall{
		{Name: "search", Arguments: json.RawMessage(`{ "q": "checkout timeout" }`)},
		{Name: "search", Arguments: json.RawMessage(`{"q":"auth"}`)},
	}}}
	gs := gradeOne(t, grade.Env{}, c, tr)
	want := map[string]bool{"searched": true, "searched_checkout": true, "no_deploy": true, "at_most_one_search": false}
	for _, g := range gs {
		if g.Passed != want[g.Name] {
			t.Errorf("%s: passed=%v, want %v (%s)", g.Name, g.Passed, want[g.Name], g.Reason)
		}
	}
	// With only tool names (a trial file without a transcript), an
	// arguments pattern cannot be checked: an error, not a pass.
	gs = gradeOne(t, grade.Env{}, c, datasets.Trial{CaseID: "c", TraceID: "t", Success: boolp(true), ToolsCalled: []string{"search"}})
	if !gs[0].Passed || gs[1].Passed || gs[1].Error == "" {
		t.Errorf("names only: %+v / %+v", gs[0], gs[1])
	}
}

// incidentSpans is the reference design's incident trace (its tracer's
// clock ticks 10 ms per call): an agent span, a model call costing
// 0.00744, a retrieval citing runbook://checkout-timeout, and two tool
// calls, the second failing.
func incidentSpans() []store.Span {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	sp := func(id, name, op string, start, end int) store.Span {
		s := store.Span{TraceID: "00000000000000000000000000000041", SpanID: id, Name: name, Operation: op,
			StartTime: at(start), EndTime: at(end), StatusCode: store.StatusUnset, ServiceName: "incident-agent"}
		if id != "0000000000000000" {
			s.ParentSpanID = "0000000000000000"
		}
		return s
	}
	root := sp("0000000000000000", "investigate checkout spike", semconv.OpInvokeAgent, 10, 100)
	root.AgentName = "incident-agent"
	root.Attributes = store.Attributes{semconv.AttrTaskSuccess: true}
	chat := sp("0000000000000001", "chat frontier-x", semconv.OpChat, 20, 30)
	chat.RequestModel, chat.ResponseModel, chat.HasUsage, chat.InputTokens, chat.OutputTokens, chat.CostUSD = "frontier-x", "frontier-x", true, 1200, 180, f64(0.00744)
	ret := sp("0000000000000002", "retrieve runbooks", semconv.OpRetrieval, 40, 50)
	ret.RetrievedDocs, ret.CitedDocs = []string{"runbook://checkout-timeout"}, []string{"runbook://checkout-timeout"}
	search := sp("0000000000000003", "execute_tool search_runbooks", semconv.OpExecuteTool, 60, 70)
	search.ToolName = "search_runbooks"
	logs := sp("0000000000000004", "execute_tool query_logs", semconv.OpExecuteTool, 80, 90)
	logs.ToolName, logs.StatusCode, logs.StatusMessage = "query_logs", store.StatusError, "log backend unavailable"
	return []store.Span{root, chat, ret, search, logs}
}

// The reference design's incident-41 / incident-42 example as graders: the
// same run passes incident-41 and fails incident-42, whose evidence grader
// wants a second id the run never cited — "a run that succeeded can still
// fail the eval". The rollup's figures are the reference's (latency 90 ms,
// cost 0.00744, tool precision/recall 1/1 and 0.5/1, evidence support 1
// and 0.5).
func TestIncidentExampleAsGraders(t *testing.T) {
	budget := []datasets.Grader{
		{Type: datasets.GraderTrace, Name: "within_400ms", Metric: datasets.MetricDurationMS, Max: f64(400)},
		{Type: datasets.GraderTrace, Name: "within_5_cents", Metric: datasets.MetricCostUSD, Max: f64(0.05)},
	}
	cases := []datasets.Case{
		{ID: "incident-41", Task: "diagnose the checkout failure spike", ExpectedTools: []string{"search_runbooks", "query_logs"},
			RequiredEvidence: []string{"runbook://checkout-timeout"},
			Graders: append([]datasets.Grader{
				{Type: datasets.GraderEvidenceCited, Name: "evidence"},
				{Type: datasets.GraderToolCalled, Name: "searched_runbooks", Tool: "search_runbooks"},
				{Type: datasets.GraderToolCalled, Name: "queried_logs", Tool: "query_logs"},
			}, budget...)},
		{ID: "incident-42", Task: "diagnose the checkout failure spike", ExpectedTools: []string{"search_runbooks"},
			RequiredEvidence: []string{"runbook://checkout-timeout", "trace://auth-9f2"},
			Graders: append([]datasets.Grader{
				{Type: datasets.GraderEvidenceCited, Name: "evidence"},
				{Type: datasets.GraderToolCalled, Name: "searched_runbooks", Tool: "search_runbooks"},
				{Type: datasets.GraderTrace, Name: "no_error_spans", Metric: datasets.MetricErrorSpans, Max: f64(0), Required: boolp(false)},
			}, budget...)},
	}
	for i := range cases {
		if err := cases[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	trials := []datasets.Trial{
		{CaseID: "incident-41", ModelLabel: "live", Spans: incidentSpans()},
		{CaseID: "incident-42", ModelLabel: "live", Spans: incidentSpans()},
	}
	if _, err := grade.Trials(context.Background(), grade.Env{}, cases, trials); err != nil {
		t.Fatal(err)
	}
	suite, err := scorer.Score(cases, trials, scorer.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	r41, r42 := suite.Cases[0].Results[0], suite.Cases[1].Results[0]
	if !r41.Finished || !r41.Success || r41.Outcome != scorer.OutcomeGraders || r41.Score != 1 {
		t.Errorf("incident-41: %+v", r41)
	}
	if !r42.Finished || r42.Success || r42.Passed {
		t.Errorf("incident-42 finished but must fail the eval: %+v", r42)
	}
	for _, g := range r41.Grades {
		if !g.Passed {
			t.Errorf("incident-41 grader %s failed: %s", g.Name, g.Reason)
		}
	}
	byName := map[string]datasets.Grade{}
	for _, g := range r42.Grades {
		byName[g.Name] = g
	}
	if ev := byName["evidence"]; ev.Passed || ev.Score != 0.5 || ev.Reason != "cited 1 of 2 evidence ids (need all); missing trace://auth-9f2" {
		t.Errorf("incident-42 evidence grader: %+v", ev)
	}
	if e := byName["no_error_spans"]; e.Passed || e.Reason != "error_spans = 1 (want at most 0)" || e.Required {
		t.Errorf("incident-42 optional error-span grader: %+v", e)
	}
	// The reference's printed figures.
	for _, c := range []struct {
		r                     scorer.TrialScore
		precision, support    float64
		wantDuration, wantUSD float64
	}{{r41, 1, 1, 90, 0.00744}, {r42, 0.5, 0.5, 90, 0.00744}} {
		if *c.r.ToolPrecision != c.precision || *c.r.ToolRecall != 1 || *c.r.EvidenceCited != c.support ||
			*c.r.DurationMS != c.wantDuration || math.Abs(*c.r.CostUSD-c.wantUSD) > 1e-12 {
			t.Errorf("%s: precision %v recall %v support %v duration %v cost %v", c.r.CaseID,
				*c.r.ToolPrecision, *c.r.ToolRecall, *c.r.EvidenceCited, *c.r.DurationMS, *c.r.CostUSD)
		}
	}
	// Each grader's pass rate over the suite.
	rates := map[string]scorer.GraderRates{}
	for _, g := range suite.Graders {
		rates[g.Name] = g
	}
	if ev := rates["evidence"]; ev.Cases != 2 || ev.Passed != 1 || ev.PassRate == nil || ev.PassRate.Center != 0.5 {
		t.Errorf("evidence grader rates: %+v", ev)
	}
}

func TestTraceGraderCriticalPathShare(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "t", Graders: []datasets.Grader{
		{Type: datasets.GraderTrace, Name: "model_share", Metric: datasets.MetricCriticalPathShare, Span: "chat frontier-x", Max: f64(0.5)},
		{Type: datasets.GraderTrace, Name: "steps", Metric: datasets.MetricSteps, Min: f64(1), Max: f64(1)},
		{Type: datasets.GraderTrace, Name: "tokens", Metric: datasets.MetricTokens, Max: f64(1000)},
	}}
	gs := gradeOne(t, grade.Env{}, c, datasets.Trial{CaseID: "c", ModelLabel: "live", Spans: incidentSpans()})
	if !gs[0].Passed || !strings.HasPrefix(gs[0].Reason, `critical-path share of "chat frontier-x" = 0.111111`) {
		t.Errorf("critical path share: %+v", gs[0])
	}
	if !gs[1].Passed || gs[2].Passed || gs[2].Reason != "tokens = 1380 (want at most 1000)" {
		t.Errorf("steps/tokens: %+v / %+v", gs[1], gs[2])
	}
	// Without a trace, trace metrics that need it fail and say so.
	gs = gradeOne(t, grade.Env{}, c, datasets.Trial{CaseID: "c", TraceID: "x", Success: boolp(true)})
	if gs[0].Passed || !strings.Contains(gs[0].Reason, "needs the trace") {
		t.Errorf("no trace: %+v", gs[0])
	}
}

func TestPairwiseAsksBothOrdersAndFailsClosedWhenTheyDisagree(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "Explain the outage.", Graders: []datasets.Grader{
		{Type: datasets.GraderPairwise, Name: "vs_reference", Rubric: `Prefer the answer that names "connection pool" and "timeout".`,
			Reference: "The connection pool ran dry, so requests hit the timeout."},
	}}
	var prompts []string
	firstWins := grade.ScriptedJudge{Decide: func(r grade.JudgeRequest) (string, error) {
		prompts = append(prompts, r.Prompt)
		return `{"winner": "A", "reason": "A reads better"}`, nil
	}}
	gs := gradeOne(t, grade.Env{Judge: firstWins}, c, answered("Something broke."))
	g := gs[0]
	if len(prompts) != 2 {
		t.Fatalf("want two judge calls (both orders), got %d", len(prompts))
	}
	ia, ib := strings.Index(prompts[0], "Something broke."), strings.Index(prompts[0], "connection pool ran dry")
	ja, jb := strings.Index(prompts[1], "Something broke."), strings.Index(prompts[1], "connection pool ran dry")
	if !(ia < ib && jb < ja) {
		t.Fatalf("the second call must swap the positions: %q / %q", prompts[0], prompts[1])
	}
	// A judge that always picks the first position disagrees with itself
	// across orders: undecided, which fails closed.
	if g.Passed || g.Score != 0 || !strings.HasPrefix(g.Reason, "undecided: the orders disagree (answer win when first, loss when second)") {
		t.Errorf("position-biased judge: %+v", g)
	}
	if g.Judge == nil || g.Judge.Calls != 2 || g.Judge.ModelLabel != datasets.LabelScripted || g.Judge.Disagreed == nil || !*g.Judge.Disagreed ||
		strings.Join(g.Judge.Orders, " | ") != "answer first: a (answer win) | reference first: a (answer loss)" {
		t.Errorf("judge account: %+v", g.Judge)
	}
	// Every call is recorded: its order, the prompt's hash, the raw reply.
	if r := g.Judge.Replies; len(r) != 2 || r[0].Presentation != "answer first" || r[1].Presentation != "reference first" ||
		r[0].Reply != `{"winner": "A", "reason": "A reads better"}` || r[0].PromptSHA256 != sha(prompts[0]) || r[1].PromptSHA256 != sha(prompts[1]) ||
		r[0].ModelLabel != datasets.LabelScripted || r[0].InputTokens == 0 {
		t.Errorf("replies: %+v", g.Judge.Replies)
	}
	// The rule judge (scripted) decides on content: the reference mentions
	// both phrases and wins both orders, so the answer loses and fails; an
	// answer mentioning as much ties in both orders and passes at 0.5.
	gs = gradeOne(t, grade.Env{Judge: grade.ScriptedJudge{}}, c, answered("Something broke."))
	if gs[0].Passed || gs[0].Score != 0 || gs[0].Reason != "against the reference: loss in both orders" {
		t.Errorf("worse answer: %+v", gs[0])
	}
	gs = gradeOne(t, grade.Env{Judge: grade.ScriptedJudge{}}, c, answered("The connection pool was exhausted and clients saw a timeout."))
	if !gs[0].Passed || gs[0].Score != 0.5 || gs[0].Reason != "against the reference: tie in both orders" || *gs[0].Judge.Disagreed {
		t.Errorf("equal answer: %+v", gs[0])
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestModelGrader(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "Why did checkout fail?", Graders: []datasets.Grader{
		{Type: datasets.GraderModel, Name: "rubric", Rubric: `The answer must name "connection pool" and "timeout".`},
	}}
	gs := gradeOne(t, grade.Env{Judge: grade.ScriptedJudge{}}, c, answered("A timeout, from the connection pool."))
	g := gs[0]
	// Two samples by default, the rubric first and then the answer first.
	if !g.Passed || g.Score != 1 || g.Judge == nil || g.Judge.ModelLabel != "scripted" || g.Judge.Model != "scripted-judge" || g.Judge.Calls != 2 ||
		g.Reason != "mentions 2 of 2 rubric phrases (2 of 2 samples pass: rubric first pass 1, answer first pass 1)" ||
		len(g.Judge.Replies) != 2 || g.Judge.Replies[0].Presentation != "rubric first" || g.Judge.Replies[1].Presentation != "answer first" {
		t.Errorf("model grader: %+v judge %+v", g, g.Judge)
	}
	gs = gradeOne(t, grade.Env{Judge: grade.ScriptedJudge{}}, c, answered("A timeout."))
	if gs[0].Score != 0.5 || !gs[0].Passed {
		t.Errorf("half the rubric at the default threshold 0.5: %+v", gs[0])
	}
	c.Graders[0].Threshold = f64(0.8)
	gs = gradeOne(t, grade.Env{Judge: grade.ScriptedJudge{}}, c, answered("A timeout."))
	if gs[0].Passed {
		t.Errorf("threshold 0.8: %+v", gs[0])
	}
	// A judge answer that is not a verdict fails the grade with an error.
	bad := grade.ScriptedJudge{Decide: func(grade.JudgeRequest) (string, error) { return "I think it is fine.", nil }}
	gs = gradeOne(t, grade.Env{Judge: bad}, c, answered("x"))
	if gs[0].Passed || !strings.Contains(gs[0].Error, "not a verdict") {
		t.Errorf("unparseable judge: %+v", gs[0])
	}
	// A judge that fails (a provider error) fails the grading, naming it.
	broken := grade.ScriptedJudge{Decide: func(grade.JudgeRequest) (string, error) { return "", errors.New("provider said 503") }}
	trials := []datasets.Trial{answered("x")}
	trials[0].ModelLabel = "scripted"
	_, err := grade.Trials(context.Background(), grade.Env{Judge: broken}, []datasets.Case{c}, trials)
	if err == nil || !strings.Contains(err.Error(), `grader "rubric": judge: provider said 503`) {
		t.Errorf("judge error: %v", err)
	}
}

func TestCostlyVerdictsAreKeptUnlessRegraded(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "t", Graders: []datasets.Grader{
		{Type: datasets.GraderModel, Name: "rubric", Rubric: `Say "yes".`},
		{Type: datasets.GraderContains, Name: "says_yes", Value: str("yes")},
	}}
	tr := answered("no")
	tr.ModelLabel = "scripted"
	tr.Grades = []datasets.Grade{{Name: "rubric", Type: datasets.GraderModel, Passed: true, Score: 1, Reason: "recorded"},
		{Name: "says_yes", Type: datasets.GraderContains, Passed: true, Score: 1, Reason: "forged"}}
	trials := []datasets.Trial{tr}
	// No judge configured: the recorded model verdict is used; the
	// deterministic one is recomputed (a recorded pass is not believed).
	sum, err := grade.Trials(context.Background(), grade.Env{}, []datasets.Case{c}, trials)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Recorded != 1 || sum.Graded != 1 || trials[0].Grades[0].Reason != "recorded" || trials[0].Grades[1].Passed {
		t.Errorf("summary %+v grades %+v", sum, trials[0].Grades)
	}
	// Regrade without a judge: the model grader needs one.
	trials = []datasets.Trial{tr}
	_, err = grade.Trials(context.Background(), grade.Env{Regrade: true}, []datasets.Case{c}, trials)
	if !errors.Is(err, grade.ErrNoBackend) {
		t.Errorf("regrade without a judge: %v", err)
	}
}

func TestScoreRefusesAnUngradedTrial(t *testing.T) {
	c := datasets.Case{ID: "c", Task: "t", Graders: []datasets.Grader{{Type: datasets.GraderContains, Value: str("x")}}}
	tr := answered("x")
	tr.ModelLabel = "live"
	_, err := scorer.Score([]datasets.Case{c}, []datasets.Trial{tr}, scorer.DefaultConfig())
	if err == nil || !strings.Contains(err.Error(), `grader "contains" has no verdict on the trial`) {
		t.Errorf("ungraded: %v", err)
	}
}

func TestTranscriptFromSpans(t *testing.T) {
	spans := incidentSpans()
	spans[0].Attributes[semconv.AttrInputMessages] = `[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"diagnose the spike"}]}]`
	spans[0].Attributes[semconv.AttrOutputMessages] = `[{"role":"assistant","parts":[{"type":"text","content":"Checkout timed out."}],"finish_reason":"stop"}]`
	spans[3].Attributes = store.Attributes{semconv.AttrToolCallArguments: `{"q":"checkout"}`, semconv.AttrToolCallResult: "runbook://checkout-timeout"}
	spans[4].Attributes = store.Attributes{"input.value": "not json", "output.value": "log backend unavailable"}
	tr := grade.TranscriptFromSpans(spans)
	if tr.Task != "diagnose the spike" || tr.Answer != "Checkout timed out." || len(tr.ToolCalls) != 2 {
		t.Fatalf("transcript: %+v", tr)
	}
	if string(tr.ToolCalls[0].Arguments) != `{"q":"checkout"}` || tr.ToolCalls[0].Result != "runbook://checkout-timeout" || tr.ToolCalls[0].IsError {
		t.Errorf("tool call 0: %+v", tr.ToolCalls[0])
	}
	if string(tr.ToolCalls[1].Arguments) != `"not json"` || !tr.ToolCalls[1].IsError || tr.ToolCalls[1].Name != "query_logs" {
		t.Errorf("tool call 1: %+v", tr.ToolCalls[1])
	}
	if strings.Join(tr.Citations, ",") != "runbook://checkout-timeout" {
		t.Errorf("citations %v", tr.Citations)
	}
	// Content on the GenAI convention's inference-details event, on the
	// last model call only.
	spans = incidentSpans()
	spans[1].Events = []store.Event{{Name: semconv.EventInferenceOperationDetails, Attributes: store.Attributes{
		semconv.AttrInputMessages:  `[{"role":"user","parts":[{"type":"text","content":"why?"}]}]`,
		semconv.AttrOutputMessages: `[{"role":"assistant","parts":[{"type":"text","content":"because."}]}]`}}}
	if tr := grade.TranscriptFromSpans(spans); tr.Task != "why?" || tr.Answer != "because." {
		t.Errorf("event content: %+v", tr)
	}
	// OpenInference content on the root only.
	spans = incidentSpans()
	spans[0].Attributes = store.Attributes{"input.value": "q?", "output.value": "a."}
	if tr := grade.TranscriptFromSpans(spans); tr.Task != "q?" || tr.Answer != "a." {
		t.Errorf("OpenInference: %+v", tr)
	}
}
