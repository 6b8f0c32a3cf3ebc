package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/tracecases"
)

const toyAgentDir = "../../scripts/toyagent"

// startServeReady runs `loom-eval serve` in-process on free loopback ports and
// returns its ready file's contents; the server stops at the test's end.
func startServeReady(t *testing.T, dbPath string) ServeReady {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	ctx, stop := context.WithCancel(context.Background())
	var serveErr bytes.Buffer
	serve := &Main{Stdout: io.Discard, Stderr: &serveErr, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		done <- serve.Run(ctx, []string{"serve", "--store", dbPath, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
			"--ui-addr", "off", "--ready-file", ready, "--log-level", "warn"})
	}()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve exited with %v; stderr: %s", err, serveErr.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop after its context ended")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(ready)
		if err == nil {
			var r ServeReady
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("ready file: %v\n%s", err, b)
			}
			return r
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited before it was ready: %v; stderr: %s", err, serveErr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready after 30s; stderr: %s", serveErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// buildToyAgent builds scripts/toyagent: an agent off Loomwork's runtime,
// sending over OTLP with the OpenTelemetry Go SDK only.
func buildToyAgent(t *testing.T) string {
	t.Helper()
	return buildShared(t, "toyagent", toyAgentDir, ".")
}

func runToyAgent(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("toyagent %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errOut.String())
	}
	return out.String()
}

