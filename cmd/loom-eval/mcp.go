package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/loomwork/loomwork/internal/service"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/replay"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/web"
)

// runMCP dispatches `loom-eval mcp …`.
func (m *Main) runMCP(ctx context.Context, args []string) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval mcp serve [--http ADDR] [flags]\nServes Loomwork's tools over the Model Context Protocol, on stdio or Streamable HTTP (docs/protocols.md); 'loom-eval mcp serve -h' lists its flags.")
		return nil
	}
	if len(args) == 0 || args[0] != "serve" {
		return usageError("mcp: want a subcommand: mcp serve [--http ADDR] ... (see docs/protocols.md)")
	}
	return m.runMCPServe(ctx, args[1:])
}

// mcpServeFlags are `loom-eval mcp serve`'s flags.
type mcpServeFlags struct {
	httpAddr, tokenFile, dataset, indexCache, exclude, storeURL *string
	noPython, noTraces                                          *bool
	origins                                                     listFlag
}

func (f *mcpServeFlags) register(fs *flag.FlagSet, storeURL *string) {
	f.httpAddr = fs.String("http", "", "serve Streamable HTTP on this address (path /mcp) instead of stdio")
	f.tokenFile = fs.String("token-file", "", "file holding the bearer token HTTP clients must send (default $LOOMWORK_MCP_TOKEN); required with --http")
	f.dataset = fs.String("dataset", "", "judged dataset folder the doc tools search (default $LOOMWORK_DATASET, else the shipped set)")
	f.indexCache = fs.String("index-cache", ".loomwork/index", "folder for the persisted BM25 index")
	f.exclude = fs.String("exclude-issues", "", "issue numbers (comma-separated) no search or read may return, whatever the caller asks")
	f.storeURL = storeURL
	f.noPython = fs.Bool("no-python", false, "do not offer run_python_code")
	f.noTraces = fs.Bool("no-traces", false, "do not offer the trace queries")
	fs.Var(&f.origins, "allow-origin", "with --http: also accept requests from this browser origin, scheme://host[:port] (repeatable; localhost origins are always accepted, any other Origin is refused with 403)")
}

// validateOrigins checks --allow-origin.
func (f *mcpServeFlags) validateOrigins() error {
	if len(f.origins) > 0 && *f.httpAddr == "" {
		return usageError("mcp serve: --allow-origin needs --http")
	}
	for _, o := range f.origins {
		if err := mcp.ValidOrigin(o); err != nil {
			return usageError("mcp serve: --allow-origin %q: %v", o, err)
		}
	}
	return nil
}

