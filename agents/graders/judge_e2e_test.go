package graders

import (
	"context"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/grade"
)

// A case with a model grader and one with a pairwise grader, graded by
// grade.Trials with the gateway judge against each provider's fake: the
// rubric prompts reach the provider, the verdicts come back as grades,
// the judge's tokens and cost are on the grade (never the trial's own
// cost), the model grader asks twice (the rubric first, then the answer
// first) and the pairwise grader twice with the two answers swapped.
func TestGradeTrialsWithTheGatewayJudgeEndToEnd(t *testing.T) {
	const (
		answer    = "Raise wal_keep_size to 2GB; the standby fell behind because the primary recycled WAL it still needed."
		reference = "Set wal_keep_size high enough for the standby's lag, or use a replication slot."
	)
	casesJSONL := `{"id":"lag-model","task":"Why did the replica lag, and what fixes it?","graders":[{"type":"model","name":"explains_fix","rubric":"The answer names \"wal_keep_size\" and says why the standby fell behind.","threshold":0.7}]}
{"id":"lag-pair","task":"Why did the replica lag, and what fixes it?","graders":[{"type":"pairwise","name":"vs_reference","rubric":"Prefer the answer that is correct and actionable.","reference":"` + reference + `"}]}
`
	trialsJSONL := `{"case_id":"lag-model","trial":0,"model_label":"live","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","success":true,"cost_usd":0.0125,"tokens":5000,"transcript":{"answer":"` + answer + `"}}
{"case_id":"lag-pair","trial":0,"model_label":"live","trace_id":"5bf92f3577b34da6a3ce929d0e0e4736","success":true,"cost_usd":0.0125,"tokens":5000,"transcript":{"answer":"` + answer + `"}}
`
	for _, provider := range []string{ProviderOpenAI, ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			cases, err := datasets.ReadCases(strings.NewReader(casesJSONL), "cases.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			trials, err := datasets.ReadTrials(strings.NewReader(trialsJSONL), "trials.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			f := newFakeJudge(t, provider)
			// The model grader's two samples, then the pairwise grader's
			// two orders: a judge that prefers whatever it reads first
			// (position bias), which the two orders leave undecided.
			f.srv.Enqueue(
				f.answer(`{"score": 0.8, "passed": true, "reason": "names wal_keep_size and the recycled WAL"}`, 900, 0, 40),
				f.answer(`{"score": 0.9, "passed": true, "reason": "names wal_keep_size"}`, 910, 0, 30),
				f.answer("```json\n{\"winner\": \"A\", \"reason\": \"first is more specific\"}\n```", 700, 128, 25),
				f.answer(`{"winner": "A", "reason": "first is more specific"}`, 710, 128, 24),
			)
			sum, err := grade.Trials(context.Background(), grade.Env{Judge: f.judge(t)}, cases, trials)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Graded != 2 || f.srv.Count() != 4 {
				t.Fatalf("summary %+v, %d requests at the fake; want 2 graded and 4 requests", sum, f.srv.Count())
			}
			reqs := f.srv.Requests()

			// The model grader: the rubric prompt went out in both orders,
			// the verdicts came back and agree.
			if got := userText(t, reqs[0].JSON()); got != grade.ModelPrompt(cases[0].Task, cases[0].Graders[0].Rubric, answer) {
				t.Errorf("model grader prompt:\n%s", got)
			}
			if got := userText(t, reqs[1].JSON()); got != grade.ModelPromptAnswerFirst(cases[0].Task, cases[0].Graders[0].Rubric, answer) {
				t.Errorf("model grader's second prompt:\n%s", got)
			}
			mg := trials[0].Grades[0]
			if mg.Name != "explains_fix" || !mg.Passed || math.Abs(mg.Score-0.85) > 1e-12 || mg.Error != "" ||
				mg.Reason != "names wal_keep_size and the recycled WAL (2 of 2 samples pass: rubric first pass 0.8, answer first pass 0.9)" {
				t.Errorf("model grade %+v", mg)
			}
			wantUsage(t, "model grade", mg.Judge, f, 2, 1810, 70, listCost(t, f.model, 900, 0, 40)+listCost(t, f.model, 910, 0, 30))
			if r := mg.Judge.Replies; len(r) != 2 || r[0].Reply != `{"score": 0.8, "passed": true, "reason": "names wal_keep_size and the recycled WAL"}` ||
				r[0].ModelLabel != "live" || r[0].InputTokens != 900 || r[0].CostUSD == nil || r[1].OutputTokens != 30 {
				t.Errorf("model grade replies %+v", r)
			}

			// The pairwise grader: two requests, the answers swapped.
			tag := func(body, name string) string {
				m := regexp.MustCompile(`(?s)<` + name + `>\n(.*?)\n</` + name + `>`).FindStringSubmatch(body)
				if m == nil {
					t.Fatalf("no <%s> in %s", name, body)
				}
				return m[1]
			}
			first, second := userText(t, reqs[2].JSON()), userText(t, reqs[3].JSON())
			if tag(first, "response_a") != answer || tag(first, "response_b") != reference ||
				tag(second, "response_a") != reference || tag(second, "response_b") != answer {
				t.Errorf("the two pairwise requests do not swap the answers:\nfirst:\n%s\nsecond:\n%s", first, second)
			}
			pg := trials[1].Grades[0]
			if pg.Name != "vs_reference" || pg.Passed || pg.Score != 0 || !strings.HasPrefix(pg.Reason, "undecided: the orders disagree") {
				t.Errorf("pairwise grade %+v, want undecided (failed, 0) from disagreeing orders", pg)
			}
			if pg.Judge == nil || len(pg.Judge.Orders) != 2 || !strings.Contains(pg.Judge.Orders[0], "answer first: a (answer win)") ||
				!strings.Contains(pg.Judge.Orders[1], "reference first: a (answer loss)") {
				t.Errorf("pairwise orders %+v", pg.Judge)
			}
			wantUsage(t, "pairwise grade", pg.Judge, f, 2, 1410, 49, listCost(t, f.model, 700, 128, 25)+listCost(t, f.model, 710, 128, 24))

			// The agent's own account is untouched by the judge's.
			for _, tr := range trials {
				if tr.CostUSD == nil || *tr.CostUSD != 0.0125 || tr.Tokens == nil || *tr.Tokens != 5000 {
					t.Errorf("trial of %s: cost %v, tokens %v; want the agent's 0.0125 and 5000", tr.CaseID, tr.CostUSD, tr.Tokens)
				}
			}
		})
	}
}

func wantUsage(t *testing.T, what string, u *datasets.JudgeUsage, f *fakeJudge, calls int, in, out int64, cost float64) {
	t.Helper()
	if u == nil {
		t.Fatalf("%s: no judge usage", what)
	}
	if u.ModelLabel != "live" || u.Provider != f.provider || u.Model != f.respond || u.Calls != calls || u.InputTokens != in || u.OutputTokens != out {
		t.Errorf("%s: judge %+v, want live %s %s, %d calls, %d in, %d out", what, u, f.provider, f.respond, calls, in, out)
	}
	if u.CostUSD == nil || math.Abs(*u.CostUSD-cost) > 1e-12 || cost <= 0 {
		t.Errorf("%s: judge cost %v, want %v", what, u.CostUSD, cost)
	}
}
