package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/runtime/runtimetest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/internal/testtier"
)

func contextRuntime(t *testing.T, m runtime.Model, j journal.Journal, tp *sdktrace.TracerProvider, spec *runtime.ContextSpec) *runtime.Runtime {
	t.Helper()
	cfg := runtime.Config{Model: m, Journal: j, Clock: fakeClock(), MaxSteps: 20, Context: spec}
	if tp != nil {
		cfg.TracerProvider = tp
	}
	rt, err := runtime.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestContextLayerKeepsRequestsInBudgetAndTracesWhatItDid(t *testing.T) {
	testtier.Slow(t) // the layer counts every request with o200k_base, CPU-heavy under -race
	t.Parallel()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500}
	m := &runtimetest.StepModel{Pages: 10}
	j := openJournal(t, "")
	res, err := contextRuntime(t, m, j, tp, spec).Run(ctx, runtimetest.LogAgent(), runtime.Task{RunID: "ctx-1", Input: "Find the incident id in the logs."})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "The incident is INC-40721." {
		t.Fatalf("answer = %q: the pinned identifier did not reach the last request", res.Answer)
	}
	tok, err := contextlayer.NewTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range m.Seen {
		if n := contextlayer.ConversationTokens(tok, req.System, req.Messages); n > spec.Budget {
			t.Errorf("request %d counts %d tokens, over the %d budget", i+1, n, spec.Budget)
		}
		if err := llm.ValidateOrder(req.Messages); err != nil {
			t.Errorf("request %d breaks the tool ordering rule: %v", i+1, err)
		}
	}
	var chats []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "chat") {
			chats = append(chats, s)
		}
	}
	if len(chats) != 11 {
		t.Fatalf("%d chat spans, want 11", len(chats))
	}
	last := attrs(chats[len(chats)-1])
	if last["loomwork.context.tokenizer"].AsString() != "o200k_base" || last["loomwork.context.budget"].AsInt64() != 1500 ||
		last["loomwork.context.strategy"].AsString() != "shrink+summarise+pins" {
		t.Fatalf("last chat span: %v", last)
	}
	before, after := last["loomwork.context.tokens_before"].AsInt64(), last["loomwork.context.tokens_after"].AsInt64()
	if before <= 1500 || after > 1500 || after >= before {
		t.Fatalf("tokens before/after = %d/%d", before, after)
	}
	if last["loomwork.context.shrunk"].AsInt64() == 0 || last["loomwork.context.shrunk.tokens_saved"].AsInt64() <= 0 ||
		last["loomwork.context.summarised"].AsInt64() == 0 || last["loomwork.context.summary.by"].AsString() != "extractive" {
		t.Fatalf("nothing shrunk or summarised on the last chat span: %v", last)
	}
	if !strings.Contains(strings.Join(last["loomwork.context.pinned.values"].AsStringSlice(), ","), "INC-40721") {
		t.Fatalf("pinned values = %v", last["loomwork.context.pinned.values"].AsStringSlice())
	}
	// The provider-style count sits beside the layer's estimate.
	in := last["gen_ai.usage.input_tokens"].AsInt64()
	if in == 0 || last["loomwork.context.usage_minus_estimate"].AsInt64() != in-after {
		t.Fatalf("usage %d beside estimate %d: delta attribute %v", in, after, last["loomwork.context.usage_minus_estimate"])
	}
	// The journal keeps the uncompacted history and the report.
	evs, _ := j.Events(ctx, "ctx-1")
	var started journal.RunStarted
	json.Unmarshal(evs[0].Payload, &started)
	if !strings.Contains(string(started.Attributes), `"budget":1500`) {
		t.Fatalf("run_started attributes = %s", started.Attributes)
	}
	sawReport, sawFullPage3 := false, false
	for _, e := range evs {
		if e.Kind == journal.KindModelRequest && bytes.Contains(e.Payload, []byte(`"tokens_after"`)) {
			sawReport = true
		}
		if e.Kind == journal.KindModelRequest && bytes.Contains(e.Payload, []byte(`INC-40721 after three retries`)) {
			sawFullPage3 = true
		}
	}
	if !sawReport || !sawFullPage3 {
		t.Fatalf("journal: context report %v, uncompacted page 3 %v", sawReport, sawFullPage3)
	}
}