// TestFromTracesToyAgentToGate is the worked example of docs/scoring.md
// ("Any agent's traces become cases"), with the numbers a user sees: a
// toy agent that is not on Loomwork's runtime sends its traces to a real
// serve, cases from-traces makes cases (with a graders file) and trials,
// score grades them from the stored traces, and the gate fails a
// candidate that rounds to one decimal.
func TestFromTracesToyAgentToGate(t *testing.T) {
	testtier.Slow(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "traces.db")
	ready := startServeReady(t, db)
	toy := buildToyAgent(t)
	tasks := filepath.Join(toyAgentDir, "tasks.json")
	graders := filepath.Join(toyAgentDir, "graders.jsonl")
	prices := filepath.Join(toyAgentDir, "prices.json")

	out := runToyAgent(t, toy, "--endpoint", ready.GRPCAddr, "--insecure", "--tasks", tasks, "--trials", "2", "--service-version", "1")
	for _, want := range []string{"mean-trap trial 0: The mean is 96.12.", "median-unsorted trial 1: The median is 9.",
		"Sent 8 traces (4 tasks × 2 trials, 0 failed runs)"} {
		if !strings.Contains(out, want) {
			t.Errorf("toyagent output lacks %q:\n%s", want, out)
		}
	}
	// A trace without loomwork.case.id, from another sender, in the same
	// store: the demo's.
	demoOut, _, err := scorerCLI(t, "demo", "--endpoint", ready.GRPCAddr, "--ui", "off")
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, demoOut)
	}
	demoTrace := regexp.MustCompile(`Trace ID: ([0-9a-f]{32})`).FindStringSubmatch(demoOut)[1]

	cases, baseline := filepath.Join(dir, "cases.jsonl"), filepath.Join(dir, "baseline.jsonl")
	out, code, err := scorerCLI(t, "cases", "from-traces", "--store", db, "--attr", "service.version=1",
		"--graders", graders, "--cases-out", cases, "--trials-out", baseline)
	if code != ExitOK {
		t.Fatalf("from-traces: exit %d: %v\n%s", code, err, out)
	}
	for _, want := range []string{
		"Read 8 traces from " + db + " (9 listed for the time, service and agent filters, 1 left out by --attr): 4 cases, 8 trials.",
		"Wrote 4 cases to " + cases + " and 8 trials to " + baseline + ".",
		"Graders from " + graders + " on 4 of 4 cases.",
		"Traces without loomwork.case.id: 0.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("from-traces output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^mean-trap\s+2\s+loomwork.trial\s+calculator\s+formulas/mean.md\s+3$`).MatchString(out) {
		t.Errorf("from-traces table lacks the mean-trap row (2 trials numbered by loomwork.trial, calculator, formulas/mean.md, 3 graders):\n%s", out)
	}
	caseBytes, _ := os.ReadFile(cases)
	trialBytes, _ := os.ReadFile(baseline)
	if first := strings.SplitN(string(caseBytes), "\n", 2)[0]; !strings.HasPrefix(first, `{"id":"max-list","task":"What is the maximum of 4, 17 and 11?","expected_tools":["calculator"],"required_evidence":["formulas/max.md"],`) ||
		!strings.Contains(first, `"tags":["from-traces"],"graders":[{"type":"contains","value":"17"}`) {
		t.Errorf("first case line = %s", first)
	}
	if n := strings.Count(string(trialBytes), "\n"); n != 8 || !strings.Contains(string(trialBytes), `{"case_id":"mean-trap","trial":1,"model_label":"scripted","model":"toy-calculator-2026-01","agent":"calculator","trace_id":"`) {
		t.Errorf("trials file (%d lines):\n%s", n, trialBytes)
	}

	// Again: refused without --force; with it, the same bytes.
	if _, code, err := scorerCLI(t, "cases", "from-traces", "--store", db, "--attr", "service.version=1", "--cases-out", cases); code != ExitUsage ||
		!strings.Contains(err.Error(), "--cases-out "+cases+" exists; add --force") {
		t.Errorf("existing --cases-out: exit %d, %v", code, err)
	}
	if _, code, err := scorerCLI(t, "cases", "from-traces", "--store", db, "--attr", "service.version=1", "--graders", graders,
		"--cases-out", cases, "--trials-out", baseline, "--force"); code != ExitOK {
		t.Fatalf("--force: exit %d: %v", code, err)
	}
	caseBytes2, _ := os.ReadFile(cases)
	trialBytes2, _ := os.ReadFile(baseline)
	if !bytes.Equal(caseBytes, caseBytes2) || !bytes.Equal(trialBytes, trialBytes2) {
		t.Errorf("a second from-traces wrote other bytes")
	}

	// Without the attribute filter the demo's trace comes too, as a case
	// of its own, and --json says so.
	out, code, err = scorerCLI(t, "cases", "from-traces", "--store", db, "--trials-out", filepath.Join(dir, "all.jsonl"), "--json")
	outFormat, _, _ := scorerCLI(t, "cases", "from-traces", "--format", "json", "--store", db, "--trials-out", filepath.Join(dir, "all.jsonl"), "--force")
	if out != outFormat {
		t.Errorf("--json and --format json print differently:\n%s\n%s", out, outFormat)
	}
	var rep struct {
		tracecases.Report
		TrialsOut string `json:"trials_out"`
	}
	if code != ExitOK || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("from-traces --json: exit %d, %v\n%s", code, err, out)
	}
	if rep.Read != 9 || rep.Cases != 5 || rep.Trials != 9 || len(rep.WithoutCaseID) != 1 || rep.WithoutCaseID[0].TraceID != demoTrace ||
		rep.WithoutCaseID[0].CaseID != "trace-"+demoTrace[:12] {
		t.Errorf("--json report: read %d, cases %d, trials %d, without case id %+v", rep.Read, rep.Cases, rep.Trials, rep.WithoutCaseID)
	}

	// score --store grades the trials from their stored traces.
	out, code, err = scorerCLI(t, "score", baseline, "--cases", cases, "--store", db, "--prices", prices, "--json")
	if code != ExitOK {
		t.Fatalf("score: exit %d: %v\n%s", code, err, out)
	}
	var scored struct {
		Candidate struct {
			NTrials  int                        `json:"n_trials"`
			PassRate struct{ Estimate float64 } `json:"pass_rate"`
			Cases    []scoredCase               `json:"cases"`
			Graders  []struct {
				Name           string
				Passed, Trials int
			} `json:"graders"`
		} `json:"candidate"`
	}
	if err := json.Unmarshal([]byte(out), &scored); err != nil {
		t.Fatalf("score --json: %v\n%s", err, out)
	}
	passes := map[string]int{}
	for _, c := range scored.Candidate.Cases {
		passes[c.CaseID] = c.Passes
	}
	// The rounded mean passes with its tolerance; the wrong median fails.
	wantPasses := map[string]int{"mean-trap": 2, "sum-basic": 2, "median-unsorted": 0, "max-list": 2}
	for id, want := range wantPasses {
		if passes[id] != want {
			t.Errorf("score: case %s passed %d of 2 trials, want %d", id, passes[id], want)
		}
	}
	if scored.Candidate.NTrials != 8 || scored.Candidate.PassRate.Estimate != 0.75 {
		t.Errorf("score: %d trials, pass rate %v; want 8 and 0.75", scored.Candidate.NTrials, scored.Candidate.PassRate.Estimate)
	}
	graderPasses := map[string]int{}
	for _, g := range scored.Candidate.Graders {
		graderPasses[g.Name] = g.Passed
	}
	// The trap: the same expected value without a tolerance rejects 96.12
	// (an optional grader: reported, deciding nothing).
	if graderPasses["mean within 0.005"] != 2 || graderPasses["mean, exact (the trap)"] != 0 || graderPasses["at most 300 tokens"] != 2 {
		t.Errorf("score: grader passes = %v", graderPasses)
	}
	for _, c := range scored.Candidate.Cases {
		if c.CaseID == "mean-trap" && !strings.Contains(c.Results[0].Grades[0].Reason, "read 96.12 from the answer; |96.12 - 96.124991| = 0.004991 within abs_tol 0.005") {
			t.Errorf("mean-trap grade = %+v", c.Results[0].Grades)
		}
	}

	// A candidate that rounds to one decimal: the gate fails on mean-trap.
	runToyAgent(t, toy, "--endpoint", ready.GRPCAddr, "--insecure", "--tasks", tasks, "--trials", "2", "--service-version", "2", "--precision", "1")
	candidate := filepath.Join(dir, "candidate.jsonl")
	if out, code, err := scorerCLI(t, "cases", "from-traces", "--store", db, "--attr", "service.version=2", "--trials-out", candidate); code != ExitOK ||
		!strings.Contains(out, "Read 8 traces") {
		t.Fatalf("from-traces candidate: exit %d: %v\n%s", code, err, out)
	}
	out, code, err = scorerCLI(t, "gate", "--policy", "../../baselines/policy.json", "--cases", cases, "--baseline", baseline,
		"--candidate", candidate, "--store", db, "--prices", prices)
	if code != ExitFailure || err == nil || !strings.Contains(err.Error(), "gate failed: case_regressions") {
		t.Fatalf("gate: exit %d, %v; want exit 1 on case_regressions\n%s", code, err, out)
	}
	for _, want := range []string{"regressed: mean-trap", "read 96.1 from the answer; |96.1 - 96.124991| = 0.024991 outside abs_tol 0.005",
		"[FAIL] case_regressions: 1 cases regressed by their own trials [mean-trap]"} {
		if !strings.Contains(out, want) {
			t.Errorf("gate output lacks %q:\n%s", want, out)
		}
	}
	// The unchanged baseline against itself passes.
	if out, code, err := scorerCLI(t, "gate", "--policy", "../../baselines/policy.json", "--cases", cases, "--baseline", baseline,
		"--candidate", baseline, "--store", db, "--prices", prices); code != ExitOK {
		t.Errorf("gate of the baseline against itself: exit %d, %v\n%s", code, err, out)
	}
}

type scoredCase struct {
	CaseID  string `json:"case_id"`
	Passes  int    `json:"passes"`
	Results []struct {
		Grades []struct {
			Name, Reason string
			Passed       bool
		} `json:"grades"`
	} `json:"results"`
}

// TestCasesFromTracesBadInput: usage errors name the flag or the file and
// line, and nothing is written.
func TestCasesFromTracesBadInput(t *testing.T) {
	testtier.Slow(t)
	dir := t.TempDir()
	// Three one-span traces without a case id (cases trace-<12 hex>).
	db := tracesStore(t)
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badGraders := write("graders.jsonl", `{"case_id": "x", "graders": [{"type": "contains", "value": "y"}]}`+"\n")
	badType := write("type.jsonl", "\n"+`{"case_id": "trace-`+tracesA[:12]+`", "graders": [{"type": "numbr"}]}`+"\n")
	codeGrader := write("code.jsonl", `{"case_id": "trace-`+tracesA[:12]+`", "graders": [{"type": "code", "file": "graders/check.py"}]}`+"\n")
	out := filepath.Join(dir, "out.jsonl")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cases"}, ExitUsage, "want a subcommand"},
		{[]string{"cases", "to-traces"}, ExitUsage, `unknown subcommand "to-traces"`},
		{[]string{"cases", "from-traces", "--store", db}, ExitUsage, "give --cases-out FILE, --trials-out FILE or both"},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--since", "yesterday"}, ExitUsage, `--since: "yesterday" is neither a duration`},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--since", "-1h"}, ExitUsage, "--since: \"-1h\" is negative"},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--since", "1h", "--until", "2h"}, ExitUsage, "--until"},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--attr", "novalue"}, ExitUsage, `"novalue" is not KEY=VALUE`},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--attr", "a=1", "--attr", "a=2"}, ExitUsage, "a is given twice"},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--limit", "-2"}, ExitUsage, "--limit -2 is negative"},
		{[]string{"cases", "from-traces", "--store", db, "--cases-out", out, "--trials-out", out}, ExitUsage, "are the same file"},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--graders", badGraders}, ExitUsage, "needs --cases-out"},
		{[]string{"cases", "from-traces", "--store", db, "--cases-out", out, "--graders", filepath.Join(dir, "none.jsonl")}, ExitUsage, "--graders: open"},
		{[]string{"cases", "from-traces", "--store", "postgres://x", "--cases-out", out}, ExitUsage, "--store"},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--service", "nobody"}, ExitFailure, "no traces match (0 listed"},
		{[]string{"cases", "from-traces", "--store", db, "--trials-out", out, "--attr", "service.version=9"}, ExitFailure, "no traces match (3 listed for the time, service and agent filters, 3 left out by --attr)"},
		{[]string{"cases", "from-traces", "--store", db, "--cases-out", out, "--graders", badGraders}, ExitUsage, badGraders + `:1: field "case_id": no case "x" came from the traces read (cases: trace-`},
		{[]string{"cases", "from-traces", "--store", db, "--cases-out", out, "--graders", badType}, ExitUsage, badType + `:2: case "trace-` + tracesA[:12] + `": field "graders[0]": type "numbr" is not a grader type`},
		{[]string{"cases", "from-traces", "--store", db, "--cases-out", out, "--graders", codeGrader}, ExitUsage, `graders[0].file "graders/check.py": code grader files are read relative to the cases file's folder`},
	} {
		_, code, err := scorerCLI(t, tc.args...)
		if code != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, %v; want exit %d naming %q", tc.args[1:], code, err, tc.code, tc.want)
		}
		if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("%v wrote %s", tc.args[1:], out)
		}
	}
}
