package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var end = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func emit(t *testing.T, tasks []Task, opt Options) ([]Result, tracetest.SpanStubs) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	res := Run(context.Background(), tp, tasks, opt)
	spans := exp.GetSpans() // before Shutdown, which empties the exporter
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return res, spans
}

func attrs(s tracetest.SpanStub) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

func TestTheShippedTasksGetTheToysAnswers(t *testing.T) {
	f, err := os.Open("tasks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tasks, err := ReadTasks(f, "tasks.json")
	if err != nil {
		t.Fatal(err)
	}
	res, _ := emit(t, tasks, Options{Agent: "calculator", Trials: 1, Precision: 2, End: end})
	want := map[string]string{
		// The exact mean is 96.124991: rounded to 2 decimals, a grader
		// without a tolerance rejects it.
		"mean-trap": "The mean is 96.12.",
		"sum-basic": "The sum is 100.",
		// Wrong on purpose: the median of 1 2 4 8 9 is 4; the toy takes
		// the middle of the unsorted list.
		"median-unsorted": "The median is 9.",
		"max-list":        "The maximum is 17.",
	}
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d", len(res), len(want))
	}
	for _, r := range res {
		if r.Answer != want[r.CaseID] || r.Failed {
			t.Errorf("%s: answer %q (failed %v), want %q", r.CaseID, r.Answer, r.Failed, want[r.CaseID])
		}
	}
	res1, _ := emit(t, tasks[:1], Options{Agent: "calculator", Precision: 1, End: end})
	if res1[0].Answer != "The mean is 96.1." {
		t.Errorf("--precision 1: %q", res1[0].Answer)
	}
}

func TestEachRunIsAGenAITraceMarkedWithItsCase(t *testing.T) {
	tasks := []Task{{CaseID: "mean-trap", Task: "What is the mean of 95.5, 97.25 and 95.624973?"}, {CaseID: "odd", Task: "Tell me a joke."}}
	res, spans := emit(t, tasks, Options{Agent: "calculator", Trials: 2, Precision: 2, End: end})
	if len(res) != 4 || len(spans) != 2*(5+1) {
		t.Fatalf("%d results, %d spans; want 4 runs, 5 spans for a question the toy reads and 1 for one it does not", len(res), len(spans))
	}
	byTrace := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		id := s.SpanContext.TraceID().String()
		byTrace[id] = append(byTrace[id], s)
	}
	if len(byTrace) != 4 {
		t.Fatalf("%d traces, want one per run", len(byTrace))
	}
	var lastEnd time.Time
	for i, r := range res {
		ss := byTrace[r.TraceID]
		var root tracetest.SpanStub
		names := map[string]tracetest.SpanStub{}
		for _, s := range ss {
			if !s.Parent.IsValid() {
				root = s
			} else if s.Parent.SpanID() != root.SpanContext.SpanID() && root.Name != "" {
				t.Errorf("%s: span %s's parent is not the root", r.CaseID, s.Name)
			}
			names[s.Name] = s
		}
		a := attrs(root)
		if root.Name != "invoke_agent calculator" || a["gen_ai.operation.name"].AsString() != "invoke_agent" ||
			a["gen_ai.agent.name"].AsString() != "calculator" || a[keyCaseID].AsString() != r.CaseID || a[keyTrial].AsInt64() != int64(r.Trial) {
			t.Errorf("run %d root = %s %v", i, root.Name, a)
		}
		if r.Trial != i/2 {
			t.Errorf("run %d: trial %d, want %d (every task once per trial)", i, r.Trial, i/2)
		}
		var in []message
		if err := json.Unmarshal([]byte(a["gen_ai.input.messages"].AsString()), &in); err != nil || in[0].Role != "user" || in[0].Parts[0].Content != tasks[i%2].Task {
			t.Errorf("run %d input messages = %s (%v)", i, a["gen_ai.input.messages"].AsString(), err)
		}
		if !strings.Contains(a["gen_ai.output.messages"].AsString(), r.Answer) {
			t.Errorf("run %d output messages %s lack the answer %q", i, a["gen_ai.output.messages"].AsString(), r.Answer)
		}
		if root.StartTime.Before(lastEnd) {
			t.Errorf("run %d starts before the previous one ended", i)
		}
		lastEnd = root.EndTime
		if r.CaseID == "odd" {
			if !r.Failed || root.Status.Code != codes.Error || len(ss) != 1 {
				t.Errorf("unreadable question: failed %v, status %v, %d spans", r.Failed, root.Status, len(ss))
			}
			continue
		}
		if got := a[keyCitations].AsStringSlice(); len(got) != 1 || got[0] != "formulas/mean.md" {
			t.Errorf("citations = %v", got)
		}
		retr := attrs(names["retrieval formulas"])
		if retr["gen_ai.retrieval.documents"].AsString() != `[{"id":"formulas/mean.md","score":0.93}]` {
			t.Errorf("retrieval documents = %v", retr["gen_ai.retrieval.documents"])
		}
		tool := attrs(names["execute_tool calculator"])
		if tool["gen_ai.tool.name"].AsString() != "calculator" || tool["gen_ai.tool.call.arguments"].AsString() != `{"op":"mean","values":[95.5,97.25,95.624973]}` ||
			tool["gen_ai.tool.call.result"].AsString() != "96.12499100000001" {
			t.Errorf("tool span = %v", tool)
		}
		chats := 0
		for _, s := range ss {
			if s.Name != "chat toy-calculator" {
				continue
			}
			chats++
			c := attrs(s)
			if c["gen_ai.request.model"].AsString() != requestModel || c["gen_ai.response.model"].AsString() != responseModel ||
				c["gen_ai.usage.input_tokens"].AsInt64() <= 0 || c["gen_ai.usage.output_tokens"].AsInt64() <= 0 || c[keyModelLabel].AsString() != "scripted" {
				t.Errorf("chat span = %v", c)
			}
		}
		if chats != 2 {
			t.Errorf("%d chat spans, want 2", chats)
		}
	}
	if !lastEnd.Equal(end.Add(-100 * time.Millisecond)) {
		t.Errorf("the last run ends at %v, want just before --end %v", lastEnd, end)
	}
}

func TestBadInputIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `[{"case_id": "a", "task": "What is the sum of 1 and 2?"}]`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--tasks FILE is required"},
		{[]string{"--tasks", filepath.Join(dir, "missing.json")}, "missing.json: no such file"},
		{[]string{"--tasks", write("unknown.json", `[{"case_id": "a", "task": "q", "answer": "x"}]`)}, `unknown.json: json: unknown field "answer"`},
		{[]string{"--tasks", write("empty.json", `[{"case_id": "a", "task": " "}]`)}, "empty.json: task [0] (a): task is empty"},
		{[]string{"--tasks", write("dup.json", `[{"case_id": "a", "task": "q"}, {"case_id": "a", "task": "r"}]`)}, `dup.json: task [1]: case_id "a" is also task [0]'s`},
		{[]string{"--tasks", good, "--endpoint", "nowhere"}, `--endpoint "nowhere" is not host:port`},
		{[]string{"--tasks", good, "--trials", "0"}, "--trials 0: want at least 1"},
		{[]string{"--tasks", good, "--protocol", "udp"}, `--protocol "udp": want grpc or http`},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, &out, &errOut, func() time.Time { return end })
		if code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tc.args, code, errOut.String(), exitUsage, tc.want)
		}
	}

	// Nothing listening: the flush fails, and the exit says so.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--tasks", good, "--endpoint", addr, "--insecure", "--protocol", "http", "--timeout", "1s"}, &out, &errOut, time.Now)
	if code != exitRuntime || !strings.Contains(errOut.String(), "send traces to "+addr) || strings.Contains(out.String(), "Sent") {
		t.Errorf("no server: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
