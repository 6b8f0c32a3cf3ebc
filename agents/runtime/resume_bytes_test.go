package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/scripted"
)

// interruptedJournal refuses the nth append (a process that died there: what
// came before is durable).
type interruptedJournal struct {
	*journaldb.Store
	n, at int
}

func (f *interruptedJournal) Append(ctx context.Context, run string, recs ...journal.Record) ([]journal.Event, error) {
	f.n++
	if f.n == f.at {
		return nil, errors.New("killed")
	}
	return f.Store.Append(ctx, run, recs...)
}

// A run interrupted after a model's tool call and resumed in a new runtime
// sees the same conversation, byte for byte, as one that ran through: the
// call's arguments are kept in the canonical form the journal stores, so
// what is counted over them (here the model's usage, as the scripted
// policies count it) does not change with an interruption. Before, a fresh
// run kept a model's "\u003c" where the resumed one read "<" back from the
// journal, and a resumed trial reported fewer tokens.
func TestAResumedRunSeesTheSameArgumentBytes(t *testing.T) {
	ctx := context.Background()
	args, _ := json.Marshal(map[string]string{"query": "<!-- Translations --> & more", "b": "x"}) // HTML-escaped, as a model (or json.Marshal) may send them
	model := scripted.NewFunc("scripted-bytes", func(req llm.Request, turn int) (scripted.Turn, error) {
		if turn == 0 {
			return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "look", Arguments: args}}}, nil
		}
		n := 0
		for _, m := range req.Messages {
			for _, c := range m.ToolCalls {
				n += len(c.Arguments)
			}
		}
		return scripted.Turn{Content: "done", Usage: llm.Usage{InputTokens: int64(n)}}, nil
	})
	agent := runtime.Agent{Name: "looker", System: "s", Tools: []runtime.Tool{{Name: "look", Parameters: json.RawMessage(`{"type":"object"}`),
		Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
			return runtime.ToolOutput{Content: "seen"}, nil
		}}}}
	usage := func(interruptAt int) int64 {
		j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Shutdown(ctx)
		if interruptAt > 0 {
			rt, _ := runtime.New(runtime.Config{Model: model, Journal: &interruptedJournal{Store: j, at: interruptAt}})
			if _, err := rt.Run(ctx, agent, runtime.Task{RunID: "r", Input: "x"}); err == nil {
				t.Fatal("the interrupted run finished")
			}
		}
		rt, _ := runtime.New(runtime.Config{Model: model, Journal: j})
		res, err := rt.Run(ctx, agent, runtime.Task{RunID: "r", Input: "x"})
		if err != nil {
			t.Fatal(err)
		}
		if interruptAt > 0 && res.Reused == 0 {
			t.Fatal("the resumed run reused nothing")
		}
		return res.Usage.InputTokens
	}
	// Appends: run_started, model_request, model_response, tool_call,
	// tool_result, model_request, then the second model_response (7).
	through, resumed := usage(0), usage(7)
	if through == 0 || through != resumed {
		t.Fatalf("the model counted %d argument bytes in a run that ran through, %d after a resume", through, resumed)
	}
}
