package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/internal/testtier"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A suite graded end to end by the binary: hidden tests run in the sandbox
// against the files each trial wrote, a tolerance grader, a scripted
// judge; success is every required grader passing, and each grader's pass
// rate is reported.
func TestRootScoreGradesWithCodeNumberAndScriptedJudgeGraders(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // the built binary in its own folder; sandboxed graders wait
	bin := buildLoomEval(t)
	dir := t.TempDir()
	cases := `{"id":"mean","task":"Write solution.py with mean(xs); print mean([1,2,4]).","graders":[` +
		`{"type":"code","name":"hidden_tests","file":"graders/mean.py"},` +
		`{"type":"number","name":"printed_mean","expected":2.3333333,"abs_tol":0.005},` +
		`{"type":"model","name":"explains","rubric":"The answer must say \"mean\".","required":false}]}` + "\n"
	trial := func(n int, code, answer string) string {
		b, _ := json.Marshal(map[string]any{"case_id": "mean", "trial": n, "model_label": "scripted", "trace_id": "t", "success": true,
			"transcript": map[string]any{"answer": answer, "files": map[string]string{"solution.py": code}}})
		return string(b) + "\n"
	}
	good := "def mean(xs):\n    return sum(xs) / len(xs) if xs else 0\n"
	empty := "def mean(xs):\n    return sum(xs) / len(xs) if xs else 1/0\n" // crashes on the hidden empty-list test
	trials := trial(0, good, "The mean is 2.33.") + trial(1, empty, "mean = 2.333") + trial(2, good, "It is 2.4.")
	writeFiles(t, dir, map[string]string{
		"cases.jsonl":  cases,
		"trials.jsonl": trials,
		"graders/mean.py": `from loomwork_checks import run_checks

def grade(transcript, outcome):
    return run_checks("mean", [(([1, 2, 4],), 7 / 3), (([],), 0)])
`,
	})
	stdout, stderr, code := runBinary(t, bin, dir, envWithoutKeys(), "score", "trials.jsonl", "--cases", "cases.jsonl", "--judge", "scripted", "--format", "json")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var rep struct {
		Suite struct {
			Cases []struct {
				Results []struct {
					Success bool `json:"success"`
					Grades  []struct {
						Name, Reason string
						Passed       bool
						Judge        *struct {
							ModelLabel string `json:"model_label"`
						}
					} `json:"grades"`
				} `json:"results"`
			} `json:"cases"`
			Graders []struct {
				Name   string `json:"name"`
				Passed int    `json:"passed"`
				Trials int    `json:"trials"`
			} `json:"graders"`
			Judge struct {
				Calls  int            `json:"calls"`
				Labels map[string]int `json:"model_labels"`
			} `json:"judge"`
			TotalCostUSD *float64 `json:"total_cost_usd"`
		} `json:"candidate"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	res := rep.Suite.Cases[0].Results
	got := []bool{res[0].Success, res[1].Success, res[2].Success}
	if got[0] != true || got[1] != false || got[2] != false {
		t.Fatalf("successes %v, want [true false false]: trial 1 fails the hidden test, trial 2 the tolerance", got)
	}
	if r := res[1].Grades[0].Reason; !strings.Contains(r, "ZeroDivisionError") {
		t.Errorf("hidden test failure reason: %q", r)
	}
	if j := res[0].Grades[2].Judge; j == nil || j.ModelLabel != "scripted" {
		t.Errorf("judge not labelled scripted: %+v", res[0].Grades[2])
	}
	want := map[string]int{"hidden_tests": 2, "printed_mean": 2, "explains": 2}
	for _, g := range rep.Suite.Graders {
		if g.Trials != 3 || g.Passed != want[g.Name] {
			t.Errorf("grader %s: %d/%d, want %d/3", g.Name, g.Passed, g.Trials, want[g.Name])
		}
	}
	if rep.Suite.Judge.Calls != 6 || rep.Suite.Judge.Labels["scripted"] != 3 { // two samples a grade
		t.Errorf("judge totals: %+v", rep.Suite.Judge)
	}
	// The text report names every grader with its interval, and the judge.
	stdout, _, code = runBinary(t, bin, dir, envWithoutKeys(), "score", "trials.jsonl", "--cases", "cases.jsonl", "--judge", "scripted")
	for _, w := range []string{"grader hidden_tests (code, required): 2/3 trials over 1 cases, pass rate", "grader explains (model, optional)", "judge        6 calls",
		"judge        self-consistency: the samples split on 0 of 3 model grades, 0.000 [0.000, 0.561] (95% Wilson) (undecided: failed)"} {
		if code != ExitOK || !strings.Contains(stdout, w) {
			t.Errorf("text report lacks %q (exit %d):\n%s", w, code, stdout)
		}
	}
	// Without a judge, a model grader that has no recorded verdict is bad
	// input, named.
	_, stderr, code = runBinary(t, bin, dir, envWithoutKeys(), "score", "trials.jsonl", "--cases", "cases.jsonl")
	if code != ExitUsage || !strings.Contains(stderr, `grader "explains"`) || !strings.Contains(stderr, "needs a judge") {
		t.Errorf("no judge: exit %d: %s", code, stderr)
	}
	// grade records the verdicts once; score then reuses the costly ones
	// (sandbox, judge) without a judge or a sandbox run, and says so.
	_, stderr, code = runBinary(t, bin, dir, envWithoutKeys(), "grade", "trials.jsonl", "--cases", "cases.jsonl", "--judge", "scripted", "--out", "graded.jsonl")
	if code != ExitOK || !strings.Contains(stderr, "graded 3 trials: 9 verdicts reached now, 0 kept as recorded (0 of them decided again from their recorded judge replies); 6 passed, 3 failed") ||
		!strings.Contains(stderr, "judge: self-consistency: the samples split on 0 of 3 model grades") {
		t.Fatalf("grade: exit %d: %s", code, stderr)
	}
	stdout, stderr, code = runBinary(t, bin, dir, envWithoutKeys(), "score", "graded.jsonl", "--cases", "cases.jsonl")
	if code != ExitOK || !strings.Contains(stdout, "6 code or model verdicts kept as the trials recorded them") || !strings.Contains(stdout, "grader hidden_tests (code, required): 2/3") {
		t.Errorf("score of graded trials: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code = runBinary(t, bin, dir, envWithoutKeys(), "grade", "graded.jsonl", "--cases", "cases.jsonl", "--out", "graded.jsonl"); code != ExitUsage || !strings.Contains(stderr, "is the input file") {
		t.Errorf("grade onto its input: exit %d: %s", code, stderr)
	}
}

// score --judge-config sends model graders to a provider through the
// gateway (here the OpenAI wire-format fake), and the judge's tokens and
// cost are reported as the judge's.
func TestScoreJudgeConfigAsksTheProvider(t *testing.T) {
	const key = "sk-judge-test-0123456789"
	srv := providertest.NewOpenAI(t, key)
	for range 2 { // the model grader's two samples
		srv.Enqueue(providertest.OpenAICompletion(providertest.OpenAIAnswer{Model: "gpt-4o-mini-2024-07-18",
			Content: `{"score": 0.9, "passed": true, "reason": "names the pool"}`, Prompt: 500, Completion: 20}))
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"judge.json":   `{"provider": "openai", "model": "gpt-4o-mini", "base_url": "` + srv.URL + `/v1", "api_key_env": "JUDGE_KEY"}`,
		"cases.jsonl":  `{"id":"c","task":"Why did checkout fail?","graders":[{"type":"model","name":"rubric","rubric":"Names the connection pool."}]}` + "\n",
		"trials.jsonl": `{"case_id":"c","trial":0,"model_label":"live","trace_id":"t","success":true,"cost_usd":0.01,"transcript":{"answer":"The connection pool ran dry."}}` + "\n",
	})
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		if k == "JUDGE_KEY" {
			return key
		}
		return ""
	}}
	err := m.Run(context.Background(), []string{"score", filepath.Join(dir, "trials.jsonl"), "--cases", filepath.Join(dir, "cases.jsonl"),
		"--judge-config", filepath.Join(dir, "judge.json")})
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if srv.Count() != 2 {
		t.Fatalf("%d requests at the provider, want 2", srv.Count())
	}
	got := out.String()
	for _, w := range []string{"grader rubric (model, required): 1/1 trials", "judge        2 calls, 1000 input + 40 output tokens", "models gpt-4o-mini-2024-07-18", "grades by label: live 1",
		"cost         total $0.010000"} {
		if !strings.Contains(got, w) {
			t.Errorf("report lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got+errb.String(), key) {
		t.Error("the judge's key appears in the output")
	}
}