// token is the bearer token HTTP clients must send (--token-file, else
// $LOOMWORK_MCP_TOKEN, read with getenv when it is not nil); "" for stdio.
func (f *mcpServeFlags) token(getenv func(string) string) (string, error) {
	if *f.httpAddr == "" {
		return "", nil
	}
	token := ""
	switch {
	case *f.tokenFile != "":
		b, err := os.ReadFile(*f.tokenFile)
		if err != nil {
			return "", usageError("mcp serve: --token-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
	case getenv != nil:
		token = strings.TrimSpace(getenv("LOOMWORK_MCP_TOKEN"))
	}
	if token == "" {
		return "", usageError("mcp serve: --http needs a bearer token (--token-file or $LOOMWORK_MCP_TOKEN)")
	}
	return token, nil
}

// mcpServeTools are the tools mcp serve offers (the research agent's,
// run_python_code unless --no-python, the trace queries unless
// --no-traces) and the function that releases what they hold, last
// opened first.
func (m *Main) mcpServeTools(ctx context.Context, f *mcpServeFlags) ([]runtime.Tool, func(), error) {
	var closers []func()
	release := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var tools []runtime.Tool
	idx, err := m.researchIndex("mcp serve", *f.dataset, *f.indexCache)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, func() { idx.Close(context.WithoutCancel(ctx)) })
	ra, err := research.New(research.Config{Index: idx})
	if err != nil {
		release()
		return nil, nil, err
	}
	tools = append(tools, ra.Tools...)
	if !*f.noPython {
		sb, stop := lazySandbox(ctx)
		closers = append(closers, func() { _ = stop() })
		tools = append(tools, mcp.Python(sb))
	}
	if !*f.noTraces {
		// On a fresh clone nothing has created the store yet: create it
		// empty, as serve would, rather than refuse to start.
		if err := m.createStoreIfMissing(ctx, *f.storeURL); err != nil {
			release()
			return nil, nil, err
		}
		st, err := m.tracesOpenStore(ctx, *f.storeURL)
		if err != nil {
			release()
			return nil, nil, err
		}
		closers = append(closers, func() { st.Shutdown(context.WithoutCancel(ctx)) })
		tools = append(tools, mcp.TraceTools(storeQueries{st})...)
	}
	return tools, release, nil
}

// runMCPServe serves Loomwork's tools over MCP: stdio by default, or
// Streamable HTTP with --http (bearer token required).
func (m *Main) runMCPServe(ctx context.Context, args []string) error {
	fs := m.newFlagSet("mcp serve", "mcp serve [--http 127.0.0.1:8765 --token-file F [--allow-origin https://app.example]] [--dataset DIR] [--exclude-issues 12,40] [--store URL] [--no-python] [--no-traces] [--policy default|FILE|none] [--audit LOG]")
	var f mcpServeFlags
	f.register(fs, m.tracesStoreFlag(fs))
	var pol policyFlags
	pol.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("mcp serve: unexpected arguments %q", fs.Args())
	}
	if err := f.validateOrigins(); err != nil {
		return err
	}
	token, err := f.token(m.Getenv)
	if err != nil {
		return err
	}
	issues, err := research.ExcludedIssues(splitNonEmpty(*f.exclude))
	if err != nil {
		return usageError("mcp serve: --exclude-issues: %v", err)
	}
	tools, release, err := m.mcpServeTools(ctx, &f)
	if err != nil {
		return err
	}
	defer release()
	// Every client is untrusted (mcp.ClientOrigin): under --policy a
	// write it asks for is held, and so not run.
	az, _, err := pol.guard("mcp serve", nil, nil)
	if err != nil {
		return err
	}
	srv, err := mcp.NewServer(mcp.ServerConfig{Name: "loomwork", Version: "1", Tools: tools, TaskAttributes: research.TaskAttributes(issues...),
		Logger: m.mcpLogger(), AllowedOrigins: f.origins, Authorizer: az})
	if err != nil {
		return err
	}
	if *f.httpAddr == "" {
		if err := srv.ServeStdio(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("mcp serve: %w", err)}
		}
		return nil
	}
	return m.serveMCPHTTP(ctx, srv, *f.httpAddr, token)
}

// serveMCPHTTP serves srv as Streamable HTTP on addr (path /mcp) until ctx
// ends.
func (m *Main) serveMCPHTTP(ctx context.Context, srv *mcp.Server, addr, token string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("mcp serve: %w", err)}
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(token))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(m.Stderr, "loom-eval mcp serve: Streamable HTTP on http://%s/mcp (bearer token required)\n", ln.Addr())
	h := service.ServeHTTP(hs, ln, nil)
	select {
	case <-h.Done():
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("mcp serve: %w", h.Err())}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return h.Shutdown(sctx)
	}
}

func splitNonEmpty(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, "issue:"+strings.TrimPrefix(p, "issue:"))
		}
	}
	return out
}

// storeQueries adapts the trace store to mcp.TraceQueries (the same rows
// and rollup `traces list` / `traces get --json` print). Its reads are the
// CLI's: the default project unless $LOOMWORK_KEY scoped the store (the
// MCP SDK's HTTP request contexts do not carry Main.Run's).
type storeQueries struct{ st store.Store }

func cliReadContext(ctx context.Context) context.Context {
	if _, ok := store.ProjectFor(ctx); ok {
		return ctx
	}
	return store.WithDefaultProject(ctx)
}

func (q storeQueries) List(ctx context.Context, filters map[string]string) (any, error) {
	ctx = cliReadContext(ctx)
	v := url.Values{}
	for k, val := range filters {
		v.Set(k, val)
	}
	tq, err := store.ParseTraceQuery(v, time.Now())
	if err != nil {
		return nil, err
	}
	page, err := q.st.ListTraces(ctx, tq)
	if err != nil {
		return nil, err
	}
	prices, err := scorerLoadPrices("")
	if err != nil {
		return nil, err
	}
	rows, err := web.ListRows(ctx, q.st, page.Traces, prices)
	if err != nil {
		return nil, err
	}
	return map[string]any{"traces": rows, "next_page_token": page.NextPageToken}, nil
}

func (q storeQueries) spans(ctx context.Context, id string) (string, []store.Span, error) {
	ctx = cliReadContext(ctx)
	if _, err := store.ParseTraceIDPrefix(id); err != nil {
		return "", nil, err
	}
	id, err := store.TraceIDOf(ctx, q.st, id)
	if err != nil {
		return "", nil, err
	}
	spans, err := q.st.GetTrace(ctx, id)
	return id, spans, err
}

