package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/agents/scripted"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	goleak.VerifyTestMain(m)
}

// fakeClock is an injected clock advancing one millisecond per reading.
func fakeClock() func() time.Time {
	t := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func openJournal(t *testing.T, path string) *journaldb.Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "journal.db")
	}
	s, err := journaldb.Open(context.Background(), journaldb.Config{Path: path, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func newRuntime(t *testing.T, m runtime.Model, j journal.Journal, tp *sdktrace.TracerProvider) *runtime.Runtime {
	t.Helper()
	cfg := runtime.Config{Model: m, Journal: j, Clock: fakeClock()}
	if tp != nil {
		cfg.TracerProvider = tp
	}
	rt, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func bptr(b bool) *bool { return &b }

// bookScript: search the policy, compute, record two entries, answer.
func bookScript() scripted.Script {
	return scripted.Script{Model: "scripted-bookkeeper", Turns: []scripted.Turn{
		{ToolCalls: []llm.ToolCall{call("c1", "search_policy", `{"query":"meals"}`)}, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}},
		{ToolCalls: []llm.ToolCall{call("c2", "calculator", `{"op":"mul","a":2,"b":1250}`)}, Usage: llm.Usage{InputTokens: 150, OutputTokens: 12, CacheReadTokens: 90}},
		{ToolCalls: []llm.ToolCall{
			call("c3", "ledger_append", `{"account":"meals","amount_cents":2500,"memo":"team lunch"}`),
			call("c4", "ledger_append", `{"account":"cash","amount_cents":-2500}`),
		}, Usage: llm.Usage{InputTokens: 200, OutputTokens: 20}, Expect: &scripted.Expect{LastRole: llm.RoleTool, LastContains: "2500"}},
		{Content: "Booked 25.00 EUR of meals [doc:policy/meals].", Usage: llm.Usage{InputTokens: 260, OutputTokens: 15, ReasoningTokens: 5}},
	}}
}

func kinds(evs []journal.Event) string {
	ks := make([]string, len(evs))
	for i, e := range evs {
		ks[i] = string(e.Kind)
	}
	return strings.Join(ks, " ")
}

func TestRunJournalsEveryStepAndLabelsScriptedModelEvents(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t, "")
	m, err := scripted.New(bookScript())
	if err != nil {
		t.Fatal(err)
	}
	res, err := newRuntime(t, m, j, nil).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "run-1", Input: "Book the team lunch.", CaseID: "case-7", Trial: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "Booked 25.00 EUR of meals [doc:policy/meals]." || res.Steps != 4 || res.ModelCalls != 4 || res.ToolRuns != 4 {
		t.Fatalf("result = %+v", res)
	}
	if got := strings.Join(res.Citations, ","); got != "policy/meals" {
		t.Fatalf("citations = %q", got)
	}
	if got := strings.Join(res.Documents, ","); got != "policy/meals" {
		t.Fatalf("documents = %q", got)
	}
	if res.Usage.InputTokens != 710 || res.Usage.CacheReadTokens != 90 || res.Label != llm.LabelScripted {
		t.Fatalf("usage/label = %+v %q", res.Usage, res.Label)
	}
	evs, err := j.Events(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	want := "run_started model_request model_response tool_call tool_result " +
		"model_request model_response tool_call tool_result " +
		"model_request model_response tool_call effect tool_result tool_call effect tool_result " +
		"model_request model_response run_finished"
	if got := kinds(evs); got != want {
		t.Fatalf("journal kinds:\n got %s\nwant %s", got, want)
	}
	for _, e := range evs {
		if (e.Kind == journal.KindModelRequest || e.Kind == journal.KindModelResponse) && e.Label != llm.LabelScripted {
			t.Fatalf("seq %d %s has label %q, want scripted", e.Seq, e.Kind, e.Label)
		}
	}
	if err := j.Verify(ctx, "run-1"); err != nil {
		t.Fatal(err)
	}
	var n, sum int
	j.DB().QueryRowContext(ctx, `SELECT COUNT(*), SUM(amount_cents) FROM ledger_entries WHERE run_id='run-1'`).Scan(&n, &sum)
	if n != 2 || sum != 0 {
		t.Fatalf("ledger rows = %d sum = %d", n, sum)
	}
}

func TestResumeReusesRecordedAnswersAndNeverAsksTheModelAgain(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t, "")
	first, _ := scripted.New(bookScript())
	want, err := newRuntime(t, first, j, nil).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "r", Input: "Book the team lunch."})
	if err != nil {
		t.Fatal(err)
	}
	// A model that would answer differently, and counts its calls.
	other := scripted.NewFunc("other", func(llm.Request, int) (scripted.Turn, error) {
		return scripted.Turn{Content: "something else entirely"}, nil
	})
	got, err := newRuntime(t, other, j, nil).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "r", Input: "Book the team lunch."})
	if err != nil {
		t.Fatal(err)
	}
	if other.Calls() != 0 || got.ModelCalls != 0 || got.Reused != 4 || got.ToolRuns != 0 || got.ToolsReused != 4 {
		t.Fatalf("resume of a finished run called the model %d times, ran %d tools (%+v)", other.Calls(), got.ToolRuns, got)
	}
	if got.Answer != want.Answer || got.Usage != want.Usage {
		t.Fatalf("resumed answer %q usage %+v, want %q %+v", got.Answer, got.Usage, want.Answer, want.Usage)
	}
	var n int
	j.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_entries`).Scan(&n)
	evs, _ := j.Events(ctx, "r")
	if n != 2 || len(evs) != 20 {
		t.Fatalf("resume changed the state: %d ledger rows, %d events", n, len(evs))
	}
}

// failingJournal fails every append after the first n, like a process that
// dies there.
type failingJournal struct {
	*journaldb.Store
	left int
}

var errDied = errors.New("process died")

func (f *failingJournal) Append(ctx context.Context, run string, recs ...journal.Record) ([]journal.Event, error) {
	if f.left <= 0 {
		return nil, errDied
	}
	f.left--
	return f.Store.Append(ctx, run, recs...)
}

func (f *failingJournal) AppendEffect(ctx context.Context, run string, c journal.EffectCall, fn journal.EffectFunc) ([]journal.Event, error) {
	if f.left <= 0 {
		return nil, errDied
	}
	f.left--
	return f.Store.AppendEffect(ctx, run, c, fn)
}

func TestResumeFromEveryPrefixCallsTheModelOnlyForUnrecordedSteps(t *testing.T) {
	ctx := context.Background()
	for cut := 0; cut < 18; cut++ { // the run makes 18 appends; die at each one
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			t.Parallel() // each cut has its own journal
			j := openJournal(t, "")
			m1, _ := scripted.New(bookScript())
			_, err := newRuntime(t, m1, &failingJournal{Store: j, left: cut}, nil).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "r", Input: "Book the team lunch."})
			if !errors.Is(err, errDied) {
				t.Fatalf("first attempt: %v", err)
			}
			evs, _ := j.Events(ctx, "r")
			recordedAnswers := strings.Count(kinds(evs), "model_response")
			m2, _ := scripted.New(bookScript())
			res, err := newRuntime(t, m2, j, nil).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "r", Input: "Book the team lunch."})
			if err != nil {
				t.Fatal(err)
			}
			if m2.Calls() != 4-recordedAnswers || res.Reused != recordedAnswers {
				t.Fatalf("after %d events (%d answers recorded) the resume called the model %d times", len(evs), recordedAnswers, m2.Calls())
			}
			var n int
			j.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_entries`).Scan(&n)
			if n != 2 {
				t.Fatalf("ledger rows = %d, want 2", n)
			}
			if err := j.Verify(ctx, "r"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestResumeUnderAChangedAgentReportsDivergenceAtSeqOne(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t, "")
	m, _ := scripted.New(bookScript())
	if _, err := newRuntime(t, m, j, nil).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "r", Input: "Book the team lunch."}); err != nil {
		t.Fatal(err)
	}
	changed := bookkeeper.Agent()
	changed.System += " Be brief."
	_, err := newRuntime(t, m, j, nil).Run(ctx, changed, runtime.Task{RunID: "r", Input: "Book the team lunch."})
	var de *journal.DivergenceError
	if !errors.As(err, &de) || de.Seq != 1 || de.Code != journal.CodeMismatch || de.Field != "args_hash" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "[LWR1100]") {
		t.Fatalf("error lacks the stable code: %v", err)
	}
}

