package a2a_test

import (
	"context"
	"encoding/json"
	oteltrace "go.opentelemetry.io/otel/trace"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdka2a "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/a2a"
	"github.com/loomwork/loomwork/agents/a2a/a2atest"
	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/sandbox/sandboxtest"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/semconv"
)

func TestMain(m *testing.M) {
	sandboxtest.Init() // the sandbox re-executes this binary as its init helper
	os.Exit(m.Run())
}

func needSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s needs root for the sandbox, and CI runs as root; got euid %d", t.Name(), os.Geteuid())
	}
	t.Skip("the coding agent's sandbox needs root")
}

func openJournal(t *testing.T, name string) *journaldb.Store {
	t.Helper()
	j, err := journaldb.Open(context.Background(), journaldb.Config{Path: filepath.Join(t.TempDir(), name)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Shutdown(context.Background()) })
	return j
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	a := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		a[kv.Key] = kv.Value.String()
	}
	return a
}

// serve starts agent as an A2A server (journal j, spans to tp) and returns
// a started remote for it.
func serve(t *testing.T, agent runtime.Agent, model runtime.Model, j *journaldb.Store, tp *sdktrace.TracerProvider) (*a2a.Remote, *httptest.Server) {
	t.Helper()
	rt, err := runtime.New(runtime.Config{Model: model, Journal: j, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a2a.NewServer(a2a.ServerConfig{Agent: agent, Runtime: rt, Description: "Loomwork's " + agent.Name + " agent", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	hs := a2atest.Serve(t, s)
	r, err := a2a.NewRemote(a2a.RemoteConfig{BaseURL: hs.URL, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	return r, hs
}

// TestCodingAgentServedOverA2ACalledByResearch: the coding agent (scripted
// policy, real sandbox) is served over A2A; the research agent calls it as
// a tool. Both runs are journaled; the A2A task id is the coding run's id;
// the spans carry the remote task id and state.
func TestCodingAgentServedOverA2ACalledByResearch(t *testing.T) {
	needSandbox(t)
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	sb := &coding.LazySandbox{}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		sb.Shutdown(c)
	})
	codingAgent, err := coding.New(coding.Config{Sandbox: sb, WorkRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	codingJ := openJournal(t, "coding.db")
	remote, _ := serve(t, codingAgent, coding.Policy(coding.PolicyConfig{}), codingJ, tp)
	if remote.Card().Name != coding.Name || !strings.HasSuffix(remote.Card().URL, a2a.RPCPath) {
		t.Fatalf("agent card = %+v", remote.Card())
	}

	sol := coding.Solutions()[0]
	ra, err := research.New(research.Config{Index: &research.DatasetIndex{Dir: datasettest.ShippedDir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	ra.Tools = append(ra.Tools, remote.Tool())
	model, err := scripted.New(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []llm.ToolCall{{ID: "a2a-1", Name: "ask_coding", Arguments: mustJSON(t, map[string]string{"message": sol.Task})}}},
		{Content: "The coding agent's program printed " + sol.Expected + ".", Expect: &scripted.Expect{ToolError: ptr(false), LastContains: sol.Expected}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	researchJ := openJournal(t, "research.db")
	rt, _ := runtime.New(runtime.Config{Model: model, Journal: researchJ, TracerProvider: tp})
	res, err := rt.Run(ctx, ra, runtime.Task{RunID: "research-calls-coding", Input: "Have the coding agent solve: " + sol.ID})
	if err != nil {
		t.Fatal(err)
	}
	if res.Label != llm.LabelScripted || !strings.Contains(res.Answer, sol.Expected) {
		t.Fatalf("research run: %+v", res)
	}

	// The research journal holds the remote task's answer; its task id is a
	// run in the coding journal, finished, with the same answer.
	evs, _ := researchJ.Events(ctx, res.RunID)
	var taskID string
	for _, e := range evs {
		if e.Kind == journal.KindToolResult && e.Tool == "ask_coding" {
			var tr journal.ToolResult
			json.Unmarshal(e.Payload, &tr)
			if _, rest, ok := strings.Cut(tr.Content, "remote task "); ok {
				taskID = strings.Fields(rest)[0]
			}
		}
	}
	if taskID == "" {
		t.Fatal("the research journal has no remote task result")
	}
	cevs, err := codingJ.Events(ctx, taskID)
	if err != nil || len(cevs) == 0 || cevs[len(cevs)-1].Kind != journal.KindRunFinished {
		t.Fatalf("coding journal for task %s: %d events, %v", taskID, len(cevs), err)
	}
	task, err := remote.GetTask(ctx, taskID)
	if err != nil || task.Status.State != sdka2a.TaskStateCompleted || len(task.Artifacts) != 1 || task.Artifacts[0].Metadata["run_id"] != taskID {
		t.Fatalf("tasks/get %s = %+v, %v", taskID, task, err)
	}

	// Spans: the CLIENT span with the remote task id and state; the SERVER
	// span with the same task id, above the coding run's invoke_agent.
	var client, server bool
	var clientSC, serverParent, serverSC oteltrace.SpanContext
	for _, s := range rec.Ended() {
		a := attrs(s)
		switch {
		case strings.HasPrefix(s.Name(), "a2a message/send"):
			client = a[semconv.AttrA2ATaskID] == taskID && a[semconv.AttrA2ATaskState] == "completed"
			clientSC = s.SpanContext()
		case s.Name() == "a2a task coding":
			server = a[semconv.AttrA2ATaskID] == taskID && a[semconv.AttrA2ATaskState] == "completed"
			serverSC, serverParent = s.SpanContext(), s.Parent()
		}
	}
	if !client || !server {
		t.Fatalf("a2a spans: client %v server %v", client, server)
	}
	// The task's spans join the caller's trace: the traceparent the client
	// sent is the SERVER span's parent (a remote one).
	if serverSC.TraceID() != clientSC.TraceID() || !serverParent.IsRemote() || serverParent.SpanID() != clientSC.SpanID() {
		t.Fatalf("the served task's span is in trace %s under %s (remote %v); the calling span is %s in trace %s",
			serverSC.TraceID(), serverParent.SpanID(), serverParent.IsRemote(), clientSC.SpanID(), clientSC.TraceID())
	}
}

// TestRemoteFailureIsAnObservation: a remote task that fails, and a remote
// that is gone, are error observations; the calling run finishes.
func TestRemoteFailureIsAnObservation(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	// The remote agent's model has one turn, a tool call to a tool that
	// does not exist... then nothing: its second model call fails, so its
	// run fails and the task ends failed.
	broken, _ := scripted.New(scripted.Script{Turns: []scripted.Turn{{ToolCalls: []llm.ToolCall{{ID: "x", Name: "nope", Arguments: json.RawMessage(`{}`)}}}}})
	remote, hs := serve(t, runtime.Agent{Name: "flaky"}, broken, openJournal(t, "flaky.db"), tp)
	tool := remote.Tool()

	model, _ := scripted.New(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []llm.ToolCall{{ID: "c1", Name: tool.Name, Arguments: json.RawMessage(`{"message":"do it"}`)}}},
		{ToolCalls: []llm.ToolCall{{ID: "c2", Name: tool.Name, Arguments: json.RawMessage(`{"message":"again"}`)}},
			Expect: &scripted.Expect{ToolError: ptr(true), LastContains: "ended failed"}},
		{Content: "the remote agent is unavailable", Expect: &scripted.Expect{ToolError: ptr(true), LastContains: "unreachable"}},
	}})
	j := openJournal(t, "caller.db")
	rt, _ := runtime.New(runtime.Config{Model: model, Journal: j, TracerProvider: tp})
	agent := runtime.Agent{Name: "caller", Tools: []runtime.Tool{tool}}
	// Between the two calls the remote goes away.
	agent.Tools[0].Run = func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
		out, err := tool.Run(ctx, in)
		hs.Close()
		return out, err
	}
	res, err := rt.Run(ctx, agent, runtime.Task{RunID: "caller-1", Input: "x"})
	if err != nil || res.Answer != "the remote agent is unavailable" {
		t.Fatalf("caller run: %+v, %v", res, err)
	}
	failed := false
	for _, s := range rec.Ended() {
		if a := attrs(s); strings.HasPrefix(s.Name(), "a2a message/send") && a[semconv.AttrA2ATaskState] == "failed" && a[semconv.AttrA2ATaskID] != "" {
			failed = true
		}
	}
	if !failed {
		t.Fatal("no a2a client span with the failed remote task")
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// TestCancelStopsTheRun: tasks/cancel of a working task cancels its run;
// the task ends canceled and the run is not finished in the journal.
func TestCancelStopsTheRun(t *testing.T) {
	ctx := context.Background()
	started, stopped := make(chan struct{}), make(chan struct{})
	slow := runtime.Tool{Name: "wait", Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			close(started)
			<-ctx.Done()
			close(stopped)
			return runtime.ToolOutput{}, ctx.Err()
		}}
	model, _ := scripted.New(scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []llm.ToolCall{{ID: "w", Name: "wait", Arguments: json.RawMessage(`{}`)}}}, {Content: "never"}}})
	j := openJournal(t, "slow.db")
	_, hs := serve(t, runtime.Agent{Name: "slow", Tools: []runtime.Tool{slow}}, model, j, sdktrace.NewTracerProvider())
	card, err := agentcard.DefaultResolver.Resolve(ctx, hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithConfig(a2aclient.Config{Polling: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	res, err := c.SendMessage(ctx, &sdka2a.MessageSendParams{Message: sdka2a.NewMessage(sdka2a.MessageRoleUser, sdka2a.TextPart{Text: "wait"})})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*sdka2a.Task)
	if !ok {
		t.Fatalf("non-blocking message/send returned %T", res)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run never reached its tool")
	}
	got, err := c.CancelTask(ctx, &sdka2a.TaskIDParams{ID: task.ID})
	if err != nil || got.Status.State != sdka2a.TaskStateCanceled {
		t.Fatalf("tasks/cancel = %+v, %v", got, err)
	}
	select {
	case <-stopped: // the run's context was cancelled
	case <-time.After(10 * time.Second):
		t.Fatal("tasks/cancel did not stop the run")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, _ := j.Events(ctx, string(task.ID))
		if len(evs) > 0 && evs[len(evs)-1].Kind != journal.KindRunFinished {
			cur, err := c.GetTask(ctx, &sdka2a.TaskQueryParams{ID: task.ID})
			if err == nil && cur.Status.State == sdka2a.TaskStateCanceled {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after cancel: journal %d events, task not canceled", len(evs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
