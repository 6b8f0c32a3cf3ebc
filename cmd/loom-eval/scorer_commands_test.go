package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

const scorerTestdata = "../../scorer/testdata"

// scorerCLI runs one loom-eval command in-process and returns stdout and
// the exit code main would use.
func scorerCLI(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), args)
	return out.String(), exitCode(err, &errb), err
}

func TestRollupCommandMapsOTLPJSONAndPricesByStructure(t *testing.T) {
	out, code, err := scorerCLI(t, "rollup", "testdata/scorer/traces.otlp.jsonl", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	var rs []map[string]any
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if len(rs) != 2 {
		t.Fatalf("%d rollups, want 2 (spans of one trace arrive on two lines)", len(rs))
	}
	r := rs[0]
	// Hand-computed: the agent span repeats its children's usage and is
	// not billed; 3000 of chat 1's 4000 input tokens were cached.
	want := (1000*2.50 + 3000*1.25 + 200*10.0 + 8000*2.50 + 500*10.0) / 1e6
	if r["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || r["duration_ms"].(float64) != 1000 || r["critical_path_ms"].(float64) != 1000 ||
		r["tokens_in"].(float64) != 12000 || r["tokens_out"].(float64) != 700 || r["model_calls"].(float64) != 3 ||
		r["tool_calls"].(float64) != 1 || r["error_count"].(float64) != 1 || r["span_count"].(float64) != 5 {
		t.Errorf("rollup = %v", r)
	}
	if c, _ := r["cost_usd"].(float64); c < want-1e-12 || c > want+1e-12 {
		t.Errorf("cost_usd = %v, want %v", r["cost_usd"], want)
	}
	if len(r["critical_path"].([]any)) != 5 {
		t.Errorf("critical_path = %v", r["critical_path"])
	}
	if rs[1]["cost_usd"] != nil || rs[1]["unpriced_models"].([]any)[0] != "my-local-model" {
		t.Errorf("unknown model: cost_usd %v unpriced %v", rs[1]["cost_usd"], rs[1]["unpriced_models"])
	}
	text, code, _ := scorerCLI(t, "rollup", "testdata/scorer/traces.otlp.jsonl")
	if code != ExitOK || !strings.Contains(text, "critical path 1000.000 ms") || !strings.Contains(text, `cost           unknown: "chat my-local-model" (span b0000000) model "my-local-model" is not in the price table`) {
		t.Errorf("text output:\n%s", text)
	}
}

// The same spans in another order give the same bytes: rollups sum and
// list in canonical order (start, span id), not in arrival order.
func TestRollupCommandIgnoresSpanOrder(t *testing.T) {
	data, err := os.ReadFile("testdata/scorer/traces.otlp.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	slices.Reverse(lines)
	reversed := filepath.Join(t.TempDir(), "reversed.otlp.jsonl")
	if err := os.WriteFile(reversed, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range [][]string{{"--json"}, nil} {
		a, codeA, _ := scorerCLI(t, append([]string{"rollup", "testdata/scorer/traces.otlp.jsonl"}, format...)...)
		b, codeB, _ := scorerCLI(t, append([]string{"rollup", reversed}, format...)...)
		if codeA != ExitOK || codeB != ExitOK || a != b {
			t.Errorf("rollup %v depends on the order of lines (exit %d, %d):\n%s\n---\n%s", format, codeA, codeB, a, b)
		}
	}
}

func TestRollupCommandNamesTheMalformedLine(t *testing.T) {
	_, code, err := scorerCLI(t, "rollup", "--json", "testdata/scorer/malformed.otlp.jsonl")
	if code != ExitUsage || err == nil || !strings.Contains(err.Error(), "malformed.otlp.jsonl:2:") {
		t.Fatalf("exit %d err %v, want exit 2 naming line 2", code, err)
	}
	if _, code, _ := scorerCLI(t, "rollup"); code != ExitUsage {
		t.Errorf("no FILE: exit %d", code)
	}
}

func TestScoreCommandWritesEveryFormat(t *testing.T) {
	args := []string{"score", filepath.Join(scorerTestdata, "candidate.jsonl"), "--cases", filepath.Join(scorerTestdata, "cases.jsonl"),
		"--against", filepath.Join(scorerTestdata, "baseline.jsonl")}
	text, code, err := scorerCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	for _, s := range []string{"regressed: cite-docs", "1 new failures [cite-docs]", "missing from baseline: new-case", "missing from candidate: dropped-case", "scripted ×6", "exact McNemar"} {
		if !strings.Contains(text, s) {
			t.Errorf("text report lacks %q:\n%s", s, text)
		}
	}
	x, _, _ := scorerCLI(t, append(args, "--format", "junit")...)
	var doc struct {
		Failures int `xml:"failures,attr"`
	}
	if err := xml.Unmarshal([]byte(x), &doc); err != nil || doc.Failures != 1 {
		t.Errorf("junit: failures=%d err=%v\n%s", doc.Failures, err, x)
	}
	j, _, _ := scorerCLI(t, append(args, "--format", "json")...)
	if !json.Valid([]byte(j)) {
		t.Error("--format json is not JSON")
	}
	// Same seed, same report.
	j2, _, _ := scorerCLI(t, append(args, "--format", "json")...)
	if j != j2 {
		t.Error("two runs with the same seed differ")
	}
}

func TestScoreCommandRejectsBadInputWithExit2(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "trials.jsonl")
	os.WriteFile(bad, []byte(`{"case_id":"a","trial":0,"model_label":"live","trace_id":"x","success":true}`+"\n"+`{"case_id":"a","tri`), 0o644)
	_, code, err := scorerCLI(t, "score", bad)
	if code != ExitUsage || !strings.Contains(err.Error(), "trials.jsonl:2") {
		t.Errorf("truncated file: exit %d err %v", code, err)
	}
	_, code, err = scorerCLI(t, "score", filepath.Join(scorerTestdata, "candidate.jsonl"), "--format", "yaml")
	if code != ExitUsage {
		t.Errorf("bad format: exit %d err %v", code, err)
	}
	// A trial for a case the case file does not define.
	_, code, err = scorerCLI(t, "score", filepath.Join(scorerTestdata, "baseline.jsonl"), "--cases", filepath.Join(scorerTestdata, "policy.json"))
	if code != ExitUsage {
		t.Errorf("policy passed as cases: exit %d err %v", code, err)
	}
}

func TestGateCommandExitCodes(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--candidate", filepath.Join(scorerTestdata, "candidate.jsonl"), "--baseline", filepath.Join(scorerTestdata, "baseline.jsonl"),
		"--cases", filepath.Join(scorerTestdata, "cases.jsonl")}

	junit := filepath.Join(dir, "gate.xml")
	out, code, err := scorerCLI(t, append([]string{"gate", "--policy", filepath.Join(scorerTestdata, "policy.json"), "--junit", junit}, base...)...)
	if code != ExitFailure || !errors.As(err, new(*ExitError)) || !strings.Contains(out, "Gate: FAIL") {
		t.Fatalf("regressing candidate: exit %d err %v\n%s", code, err, out)
	}
	if b, err := os.ReadFile(junit); err != nil || !bytes.Contains(b, []byte(`name="gate"`)) {
		t.Errorf("--junit file: %v\n%s", err, b)
	}

	lenient := filepath.Join(dir, "lenient.json")
	os.WriteFile(lenient, []byte(`{"max_new_failures": 1, "must_pass": ["any-of-two"]}`), 0o644)
	cases := filepath.Join(dir, "cases.jsonl")
	b, _ := os.ReadFile(filepath.Join(scorerTestdata, "cases.jsonl"))
	os.WriteFile(cases, bytes.ReplaceAll(b, []byte(`"must_pass":true,`), nil), 0o644)
	args := append([]string{"gate", "--policy", lenient}, base...)
	args[len(args)-1] = cases
	if out, code, err := scorerCLI(t, args...); code != ExitOK {
		t.Errorf("lenient policy: exit %d err %v\n%s", code, err, out)
	}

	badPolicy := filepath.Join(dir, "bad.json")
	os.WriteFile(badPolicy, []byte(`{"max_new_failures": -1}`), 0o644)
	if _, code, err := scorerCLI(t, append([]string{"gate", "--policy", badPolicy}, base...)...); code != ExitUsage || !strings.Contains(err.Error(), "max_new_failures") {
		t.Errorf("bad policy: exit %d err %v", code, err)
	}
	if _, code, _ := scorerCLI(t, "gate", "--policy", lenient); code != ExitUsage {
		t.Errorf("no candidate: exit %d", code)
	}
	// score --gate is the same gate.
	if _, code, _ := scorerCLI(t, "score", filepath.Join(scorerTestdata, "candidate.jsonl"), "--against", filepath.Join(scorerTestdata, "baseline.jsonl"),
		"--cases", filepath.Join(scorerTestdata, "cases.jsonl"), "--gate", filepath.Join(scorerTestdata, "policy.json")); code != ExitFailure {
		t.Errorf("score --gate: exit %d", code)
	}
}

func TestScoreCommandResolvesTraceIDsFromARealStore(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "traces.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	spans := []store.Span{
		{TraceID: tid, SpanID: "a000000000000001", Name: "invoke_agent", Kind: "internal", StatusCode: store.StatusOK, ServiceName: "agent",
			Operation: "invoke_agent", StartTime: t0, EndTime: t0.Add(2 * time.Second),
			Attributes: store.Attributes{semconv.AttrModelLabel: "scripted"}},
		{TraceID: tid, SpanID: "a000000000000002", ParentSpanID: "a000000000000001", Name: "execute_tool search", Kind: "internal", StatusCode: store.StatusOK,
			ServiceName: "agent", Operation: "execute_tool", ToolName: "search", RetrievedDocs: []string{"docs/retries.md"},
			StartTime: t0.Add(100 * time.Millisecond), EndTime: t0.Add(500 * time.Millisecond)},
		{TraceID: tid, SpanID: "a000000000000003", ParentSpanID: "a000000000000001", Name: "chat gpt-4o-mini", Kind: "client", StatusCode: store.StatusOK,
			ServiceName: "agent", Operation: "chat", RequestModel: "gpt-4o-mini", HasUsage: true, InputTokens: 10000, OutputTokens: 500,
			CitedDocs: []string{"docs/retries.md"}, StartTime: t0.Add(600 * time.Millisecond), EndTime: t0.Add(1900 * time.Millisecond)},
	}
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	st.Shutdown(context.Background())
	trials := filepath.Join(dir, "trials.jsonl")
	os.WriteFile(trials, []byte(`{"case_id":"cite-docs","trial":0,"model_label":"scripted","trace_id":"`+tid+`"}`+"\n"), 0o644)
	cases := filepath.Join(dir, "cases.jsonl")
	os.WriteFile(cases, []byte(`{"id":"cite-docs","task":"t","expected_tools":["search"],"required_evidence":["docs/retries.md"],"budgets":{"ms":5000,"usd":0.01}}`+"\n"), 0o644)

	// Without the store the trial lacks "success": a usage error naming it.
	if _, code, err := scorerCLI(t, "score", trials, "--cases", cases); code != ExitUsage || !strings.Contains(err.Error(), `"success"`) {
		t.Fatalf("without --store: exit %d err %v", code, err)
	}
	out, code, err := scorerCLI(t, "score", trials, "--cases", cases, "--store", dbPath, "--format", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	var rep struct {
		Candidate struct {
			Cases []struct {
				Results []struct {
					Success    bool     `json:"success"`
					Passed     bool     `json:"passed"`
					Score      float64  `json:"score"`
					DurationMS float64  `json:"duration_ms"`
					CostUSD    *float64 `json:"cost_usd"`
				} `json:"results"`
			} `json:"cases"`
		} `json:"candidate"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	r := rep.Candidate.Cases[0].Results[0]
	want := (10000*0.15 + 500*0.60) / 1e6
	if !r.Success || !r.Passed || r.Score != 1 || r.DurationMS != 2000 || r.CostUSD == nil || *r.CostUSD < want-1e-12 || *r.CostUSD > want+1e-12 {
		t.Errorf("trial from stored trace = %+v (cost %v, want %v)", r, r.CostUSD, want)
	}
	os.WriteFile(trials, []byte(`{"case_id":"cite-docs","trial":0,"model_label":"scripted","trace_id":"00000000000000000000000000000009"}`+"\n"), 0o644)
	if _, code, err := scorerCLI(t, "score", trials, "--store", dbPath); code != ExitUsage || !strings.Contains(err.Error(), "not in the store") {
		t.Errorf("missing trace: exit %d err %v", code, err)
	}
}

// `score TRIALS` with no --cases scores the trials against their cases when
// it can find them, and otherwise refuses to print a pass rate that is each
// trial's own account of finishing (issue 40: the committed baseline scored
// 1.000 without --cases and 0.667 with them). From inside baselines/, the
// journals the trials name from the repository root are found too.
func TestScoreFindsTheTrialsCasesOrRefusesAPassRateWithoutOutcomes(t *testing.T) {
	t.Chdir("../..")
	want := "pass rate              0.667"
	out, code, err := scorerCLI(t, "score", "baselines/baseline.trials.jsonl")
	if code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("score baselines/baseline.trials.jsonl: exit %d (%v), want %q:\n%s", code, err, want, out)
	}
	t.Chdir("baselines")
	if out, code, err := scorerCLI(t, "score", "baseline.trials.jsonl"); code != ExitOK || !strings.Contains(out, want) {
		t.Fatalf("from inside baselines/: exit %d (%v), want %q:\n%s", code, err, want, out)
	}

	// Trials with no case file beside them: refused, naming the flags.
	dir := t.TempDir()
	trials := filepath.Join(dir, "trials.jsonl")
	os.WriteFile(trials, []byte(`{"case_id":"a","trial":0,"model_label":"live","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","success":true}`+"\n"), 0o644)
	_, code, err = scorerCLI(t, "score", trials)
	if code != ExitUsage || err == nil || !strings.Contains(err.Error(), "--cases") || !strings.Contains(err.Error(), "--no-cases") {
		t.Fatalf("no case file: exit %d (%v), want %d naming --cases and --no-cases", code, err, ExitUsage)
	}
	out, code, err = scorerCLI(t, "score", trials, "--no-cases")
	if code != ExitOK || !strings.Contains(out, "no case file: success is each trial's own account") {
		t.Fatalf("--no-cases: exit %d (%v):\n%s", code, err, out)
	}
}
