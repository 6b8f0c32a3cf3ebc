package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/replay"
)

// Runs under a context layer replay from their journal alone: the engine's
// runtime is configured with no context layer and no summariser, so the
// spec (and a model summary's text) must come from the journal. The
// runtime's own tests (agents/runtime/context_test.go) check the layer,
// resume and the journal records; these check the engine with them.

// logAgent has one tool returning a large JSON payload of log rows; the
// payload of step 3 hides the identifier INC-40721 in row 12 — the fact a
// context layer must not lose. (As in agents/runtime/context_test.go.)
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
// context the runtime passes: it calls read_logs for pages 1..pages, then
// answers with the incident id if it is still in view. Its usage is the
// estimate of the request it received.
type stepModel struct {
	pages int
	calls atomic.Int64
}

func (m *stepModel) Label() string { return llm.LabelScripted }

func (m *stepModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	m.calls.Add(1)
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

// countingSummarizer is a model summariser stand-in that counts its calls.
type countingSummarizer struct{ n atomic.Int64 }

func (s *countingSummarizer) Summarize(_ context.Context, msgs []llm.Message, _ int) (string, error) {
	k := s.n.Add(1)
	return fmt.Sprintf("(scripted summary %d) %d messages read pages of logs", k, len(msgs)), nil
}

// recordContextRun runs logAgent under spec (with summariser sum, which may
// be nil) into a fresh journal and returns its answer and the recorded run.
func recordContextRun(t *testing.T, runID string, spec *runtime.ContextSpec, sum contextlayer.Summarizer) (string, journal.Run) {
	t.Helper()
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "journal.db"), Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	rt, err := runtime.New(runtime.Config{Model: &stepModel{pages: 10}, Journal: j, Clock: fakeClock(), MaxSteps: 20, Context: spec, Summarizer: sum})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.Run(ctx, logAgent(), runtime.Task{RunID: runID, Input: "Find the incident id in the logs."})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf, runID); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(&buf, runID+".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs exported, want 1", len(runs))
	}
	return res.Answer, runs[0]
}

func TestContextRunReplaysIdenticallyWithNoContextLayerConfigured(t *testing.T) {
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500}
	want, run := recordContextRun(t, "ctx-2", spec, nil)
	eng, err := replay.New(replay.Config{Registry: registry(t, logAgent()), WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Replay(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.MatchedEvents != rep.RecordedEvents || rep.Answer != want || rep.ModelCalls != 0 {
		t.Fatalf("replay: ok=%v matched %d/%d divergence %v answer %q", rep.OK(), rep.MatchedEvents, rep.RecordedEvents, rep.Divergence, rep.Answer)
	}
}

func TestModelSummariesAreReusedOnReplay(t *testing.T) {
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500, Summarizer: runtime.SummarizerModel}
	sum := &countingSummarizer{}
	want, run := recordContextRun(t, "ctx-3", spec, sum)
	calls := sum.n.Load()
	if calls == 0 {
		t.Fatal("the model summariser was never asked")
	}
	// The engine has no summariser: the replay must take each summary's
	// text from the journal, and never ask sum again.
	eng, err := replay.New(replay.Config{Registry: registry(t, logAgent()), WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Replay(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Answer != want || sum.n.Load() != calls {
		t.Fatalf("replay: ok=%v divergence %v, summariser calls %d → %d", rep.OK(), rep.Divergence, calls, sum.n.Load())
	}
}
