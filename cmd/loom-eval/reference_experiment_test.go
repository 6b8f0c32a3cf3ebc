package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/baselines/experiment"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/conversation"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// refCLI runs loom-eval in-process with the process environment: the exit
// code, stdout and stderr.
func refCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: os.Getenv}
	err := m.Run(context.Background(), args)
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return exitCodeOf(err), out.String(), errOut.String()
}

// mustCLI is refCLI failing the test on a non-zero exit.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := refCLI(t, args...)
	if code != ExitOK {
		t.Fatalf("loom-eval %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// listedExperiments is `experiment list --json` of root.
func listedExperiments(t *testing.T, root string) []datasets.Experiment {
	t.Helper()
	var recs []datasets.Experiment
	out := mustCLI(t, "experiment", "list", "--experiments-dir", root, "--json")
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("experiment list --json: %v\n%s", err, out)
	}
	return recs
}

// refInputs are the shipped dataset and the committed case file, made
// absolute; the test then runs in a temporary folder (the .loomwork/
// caches and the default experiments root land there).
func refInputs(t *testing.T) (ds, cases string) {
	t.Helper()
	ds = shippedDatasetAbs(t)
	cases, err := filepath.Abs(filepath.Join("..", "..", "baselines", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOOMWORK_DATASET", ds)
	t.Chdir(t.TempDir())
	return ds, cases
}

// TestRunAndReplayWriteExperimentsThatListShowAndCompareRead: two
// `run --agent research --case C --trials 2` are two experiments under the
// default root, listed as the reference agent's, and `experiment compare`
// of the two works (the scripted agent is deterministic: the gate
// passes); `replay --trials-out` of the same runs writes one too.
func TestRunAndReplayWriteExperimentsThatListShowAndCompareRead(t *testing.T) {
	testtier.Slow(t)
	ds, cases := refInputs(t)
	run := []string{"run", "--agent", "research", "--case", cases, "--case-id", "mkm-156", "--trials", "2", "--dataset", ds, "--json"}
	mustCLI(t, append(run, "--journal", "a.db", "--journal-out", "a.jsonl")...)
	_, _, errOut := refCLI(t, append(run, "--journal", "b.db", "--label", "v2")...)
	if !strings.Contains(errOut, "experiment ") || !strings.Contains(errOut, experiment.DefaultRoot) {
		t.Fatalf("run did not say where its experiment went:\n%s", errOut)
	}

	recs := listedExperiments(t, experiment.DefaultRoot)
	if len(recs) != 2 {
		t.Fatalf("experiment list: %d experiments, want 2: %+v", len(recs), recs)
	}
	for _, e := range recs {
		if e.Status != datasets.ExperimentComplete || e.Target.Kind != experiment.TargetReference ||
			e.Target.Description != "reference agent research (scripted)" || e.Trials != 2 || e.Cases != 1 ||
			e.Summary.Recorded != 2 || e.ModelLabel != datasets.LabelScripted || e.Dataset.SHA256 == "" ||
			e.Agent.Params["cases_from"] != cases || e.Agent.Params["command"] != "run" {
			t.Fatalf("record = %+v", e)
		}
	}
	if recs[0].Agent.Label != "v2" || recs[1].Agent.Label != "research" {
		t.Fatalf("labels = %q, %q; want v2 (newest, --label) and research (the default)", recs[0].Agent.Label, recs[1].Agent.Label)
	}
	a, b := recs[1].ID, recs[0].ID
	out := mustCLI(t, "experiment", "show", a)
	if !strings.Contains(out, "reference agent research (scripted)") {
		t.Fatalf("experiment show:\n%s", out)
	}
	var cmp struct {
		Cases []experiment.CaseRow `json:"cases"`
		Gate  *struct {
			Passed bool `json:"passed"`
		} `json:"gate"`
	}
	out = mustCLI(t, "experiment", "compare", a, b, "--json")
	if err := json.Unmarshal([]byte(out), &cmp); err != nil {
		t.Fatalf("compare --json: %v\n%s", err, out)
	}
	if len(cmp.Cases) != 1 || cmp.Cases[0].CaseID != "mkm-156" || cmp.Cases[0].A.Trials != 2 || cmp.Cases[0].B.Trials != 2 ||
		cmp.Cases[0].A.Passes != cmp.Cases[0].B.Passes || cmp.Cases[0].A.Answer == "" || cmp.Gate == nil || !cmp.Gate.Passed {
		t.Fatalf("compare = %s", out)
	}

	// replay --trials-out: a record of the replayed runs, over --cases.
	mustCLI(t, "replay", "a.jsonl", "--trials-out", "replayed.jsonl", "--cases", cases, "--experiment-out", "exp/replayed")
	e, err := experiment.ReadRecord("exp/replayed")
	if err != nil {
		t.Fatal(err)
	}
	if e.Target.Description != "reference agent research (replayed journals)" || e.Status != datasets.ExperimentComplete ||
		e.Summary.Recorded != 2 || e.Agent.Params["command"] != "replay" {
		t.Fatalf("replay record = %+v", e)
	}
	if len(listedExperiments(t, "exp")) != 1 {
		t.Fatal("experiment list --experiments-dir exp does not list the replay's record")
	}
	mustCLI(t, "experiment", "compare", a, "exp/replayed")
	// Without --cases the cases are the runs' own tasks, kept in the folder.
	mustCLI(t, "replay", "a.jsonl", "--trials-out", "replayed2.jsonl", "--experiment-out", "exp/own")
	own, err := datasets.LoadCases(filepath.Join("exp", "own", experiment.CasesFile))
	if err != nil || len(own) != 1 || own[0].ID != "mkm-156" || !strings.HasPrefix(own[0].Task, "Syntax highlight not working") {
		t.Fatalf("the replay's own cases = %+v (%v)", own, err)
	}
	// --no-experiment writes none.
	mustCLI(t, "replay", "a.jsonl", "--trials-out", "replayed3.jsonl", "--no-experiment", "--experiments-dir", "none")
	if _, err := os.Stat("none"); !os.IsNotExist(err) {
		t.Fatalf("--no-experiment wrote %s (%v)", "none", err)
	}
}

// traceOf waits for a trace's spans to reach the store (the collector
// writes them after the run's exporter flushed) and returns them once
// want holds.
func traceOf(t *testing.T, r store.Reader, id string, want func([]store.Span) bool) []store.Span {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		spans, err := r.GetTrace(context.Background(), id)
		if err == nil && want(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s: %d spans in the store (%v) after 20s", id, len(spans), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRunTracesCaseTrialAndContentThroughTheCollector: `run --case` with
// --otlp-endpoint sends its spans to a real collector writing a real
// store: each trial's root span carries the case id and the trial, the
// chat spans carry the conversation (scripted: capture is on by default)
// as the UI's conversation view reads it, and the experiment is saved in
// that store (the UI's /experiments lists it). --capture-content=false
// leaves no content on any span.
func TestRunTracesCaseTrialAndContentThroughTheCollector(t *testing.T) {
	testtier.Slow(t)
	ds, cases := refInputs(t)
	ctx := context.Background()
	storePath, err := filepath.Abs("traces.db")
	if err != nil {
		t.Fatal(err)
	}
	b, err := startTraceBackend(ctx, storePath, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown(ctx)
	run := func(extra ...string) []runner.Result {
		out := mustCLI(t, append([]string{"run", "--agent", "research", "--case", cases, "--case-id", "mkm-156", "--trials", "2",
			"--dataset", ds, "--otlp-endpoint", b.GRPCAddr(), "--json"}, extra...)...)
		var res []runner.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 2 {
			t.Fatalf("run output: %v\n%s", err, out)
		}
		return res
	}
	chats := func(spans []store.Span) (n int) {
		for _, s := range spans {
			if s.Operation == semconv.OpChat {
				n++
			}
		}
		return n
	}
	complete := func(spans []store.Span) bool { return chats(spans) == 3 && len(spans) > 3 }

	res := run("--journal", "on.db", "--store", storePath)
	for _, r := range res {
		spans := traceOf(t, b.Reader(), r.TraceID, complete)
		var root *store.Span
		for i := range spans {
			if spans[i].ParentSpanID == "" {
				root = &spans[i]
			}
		}
		if root == nil || fmt.Sprint(root.Attributes[semconv.AttrCaseID]) != "mkm-156" || fmt.Sprint(root.Attributes[semconv.AttrTrial]) != fmt.Sprint(r.Trial) {
			t.Fatalf("trial %d: root span = %+v, want case mkm-156 trial %d", r.Trial, root, r.Trial)
		}
		for i := range spans {
			s := &spans[i]
			if s.Operation != semconv.OpChat {
				continue
			}
			c := conversation.FromSpan(s)
			if len(c.Input) < 2 || len(c.Output) != 1 || c.Input[0].Role != "system" || c.Input[1].Role != "user" ||
				!strings.HasPrefix(c.Input[1].Text(), "Syntax highlight not working") {
				t.Fatalf("trial %d: chat span %s: conversation = %+v", r.Trial, s.SpanID, c)
			}
		}
	}
	// The record names the store, and the store keeps the experiment.
	recs := listedExperiments(t, experiment.DefaultRoot)
	if len(recs) != 1 || recs[0].Store != storePath {
		t.Fatalf("records = %+v, want one naming the store %s", recs, storePath)
	}
	out := mustCLI(t, "experiment", "list", "--store", storePath)
	if !strings.Contains(out, recs[0].ID) {
		t.Fatalf("experiment list --store does not list %s:\n%s", recs[0].ID, out)
	}

	// Capture off: no content key on any span of the run.
	for _, r := range run("--journal", "off.db", "--capture-content=false", "--no-experiment") {
		for _, s := range traceOf(t, b.Reader(), r.TraceID, complete) {
			for k := range s.Attributes {
				if semconv.IsContentKey(k) {
					t.Fatalf("trial %d: span %s carries %s with --capture-content=false", r.Trial, s.Name, k)
				}
			}
		}
	}
}

// TestSuiteRunWritesAnExperiment: `suite run` records its trials as an
// experiment too (one case × 2 trials of the scripted research agent),
// and with --otlp-endpoint its worker sends each trial as a trace whose
// root names the case and the trial, with the conversation (scripted:
// content on by default); the record names the store and is saved there.
func TestSuiteRunWritesAnExperiment(t *testing.T) {
	testtier.Slow(t)
	cases := suiteCases(t, t.TempDir(), 1) // before refInputs leaves the package folder
	ds, _ := refInputs(t)
	ctx := context.Background()
	storePath, err := filepath.Abs("traces.db")
	if err != nil {
		t.Fatal(err)
	}
	b, err := startTraceBackend(ctx, storePath, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown(ctx)
	out := mustCLI(t, "suite", "run", "--cases", cases, "--trials", "2", "--out", "suite", "--dataset", ds, "--experiment-out", "exp/suite",
		"--otlp-endpoint", b.GRPCAddr(), "--store", storePath)
	if !strings.Contains(out, "2 trial records") {
		t.Fatalf("suite run:\n%s", out)
	}
	recs := listedExperiments(t, "exp")
	if len(recs) != 1 {
		t.Fatalf("experiment list: %+v", recs)
	}
	e := recs[0]
	if e.Status != datasets.ExperimentComplete || e.Target.Description != "reference agent research (scripted)" || e.Trials != 2 ||
		e.Cases != 1 || e.Summary.Recorded != 2 || e.Agent.Params["command"] != "suite run" || e.Dataset.Path != cases || e.Store != storePath {
		t.Fatalf("suite record = %+v", e)
	}
	mustCLI(t, "experiment", "show", "exp/suite")
	if out := mustCLI(t, "experiment", "list", "--store", storePath); !strings.Contains(out, e.ID) {
		t.Fatalf("the store does not keep the suite's experiment:\n%s", out)
	}

	// The two trials' traces: found by service, each with its own trial.
	caseID := caseIDOf(t, cases)
	trials := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(trials) < 2 && time.Now().Before(deadline) {
		page, err := b.Reader().ListTraces(ctx, store.TraceQuery{Service: "loom-eval-suite", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, sum := range page.Traces {
			spans, _ := b.Reader().GetTrace(ctx, sum.TraceID)
			for i := range spans {
				s := &spans[i]
				if s.ParentSpanID == "" && fmt.Sprint(s.Attributes[semconv.AttrCaseID]) == caseID {
					if hasChatContent(spans) {
						trials[fmt.Sprint(s.Attributes[semconv.AttrTrial])] = true
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !trials["0"] || !trials["1"] {
		t.Fatalf("traces of trials %v in the store, want 0 and 1 with the conversation on their chat spans", trials)
	}
}

// caseIDOf is the id of a one-case file's case.
func caseIDOf(t *testing.T, casesFile string) string {
	t.Helper()
	cs, err := datasets.LoadCases(casesFile)
	if err != nil || len(cs) != 1 {
		t.Fatalf("cases %s: %v (%d)", casesFile, err, len(cs))
	}
	return cs[0].ID
}

func hasChatContent(spans []store.Span) bool {
	for i := range spans {
		if spans[i].Operation == semconv.OpChat && len(conversation.FromSpan(&spans[i]).Input) > 0 {
			return true
		}
	}
	return false
}

func TestReferenceExperimentFlagsRefuseContradictions(t *testing.T) {
	taken := t.TempDir()
	if err := os.WriteFile(filepath.Join(taken, experiment.RecordFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--agent", "research", "--task", "x", "--store", "t.db"}, "--store names the store behind --otlp-endpoint"},
		{[]string{"run", "--agent", "research", "--task", "x", "--no-experiment", "--experiment-out", "e"}, "--no-experiment and --experiment-out"},
		{[]string{"run", "--agent", "research", "--task", "x", "--capture-content=maybe"}, "want true or false"},
		{[]string{"replay", "x.jsonl", "--store", "t.db"}, "--store names the store behind --otlp-endpoint"},
		{[]string{"suite", "run", "--cases", "c.jsonl", "--no-experiment", "--experiment-out", "e"}, "--no-experiment and --experiment-out"},
		// Refused before anything runs, not after.
		{[]string{"run", "--agent", "research", "--task", "x", "--experiment-out", taken}, "already holds an experiment"},
		{[]string{"replay", "x.jsonl", "--trials-out", "t.jsonl", "--experiment-out", taken}, "already holds an experiment"},
	} {
		code, _, errOut := refCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("loom-eval %s: exit %d, want %d naming %q\n%s", strings.Join(c.args, " "), code, ExitUsage, c.want, errOut)
		}
	}
}

// TestSuiteRunUnderAPolicy: `suite run --policy` puts the rules in the
// suite's definition; the worker authorizes every tool call (a tool the
// rules do not name is denied, and the trial's journal holds the
// decisions) and appends them to its own audit log, which verifies.
func TestSuiteRunUnderAPolicy(t *testing.T) {
	testtier.Slow(t)
	cases := suiteCases(t, t.TempDir(), 1)
	ds, _ := refInputs(t)
	rules, err := filepath.Abs("policy.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(rules, []byte(`{"version": 1, "scope": "docs", "rules": [{"tool": "search_docs", "decision": "allow"}]}`), 0o644)
	out := mustCLI(t, "suite", "run", "--cases", cases, "--trials", "1", "--out", "suite", "--dataset", ds, "--policy", rules, "--no-experiment")
	if !strings.Contains(out, "1 trial records") {
		t.Fatalf("suite run:\n%s", out)
	}
	journals, _ := filepath.Glob(filepath.Join("suite", "journals", "*", "*.jsonl"))
	if len(journals) == 0 {
		journals, _ = filepath.Glob(filepath.Join("suite", "journals", "*.jsonl"))
	}
	var all string
	for _, j := range journals {
		b, _ := os.ReadFile(j)
		all += string(b)
	}
	if !strings.Contains(all, `"kind":"policy_decision"`) || !strings.Contains(all, `"decision":"deny"`) {
		t.Fatalf("the suite's journals (%v) hold no denied decision", journals)
	}
	logs, _ := filepath.Glob(filepath.Join("suite", "audit", "*.jsonl"))
	if len(logs) != 1 {
		t.Fatalf("audit logs %v, want the one worker's", logs)
	}
	if out, _, code := cli(t, "audit", "verify", logs[0]); code != ExitOK || !strings.Contains(out, "chain verifies") {
		t.Fatalf("audit verify %s: exit %d %s", logs[0], code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1, "rules": [{"tool": "x", "decision": "maybe"}]}`), 0o644)
	if _, _, code := cli(t, "suite", "run", "--cases", cases, "--out", "suite2", "--dataset", ds, "--policy", bad); code != ExitUsage {
		t.Fatalf("a bad policy: exit %d, want %d", code, ExitUsage)
	}
	// Without --policy the built-in default policy applies: every trial's
	// run records it and each call is decided (the research agent's reads:
	// allowed) and audited; --policy none opts out.
	mustCLI(t, "suite", "run", "--cases", cases, "--trials", "1", "--out", "suite3", "--dataset", ds, "--no-experiment")
	js, _ := filepath.Glob(filepath.Join("suite3", "journals", "*.jsonl"))
	b, _ := os.ReadFile(js[0])
	if len(js) != 1 || !strings.Contains(string(b), `"policy":{"name":"default","rules":`) || !strings.Contains(string(b), `"kind":"policy_decision"`) || strings.Contains(string(b), `"decision":"deny"`) {
		t.Fatalf("the default-policy suite's journal (%v) does not record the default's decisions:\n%.600s", js, b)
	}
	if logs, _ := filepath.Glob(filepath.Join("suite3", "audit", "*.jsonl")); len(logs) != 1 {
		t.Fatalf("default policy: audit logs %v, want the one worker's", logs)
	}
	mustCLI(t, "suite", "run", "--cases", cases, "--trials", "1", "--out", "suite4", "--dataset", ds, "--no-experiment", "--policy", "none")
	js, _ = filepath.Glob(filepath.Join("suite4", "journals", "*.jsonl"))
	if b, _ := os.ReadFile(js[0]); strings.Contains(string(b), `"kind":"policy_decision"`) || strings.Contains(string(b), `"policy":`) {
		t.Fatalf("--policy none: the journal holds decisions:\n%.600s", b)
	}
	if logs, _ := filepath.Glob(filepath.Join("suite4", "audit", "*.jsonl")); len(logs) != 0 {
		t.Fatalf("--policy none: audit logs %v", logs)
	}
}
