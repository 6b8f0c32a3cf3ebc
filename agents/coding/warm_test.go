package coding_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
)

// TestEachExecutionRecordsAWarmOrColdStart: every run_python execution
// says in the journal (its tool_result's attrs) and on its execute_tool
// span (loomwork.sandbox.start) whether it claimed a sandbox the warm pool
// had started ahead of time. On a runner with a pool of one, an execution
// that waits for the pool to be full is warm; on a runner without a pool
// every execution is cold. A resumed run reuses the recorded value.
func TestEachExecutionRecordsAWarmOrColdStart(t *testing.T) {
	testtier.Slow(t) // real sandboxes
	needSandbox(t)
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	for _, c := range []struct {
		pool int
		want string
	}{{1, semconv.SandboxStartWarm}, {0, semconv.SandboxStartCold}} {
		t.Run(c.want, func(t *testing.T) {
			r, err := sandbox.New(sandbox.Config{Pool: c.pool})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() {
				sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				r.Shutdown(sctx)
			}()
			agent, err := coding.New(coding.Config{Sandbox: r, WorkRoot: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			// Writes the program, then runs it twice; before each run it
			// waits until the pool (if any) is full again.
			model := scripted.NewFunc("scripted-warm-check", func(req llm.Request, turn int) (scripted.Turn, error) {
				call := func(name, args string) (scripted.Turn, error) {
					return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("c%d", turn), Name: name, Arguments: json.RawMessage(args)}}}, nil
				}
				switch turn {
				case 0:
					return call("write_file", `{"path":"main.py","content":"print(6*7)"}`)
				case 1, 2:
					for deadline := time.Now().Add(20 * time.Second); r.PoolReady() < c.pool && time.Now().Before(deadline); {
						time.Sleep(10 * time.Millisecond)
					}
					return call("run_python", `{"path":"main.py"}`)
				}
				return scripted.Turn{Content: "42 [output:42]"}, nil
			})
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			id := "warm-check-" + c.want
			rt, err := runtime.New(runtime.Config{Model: model, Journal: j, TracerProvider: tp})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rt.Run(ctx, agent, runtime.Task{RunID: id, Input: "print 6*7"}); err != nil {
				t.Fatal(err)
			}
			evs, _ := j.Events(ctx, id)
			var starts []string
			for _, e := range evs {
				if e.Kind == journal.KindToolResult && e.Tool == "run_python" {
					var tr journal.ToolResult
					if err := json.Unmarshal(e.Payload, &tr); err != nil {
						t.Fatal(err)
					}
					starts = append(starts, tr.Attrs[semconv.AttrSandboxStart])
				}
			}
			if len(starts) != 2 || starts[0] != c.want || starts[1] != c.want {
				t.Fatalf("journaled starts %v, want two %s", starts, c.want)
			}
			var spans []string
			for _, s := range rec.Ended() {
				if s.Name() != "execute_tool run_python" {
					continue
				}
				for _, a := range s.Attributes() {
					if string(a.Key) == semconv.AttrSandboxStart {
						spans = append(spans, a.Value.AsString())
					}
				}
			}
			if len(spans) != 2 || spans[0] != c.want || spans[1] != c.want {
				t.Fatalf("execute_tool spans say %v, want two %s", spans, c.want)
			}
			// Resumed (the journal holds everything): the spans carry the
			// recorded starts, nothing runs again.
			rec2 := tracetest.NewSpanRecorder()
			rt2, _ := runtime.New(runtime.Config{Model: model, Journal: j, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec2))})
			res, err := rt2.Run(ctx, agent, runtime.Task{RunID: id, Input: "print 6*7"})
			if err != nil || res.ToolRuns != 0 {
				t.Fatalf("resume: %v, %d tool runs", err, res.ToolRuns)
			}
			n := 0
			for _, s := range rec2.Ended() {
				for _, a := range s.Attributes() {
					if string(a.Key) == semconv.AttrSandboxStart && a.Value.AsString() == c.want {
						n++
					}
				}
			}
			if n != 2 {
				t.Fatalf("resumed spans carry the recorded start %d times, want 2", n)
			}
		})
	}
}
