package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
)

// logAgent has one tool returning a large JSON payload of log rows; the
// payload of step 3 hides the identifier INC-40721 in row 12 — the fact a
// context layer must not lose.
func logAgent() runtime.Agent {
	return runtime.Agent{
		Name:   "log-reader",
		System: "You read logs page by page and report the incident id.",
		Tools: []runtime.Tool{{
			Name:        "read_logs",
			Description: "Read one page of logs.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"page":{"type":"integer","minimum":1}},"required":["page"]}`),
			Run: func(_ context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
				var a struct{ Page int }
				if err := json.Unmarshal(in.Arguments, &a); err != nil {
					return runtime.ToolOutput{}, err
				}
				rows := make([]map[string]any, 30)
				for i := range rows {
					msg := fmt.Sprintf("page %d row %d: request served in %d ms by worker-%d", a.Page, i, 40+i*3, i%7)
					if a.Page == 3 && i == 12 {
						msg = "page 3 row 12: escalated as INC-40721 after three retries"
					}
					rows[i] = map[string]any{"ts": fmt.Sprintf("2026-03-01T09:%02d:%02dZ", a.Page, i), "msg": msg}
				}
				b, _ := json.Marshal(map[string]any{"page": a.Page, "finding": fmt.Sprintf("finding-%d", a.Page), "rows": rows})
				return runtime.ToolOutput{Content: string(b)}, nil
			},
		}},
	}
}

// stepModel is a scripted model (labelled so) that reads its step from the
// context the runtime passes, as a real model would not need to: it calls
// read_logs for pages 1..pages, then answers. Its usage is the estimate of
// the request it received, so spans carry a provider-style count.
type stepModel struct {
	pages int
	calls atomic.Int64
	seen  []llm.Request
}

func (m *stepModel) Label() string { return llm.LabelScripted }

func (m *stepModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	m.calls.Add(1)
	m.seen = append(m.seen, req)
	if err := llm.ValidateOrder(req.Messages); err != nil {
		return llm.Response{}, err
	}
	step, ok := runtime.StepFromContext(ctx)
	if !ok {
		return llm.Response{}, errors.New("no step in context")
	}
	in := int64(contextlayer.ConversationTokens(contextlayer.Estimate{}, req.System, req.Messages))
	resp := llm.Response{Provider: "scripted", Model: "scripted-logs", Label: llm.LabelScripted, Usage: llm.Usage{InputTokens: in, OutputTokens: 9}}
	if step <= m.pages && len(req.Tools) > 0 {
		resp.Message = llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: fmt.Sprintf("call_%d", step), Name: "read_logs", Arguments: json.RawMessage(fmt.Sprintf(`{"page":%d}`, step))}}}
		return resp, nil
	}
	var all strings.Builder
	for _, msg := range req.Messages {
		all.WriteString(msg.Content)
	}
	answer := "no incident id in view"
	if strings.Contains(all.String(), "INC-40721") {
		answer = "The incident is INC-40721."
	}
	resp.Message = llm.Message{Role: llm.RoleAssistant, Content: answer}
	return resp, nil
}

func contextRuntime(t *testing.T, m runtime.Model, j runtime.Journal, tp *sdktrace.TracerProvider, spec *runtime.ContextSpec) *runtime.Runtime {
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
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500}
	m := &stepModel{pages: 10}
	j := openJournal(t, "")
	res, err := contextRuntime(t, m, j, tp, spec).Run(ctx, logAgent(), runtime.Task{RunID: "ctx-1", Input: "Find the incident id in the logs."})
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
	for i, req := range m.seen {
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
	ctx := context.Background()
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500}
	j := openJournal(t, "")
	m := &stepModel{pages: 10}
	want, err := contextRuntime(t, m, j, nil, spec).Run(ctx, logAgent(), runtime.Task{RunID: "ctx-2", Input: "Find the incident id in the logs."})
	if err != nil {
		t.Fatal(err)
	}
	// Resume of the finished run: every compacted request must hash the same.
	m2 := &stepModel{pages: 10}
	got, err := contextRuntime(t, m2, j, nil, spec).Run(ctx, logAgent(), runtime.Task{RunID: "ctx-2", Input: "Find the incident id in the logs."})
	if err != nil || m2.calls.Load() != 0 || got.Answer != want.Answer {
		t.Fatalf("resume: err %v, %d model calls, answer %q", err, m2.calls.Load(), got.Answer)
	}
	// Resuming under another budget is a divergence at seq 1.
	other := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1600}
	_, err = contextRuntime(t, &stepModel{pages: 10}, j, nil, other).Run(ctx, logAgent(), runtime.Task{RunID: "ctx-2", Input: "Find the incident id in the logs."})
	var de *journal.DivergenceError
	if !errors.As(err, &de) || de.Seq != 1 {
		t.Fatalf("resume under a changed context spec: %v", err)
	}
}

// countingSummarizer is a model summariser stand-in that counts its calls.
type countingSummarizer struct{ n atomic.Int64 }

func (s *countingSummarizer) Summarize(_ context.Context, msgs []llm.Message, _ int) (string, error) {
	k := s.n.Add(1)
	return fmt.Sprintf("(scripted summary %d) %d messages read pages of logs", k, len(msgs)), nil
}

// Replaying such a run without asking the summariser again is checked with
// the engine, in replay/context_test.go.
func TestModelSummariesAreJournaled(t *testing.T) {
	ctx := context.Background()
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500, Summarizer: runtime.SummarizerModel}
	j := openJournal(t, "")
	sum := &countingSummarizer{}
	rt, err := runtime.New(runtime.Config{Model: &stepModel{pages: 10}, Journal: j, Clock: fakeClock(), MaxSteps: 20, Context: spec, Summarizer: sum})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Run(ctx, logAgent(), runtime.Task{RunID: "ctx-3", Input: "Find the incident id in the logs."}); err != nil {
		t.Fatal(err)
	}
	if sum.n.Load() == 0 {
		t.Fatal("the model summariser was never asked")
	}
	// A runtime without a summariser cannot start such a run fresh...
	if _, err := runtime.New(runtime.Config{Model: &stepModel{pages: 10}, Journal: openJournal(t, ""), Context: spec}); err != nil {
		t.Fatal(err)
	}
	bare, _ := runtime.New(runtime.Config{Model: &stepModel{pages: 10}, Journal: openJournal(t, ""), Context: spec, MaxSteps: 20})
	if _, err := bare.Run(ctx, logAgent(), runtime.Task{RunID: "fresh", Input: "x"}); err == nil || !strings.Contains(err.Error(), "no Summarizer") {
		t.Fatalf("fresh model-summary run without a summariser: %v", err)
	}
	// ...so the journal must carry each summary's text for a replay.
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf, "ctx-3"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"summary_text":"(scripted summary 1)`)) {
		t.Fatal("the model summary text is not in the journal")
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
		_, err := runtime.New(runtime.Config{Model: &stepModel{}, Journal: openJournal(t, ""), Context: &tc.spec})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want it to name %s", tc.spec, err, tc.want)
		}
	}
	_, err := contextRuntime(t, &stepModel{}, openJournal(t, ""), nil, nil).Run(context.Background(), logAgent(),
		runtime.Task{RunID: "a", Input: "x", Attributes: json.RawMessage(`{"loomwork.context":1}`)})
	if err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("reserved attribute key: %v", err)
	}
}