func (q storeQueries) Get(ctx context.Context, id string) (any, error) {
	id, spans, err := q.spans(ctx, id)
	if err != nil {
		return nil, err
	}
	return map[string]any{"trace_id": id, "spans": spans}, nil
}

func (q storeQueries) Rollup(ctx context.Context, id string) (any, error) {
	_, spans, err := q.spans(ctx, id)
	if err != nil {
		return nil, err
	}
	prices, err := scorerLoadPrices("")
	if err != nil {
		return nil, err
	}
	return rollup.Compute(spans, prices), nil
}

// mcpFlags are the repeatable flags that take a run's tools from MCP
// servers (run and replay --mcp-live share them).
type mcpFlags struct {
	stdio, urls, env, replace listFlag
}

func (f *mcpFlags) add(fs *flag.FlagSet, what string) {
	fs.Var(&f.stdio, "mcp", what+" from a stdio MCP server: NAME=COMMAND [ARGS] (split on spaces; repeatable)")
	fs.Var(&f.urls, "mcp-url", what+" from a Streamable HTTP MCP server: NAME=URL (bearer token from $LOOMWORK_MCP_TOKEN; repeatable)")
	fs.Var(&f.replace, "mcp-replace", "let the MCP server NAME replace these of the agent's own tools: NAME=TOOL[,TOOL] (repeatable; without it a server tool named like one of the agent's is refused, so an untrusted server cannot shadow e.g. search_docs)")
	fs.Var(&f.env, "mcp-env", "pass these variables of this environment to the stdio MCP server NAME: NAME=VAR[,VAR] (repeatable; by default a server gets only "+strings.Join(mcp.DefaultPassEnv, ", ")+")")
}

// passEnv maps each stdio server to the variables --mcp-env names for it.
func (f *mcpFlags) passEnv() (map[string][]string, error) {
	out := map[string][]string{}
	for _, s := range f.env {
		name, vars, ok := strings.Cut(s, "=")
		if !ok || name == "" || strings.TrimSpace(vars) == "" {
			return nil, usageError("--mcp-env %q: want NAME=VAR[,VAR]", s)
		}
		for _, v := range strings.Split(vars, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out[name] = append(out[name], v)
			}
		}
	}
	for name := range out {
		found := false
		for _, s := range f.stdio {
			if n, _, _ := strings.Cut(s, "="); n == name {
				found = true
			}
		}
		if !found {
			return nil, usageError("--mcp-env %s=…: no stdio server %s (--mcp %s=COMMAND)", name, name, name)
		}
	}
	return out, nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// connect starts one client per configured server (tool lists pinned).
func (m *Main) mcpConnect(ctx context.Context, f *mcpFlags, tp trace.TracerProvider) ([]*mcp.Client, func(), error) {
	var clients []*mcp.Client
	stop := func() {
		for _, c := range clients {
			_ = c.Shutdown(context.WithoutCancel(ctx))
		}
	}
	add := func(cfg mcp.ClientConfig) error {
		cfg.Logger = m.mcpLogger()
		if tp != nil {
			cfg.TracerProvider = tp
		}
		c, err := mcp.NewClient(cfg)
		if err != nil {
			return usageError("%v", err)
		}
		if err := c.Start(ctx); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: err}
		}
		clients = append(clients, c)
		return nil
	}
	pass, err := f.passEnv()
	if err != nil {
		return nil, stop, err
	}
	for _, s := range f.stdio {
		name, cmdline, ok := strings.Cut(s, "=")
		argv := strings.Fields(cmdline)
		if !ok || name == "" || len(argv) == 0 {
			return nil, stop, usageError("--mcp %q: want NAME=COMMAND [ARGS]", s)
		}
		if err := add(mcp.ClientConfig{Name: name, Command: argv[0], Args: argv[1:], PassEnv: pass[name]}); err != nil {
			return nil, stop, err
		}
	}
	for _, s := range f.urls {
		name, u, ok := strings.Cut(s, "=")
		if !ok || name == "" || u == "" {
			return nil, stop, usageError("--mcp-url %q: want NAME=URL", s)
		}
		tok := ""
		if m.Getenv != nil {
			tok = m.Getenv("LOOMWORK_MCP_TOKEN")
		}
		if err := add(mcp.ClientConfig{Name: name, URL: u, BearerToken: tok}); err != nil {
			return nil, stop, err
		}
	}
	return clients, stop, nil
}

// mcpTooled is an agent with its MCP servers' tools: the remote tools'
// taint origins (for the guard) and the task attributes that journal the
// servers' pinned tool lists (nil without servers).
type mcpTooled struct {
	agent   runtime.Agent
	origins map[string]string
	attrs   json.RawMessage
}

