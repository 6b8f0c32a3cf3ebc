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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomwork/loomwork/baselines/experiment"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store/storeurl"
)

// headerLog records the trace headers an agent's endpoint received.
type headerLog struct {
	mu                sync.Mutex
	parents, baggages []string
}

func (h *headerLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			h.mu.Lock()
			h.parents = append(h.parents, r.Header.Get("traceparent"))
			h.baggages = append(h.baggages, r.Header.Get("baggage"))
			h.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// check says every request carried a trial's traceparent (naming one of
// the trials' traces) and baggage naming a case.
func (h *headerLog) check(t *testing.T, trials []datasets.Trial) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := map[string]bool{}
	for _, tr := range trials {
		ids[tr.TraceID] = true
	}
	if len(h.parents) < len(trials) {
		t.Errorf("%d requests with trace headers, want at least one per trial (%d)", len(h.parents), len(trials))
	}
	for i, p := range h.parents {
		parts := strings.Split(p, "-")
		if len(parts) != 4 || !ids[parts[1]] {
			t.Errorf("request %d: traceparent %q names no trial's trace", i, p)
		}
		if !strings.Contains(h.baggages[i], "loomwork.case.id=") {
			t.Errorf("request %d: baggage %q names no case", i, h.baggages[i])
		}
	}
}

// calcA2AAgent is an A2A agent built with the A2A Go SDK and nothing of
// Loomwork's: each task's message is sent to the fake model over the
// chat-completions wire and the reply is the task's artifact. version 2
// answers even sums one too high.
type calcA2AAgent struct {
	modelURL string
	version  atomic.Int32
}

func (a *calcA2AAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
	}
	var text string
	for _, p := range rc.Message.Parts {
		if tp, ok := p.(a2a.TextPart); ok {
			text += tp.Text
		}
	}
	answer, err := chat(ctx, a.modelURL, text)
	if err != nil {
		ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: err.Error()}))
		ev.Final = true
		return q.Write(ctx, ev)
	}
	if n, err := strconv.Atoi(answer); err == nil && n%2 == 0 && a.version.Load() == 2 {
		answer = strconv.Itoa(n + 1)
	}
	art := a2a.NewArtifactEvent(rc, a2a.TextPart{Text: answer})
	art.LastChunk = true
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCompleted, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

func (a *calcA2AAgent) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// chat is one chat-completions call.
func chat(ctx context.Context, base, task string) (string, error) {
	body, _ := json.Marshal(map[string]any{"model": "fake-calc", "messages": []map[string]string{{"role": "user", "content": task}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) == 0 {
		return "", fmt.Errorf("model: HTTP %d: %v", resp.StatusCode, err)
	}
	return out.Choices[0].Message.Content, nil
}

// An A2A agent, by its Agent Card URL: every trial is a task whose answer
// is its artifact, every JSON-RPC request carries the trial's trace
// context, and version 2 gated against version 1 fails naming the two
// cases it broke.
func TestExperimentA2ATarget(t *testing.T) {
	testtier.Slow(t)
	model := newFakeCalcModel(t)
	agent := &calcA2AAgent{modelURL: model.URL + "/v1"}
	agent.version.Store(1)
	var hdr headerLog
	mux := http.NewServeMux()
	srv := httptest.NewServer(hdr.wrap(mux))
	t.Cleanup(srv.Close)
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{
		Name: "calc", Description: "adds two numbers", URL: srv.URL + "/rpc", PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion: "0.3.0", Version: "1", DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "add", Name: "add", Description: "adds", Tags: []string{"math"}}},
	}))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent)))
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")

	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--a2a", srv.URL+"/.well-known/agent-card.json",
		"--trials", "2", "--model-label", "scripted", "--out", v1, "--trace-wait", "200ms")
	if err != nil {
		t.Fatalf("v1: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	trials := readTrials(t, v1)
	if len(trials) != 12 || !strings.Contains(errOut, "[12/12] passed 12") {
		t.Fatalf("v1: %d trials (want 12, all passed)\n%s", len(trials), errOut)
	}
	for _, tr := range trials {
		if tr.Transcript == nil || tr.Transcript.Answer == "" {
			t.Errorf("trial %d of %s: no answer recorded", tr.Trial, tr.CaseID)
		}
	}
	hdr.check(t, trials)
	rec, err := experiment.ReadRecord(v1)
	if err != nil || rec.Target.Kind != "a2a" {
		t.Errorf("v1's record: %v, target %+v", err, rec)
	}

	// Version 2, reached by the agent's base URL this time.
	agent.version.Store(2)
	out, errOut, err = runLoom(t, "experiment", "run", "--cases", cases, "--a2a", srv.URL, "--trials", "2",
		"--model-label", "scripted", "--out", v2, "--against", v1, "--trace-wait", "200ms")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure || !strings.Contains(err.Error(), "regressed cases: even-4, even-6") {
		t.Errorf("v2 against v1: %v, want exit 1 naming even-4, even-6\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// An A2A agent whose task fails is a failed trial (recorded, not retried);
// a card URL with nothing behind it runs no trial (exit 3, the experiment
// incomplete, the card's 404 said).
func TestExperimentA2AFailures(t *testing.T) {
	testtier.Slow(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	agent := &calcA2AAgent{modelURL: "http://127.0.0.1:1/v1"} // no model: every task fails
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&a2a.AgentCard{
		Name: "calc", URL: srv.URL + "/rpc", PreferredTransport: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3.0", Version: "1",
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}}))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent)))
	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--a2a", srv.URL, "--trials", "1", "--out", filepath.Join(dir, "f"), "--trace-wait", "100ms", "--json")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	for _, tr := range readTrials(t, filepath.Join(dir, "f")) {
		if tr.Success == nil || *tr.Success {
			t.Errorf("trial of %s finished although the agent's task failed", tr.CaseID)
		}
	}
	if !strings.Contains(errOut, "failed") {
		t.Errorf("the progress does not say the trials failed:\n%s", errOut)
	}

	_, errOut, err = runLoom(t, "experiment", "run", "--cases", cases, "--a2a", srv.URL+"/nothing/card.json", "--trials", "1",
		"--out", filepath.Join(dir, "g"), "--retries", "0")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitRuntimeErr || !strings.Contains(err.Error(), "incomplete") || !strings.Contains(errOut, "card.json: a2a remote") || !strings.Contains(errOut, "404 Not Found") {
		t.Errorf("a card URL with no card: %v, want exit 3 (incomplete), the card's 404 on stderr\n%s", err, errOut)
	}
}