// The replay of such runs (by an engine with no context layer configured)
// is checked with the engine, in replay/context_test.go.
func TestContextRunsResumeIdentically(t *testing.T) {
	testtier.Slow(t) // the layer counts every request with o200k_base, CPU-heavy under -race
	t.Parallel()
	ctx := context.Background()
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500}
	j := openJournal(t, "")
	m := &runtimetest.StepModel{Pages: 10}
	want, err := contextRuntime(t, m, j, nil, spec).Run(ctx, runtimetest.LogAgent(), runtime.Task{RunID: "ctx-2", Input: "Find the incident id in the logs."})
	if err != nil {
		t.Fatal(err)
	}
	// Resume of the finished run: every compacted request must hash the same.
	m2 := &runtimetest.StepModel{Pages: 10}
	got, err := contextRuntime(t, m2, j, nil, spec).Run(ctx, runtimetest.LogAgent(), runtime.Task{RunID: "ctx-2", Input: "Find the incident id in the logs."})
	if err != nil || m2.Calls.Load() != 0 || got.Answer != want.Answer {
		t.Fatalf("resume: err %v, %d model calls, answer %q", err, m2.Calls.Load(), got.Answer)
	}
	// Resuming under another budget is a divergence at seq 1.
	other := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1600}
	_, err = contextRuntime(t, &runtimetest.StepModel{Pages: 10}, j, nil, other).Run(ctx, runtimetest.LogAgent(), runtime.Task{RunID: "ctx-2", Input: "Find the incident id in the logs."})
	var de *journal.DivergenceError
	if !errors.As(err, &de) || de.Seq != 1 {
		t.Fatalf("resume under a changed context spec: %v", err)
	}
}

func TestContextSpecValidationNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		spec runtime.ContextSpec
		want string
	}{
		{runtime.ContextSpec{Strategy: "squeeze", Budget: 10}, "context.strategy"},
		{runtime.ContextSpec{Strategy: "shrink", Budget: 0}, "context.budget"},
		{runtime.ContextSpec{Strategy: "shrink", Budget: 10, Tokenizer: "cl100k"}, "context.tokenizer"},
		{runtime.ContextSpec{Strategy: "shrink", Budget: 10, Summarizer: "llm"}, "context.summarizer"},
	} {
		_, err := runtime.New(runtime.Config{Model: &runtimetest.StepModel{}, Journal: openJournal(t, ""), Context: &tc.spec})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want it to name %s", tc.spec, err, tc.want)
		}
	}
	_, err := contextRuntime(t, &runtimetest.StepModel{}, openJournal(t, ""), nil, nil).Run(context.Background(), runtimetest.LogAgent(),
		runtime.Task{RunID: "a", Input: "x", Attributes: json.RawMessage(`{"loomwork.context":1}`)})
	if err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("reserved attribute key: %v", err)
	}
}

// escapingModel answers as StepModel does, but spells its tool-call
// arguments the way json.Marshal and some providers do: `<`, `>` and `&`
// as \u003c, \u003e and \u0026. The journal's canonical JSON holds them
// as themselves.
type escapingModel struct{ runtimetest.StepModel }

func (m *escapingModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	resp, err := m.StepModel.Complete(ctx, req)
	for i, c := range resp.Message.ToolCalls {
		var a struct{ Page int }
		if err := json.Unmarshal(c.Arguments, &a); err != nil {
			return llm.Response{}, err
		}
		resp.Message.ToolCalls[i].Arguments = json.RawMessage(fmt.Sprintf(`{"page":%d,"why":"\u003cpage %d\u003e \u0026 the next"}`, a.Page, a.Page))
	}
	return resp, err
}

// A run that dies after any append and is resumed writes the journal an
// uninterrupted run writes, step for step — with the context layer
// counting tokens over tool-call arguments whose spelling the journal
// changes. Before the runtime went on with the journaled answer, the
// first run counted \u003c (several tokens) where the resumed one counted
// `<` (one), so their requests, usage and answers' hashes differed.
func TestResumedRunMatchesTheUninterruptedOne(t *testing.T) {
	testtier.Slow(t) // the layer counts every request with o200k_base
	ctx := context.Background()
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500}
	task := runtime.Task{RunID: "esc", Input: "Find the incident id in the logs."}
	whole := openJournal(t, "")
	if _, err := contextRuntime(t, &escapingModel{runtimetest.StepModel{Pages: 4}}, whole, nil, spec).Run(ctx, runtimetest.LogAgent(), task); err != nil {
		t.Fatal(err)
	}
	want, err := whole.Events(ctx, task.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < len(want)-1; cut++ {
		j := openJournal(t, "")
		_, err := contextRuntime(t, &escapingModel{runtimetest.StepModel{Pages: 4}}, &failingJournal{Store: j, left: cut}, nil, spec).Run(ctx, runtimetest.LogAgent(), task)
		if !errors.Is(err, errDied) {
			t.Fatalf("cut %d: first attempt: %v", cut, err)
		}
		if _, err := contextRuntime(t, &escapingModel{runtimetest.StepModel{Pages: 4}}, j, nil, spec).Run(ctx, runtimetest.LogAgent(), task); err != nil {
			t.Fatalf("cut %d: resume: %v", cut, err)
		}
		got, err := j.Events(ctx, task.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("cut %d: %d events, the uninterrupted run wrote %d", cut, len(got), len(want))
		}
		for i := range want {
			if got[i].Kind != want[i].Kind || !bytes.Equal(got[i].Payload, want[i].Payload) || got[i].ArgsHash != want[i].ArgsHash {
				t.Fatalf("cut %d: event %d (%s) differs from the uninterrupted run's:\n got %s\nwant %s", cut, i+1, want[i].Kind, got[i].Payload, want[i].Payload)
			}
		}
	}
}
