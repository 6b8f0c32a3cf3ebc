package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"text/template"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomwork/loomwork/datasets"
)

// DefaultMCPArgTemplate is the tool's arguments when MCPConfig.ArgTemplate
// is empty: the task as the argument "input".
const DefaultMCPArgTemplate = `{"input": {{json .Task}}}`

// MCPEnvAllowList is the environment a stdio MCP server gets from the
// runner (with the trial's trace context and OTLP settings, and the
// variables MCPConfig.PassEnv names): nothing else, so none of the
// runner's secrets reach it.
var MCPEnvAllowList = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

// MCPConfig calls one tool of an MCP server per trial: a stdio server
// (Argv, started for the trial and stopped after it, its trace context in
// its environment) or a Streamable HTTP endpoint (URL, the trace context
// in traceparent/baggage headers). Either way the call's _meta carries
// traceparent, tracestate and baggage too. The answer is the result's
// text content (its structured content when it has no content).
type MCPConfig struct {
	// Argv starts a stdio server (no shell); exactly one of Argv and URL.
	Argv []string
	// URL is a Streamable HTTP endpoint.
	URL string
	// Tool is the tool to call. Required.
	Tool string
	// ArgTemplate renders the tool's arguments, a JSON object: a
	// text/template over TemplateData with the function json
	// (default DefaultMCPArgTemplate).
	ArgTemplate string
	// PassEnv names further variables of the runner's environment a stdio
	// server gets (its own API key, say).
	PassEnv []string
	// Getenv reads the runner's environment (default os.Getenv).
	Getenv func(string) string
	Client *http.Client
	// StderrTail bounds how much of a stdio server's stderr a failure
	// quotes (default 2000).
	StderrTail int
}

// Validate reports every problem with the configuration.
func (c *MCPConfig) Validate() error {
	var errs []error
	hasCmd := len(c.Argv) > 0 && strings.TrimSpace(c.Argv[0]) != ""
	switch {
	case hasCmd && c.URL != "":
		errs = append(errs, errors.New("mcp: give a server command or a URL, not both"))
	case !hasCmd && c.URL == "":
		errs = append(errs, errors.New("mcp: no server (give its command, e.g. --mcp-cmd 'python3 server.py', or --mcp-url)"))
	case c.URL != "":
		if err := checkURL(c.URL); err != nil {
			errs = append(errs, fmt.Errorf("mcp url: %w", err))
		}
	}
	if strings.TrimSpace(c.Tool) == "" {
		errs = append(errs, errors.New("mcp tool: required (--mcp-tool NAME)"))
	}
	if c.ArgTemplate != "" {
		if _, err := parseBody(c.ArgTemplate); err != nil {
			errs = append(errs, fmt.Errorf("mcp arg template: %w", err))
		}
	}
	for _, k := range c.PassEnv {
		if k == "" || strings.ContainsAny(k, "= ") {
			errs = append(errs, fmt.Errorf("mcp env: %q is not a variable name", k))
		}
	}
	if c.StderrTail < 0 {
		errs = append(errs, fmt.Errorf("mcp stderr_tail: %d is negative", c.StderrTail))
	}
	return errors.Join(errs...)
}

// MCPTarget implements Target for MCPConfig.
type MCPTarget struct {
	cfg  MCPConfig
	args *template.Template
}

// NewMCPTarget validates cfg; it starts and connects to nothing.
func NewMCPTarget(cfg MCPConfig) (*MCPTarget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ArgTemplate == "" {
		cfg.ArgTemplate = DefaultMCPArgTemplate
	}
	args, _ := parseBody(cfg.ArgTemplate)
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	if cfg.StderrTail == 0 {
		cfg.StderrTail = 2000
	}
	return &MCPTarget{cfg: cfg, args: args}, nil
}

// Describe implements Target.
func (t *MCPTarget) Describe() datasets.ExperimentTarget {
	server := "stdio " + strings.Join(t.cfg.Argv, " ")
	if t.cfg.URL != "" {
		server = "streamable HTTP " + redactURL(t.cfg.URL)
	}
	d := "MCP tool " + t.cfg.Tool + " of " + server + " arguments " + t.cfg.ArgTemplate
	if len(t.cfg.PassEnv) > 0 {
		d += " (env passed: " + strings.Join(t.cfg.PassEnv, ", ") + ")"
	}
	return datasets.ExperimentTarget{Kind: "mcp", Description: d}
}

// FlushedOnReturn implements Flusher: a stdio server has exited when Run
// returns; a server behind a URL exports on its own schedule.
func (t *MCPTarget) FlushedOnReturn() bool { return t.cfg.URL == "" }

// Env is a stdio server's environment for one trial: the allow-listed
// variables of the runner's, those PassEnv names, and the trial's trace
// context and OTLP settings.
func (t *MCPTarget) Env(p Propagation) []string {
	var base []string
	for _, k := range append(append([]string(nil), MCPEnvAllowList...), t.cfg.PassEnv...) {
		if v := t.cfg.Getenv(k); v != "" {
			base = append(base, k+"="+v)
		}
	}
	return p.Env(base)
}