func TestStepLimitMakesOneLastCallWithToolsWithheld(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t, "")
	var lastReq llm.Request
	m := scripted.NewFunc("", func(req llm.Request, turn int) (scripted.Turn, error) {
		lastReq = req
		if len(req.Tools) == 0 {
			return scripted.Turn{Content: "Total so far: 6."}, nil
		}
		return scripted.Turn{ToolCalls: []llm.ToolCall{call(fmt.Sprintf("c%d", turn), "calculator", `{"op":"add","a":3,"b":3}`)}}, nil
	})
	rt := newRuntime(t, m, j, nil)
	res, err := rt.Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "r", Input: "Add forever.", MaxSteps: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !res.StepLimitReached || res.Answer != "Total so far: 6." || res.Steps != 4 || m.Calls() != 4 {
		t.Fatalf("result = %+v, calls = %d", res, m.Calls())
	}
	if len(lastReq.Tools) != 0 {
		t.Fatalf("final call offered %d tools", len(lastReq.Tools))
	}
	last := lastReq.Messages[len(lastReq.Messages)-1]
	if last.Role != llm.RoleUser || last.Content != runtime.StepLimitPrompt {
		t.Fatalf("final call's last message = %+v", last)
	}
	if err := llm.ValidateOrder(lastReq.Messages); err != nil {
		t.Fatal(err)
	}
	evs, _ := j.Events(ctx, "r")
	var mr journal.ModelRequest
	json.Unmarshal(evs[len(evs)-3].Payload, &mr)
	if evs[len(evs)-3].Kind != journal.KindModelRequest || !mr.ToolsWithheld || len(mr.Tools) != 0 {
		t.Fatalf("final model_request not journaled as tools-withheld: %s", evs[len(evs)-3].Payload)
	}
}

