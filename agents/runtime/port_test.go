package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/memjournal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/agents/scripted"
)

// notifier is an agent whose side-effecting tool keeps no tables: it
// notifies a receiver that deduplicates on the key (here, a counter).
func notifier(sent *[]string) runtime.Agent {
	return runtime.Agent{Name: "notifier", System: "notify", Tools: []runtime.Tool{
		bookkeeper.Calculator(),
		{Name: "notify", Effect: true, Parameters: json.RawMessage(`{"type":"object"}`),
			Run: func(_ context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
				if in.Tx != nil {
					return runtime.ToolOutput{}, errors.New("a journal without tables gave a SQL transaction")
				}
				*sent = append(*sent, in.IdempotencyKey)
				return runtime.ToolOutput{Content: "notified"}, nil
			}},
	}}
}

func notifyScript() *scripted.Model {
	return scripted.NewFunc("", func(_ llm.Request, turn int) (scripted.Turn, error) {
		switch turn {
		case 0:
			return scripted.Turn{ToolCalls: []llm.ToolCall{call("c1", "calculator", `{"op":"add","a":2,"b":2}`)}}, nil
		case 1:
			return scripted.Turn{ToolCalls: []llm.ToolCall{call("c2", "notify", `{}`)}}, nil
		default:
			return scripted.Turn{Content: "done"}, nil
		}
	})
}

// The runtime runs on any store of the port: on the in-memory journal an
// effect tool runs once per key (resuming reuses its result) and gets no
// SQL transaction.
func TestRunOnAJournalWithoutTables(t *testing.T) {
	ctx := context.Background()
	j := memjournal.New(memjournal.Config{Clock: fakeClock()})
	var sent []string
	for range 2 { // the second Run resumes the finished run
		res, err := newRuntime(t, notifyScript(), j, nil).Run(ctx, notifier(&sent), runtime.Task{RunID: "n", Input: "notify"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Answer != "done" {
			t.Fatalf("answer = %q", res.Answer)
		}
	}
	if len(sent) != 1 || sent[0] == "" {
		t.Fatalf("notifications sent: %q, want one with a key", sent)
	}
	evs, err := j.Events(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	want := "run_started model_request model_response tool_call tool_result model_request model_response tool_call tool_result model_request model_response run_finished"
	if got := kinds(evs); got != want {
		t.Fatalf("journal kinds:\n got %s\nwant %s", got, want)
	}
	if err := journal.VerifyChain(evs); err != nil {
		t.Fatal(err)
	}
}

// A tool that keeps tables in the journal cannot run on a journal without
// them: the run says so before anything is journaled or asked.
func TestToolWithTablesNeedsAJournalWithTables(t *testing.T) {
	ctx := context.Background()
	j := memjournal.New(memjournal.Config{})
	m, err := scripted.New(bookScript())
	if err != nil {
		t.Fatal(err)
	}
	_, err = newRuntime(t, m, j, nil).Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "b", Input: "book"})
	if err == nil || !strings.Contains(err.Error(), "tool ledger_append keeps tables in the journal (EffectSchema), and the journal (*memjournal.Journal) has none") {
		t.Fatalf("err = %v", err)
	}
	if evs, _ := j.Events(ctx, "b"); len(evs) != 0 {
		t.Fatalf("the refused run journaled %d events", len(evs))
	}
}

// racingJournal completes every effect key with another caller's result
// just before the runtime's call arrives.
type racingJournal struct{ *memjournal.Journal }

func (r racingJournal) AppendEffect(ctx context.Context, runID string, c journal.EffectCall, fn journal.EffectFunc) ([]journal.Event, error) {
	other := func(context.Context, journal.EffectTx) (journal.Record, error) {
		return journal.Record{Kind: journal.KindToolResult, Step: c.Step, Tool: c.Tool, CallID: c.CallID,
			Payload: journal.ToolResult{Content: "notified by the other caller", Key: c.Key}}, nil
	}
	if _, err := r.Journal.AppendEffect(ctx, runID, c, other); err != nil {
		return nil, err
	}
	return r.Journal.AppendEffect(ctx, runID, c, fn)
}

// A key another caller completed is not run again: its recorded result is
// the observation.
func TestCompletedEffectKeyAnswersWithItsRecordedResult(t *testing.T) {
	ctx := context.Background()
	j := racingJournal{memjournal.New(memjournal.Config{})}
	var sent []string
	var final llm.Request
	m := scripted.NewFunc("", func(req llm.Request, turn int) (scripted.Turn, error) {
		if turn == 0 {
			return scripted.Turn{ToolCalls: []llm.ToolCall{call("c1", "notify", `{}`)}}, nil
		}
		final = req
		return scripted.Turn{Content: "done"}, nil
	})
	if _, err := newRuntime(t, m, j, nil).Run(ctx, notifier(&sent), runtime.Task{RunID: "r", Input: "notify"}); err != nil {
		t.Fatal(err)
	}
	if len(sent) != 0 {
		t.Fatalf("the tool ran for a completed key: %q", sent)
	}
	if obs := observation(final, "c1"); obs.Content != "notified by the other caller" || obs.IsError {
		t.Fatalf("observation = %+v, want the recorded result", obs)
	}
}
