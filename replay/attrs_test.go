package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/replay"
	"github.com/loomwork/loomwork/semconv"
)

// A tool's attrs say how it ran (a warm or a cold sandbox), not what it
// returned: they are journaled, and a replay whose tool ran another way
// (cold where the recording was warm) still reproduces the journal, even
// strictly; a changed result does not.
func TestReplayDoesNotCompareHowAToolRan(t *testing.T) {
	ctx := context.Background()
	agentFor := func(start, content string) runtime.Agent {
		return runtime.Agent{Name: "runner", System: "s", Tools: []runtime.Tool{{Name: "run", Parameters: json.RawMessage(`{"type":"object"}`),
			Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
				return runtime.ToolOutput{Content: content, Attrs: map[string]string{semconv.AttrSandboxStart: start}}, nil
			}}}}
	}
	model := scripted.NewFunc("scripted-attrs", func(_ llm.Request, turn int) (scripted.Turn, error) {
		if turn == 0 {
			return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "run", Arguments: json.RawMessage(`{}`)}}}, nil
		}
		return scripted.Turn{Content: "done"}, nil
	})
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	rt, _ := runtime.New(runtime.Config{Model: model, Journal: j, Clock: fakeClock()})
	if _, err := rt.Run(ctx, agentFor(semconv.SandboxStartWarm, "42"), runtime.Task{RunID: "a-1", Input: "x"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"attrs":{"loomwork.sandbox.start":"warm"}`) {
		t.Fatalf("the journal does not hold how the tool ran:\n%s", buf.String())
	}
	runs, err := journal.ReadJSONL(&buf, "a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		start, content string
		same           bool
	}{{semconv.SandboxStartCold, "42", true}, {semconv.SandboxStartWarm, "41", false}} {
		e, _ := replay.New(replay.Config{Registry: registry(t, agentFor(c.start, c.content))})
		rep, err := e.Replay(ctx, runs[0])
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() != c.same {
			t.Fatalf("replayed %s with result %s: ok %v (divergence %+v, diffs %+v), want %v", c.start, c.content, rep.OK(), rep.Divergence, rep.ResultDiffs, c.same)
		}
	}
}