// observation returns the content of the tool message answering callID in
// the model's later request.
func observation(req llm.Request, callID string) llm.Message {
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool && m.ToolCallID == callID {
			return m
		}
	}
	return llm.Message{}
}

func TestFailingToolsBecomeErrorObservationsAndTheRunGoesOn(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t, "")
	agent := bookkeeper.Agent()
	agent.Tools = append(agent.Tools, runtime.Tool{
		Name: "flaky", Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) { panic("index out of range") },
	}, runtime.Tool{
		Name: "flaky_effect", Effect: true, EffectSchema: `CREATE TABLE IF NOT EXISTS flaky (v INTEGER)`,
		Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			if err := in.Tx.Exec(ctx, `INSERT INTO flaky (v) VALUES (1)`); err != nil {
				return runtime.ToolOutput{}, err
			}
			return runtime.ToolOutput{}, errors.New("remote refused after the insert")
		},
	})
	var final llm.Request
	m := scripted.NewFunc("", func(req llm.Request, turn int) (scripted.Turn, error) {
		switch turn {
		case 0:
			return scripted.Turn{ToolCalls: []llm.ToolCall{
				call("div", "calculator", `{"op":"div","a":1,"b":0}`),
				call("bad", "ledger_append", `{"account":"cash","amount_cents":"ten"}`),
				call("missing", "ledger_append", `{"amount_cents":5}`),
				call("panic", "flaky", `{}`),
				call("unknown", "teleport", `{}`),
				call("rollback", "flaky_effect", `{}`),
				call("notjson", "calculator", `{"op":`),
			}}, nil
		default:
			final = req
			return scripted.Turn{Content: "done"}, nil
		}
	})
	res, err := newRuntime(t, m, j, nil).Run(ctx, agent, runtime.Task{RunID: "r", Input: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "done" {
		t.Fatalf("answer = %q", res.Answer)
	}
	for id, want := range map[string]string{
		"div":      "error: tool calculator failed: division by zero",
		"bad":      `error: invalid arguments for tool ledger_append: field "/amount_cents": got string, want integer`,
		"missing":  `error: invalid arguments for tool ledger_append: arguments: missing property 'account'`,
		"panic":    "error: tool flaky failed: tool panicked: index out of range",
		"unknown":  `error: unknown tool "teleport"; available tools: calculator, search_policy, ledger_append, flaky, flaky_effect`,
		"rollback": "error: tool flaky_effect failed: remote refused after the insert",
		"notjson":  "error: invalid arguments for tool calculator: not valid JSON",
	} {
		obs := observation(final, id)
		if !obs.IsError || !strings.HasPrefix(obs.Content, want) {
			t.Errorf("call %s: observation %+v, want IsError and prefix %q", id, obs, want)
		}
	}
	var rows, ledger int
	j.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM flaky`).Scan(&rows)
	j.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger_entries`).Scan(&ledger)
	if rows != 0 || ledger != 0 {
		t.Fatalf("failed or refused calls left effects: flaky=%d ledger=%d", rows, ledger)
	}
}