// mcpTools connects the --mcp / --mcp-url servers and gives agent their
// tools, for a command that serves or steps the agent (a2a serve, workflow
// run). stop ends the servers; call it even on an error.
func (m *Main) mcpTools(ctx context.Context, f *mcpFlags, agent runtime.Agent, tp trace.TracerProvider) (mcpTooled, func(), error) {
	clients, stop, err := m.mcpConnect(ctx, f, tp)
	if err != nil {
		return mcpTooled{agent: agent}, stop, err
	}
	out := mcpTooled{agent: agent}
	if len(clients) == 0 {
		return out, stop, nil
	}
	if out.agent, err = withMCPTools(agent, clients, f); err != nil {
		return out, stop, err
	}
	out.origins = mcp.Origins(clients...)
	if out.attrs, err = mcp.Attributes(nil, clients...); err != nil {
		return out, stop, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return out, stop, nil
}

// withMCPTools gives agent the servers' tools. A tool named like one of
// the agent's own replaces it only where --mcp-replace lets that server
// (e.g. the research agent's search_docs from `loom-eval mcp serve`);
// otherwise the collision is refused: an untrusted server must not shadow
// a tool the agent trusts. Two servers offering one name are refused too.
func withMCPTools(agent runtime.Agent, clients []*mcp.Client, f *mcpFlags) (runtime.Agent, error) {
	may, err := f.replacements()
	if err != nil {
		return agent, err
	}
	own := map[string]bool{}
	for _, t := range agent.Tools {
		own[t.Name] = true
	}
	tools := append([]runtime.Tool(nil), agent.Tools...)
	from := map[string]string{}
	for _, c := range clients {
		for _, t := range c.Tools() {
			if prev, dup := from[t.Name]; dup {
				return agent, usageError("MCP servers %s and %s both offer a tool %q: the agent cannot tell them apart", prev, c.Name(), t.Name)
			}
			from[t.Name] = c.Name()
			i := slices.IndexFunc(tools, func(x runtime.Tool) bool { return x.Name == t.Name })
			switch {
			case i < 0:
				tools = append(tools, t)
			case own[t.Name] && !may[c.Name()][t.Name]:
				return agent, usageError("MCP server %s offers %q, a tool of the %s agent's own: refused (an untrusted server must not shadow it); --mcp-replace %s=%s lets it", c.Name(), t.Name, agent.Name, c.Name(), t.Name)
			default:
				tools[i] = t
			}
		}
	}
	for server, names := range may {
		for name := range names {
			if from[name] != server {
				return agent, usageError("--mcp-replace %s=%s: server %s offers no tool %q", server, name, server, name)
			}
		}
	}
	agent.Tools = tools
	return agent, nil
}

// replacements reads --mcp-replace: server → the tools it may replace.
func (f *mcpFlags) replacements() (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	for _, s := range f.replace {
		name, tools, ok := strings.Cut(s, "=")
		if !ok || name == "" || strings.TrimSpace(tools) == "" {
			return nil, usageError("--mcp-replace %q: want NAME=TOOL[,TOOL]", s)
		}
		for _, t := range strings.Split(tools, ",") {
			if t = strings.TrimSpace(t); t != "" {
				if out[name] == nil {
					out[name] = map[string]bool{}
				}
				out[name][t] = true
			}
		}
	}
	return out, nil
}

// mcpReplayEngine returns the engine that replays run when the run took
// tools from MCP servers (its run_started attributes hold their pins):
// the tools' results come from the journal (no server needed) unless
// live clients are given, which re-execute the calls — a result that
// differs is reported like any re-executed tool's. ok is false for a run
// that used no MCP server.
func mcpReplayEngine(run journal.Run, cfg replay.Config, live []*mcp.Client) (*replay.Engine, bool, error) {
	pins, err := mcp.Pins(run)
	if err != nil || len(pins) == 0 {
		return nil, false, err
	}
	var agent runtime.Agent
	if len(live) > 0 {
		agent, err = mcp.LiveAgent(run, nil, live...)
	} else {
		agent, err = mcp.RecordedAgent(run, nil)
	}
	if err != nil {
		return nil, true, err
	}
	if a, ok := cfg.Registry.Agent(agent.Name); ok {
		agent.Citations = a.Citations
	}
	reg := runtime.NewRegistry()
	if err := reg.Register(agent); err != nil {
		return nil, true, err
	}
	cfg.Registry = reg
	e, err := replay.New(cfg)
	return e, true, err
}

// mcpLogger is the SDK's logger: warnings and errors on stderr (its
// per-session INFO lines are noise in a run's output).
func (m *Main) mcpLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
