package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/collector"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// testBackend is a real collector on loopback writing a real embedded
// store, as cmd/loom-eval wires it.
type testBackend struct {
	st  store.Store
	srv *collector.Server
}

func (b *testBackend) OTLPEndpoint() string { return "http://" + b.srv.HTTPAddr() }
func (b *testBackend) GRPCAddr() string     { return b.srv.GRPCAddr() }
func (b *testBackend) Reader() store.Reader { return b.st }

func startTraces(t *testing.T, dir string) *Traces {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, TracesFile)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Shutdown(ctx) })
	srv, err := collector.NewServer(collector.ServerConfig{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Exporter: collector.Config{Timeout: collector.DefaultTimeout}}, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(ctx) })
	tr, err := NewTraces(TracesConfig{Backend: &testBackend{st: st, srv: srv}, Wait: 300 * time.Millisecond, Quiet: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr
}

func newRecord(dir string, cases, trials int) *datasets.Experiment {
	return &datasets.Experiment{Version: datasets.ExperimentVersion, ID: "test-exp", Created: time.Unix(0, 0).UTC(), Status: datasets.ExperimentRunning,
		Dataset: datasets.ExperimentDataset{Path: "cases.jsonl", SHA256: "x"}, Trials: trials, Cases: cases, Store: filepath.Join(dir, TracesFile)}
}

func numberCase(id, task string, expected float64) datasets.Case {
	return datasets.Case{ID: id, Task: task, Graders: datasets.Graders{{Type: datasets.GraderNumber, Expected: &expected}}}
}

// An endpoint that answers 503 twice is retried until it answers; one that
// answers 400 or 500 failed the trial itself and is asked once; the
// backoff doubles.
func TestInfraFailuresRetriedAgentFailuresNot(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Q, ID string }
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls[body.ID]++
		n := calls[body.ID]
		mu.Unlock()
		switch {
		case body.ID == "flaky-infra" && n <= 2:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		case body.ID == "agent-400":
			http.Error(w, `{"error":"bad question"}`, http.StatusBadRequest)
		case body.ID == "agent-500":
			http.Error(w, "panic in the agent", http.StatusInternalServerError)
		default:
			fmt.Fprint(w, `{"data":{"answer":"42"}}`)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	target, err := NewHTTPTarget(HTTPConfig{URL: srv.URL, Body: `{"Q": {{json .Task}}, "ID": {{json .CaseID}}}`, AnswerPath: "data.answer"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []datasets.Case{numberCase("flaky-infra", "q", 42), numberCase("agent-400", "q", 42), numberCase("agent-500", "q", 42)}
	var slept []time.Duration
	var sleptMu sync.Mutex
	r, err := New(Config{Record: newRecord(dir, 3, 1), Dir: dir, Cases: cases, Trials: 1, Concurrency: 2, Retries: 3, Backoff: time.Second, Score: scorer.DefaultConfig()},
		Deps{Target: target, Traces: startTraces(t, dir), Sleep: func(ctx context.Context, d time.Duration) error {
			sleptMu.Lock()
			defer sleptMu.Unlock()
			if d >= time.Second {
				slept = append(slept, d) // the runner's backoff (trace polling sleeps less)
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	trials, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if calls["flaky-infra"] != 3 || calls["agent-400"] != 1 || calls["agent-500"] != 1 {
		t.Errorf("requests per case %v; want flaky-infra 3 (two 503s retried), agent-400 1, agent-500 1", calls)
	}
	if fmt.Sprint(slept) != "[1s 2s]" {
		t.Errorf("backoff %v, want [1s 2s]", slept)
	}
	got := map[string]bool{}
	for _, tr := range trials {
		got[tr.CaseID] = *tr.Success
	}
	if !got["flaky-infra"] || got["agent-400"] || got["agent-500"] || len(got) != 3 {
		t.Errorf("finished per case %v; want flaky-infra true, the agent's failures recorded as false", got)
	}
	if rec := r.cfg.Record; rec.Status != datasets.ExperimentComplete || rec.Summary.AgentFailures != 2 || rec.Summary.Passed != 1 {
		t.Errorf("record %+v", rec.Summary)
	}
}

// A command that cannot start is an infrastructure failure: retried, then
// left unrecorded (the experiment is incomplete); a command that exits 1
// is the agent's failure, run once.
func TestCommandStartFailureVersusExit(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	missing, err := NewCommandTarget(CommandConfig{Argv: []string{filepath.Join(dir, "no-such-agent")}})
	if err != nil {
		t.Fatal(err)
	}
	attempts := 0
	r, err := New(Config{Record: newRecord(dir, 1, 1), Dir: dir, Cases: []datasets.Case{numberCase("c", "q", 1)}, Trials: 1, Concurrency: 1, Retries: 2, Score: scorer.DefaultConfig()},
		Deps{Target: countingTarget{missing, &attempts}, Traces: startTraces(t, dir), Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	trials, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 3 || len(trials) != 0 || r.cfg.Record.Status != datasets.ExperimentIncomplete || r.cfg.Record.Summary.InfraFailures != 1 {
		t.Errorf("missing program: %d attempts, %d trials, status %s, infra failures %d; want 3, 0, incomplete, 1",
			attempts, len(trials), r.cfg.Record.Status, r.cfg.Record.Summary.InfraFailures)
	}

	dir2 := t.TempDir()
	failing, err := NewCommandTarget(CommandConfig{Argv: []string{"/bin/sh", "-c", "echo run >> " + count + "; echo oops >&2; exit 1"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err = New(Config{Record: newRecord(dir2, 1, 2), Dir: dir2, Cases: []datasets.Case{numberCase("c", "q", 1)}, Trials: 2, Concurrency: 1, Retries: 2, Score: scorer.DefaultConfig()},
		Deps{Target: failing, Traces: startTraces(t, dir2), Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	trials, err = r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := os.ReadFile(count)
	if strings.Count(string(runs), "run") != 2 || len(trials) != 2 || *trials[0].Success {
		t.Errorf("exit 1: %d runs for 2 trials, %d trials recorded, success %v; want 2, 2, false", strings.Count(string(runs), "run"), len(trials), *trials[0].Success)
	}
}

type countingTarget struct {
	Target
	n *int
}

func (c countingTarget) Run(ctx context.Context, req Request) (Response, error) {
	*c.n++
	return c.Target.Run(ctx, req)
}

// A torn last line (a kill mid-write) is cut off; a bad complete line is
// an error naming it; a trial is appended once.
func TestJournalTornLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TrialsFile)
	good := `{"case_id":"a","trial":0,"model_label":"live","trace_id":"0123456789abcdef0123456789abcdef","success":true}` + "\n"
	if err := os.WriteFile(path, []byte(good+`{"case_id":"a","tri`), 0o644); err != nil {
		t.Fatal(err)
	}
	j, trials, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 1 || j.Torn != len(`{"case_id":"a","tri`) || !j.Has(TrialKey{"a", 0}) {
		t.Errorf("trials %d, torn %d", len(trials), j.Torn)
	}
	ok := true
	if err := j.Append(&datasets.Trial{CaseID: "a", Trial: 0, ModelLabel: "live", TraceID: "0123456789abcdef0123456789abcdef", Success: &ok}); err == nil {
		t.Error("a trial was appended twice")
	}
	if err := j.Append(&datasets.Trial{CaseID: "a", Trial: 1, ModelLabel: "live", TraceID: "0123456789abcdef0123456789abcdef", Success: &ok}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if got, err := datasets.LoadTrials(path); err != nil || len(got) != 2 {
		t.Errorf("after append: %d trials, %v", len(got), err)
	}
	if err := os.WriteFile(path, []byte("not json\n"+good), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenJournal(path); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("a bad complete line: %v, want an error naming line 1", err)
	}
}

// The default policy is the committed, calibrated one.
func TestDefaultPolicyIsTheCommittedOne(t *testing.T) {
	b, err := os.ReadFile("../policy.json")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := gate.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	def, err := ParseDefaultPolicy()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(committed)
	d, _ := json.Marshal(def)
	if string(a) != string(d) {
		t.Errorf("DefaultPolicy differs from baselines/policy.json:\n%s\n%s", d, a)
	}
}

func TestPropagationEnv(t *testing.T) {
	p := Propagation{TraceParent: "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01", OTLPEndpoint: "http://127.0.0.1:1", OTLPProtocol: "http/protobuf",
		ServiceName: DefaultAgentService, Resource: [][2]string{{"loomwork.case.id", "a,b=c d"}}}
	env := strings.Join(p.Env([]string{"OTEL_SERVICE_NAME=mine", "OTEL_RESOURCE_ATTRIBUTES=team=x", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://elsewhere", "PATH=/bin"}), "\n")
	for _, want := range []string{"TRACEPARENT=00-0123456789abcdef0123456789abcdef-0123456789abcdef-01", "OTEL_SERVICE_NAME=mine",
		"OTEL_RESOURCE_ATTRIBUTES=team=x,loomwork.case.id=a%2Cb%3Dc%20d", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "PATH=/bin"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	if strings.Contains(env, "elsewhere") {
		t.Errorf("a traces-specific endpoint would win over the runner's:\n%s", env)
	}
}
