package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/sandbox"
)

// Python is the sandboxed Python tool `loom-eval mcp serve` offers:
// run_python_code runs the given source with /usr/bin/python3 -I in a
// fresh sandbox workspace under the coding agent's limits (no network).
func Python(sb coding.Sandbox) runtime.Tool {
	return runtime.Tool{
		Name:        "run_python_code",
		Description: "Run Python source with /usr/bin/python3 -I in a sandbox (no network, 10 s wall, 5 s CPU, 256 MiB, a fresh empty working directory). Returns the exit status, why it ended, stdout and stderr.",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"code":{"type":"string","minLength":1,"maxLength":65536,"description":"the program"},
			"stdin":{"type":"string","maxLength":65536}},
			"required":["code"],"additionalProperties":false}`),
		Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var a struct{ Code, Stdin string }
			if err := json.Unmarshal(in.Arguments, &a); err != nil {
				return runtime.ToolOutput{}, err
			}
			req := sandbox.Request{Command: []string{coding.Python, "-I", "-c", a.Code}, Limits: coding.Limits()}
			if a.Stdin != "" {
				req.Stdin = []byte(a.Stdin)
			}
			res, err := sb.Run(ctx, req)
			if err != nil {
				return runtime.ToolOutput{}, fmt.Errorf("sandbox: %w", err)
			}
			b, err := json.Marshal(map[string]any{"exited": res.Exited, "exit_code": res.ExitCode, "signal": res.Signal,
				"reason": string(res.Reason), "stdout": res.Stdout, "stderr": res.Stderr,
				"stdout_truncated": res.StdoutTruncated, "stderr_truncated": res.StderrTruncated})
			if err != nil {
				return runtime.ToolOutput{}, err
			}
			return runtime.ToolOutput{Content: string(b)}, nil
		},
	}
}

// TraceQueries is the read-only trace access the trace tools need (cmd
// adapts the trace store and the rollup to it). Each returns a JSON-ready
// value.
type TraceQueries interface {
	// List returns recent traces; filters are store query parameters
	// (since, agent, status, ...).
	List(ctx context.Context, filters map[string]string) (any, error)
	// Get returns one trace's spans (id or unique prefix).
	Get(ctx context.Context, traceID string) (any, error)
	// Rollup returns one trace's rollup (critical path, cost).
	Rollup(ctx context.Context, traceID string) (any, error)
}

// ErrTraceNotFound is what a TraceQueries returns for an unknown trace;
// the tool reports it to the caller as a tool error.
var ErrTraceNotFound = errors.New("trace not found")

// TraceTools are read-only trace queries over q: trace_list, trace_get,
// trace_rollup.
func TraceTools(q TraceQueries) []runtime.Tool {
	idSchema := json.RawMessage(`{"type":"object","properties":{
		"trace_id":{"type":"string","minLength":8,"maxLength":32,"description":"a trace id or a unique prefix of at least 8 hex digits"}},
		"required":["trace_id"],"additionalProperties":false}`)
	js := func(v any, err error) (runtime.ToolOutput, error) {
		if err != nil {
			return runtime.ToolOutput{}, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return runtime.ToolOutput{}, err
		}
		return runtime.ToolOutput{Content: string(b)}, nil
	}
	id := func(in runtime.ToolInput) (string, error) {
		var a struct {
			TraceID string `json:"trace_id"`
		}
		err := json.Unmarshal(in.Arguments, &a)
		return a.TraceID, err
	}
	return []runtime.Tool{
		{
			Name:        "trace_list",
			Description: "List stored traces, newest first (read-only). Filters: since (e.g. 1h), agent, model, status (ok|error), limit.",
			Parameters: json.RawMessage(`{"type":"object","properties":{
				"since":{"type":"string","maxLength":20},"agent":{"type":"string","maxLength":200},
				"model":{"type":"string","maxLength":200},"status":{"type":"string","enum":["ok","error"]},
				"limit":{"type":"integer","minimum":1,"maximum":200}},"additionalProperties":false}`),
			Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
				var a map[string]any
				if err := json.Unmarshal(in.Arguments, &a); err != nil {
					return runtime.ToolOutput{}, err
				}
				f := map[string]string{}
				for k, v := range a {
					f[k] = fmt.Sprint(v)
				}
				return js(q.List(ctx, f))
			},
		},
		{
			Name: "trace_get", Description: "Get one stored trace's spans (read-only).", Parameters: idSchema,
			Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
				tid, err := id(in)
				if err != nil {
					return runtime.ToolOutput{}, err
				}
				return js(q.Get(ctx, tid))
			},
		},
		{
			Name: "trace_rollup", Description: "Roll up one stored trace: critical path, leaf-only cost, tokens (read-only).", Parameters: idSchema,
			Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
				tid, err := id(in)
				if err != nil {
					return runtime.ToolOutput{}, err
				}
				return js(q.Rollup(ctx, tid))
			},
		},
	}
}