// buildMCPCalc builds testdata/mcpcalc (a stdio MCP server on the MCP and
// OTel Go SDKs, no Loomwork package), once per test binary.
func buildMCPCalc(t *testing.T) string {
	t.Helper()
	return buildShared(t, "mcpcalc", "", "./testdata/mcpcalc")
}

// A tool of a stdio MCP server, started per trial with an allow-listed
// environment: the runner's secrets do not reach it, the trial's trace
// context does (environment and the call's _meta), the server's span
// lands under the trial's root, and version 2 fails the gate naming the
// two cases it broke.
func TestExperimentMCPStdioTarget(t *testing.T) {
	testtier.Slow(t)
	server := buildMCPCalc(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	envFile := filepath.Join(dir, "env.jsonl")
	t.Setenv("LOOMWORK_TEST_SECRET", "s3cret")
	t.Setenv("OPENAI_API_KEY", "sk-not-for-the-server")
	t.Setenv("MCPCALC_PASSED", "yes")
	v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")
	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--mcp-cmd", server+" --env-file "+envFile,
		"--mcp-tool", "add", "--mcp-arg-template", `{"question": {{json .Task}}}`, "--mcp-env", "MCPCALC_PASSED",
		"--trials", "2", "--model-label", "scripted", "--out", v1)
	if err != nil {
		t.Fatalf("v1: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	trials := readTrials(t, v1)
	if len(trials) != 12 || !strings.Contains(errOut, "[12/12] passed 12") {
		t.Fatalf("v1: %d trials (want 12, all passed)\n%s", len(trials), errOut)
	}
	traceIDs := map[string]bool{}
	for _, tr := range trials {
		traceIDs[tr.TraceID] = true
	}
	calls := readJSONLines(t, envFile)
	if len(calls) != 12 {
		t.Fatalf("the server saw %d calls, want 12", len(calls))
	}
	for i, c := range calls {
		var env []string
		for _, n := range c["env"].([]any) {
			env = append(env, n.(string))
		}
		for _, bad := range []string{"LOOMWORK_TEST_SECRET", "OPENAI_API_KEY", "GOFLAGS"} {
			if slices.Contains(env, bad) {
				t.Errorf("call %d: the server's environment has %s: %v", i, bad, env)
			}
		}
		for _, want := range []string{"PATH", "HOME", "TRACEPARENT", "BAGGAGE", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_RESOURCE_ATTRIBUTES", "MCPCALC_PASSED"} {
			if !slices.Contains(env, want) {
				t.Errorf("call %d: the server's environment lacks %s: %v", i, want, env)
			}
		}
		tp, _ := c["traceparent"].(string)
		if parts := strings.Split(tp, "-"); len(parts) != 4 || !traceIDs[parts[1]] || c["meta_traceparent"] != tp {
			t.Errorf("call %d: TRACEPARENT %q, _meta traceparent %q: want the same, naming a trial's trace", i, tp, c["meta_traceparent"])
		}
	}
	st, err := storeurl.Open(context.Background(), filepath.Join(v1, "traces.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trials {
		spans, err := st.GetTrace(context.Background(), tr.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range spans {
			found = found || (s.Name == "execute_tool add" && s.ServiceName == "agent-under-test" && s.ParentSpanID != "")
		}
		if !found {
			t.Errorf("trial %d of %s: the server's span is not in the trial's trace (%d spans)", tr.Trial, tr.CaseID, len(spans))
		}
	}
	st.Shutdown(context.Background())

	out, errOut, err = runLoom(t, "experiment", "run", "--cases", cases, "--mcp-cmd", server+" --v2", "--mcp-tool", "add",
		"--mcp-arg-template", `{"question": {{json .Task}}}`, "--trials", "2", "--model-label", "scripted", "--out", v2, "--against", v1)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure || !strings.Contains(err.Error(), "regressed cases: even-4, even-6") {
		t.Errorf("v2 against v1: %v, want exit 1 naming even-4, even-6\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// MCP failures: an unknown tool and an isError result are the agent's
// (recorded failed trials, the reason in the transcript); a server
// command that does not exist is the infrastructure's (exit 3, incomplete).
func TestExperimentMCPFailures(t *testing.T) {
	testtier.Slow(t)
	server := buildMCPCalc(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	for name, args := range map[string][]string{
		"unknown tool": {"--mcp-cmd", server, "--mcp-tool", "subtract", "--mcp-arg-template", `{"question": {{json .Task}}}`},
		"tool error":   {"--mcp-cmd", server, "--mcp-tool", "add", "--mcp-arg-template", `{"question": "multiply"}`},
	} {
		out := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		o, e, err := runLoom(t, append([]string{"experiment", "run", "--cases", cases, "--trials", "1", "--out", out, "--trace-wait", "100ms", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", name, err, o, e)
		}
		for _, tr := range readTrials(t, out) {
			if tr.Success == nil || *tr.Success {
				t.Errorf("%s: trial of %s finished", name, tr.CaseID)
			}
		}
	}
	_, e, err := runLoom(t, "experiment", "run", "--cases", cases, "--trials", "1", "--out", filepath.Join(dir, "missing"),
		"--mcp-cmd", filepath.Join(dir, "no-such-server"), "--mcp-tool", "add", "--retries", "1", "--backoff", "10ms")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitRuntimeErr || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("a server that cannot start: %v, want exit 3 (incomplete)\n%s", err, e)
	}
	if _, _, err := runLoom(t, "experiment", "run", "--cases", cases, "--mcp-cmd", server); !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), "--mcp-tool") {
		t.Errorf("no --mcp-tool: %v, want exit 2 naming --mcp-tool", err)
	}
}

// A tool of a Streamable HTTP MCP server: the trial's trace context rides
// on the HTTP requests' headers.
func TestExperimentMCPHTTPTarget(t *testing.T) {
	type in struct {
		Question string `json:"question"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "calc-http", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "adds"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		var x, y int
		if _, err := fmt.Sscanf(a.Question, "add %d and %d", &x, &y); err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(x + y)}}}, nil, nil
	})
	var hdr headerLog
	srv := httptest.NewServer(hdr.wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--mcp-url", srv.URL, "--mcp-tool", "add",
		"--mcp-arg-template", `{"question": {{json .Task}}}`, "--trials", "1", "--model-label", "scripted", "--out", filepath.Join(dir, "e"), "--trace-wait", "100ms")
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	trials := readTrials(t, filepath.Join(dir, "e"))
	if len(trials) != 6 || !strings.Contains(errOut, "[6/6] passed 6") {
		t.Fatalf("%d trials (want 6, all passed)\n%s", len(trials), errOut)
	}
	hdr.check(t, trials)
}

func readJSONLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}