func TestCancelledRunStopsAndResumesLater(t *testing.T) {
	j := openJournal(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	agent := bookkeeper.Agent()
	ran := 0
	agent.Tools = append(agent.Tools, runtime.Tool{Name: "slow", Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
		ran++
		if ran == 1 {
			cancel()
			<-ctx.Done()
			return runtime.ToolOutput{}, ctx.Err()
		}
		return runtime.ToolOutput{Content: "finished"}, nil
	}})
	script := scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []llm.ToolCall{call("s1", "slow", `{}`)}},
		{Content: "ok", Expect: &scripted.Expect{LastContains: "finished", ToolError: bptr(false)}},
	}}
	m, _ := scripted.New(script)
	_, err := newRuntime(t, m, j, nil).Run(ctx, agent, runtime.Task{RunID: "r", Input: "x"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	evs, _ := j.Events(context.Background(), "r")
	if kinds(evs) != "run_started model_request model_response tool_call" {
		t.Fatalf("a cancelled call must not be journaled as a result: %s", kinds(evs))
	}
	res, err := newRuntime(t, m, j, nil).Run(context.Background(), agent, runtime.Task{RunID: "r", Input: "x"})
	if err != nil || res.Answer != "ok" || ran != 2 {
		t.Fatalf("resume: %v %+v ran=%d", err, res, ran)
	}
}

func TestScriptedModelErrorsWhenConversationDiverges(t *testing.T) {
	ctx := context.Background()
	j := openJournal(t, "")
	script := scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []llm.ToolCall{call("c1", "calculator", `{"op":"div","a":1,"b":0}`)}},
		{Content: "ok", Expect: &scripted.Expect{ToolError: bptr(false)}},
	}}
	m, _ := scripted.New(script)
	_, err := newRuntime(t, m, j, nil).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "r", Input: "x"})
	if !errors.Is(err, scripted.ErrDiverged) || !strings.Contains(err.Error(), "is_error=false") {
		t.Fatalf("err = %v", err)
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

func TestSpansFollowTheGenAIConventions(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	m, _ := scripted.New(bookScript())
	if _, err := newRuntime(t, m, openJournal(t, ""), tp).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "run-9", Input: "Book the team lunch.", Model: "gpt-x"}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
		if s.Name() == "invoke_agent bookkeeper" {
			root = s
		}
	}
	if root == nil || len(byName["chat gpt-x"]) != 4 || len(byName["execute_tool ledger_append"]) != 2 ||
		len(byName["execute_tool calculator"]) != 1 || len(byName["retrieval search_policy"]) != 1 {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("spans = %v", names)
	}
	ra := attrs(root)
	if ra["gen_ai.operation.name"].AsString() != "invoke_agent" || ra["gen_ai.agent.name"].AsString() != "bookkeeper" ||
		ra["gen_ai.conversation.id"].AsString() != "run-9" || ra["loomwork.model.label"].AsString() != "scripted" ||
		strings.Join(ra["loomwork.citations"].AsStringSlice(), ",") != "policy/meals" {
		t.Fatalf("invoke_agent attributes = %v", ra)
	}
	chat := byName["chat gpt-x"][1]
	ca := attrs(chat)
	if chat.Parent().SpanID() != root.SpanContext().SpanID() || ca["gen_ai.operation.name"].AsString() != "chat" ||
		ca["gen_ai.provider.name"].AsString() != "scripted" || ca["gen_ai.request.model"].AsString() != "gpt-x" ||
		ca["gen_ai.response.model"].AsString() != "scripted-bookkeeper" || ca["gen_ai.usage.input_tokens"].AsInt64() != 150 ||
		ca["gen_ai.usage.output_tokens"].AsInt64() != 12 || ca["gen_ai.usage.cache_read.input_tokens"].AsInt64() != 90 ||
		ca["loomwork.model.label"].AsString() != "scripted" || ca["gen_ai.conversation.id"].AsString() != "run-9" {
		t.Fatalf("chat attributes = %v", ca)
	}
	if a := attrs(byName["chat gpt-x"][3]); a["gen_ai.usage.reasoning.output_tokens"].AsInt64() != 5 {
		t.Fatalf("reasoning tokens = %v", a)
	}
	tool := byName["execute_tool ledger_append"][0]
	ta := attrs(tool)
	if tool.Parent().SpanID() != root.SpanContext().SpanID() || ta["gen_ai.operation.name"].AsString() != "execute_tool" ||
		ta["gen_ai.tool.name"].AsString() != "ledger_append" || ta["gen_ai.tool.call.id"].AsString() != "c3" {
		t.Fatalf("execute_tool attributes = %v", ta)
	}
	ret := byName["retrieval search_policy"][0]
	rta := attrs(ret)
	if ret.Parent().SpanID() != byName["execute_tool search_policy"][0].SpanContext().SpanID() ||
		rta["gen_ai.operation.name"].AsString() != "retrieval" || strings.Join(rta["gen_ai.retrieval.documents"].AsStringSlice(), ",") != "policy/meals" {
		t.Fatalf("retrieval span = %v", rta)
	}
	for _, s := range spans {
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Fatalf("span %s is in another trace", s.Name())
		}
	}
}

// A tool whose schema does not compile — or needs anything but itself, a
// URL never being fetched — is refused when the agent is registered, and
// the error names the tool.
func TestRegisterRefusesASchemaThatDoesNotCompileNamingTheTool(t *testing.T) {
	run := func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) { return runtime.ToolOutput{}, nil }
	for schema, want := range map[string]string{
		`{"type":"object","properties":{"n":{"type":"integr"}}}`:                     `at '/properties/n/type'`,
		`{"type":"object","properties":{"n":{"$ref":"https://example.com/n.json"}}}`: `"https://example.com/n.json"`,
	} {
		err := runtime.NewRegistry().Register(runtime.Agent{Name: "a", Tools: []runtime.Tool{
			{Name: "fine", Parameters: json.RawMessage(`{"type":"object"}`), Run: run},
			{Name: "broken", Parameters: json.RawMessage(schema), Run: run},
		}})
		if err == nil || !strings.Contains(err.Error(), `agent a: tool "broken": compile schema: `) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to name the tool and %s", schema, err, want)
		}
	}
}