// Run implements Target: a server that cannot be started or reached, and
// HTTP 429, 502, 503, 504, are the infrastructure's; a server that exits
// or breaks the protocol, a JSON-RPC error (an unknown tool, bad
// arguments), a result with isError, and the trial's deadline are the
// agent's.
func (t *MCPTarget) Run(ctx context.Context, req Request) (Response, error) {
	var body bytes.Buffer
	data := TemplateData{ExperimentID: req.ExperimentID, CaseID: req.Case.ID, Task: req.Case.Task, Trial: req.Trial, Case: req.Case}
	if err := t.args.Execute(&body, data); err != nil {
		return Response{}, &InfraError{Err: fmt.Errorf("render the arguments of %s for case %q: %w", t.cfg.Tool, req.Case.ID, err)}
	}
	var args map[string]any
	if err := json.Unmarshal(body.Bytes(), &args); err != nil {
		return Response{}, &InfraError{Err: fmt.Errorf("the arguments of %s for case %q are not a JSON object (%s): %w", t.cfg.Tool, req.Case.ID, body.String(), err)}
	}
	stderr := &tailBuffer{max: t.cfg.StderrTail}
	transport, startErr := t.transport(ctx, req.Trace, stderr)
	client := mcp.NewClient(&mcp.Implementation{Name: "loom-eval-experiment", Version: "1"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return t.classify(ctx, "connect", err, *startErr, stderr)
	}
	meta := mcp.Meta{}
	h := http.Header{}
	req.Trace.Headers(h)
	for k := range h {
		meta[strings.ToLower(k)] = h.Get(k)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: t.cfg.Tool, Arguments: args, Meta: meta})
	closeErr := session.Close()
	if err != nil {
		return t.classify(ctx, "tools/call "+t.cfg.Tool, err, false, stderr)
	}
	_ = closeErr // the answer is in; a server slow to exit is not the trial's failure
	text := toolText(res)
	if res.IsError {
		return Response{Failure: fmt.Sprintf("tool %s returned an error: %s", t.cfg.Tool, text)}, nil
	}
	return Response{Answer: strings.TrimSpace(text)}, nil
}

// transport is the trial's connection; *startFailed says whether a stdio
// server could not be started at all (set once Connect returns).
func (t *MCPTarget) transport(ctx context.Context, p Propagation, stderr *tailBuffer) (mcp.Transport, *bool) {
	failed := new(bool)
	if t.cfg.URL != "" {
		h := http.Header{}
		p.Headers(h)
		hc := *t.cfg.Client
		hc.Transport = headerTransport{h: h, next: hc.Transport}
		return &mcp.StreamableClientTransport{Endpoint: t.cfg.URL, HTTPClient: &hc, MaxRetries: -1, DisableStandaloneSSE: true}, failed
	}
	cmd := exec.CommandContext(ctx, t.cfg.Argv[0], t.cfg.Argv[1:]...)
	cmd.Env = t.Env(p)
	cmd.Stderr = stderr
	cmd.WaitDelay = 2 * time.Second
	return &startWatch{inner: &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, cmd: cmd, failed: failed}, failed
}

// startWatch notes whether the command could not start (as opposed to
// starting and then failing the handshake).
type startWatch struct {
	inner  *mcp.CommandTransport
	cmd    *exec.Cmd
	failed *bool
}

func (s *startWatch) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := s.inner.Connect(ctx)
	*s.failed = err != nil && s.cmd.Process == nil
	return c, err
}

func (t *MCPTarget) classify(ctx context.Context, what string, err error, startFailed bool, stderr *tailBuffer) (Response, error) {
	if ctx.Err() != nil {
		return Response{Failure: fmt.Sprintf("no answer before the trial's deadline (%v)%s", context.Cause(ctx), stderr.suffix())}, nil
	}
	if startFailed {
		return Response{}, &InfraError{Retryable: true, Err: fmt.Errorf("start %s: %w", t.cfg.Argv[0], err)}
	}
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return Response{Failure: fmt.Sprintf("MCP %s: JSON-RPC error %d: %s", what, rpc.Code, rpc.Message)}, nil
	}
	if t.cfg.URL != "" {
		if m := httpStatusRe.FindStringSubmatch(err.Error()); m != nil && retryableStatus(code(m[1])) {
			return Response{}, &InfraError{Retryable: true, Err: fmt.Errorf("MCP %s %s: %w", t.cfg.URL, what, err)}
		}
		if isConnError(err) {
			return Response{}, &InfraError{Retryable: true, Err: fmt.Errorf("MCP %s %s: %w", t.cfg.URL, what, err)}
		}
	}
	return Response{Failure: fmt.Sprintf("MCP %s: %v%s", what, err, stderr.suffix())}, nil
}

// toolText is a tool result's text: its text content, other content as
// JSON, or its structured content when it has no content.
func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, ct := range res.Content {
		if v, ok := ct.(*mcp.TextContent); ok {
			parts = append(parts, v.Text)
			continue
		}
		b, _ := json.Marshal(ct)
		parts = append(parts, string(b))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

// headerTransport adds fixed headers (a trial's trace context).
type headerTransport struct {
	h    http.Header
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}
