package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
)

// labelsCLI runs loom-eval in-process; errOut is what it printed on
// stderr followed by the error main would print.
func labelsCLI(t *testing.T, args ...string) (out, errOut string, code int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), args)
	code = exitCode(err, &stderr)
	return stdout.String(), stderr.String(), code
}

// writeGradedTrials writes trials 0..len(passed)-1 of case c1, each with
// a model grade "helpful" (passed[i], judged by a live gpt-4o-mini) and a
// code grade "tests_pass".
func writeGradedTrials(t *testing.T, dir string, passed []bool) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	ok, cost := true, 0.000123
	for i, p := range passed {
		tr := datasets.Trial{CaseID: "c1", Trial: i, ModelLabel: "scripted", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Success: &ok,
			Grades: []datasets.Grade{
				{Name: "helpful", Type: datasets.GraderModel, Required: true, Passed: p, Score: map[bool]float64{true: 0.9, false: 0.2}[p], Reason: "r",
					Judge: &datasets.JudgeUsage{ModelLabel: "live", Provider: "openai", Model: "gpt-4o-mini-2024-07-18", Calls: 1, InputTokens: 800, OutputTokens: 30, CostUSD: &cost}},
				{Name: "tests_pass", Type: datasets.GraderCode, Required: true, Passed: true, Score: 1, Reason: "ok"},
			}}
		if err := enc.Encode(tr); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "trials.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLabelsAddAppendsOneLabelAndRefusesADuplicate(t *testing.T) {
	dir := t.TempDir()
	labels := filepath.Join(dir, "labels.jsonl")
	out, errOut, code := labelsCLI(t, "labels", "add", "--labels", labels, "--case", "c1", "--trial", "2", "--grader", "helpful", "--pass", "--labeler", "ana", "--note", "cites the page")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := labels + `:1: trial 2 of case "c1", grader "helpful", labeler "ana": pass` + "\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	// The flags may come in any order; trial 0 is a trial.
	if _, errOut, code := labelsCLI(t, "labels", "add", "--fail", "--grader", "helpful", "--trial", "0", "--case", "c1", "--labels", labels); code != ExitOK {
		t.Fatalf("second label: exit %d: %s", code, errOut)
	}
	got, err := datasets.LoadLabels(labels)
	if err != nil {
		t.Fatal(err)
	}
	want := []datasets.Label{
		{CaseID: "c1", Trial: 2, Grader: "helpful", Passed: true, Labeler: "ana", Note: "cites the page", Line: 1},
		{CaseID: "c1", Trial: 0, Grader: "helpful", Passed: false, Line: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("file holds %+v\nwant %+v", got, want)
	}

	// Ana changing her mind is refused, naming her label's line.
	_, errOut, code = labelsCLI(t, "labels", "add", "--labels", labels, "--case", "c1", "--trial", "2", "--grader", "helpful", "--fail", "--labeler", "ana")
	if code != ExitUsage || !strings.Contains(errOut, labels+":1 already holds a label of trial 2") {
		t.Errorf("duplicate: exit %d, %s", code, errOut)
	}
	if got, _ := datasets.LoadLabels(labels); len(got) != 2 {
		t.Errorf("the duplicate was written: %d labels", len(got))
	}
}

func TestLabelsAddRejectsBadUsageAndLabelsThatPairWithNoGrade(t *testing.T) {
	dir := t.TempDir()
	labels := filepath.Join(dir, "labels.jsonl")
	base := []string{"labels", "add", "--labels", labels, "--case", "c1", "--grader", "helpful"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(base, "--pass"), "--trial N is required"},
		{append(base, "--trial", "1"), "exactly one of --pass and --fail"},
		{append(base, "--trial", "1", "--pass", "--fail"), "exactly one of --pass and --fail"},
		{append(base, "--trial", "-2", "--pass"), "non-negative"},
		{append(base, "--trial", "x", "--pass"), "invalid value"},
		{append(base, "--trial", "1", "--pass", "--labeler", " ana"), "leading or trailing space"},
		{append(base, "--trial", "1", "--pass", "extra"), `unexpected argument "extra"`},
		{[]string{"labels", "add", "--case", "c1", "--trial", "1", "--grader", "g", "--pass"}, "--labels FILE is required"},
		{[]string{"labels"}, "want a subcommand"},
		{[]string{"labels", "remove"}, `unknown subcommand "remove"`},
	} {
		_, errOut, code := labelsCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(labels); !os.IsNotExist(err) {
		t.Errorf("a refused add created the labels file (%v)", err)
	}

	// With --trials, a grader name the trial has no grade of is refused.
	trials := writeGradedTrials(t, dir, []bool{true, false})
	_, errOut, code := labelsCLI(t, append(base, "--trial", "1", "--pass", "--grader", "helpfull", "--trials", trials)...)
	if code != ExitUsage || !strings.Contains(errOut, `has no grade "helpfull" (its grades: "helpful", "tests_pass")`) {
		t.Errorf("misspelt grader: exit %d, %s", code, errOut)
	}
	_, errOut, code = labelsCLI(t, append(base, "--trial", "5", "--pass", "--trials", trials)...)
	if code != ExitUsage || !strings.Contains(errOut, "no such trial") {
		t.Errorf("unknown trial: exit %d, %s", code, errOut)
	}
	if _, errOut, code := labelsCLI(t, append(base, "--trial", "1", "--pass", "--trials", trials)...); code != ExitOK {
		t.Errorf("a label of an existing grade: exit %d, %s", code, errOut)
	}

	// A labels file that does not decode is not appended to.
	broken := filepath.Join(dir, "broken.jsonl")
	if err := os.WriteFile(broken, []byte(`{"case_id":"c1","trial":0,"grader":"helpful","passed":"yes"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = labelsCLI(t, "labels", "add", "--labels", broken, "--case", "c1", "--trial", "1", "--grader", "helpful", "--pass")
	if code != ExitUsage || !strings.Contains(errOut, broken+`:1: field "passed": wrong type`) {
		t.Errorf("broken file: exit %d, %s", code, errOut)
	}
}

func TestLabelsAgreementReportsKappaPerGraderInTextAndJSON(t *testing.T) {
	dir := t.TempDir()
	// The judge's verdicts on ten trials, and a person's labels of them:
	// agree on 7 (4 both pass, 3 both fail), judge-only pass 2, human-only
	// pass 1 — p_o 0.7, p_e 0.5, κ 0.4.
	judge := []bool{true, true, true, true, true, true, false, false, false, false}
	human := []bool{true, true, true, true, false, false, true, false, false, false}
	trials := writeGradedTrials(t, dir, append(judge, true, false)) // trials 10, 11 unlabelled
	labels := filepath.Join(dir, "labels.jsonl")
	for i, h := range human {
		verdict := "--fail"
		if h {
			verdict = "--pass"
		}
		if _, errOut, code := labelsCLI(t, "labels", "add", "--labels", labels, "--case", "c1", "--trial", strconv.Itoa(i), "--grader", "helpful", verdict, "--labeler", "ana", "--trials", trials); code != ExitOK {
			t.Fatalf("add label %d: exit %d: %s", i, code, errOut)
		}
	}
	for i := range 3 {
		if _, errOut, code := labelsCLI(t, "labels", "add", "--labels", labels, "--case", "c1", "--trial", strconv.Itoa(i), "--grader", "tests_pass", "--pass"); code != ExitOK {
			t.Fatalf("add tests_pass label: exit %d: %s", code, errOut)
		}
	}

	out, errOut, code := labelsCLI(t, "labels", "agreement", "--labels", labels, trials)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var helpful, tests string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "helpful "):
			helpful = line
		case strings.HasPrefix(line, "tests_pass "):
			tests = line
		}
	}
	if f := strings.Fields(helpful); len(f) < 13 || f[1] != "model" || f[2] != "10" || f[4] != "0.70" || f[5] != "0.40" ||
		f[8] != "4" || f[9] != "2" || f[10] != "1" || f[11] != "3" || f[12] != "live" || f[13] != "openai/gpt-4o-mini-2024-07-18" {
		t.Errorf("helpful row %q\nof\n%s", helpful, out)
	}
	// Three labels, all pass, all agreeing: κ is undefined, and the report
	// says so rather than printing a number.
	if f := strings.Fields(tests); len(f) < 7 || f[2] != "3" || f[4] != "1.00" || f[5] != "undefined" || f[6] != "[-1.00," {
		t.Errorf("tests_pass row %q", tests)
	}
	for _, want := range []string{"13 labels in " + labels, "tests_pass: every label from both raters is the same class", "tests_pass: 3 labels: κ's interval is wide", "95% interval"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}

	jsonA, errA, codeA := labelsCLI(t, "labels", "agreement", "--labels", labels, trials, "--json", "--level", "0.9")
	jsonB, errB, codeB := labelsCLI(t, "labels", "agreement", "--format", "json", "--level", "0.9", trials, "--labels", labels)
	if codeA != ExitOK || codeB != ExitOK || jsonA != jsonB {
		t.Fatalf("--json and --format json: exits %d (%s) and %d (%s), same output %v", codeA, errA, codeB, errB, jsonA == jsonB)
	}
	var rep struct {
		Level   float64 `json:"level"`
		NLabels int     `json:"n_labels"`
		Graders []struct {
			Grader    string         `json:"grader"`
			N         int            `json:"n"`
			Agreement float64        `json:"agreement"`
			Judge     string         `json:"judge"`
			Confusion map[string]int `json:"confusion"`
			Kappa     struct {
				Kappa *float64 `json:"kappa"`
				Lower float64  `json:"lower"`
				Upper float64  `json:"upper"`
				Level float64  `json:"level"`
			} `json:"kappa"`
		} `json:"graders"`
	}
	if err := json.Unmarshal([]byte(jsonA), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, jsonA)
	}
	if rep.Level != 0.9 || rep.NLabels != 13 || len(rep.Graders) != 2 {
		t.Fatalf("report %+v", rep)
	}
	h := rep.Graders[0]
	if h.Grader != "helpful" || h.N != 10 || h.Kappa.Kappa == nil || math.Abs(*h.Kappa.Kappa-0.4) > 1e-12 || h.Kappa.Level != 0.9 ||
		h.Confusion["grader_pass_human_fail"] != 2 || h.Judge != "live openai/gpt-4o-mini-2024-07-18" {
		t.Errorf("helpful %+v", h)
	}
	if g := rep.Graders[1]; g.Grader != "tests_pass" || g.Kappa.Kappa != nil || g.Kappa.Lower != -1 || g.Kappa.Upper != 1 {
		t.Errorf("tests_pass %+v: want κ null and [-1, 1]", g)
	}
}

func TestLabelsAgreementRejectsLabelsOfOtherTrialsAndBadInput(t *testing.T) {
	dir := t.TempDir()
	trials := writeGradedTrials(t, dir, []bool{true, false})
	labels := filepath.Join(dir, "labels.jsonl")
	if err := os.WriteFile(labels, []byte(`{"case_id":"c1","trial":0,"grader":"helpful","passed":true}
{"case_id":"c1","trial":9,"grader":"helpful","passed":true}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"labels", "agreement", "--labels", labels, trials}, `label on line 2 (trial 9 of case "c1", grader "helpful"): no such trial`},
		{[]string{"labels", "agreement", "--labels", empty, trials}, "holds no labels"},
		{[]string{"labels", "agreement", "--labels", filepath.Join(dir, "none.jsonl"), trials}, "none.jsonl: no such file"},
		{[]string{"labels", "agreement", "--labels", labels, filepath.Join(dir, "missing.jsonl")}, "missing.jsonl: no such file"},
		{[]string{"labels", "agreement", "--labels", labels}, "want one graded trials file"},
		{[]string{"labels", "agreement", trials}, "--labels FILE is required"},
		{[]string{"labels", "agreement", "--labels", labels, trials, "--level", "95"}, "--level must be in (0, 1)"},
		{[]string{"labels", "agreement", "--labels", labels, trials, "--format", "csv"}, "--format must be one of text, json"},
	} {
		_, errOut, code := labelsCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}
