package datasets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGraderDecodingIsStrict(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"id":"a","task":"t","graders":[{"type":"contains"}]}`, `cases.jsonl:1: field "graders[0].value": required for a contains grader`},
		{`{"id":"a","task":"t","graders":[{"type":"contians","value":"x"}]}`, `field "graders[0]": type "contians" is not a grader type`},
		{`{"id":"a","task":"t","graders":[{"type":"contains","value":"x","abs_tol":1}]}`, `field "graders[0].abs_tol": does not apply to a contains grader (it reads target, value, ignore_case)`},
		{`{"id":"a","task":"t","graders":[{"type":"contains","value":"x","vale":"y"}]}`, `field "graders[0].vale": unknown field`},
		{`{"id":"a","task":"t","graders":[{"type":"contains","value":"x"},{"type":"contains","value":"y"}]}`, `field "graders[1].name": "contains" is also graders[0]'s name`},
		{`{"id":"a","task":"t","graders":[{"type":"number","expected":1,"abs_tol":-1}]}`, `field "graders[0].abs_tol": must be a non-negative number`},
		{`{"id":"a","task":"t","graders":[{"type":"number","expected":1,"pattern":"\\d+"}]}`, `field "graders[0].pattern": needs a capture group`},
		{`{"id":"a","task":"t","graders":[{"type":"evidence_cited"}]}`, `field "graders[0].evidence": required when the case lists no required_evidence`},
		{`{"id":"a","task":"t","graders":[{"type":"trace","metric":"tokens"}]}`, `field "graders[0].max": a trace grader needs min, max or both`},
		{`{"id":"a","task":"t","graders":[{"type":"trace","metric":"latency","max":1}]}`, `field "graders[0].metric": "latency": want one of`},
		{`{"id":"a","task":"t","graders":[{"type":"trace","metric":"tokens","max":1,"span":"x"}]}`, `field "graders[0].span": required with metric critical_path_share, and only with it`},
		{`{"id":"a","task":"t","graders":[{"type":"tool_called","tool":"x","min":1.5}]}`, `field "graders[0].min": is a call count`},
		{`{"id":"a","task":"t","graders":[{"type":"tool_called","tool":"x","min":3,"max":1}]}`, `field "graders[0].min": 3 is above max 1`},
		{`{"id":"a","task":"t","graders":[{"type":"code","file":"../x.py"}]}`, `field "graders[0].file": "../x.py": want a clean path inside the case file's folder`},
		{`{"id":"a","task":"t","graders":[{"type":"code","file":"x.sh"}]}`, `a code grader is a Python file`},
		{`{"id":"a","task":"t","graders":[{"type":"model"}]}`, `field "graders[0].rubric": required for a model grader`},
		{`{"id":"a","task":"t","graders":[{"type":"pairwise","rubric":"r"}]}`, `field "graders[0].reference": required for a pairwise grader`},
		{`{"id":"a","task":"t","graders":[{"type":"json_schema","schema":3}]}`, `field "graders[0].schema": a JSON Schema is an object or a boolean`},
		{`{"id":"a","task":"t","graders":[{"type":"contains","value":3}]}`, `field "graders[0].value": wrong type: got JSON number, want string`},
		{`{"id":"a","task":"t","graders":[{"type":"equals","value":"x","target":"stdout"}]}`, `field "graders[0].target": "stdout": want "answer", "tool_result:NAME" or "file:PATH"`},
		{`{"id":"a","task":"t","graders":[{"type":"model","rubric":"r","threshold":2}]}`, `field "graders[0].threshold": must be in [0, 1]`},
	} {
		_, err := ReadCases(strings.NewReader(tc.line), "cases.jsonl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  got  %v\n  want %s", tc.line, err, tc.want)
		}
		var le *LineError
		if err != nil && !errors.As(err, &le) {
			t.Errorf("%s: not a *LineError: %T", tc.line, err)
		}
	}
	ok := `{"id":"a","task":"t","required_evidence":["d"],"graders":[{"type":"evidence_cited"},{"type":"number","name":"n","expected":96.124991,"abs_tol":0.005},{"type":"equals","name":"e","value":""},{"type":"trace","metric":"critical_path_share","span":"chat","max":0.5,"required":false}]}`
	cs, err := ReadCases(strings.NewReader(ok), "cases.jsonl")
	if err != nil || len(cs[0].Graders) != 4 || cs[0].Graders[3].IsRequired() || !cs[0].Graders[0].IsRequired() {
		t.Fatalf("valid graders: %v %+v", err, cs)
	}
}

func TestLoadCasesReadsCodeGradersBesideTheCaseFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "graders"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "graders", "check.py"), []byte("def grade(t, o):\n    return True\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cases.jsonl")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"id":"a","task":"t","graders":[{"type":"code","file":"graders/check.py"}]}` + "\n")
	cs, err := LoadCases(path)
	if err != nil || !strings.Contains(string(cs[0].Graders[0].Source), "def grade") {
		t.Fatalf("load: %v %+v", err, cs)
	}
	write("\n" + `{"id":"a","task":"t","graders":[{"type":"code","file":"graders/missing.py"}]}` + "\n")
	_, err = LoadCases(path)
	if err == nil || !strings.Contains(err.Error(), `cases.jsonl:2: field "graders[0].file": read code grader:`) {
		t.Fatalf("missing grader file: %v", err)
	}
}

func TestTrialGradesAreChecked(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"case_id":"a","trial":0,"model_label":"live","trace_id":"x","success":true,"grades":[{"name":"","type":"contains","required":true,"passed":true,"score":1,"reason":""}]}`, `field "grades[0].name": required`},
		{`{"case_id":"a","trial":0,"model_label":"live","trace_id":"x","success":true,"grades":[{"name":"g","type":"contains","required":true,"passed":true,"score":1.5,"reason":""}]}`, `field "grades[0].score": must be in [0, 1]`},
		{`{"case_id":"a","trial":0,"model_label":"live","trace_id":"x","success":true,"grades":[{"name":"g","type":"x","required":true,"passed":true,"score":1,"reason":""},{"name":"g","type":"x","required":true,"passed":true,"score":1,"reason":""}]}`, `field "grades[1].name": "g" is also grades[0]'s name`},
		{`{"case_id":"a","trial":0,"model_label":"live","trace_id":"x","success":true,"transcript":{"answer":"a","tool_calls":[{"name":"t","result":"r","extra":1}]}}`, `unknown field`},
	} {
		_, err := ReadTrials(strings.NewReader(tc.line), "trials.jsonl")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n  got  %v\n  want %s", tc.line, err, tc.want)
		}
	}
}
