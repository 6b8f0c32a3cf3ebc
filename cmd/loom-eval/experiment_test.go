package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store/storeurl"
)

// fakeCalcModel is a scripted, fake OpenAI-compatible chat-completions
// endpoint on loopback: "add A and B" is answered with the sum. It is no
// model and the agent's spans say so (loomwork.model.label = scripted).
type fakeCalcModel struct {
	*httptest.Server
	calls   atomic.Int64
	broken  atomic.Bool // answers even sums one too high (a worse model)
	mu      sync.Mutex
	parents []string // traceparent headers received
}

var addRe = regexp.MustCompile(`add (\d+) and (\d+)`)

func newFakeCalcModel(t *testing.T) *fakeCalcModel {
	t.Helper()
	f := &fakeCalcModel{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		f.calls.Add(1)
		f.mu.Lock()
		f.parents = append(f.parents, r.Header.Get("traceparent"))
		f.mu.Unlock()
		var req struct {
			Model    string `json:"model"`
			Messages []struct{ Role, Content string }
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		answer := "I cannot do that."
		if m := addRe.FindStringSubmatch(req.Messages[len(req.Messages)-1].Content); m != nil {
			a, _ := strconv.Atoi(m[1])
			b, _ := strconv.Atoi(m[2])
			sum := a + b
			if f.broken.Load() && sum%2 == 0 {
				sum++
			}
			answer = strconv.Itoa(sum)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-fake","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`, req.Model, answer)
	}))
	t.Cleanup(f.Close)
	return f
}

// experimentCases writes six addition cases; two of them (even-4,
// even-6) have even answers, which version 2 of the agent gets wrong.
func experimentCases(t *testing.T, dir string) string {
	t.Helper()
	sums := []struct {
		id   string
		a, b int
	}{{"odd-3", 1, 2}, {"odd-5", 2, 3}, {"even-4", 1, 3}, {"odd-7", 3, 4}, {"even-6", 2, 4}, {"odd-9", 4, 5}}
	var b bytes.Buffer
	for _, s := range sums {
		fmt.Fprintf(&b, `{"id":%q,"task":"add %d and %d","graders":[{"type":"number","name":"the sum","expected":%d}]}`+"\n", s.id, s.a, s.b, s.a+s.b)
	}
	path := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// buildExpAgent builds testdata/expagent (the OTel Go SDK, no Loomwork
// package), once per test binary.
func buildExpAgent(t *testing.T) string {
	t.Helper()
	return buildShared(t, "expagent", "", "./testdata/expagent")
}

func runLoom(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getenv: os.Getenv}
	err = m.Run(context.Background(), args)
	return o.String(), e.String(), err
}

func readTrials(t *testing.T, dir string) []datasets.Trial {
	t.Helper()
	trials, err := datasets.LoadTrials(filepath.Join(dir, "trials.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return trials
}

// A command agent v1 passes; v2, gated against it, fails the gate naming
// the two cases it broke; every trial's trace holds the runner's root and
// the agent's own spans under it.
func TestExperimentCommandAgentGate(t *testing.T) {
	testtier.Slow(t)
	model := newFakeCalcModel(t)
	agent := buildExpAgent(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	t.Setenv("EXPAGENT_MODEL_URL", model.URL+"/v1")
	v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")

	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--cmd", agent, "--trials", "2", "--concurrency", "2",
		"--out", v1, "--label", "v1", "--param", "temperature=0")
	if err != nil {
		t.Fatalf("v1: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "[12/12] passed 12") {
		t.Errorf("v1's progress does not end at 12/12 passed:\n%s", errOut)
	}
	trials := readTrials(t, v1)
	if len(trials) != 12 {
		t.Fatalf("v1: %d trials, want 12", len(trials))
	}
	checkJoinedTraces(t, v1, trials)

	t.Setenv("EXPAGENT_VERSION", "2")
	out, errOut, err = runLoom(t, "experiment", "run", "--cases", cases, "--cmd", agent, "--trials", "2", "--out", v2, "--label", "v2", "--against", v1)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure {
		t.Fatalf("v2 against v1: got %v, want exit 1\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if !strings.Contains(err.Error(), "regressed cases: even-4, even-6") {
		t.Errorf("the gate's error does not name the two broken cases: %v", err)
	}
	if !strings.Contains(out, "Gate: FAIL") {
		t.Errorf("no failed gate in the report:\n%s", out)
	}
	for _, f := range []string{"experiment.json", "trials.jsonl", "report.json"} {
		if _, err := os.Stat(filepath.Join(v2, f)); err != nil {
			t.Errorf("v2's folder lacks %s: %v", f, err)
		}
	}

	out, _, err = runLoom(t, "experiment", "compare", v1, v2, "--json")
	if !errors.As(err, &ee) || ee.Code != ExitFailure {
		t.Fatalf("compare: got %v, want exit 1", err)
	}
	var cmp struct {
		Cases []struct {
			CaseID string `json:"case_id"`
			Change string `json:"change"`
			A, B   struct {
				Passes   int      `json:"passes"`
				TraceIDs []string `json:"trace_ids"`
			}
		} `json:"cases"`
		Comparison struct {
			Regressed     []string `json:"regressed"`
			Deterministic bool     `json:"deterministic"`
		} `json:"comparison"`
		Gate struct {
			Passed bool `json:"passed"`
		} `json:"gate"`
	}
	if err := json.Unmarshal([]byte(out), &cmp); err != nil {
		t.Fatalf("compare --json: %v\n%s", err, out)
	}
	if got := strings.Join(cmp.Comparison.Regressed, ","); got != "even-4,even-6" || cmp.Gate.Passed || !cmp.Comparison.Deterministic {
		t.Errorf("compare: regressed %q, gate passed %v, deterministic %v; want even-4,even-6, false, true", got, cmp.Gate.Passed, cmp.Comparison.Deterministic)
	}
	if len(cmp.Cases) != 6 || len(cmp.Cases[0].A.TraceIDs) != 2 {
		t.Errorf("compare: %d case rows (want 6) or no trace ids: %+v", len(cmp.Cases), cmp.Cases)
	}

	out, _, err = runLoom(t, "experiment", "list", "--experiments-dir", dir)
	if err != nil || !strings.Contains(out, "v1") || !strings.Contains(out, "v2") || !strings.Contains(out, "complete") {
		t.Errorf("list: %v\n%s", err, out)
	}
	rec, err := os.ReadFile(filepath.Join(v1, "experiment.json"))
	if err != nil || !bytes.Contains(rec, []byte(`"temperature": "0"`)) || !bytes.Contains(rec, []byte(`"sha256"`)) {
		t.Errorf("v1's record lacks its param or digest: %v\n%s", err, rec)
	}
}

// checkJoinedTraces opens the experiment's store: each trial's trace holds
// the runner's root span (experiment, case, trial) and the agent's spans,
// the agent's root a child of the runner's.
func checkJoinedTraces(t *testing.T, dir string, trials []datasets.Trial) {
	t.Helper()
	st, err := storeurl.Open(context.Background(), filepath.Join(dir, "traces.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	for _, tr := range trials {
		spans, err := st.GetTrace(context.Background(), tr.TraceID)
		if err != nil {
			t.Fatalf("trial %d of %s: trace %s: %v", tr.Trial, tr.CaseID, tr.TraceID, err)
		}
		var rootID string
		agentUnderRoot, chat := false, false
		for _, s := range spans {
			if s.ParentSpanID == "" {
				rootID = s.SpanID
				if s.Attributes[semconv.AttrCaseID] != tr.CaseID || s.Attributes[semconv.AttrExperimentID] == nil {
					t.Errorf("trial %d of %s: root span attributes %v", tr.Trial, tr.CaseID, s.Attributes)
				}
			}
		}
		for _, s := range spans {
			agentUnderRoot = agentUnderRoot || (s.Name == "invoke_agent expagent" && s.ParentSpanID == rootID && s.ServiceName == "agent-under-test")
			chat = chat || s.Operation == "chat"
		}
		if !agentUnderRoot || !chat {
			t.Errorf("trial %d of %s: trace %s (%d spans) lacks the agent's spans under the runner's root", tr.Trial, tr.CaseID, tr.TraceID, len(spans))
		}
		if tr.ModelLabel != datasets.LabelScripted || tr.Tokens == nil || *tr.Tokens != 15 {
			t.Errorf("trial %d of %s: label %q tokens %v; want scripted (the agent's spans say so) and 15", tr.Trial, tr.CaseID, tr.ModelLabel, tr.Tokens)
		}
	}
}

// An OpenAI-compatible endpoint is a target too: the task is the user
// message, the answer choices[0].message.content, and the request carries
// the trial's traceparent.
func TestExperimentOpenAITarget(t *testing.T) {
	testtier.Slow(t)
	model := newFakeCalcModel(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--openai", model.URL+"/v1", "--model", "fake-calc",
		"--trials", "2", "--model-label", "scripted", "--out", filepath.Join(dir, "e"), "--json", "--trace-wait", "300ms")
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	trials := readTrials(t, filepath.Join(dir, "e"))
	if len(trials) != 12 || model.calls.Load() != 12 {
		t.Fatalf("%d trials, %d model calls; want 12 and 12", len(trials), model.calls.Load())
	}
	ids := map[string]bool{}
	for _, tr := range trials {
		ids[tr.TraceID] = true
		if tr.Transcript == nil || tr.Transcript.Answer == "" || tr.Tokens == nil || *tr.Tokens != 15 {
			t.Errorf("trial %d of %s: transcript %+v tokens %v", tr.Trial, tr.CaseID, tr.Transcript, tr.Tokens)
		}
	}
	for _, p := range model.parents {
		parts := strings.Split(p, "-")
		if len(parts) != 4 || !ids[parts[1]] {
			t.Errorf("traceparent %q names no trial's trace", p)
		}
	}
	var rep struct {
		Candidate struct {
			PassRate struct {
				Estimate float64 `json:"estimate"`
			} `json:"pass_rate"`
		} `json:"candidate"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if rep.Candidate.PassRate.Estimate != 1 {
		t.Errorf("pass rate %v, want 1\n%s", rep.Candidate.PassRate.Estimate, out)
	}

	// A worse model behind the same endpoint, gated against the first run.
	model.broken.Store(true)
	out, errOut, err = runLoom(t, "experiment", "run", "--cases", cases, "--openai", model.URL+"/v1", "--model", "fake-calc",
		"--trials", "2", "--model-label", "scripted", "--out", filepath.Join(dir, "e2"), "--against", filepath.Join(dir, "e"), "--trace-wait", "300ms")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure || !strings.Contains(err.Error(), "regressed cases: even-4, even-6") {
		t.Errorf("the worse model: %v, want exit 1 naming even-4, even-6\n%s\n%s", err, out, errOut)
	}
}

// Killing the runner mid-way and resuming runs each unfinished (case,
// trial) once and no finished one again: the agent's invocations count it.
func TestExperimentKillAndResume(t *testing.T) {
	testtier.Slow(t)
	model := newFakeCalcModel(t)
	agent := buildExpAgent(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	out := filepath.Join(dir, "e")
	count := filepath.Join(dir, "invocations")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := loomEval(ctx, dir, "experiment", "run", "--cases", cases, "--cmd", agent, "--trials", "2", "--concurrency", "1", "--out", out)
	cmd.Env = append(cmd.Env, "EXPAGENT_MODEL_URL="+model.URL+"/v1", "EXPAGENT_COUNT_FILE="+count, "EXPAGENT_SLEEP=200ms")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for lines(t, filepath.Join(out, "trials.jsonl")) < 4 {
		if ctx.Err() != nil {
			t.Fatalf("no 4 trials before the deadline:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	time.Sleep(400 * time.Millisecond) // the agent in flight when killed finishes on its own
	recorded, before := len(readTrials(t, out)), lines(t, count)
	if recorded < 4 || recorded >= 12 {
		t.Fatalf("killed after %d recorded trials; the test wants a run cut mid-way", recorded)
	}

	t.Setenv("EXPAGENT_MODEL_URL", model.URL+"/v1")
	t.Setenv("EXPAGENT_COUNT_FILE", count)
	var ee *ExitError
	if _, _, err := runLoom(t, "experiment", "run", "--resume", out, "--cmd", agent, "--trials", "3"); !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Fatalf("resume with another --trials: %v, want exit 2", err)
	}
	if _, _, err := runLoom(t, "experiment", "run", "--resume", out, "--cmd", agent+" --other"); !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), "target changed") {
		t.Fatalf("resume with another target: %v, want exit 2 naming the target", err)
	}
	o, e, err := runLoom(t, "experiment", "run", "--resume", out, "--cmd", agent)
	if err != nil {
		t.Fatalf("resume: %v\nstdout:\n%s\nstderr:\n%s", err, o, e)
	}
	trials := readTrials(t, out)
	seen := map[string]bool{}
	for _, tr := range trials {
		k := fmt.Sprintf("%s/%d", tr.CaseID, tr.Trial)
		if seen[k] {
			t.Errorf("trial %s recorded twice", k)
		}
		seen[k] = true
	}
	if len(seen) != 12 {
		t.Errorf("%d distinct trials after resume, want 12", len(seen))
	}
	if ran := lines(t, count) - before; ran != 12-recorded {
		t.Errorf("resume invoked the agent %d times; %d trials were missing (finished trials must not run again)", ran, 12-recorded)
	}
	if !strings.Contains(e, fmt.Sprintf("%d of 12 trials already recorded", recorded)) {
		t.Errorf("resume does not say what it resumes:\n%s", e)
	}
	t.Logf("killed after %d recorded trials (%d agent invocations); resume ran %d", recorded, before, 12-recorded)
}

func lines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	return n
}

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string]string{
		`python3 agent.py --x 1`:         "python3|agent.py|--x|1",
		`sh -c 'echo "a b"'`:             `sh|-c|echo "a b"`,
		`a "b \"c\"" d\ e`:               `a|b "c"|d e`,
		`  agent   {input}  `:            "agent|{input}",
		`go run ./agent --q "{input}" x`: "go|run|./agent|--q|{input}|x",
	} {
		got, err := splitArgs(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("splitArgs(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := splitArgs(`a 'b`); err == nil {
		t.Error("an unterminated quote was accepted")
	}
}

// An agent that does not extract TRACEPARENT (it only reads the standard
// OTEL_* variables) still lands in its trial: its trace, found by the
// experiment, case and trial in its resource, is the trial's trace.
func TestExperimentJoinsByResourceWithoutTraceparent(t *testing.T) {
	testtier.Slow(t)
	model := newFakeCalcModel(t)
	agent := buildExpAgent(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	t.Setenv("EXPAGENT_MODEL_URL", model.URL+"/v1")
	t.Setenv("EXPAGENT_NO_EXTRACT", "1")
	out := filepath.Join(dir, "e")
	if o, e, err := runLoom(t, "experiment", "run", "--cases", cases, "--cmd", agent, "--trials", "1", "--out", out); err != nil {
		t.Fatalf("%v\n%s\n%s", err, o, e)
	}
	st, err := storeurl.Open(context.Background(), filepath.Join(out, "traces.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	for _, tr := range readTrials(t, out) {
		spans, err := st.GetTrace(context.Background(), tr.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		ok := false
		for _, s := range spans {
			ok = ok || (s.Name == "invoke_agent expagent" && s.ResourceAttributes[semconv.AttrCaseID] == tr.CaseID)
		}
		if !ok || tr.Tokens == nil || *tr.Tokens != 15 || tr.ModelLabel != datasets.LabelScripted {
			t.Errorf("trial of %s: trace %s is not the agent's (%d spans), tokens %v, label %q", tr.CaseID, tr.TraceID, len(spans), tr.Tokens, tr.ModelLabel)
		}
	}
}
