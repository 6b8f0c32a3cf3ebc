package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/schema"
	"github.com/loomwork/loomwork/semconv"
)

// ServerConfig configures an MCP server over runtime tools.
type ServerConfig struct {
	// Name and Version are the serverInfo the server announces.
	Name    string
	Version string
	// Tools are served as MCP tools: name, description and JSON Schema as
	// declared. Tools with Effect set are refused (they need the journal's
	// transaction, which an MCP caller does not have).
	Tools []runtime.Tool
	// TaskAttributes is passed to every call as ToolInput.TaskAttributes
	// (e.g. the research tools' exclude_issues): the server's rules, which
	// no caller's arguments can change.
	TaskAttributes json.RawMessage
	// TracerProvider receives one SERVER span per tools/call. Default: none.
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	// AllowedOrigins are the browser origins ("scheme://host[:port]") the
	// HTTP handler accepts besides localhost ones. A request with any
	// other Origin header is refused with 403 (DNS rebinding: a page on
	// evil.example whose name now points at 127.0.0.1 must not reach a
	// local server); a request without Origin (not from a browser) passes
	// to the bearer check.
	AllowedOrigins []string
	// Authorizer, when set, decides every tools/call before the tool runs
	// (agents/policy's Guard). The caller is an untrusted party: its
	// arguments are derived from ClientOrigin, so a write is held (and,
	// with no human on an MCP call, not run) and a read runs only where the
	// rules allow it. A refused call is a tool error naming the reason.
	Authorizer runtime.Authorizer
}

// ClientOrigin is the taint origin of an MCP client's arguments.
const ClientOrigin = "mcp client"

// Validate reports every problem with the configuration.
func (c ServerConfig) Validate() error {
	var errs []error
	for _, o := range c.AllowedOrigins {
		if _, err := normOrigin(o); err != nil {
			errs = append(errs, fmt.Errorf("mcp server: allowed origin %q: %w", o, err))
		}
	}
	if c.Name == "" {
		errs = append(errs, errors.New("mcp server: name must be set"))
	}
	seen := map[string]bool{}
	for i, t := range c.Tools {
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("mcp server: tool %d has no name", i))
		case seen[t.Name]:
			errs = append(errs, fmt.Errorf("mcp server: tool %q declared twice", t.Name))
		case t.Run == nil:
			errs = append(errs, fmt.Errorf("mcp server: tool %q has no Run function", t.Name))
		case t.Effect:
			errs = append(errs, fmt.Errorf("mcp server: tool %q has side effects in the journal's database and cannot be served", t.Name))
		}
		seen[t.Name] = true
	}
	if len(c.TaskAttributes) > 0 && !json.Valid(c.TaskAttributes) {
		errs = append(errs, errors.New("mcp server: task_attributes is not valid JSON"))
	}
	return errors.Join(errs...)
}

// Server serves runtime tools over MCP (stdio or Streamable HTTP) with the
// official SDK.
type Server struct {
	cfg    ServerConfig
	srv    *sdk.Server
	tracer trace.Tracer
}

// NewServer compiles the tools' schemas and builds the SDK server; it does
// no I/O.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg, tracer: cfg.TracerProvider.Tracer("loomwork/agents/mcp")}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: cfg.Name, Version: cfg.Version}, &sdk.ServerOptions{Logger: cfg.Logger})
	for _, t := range cfg.Tools {
		if err := s.Add(t); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add serves one more tool (or replaces the one with its name); connected
// clients are notified that the tool list changed.
func (s *Server) Add(t runtime.Tool) error {
	sch, err := schema.Compile(t.Parameters)
	if err != nil {
		return fmt.Errorf("mcp server: tool %s: %w", t.Name, err)
	}
	var input map[string]any
	if err := json.Unmarshal(t.Parameters, &input); err != nil || input["type"] != "object" {
		return fmt.Errorf("mcp server: tool %s: input schema must be a JSON object with type \"object\"", t.Name)
	}
	s.srv.AddTool(&sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(t.Parameters)},
		s.handler(t, sch))
	return nil
}

func (s *Server) handler(t runtime.Tool, sch *schema.Schema) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		sid := ""
		if req.Session != nil {
			sid = req.Session.ID()
		}
		attrs := []attribute.KeyValue{
			attribute.String(semconv.AttrMCPMethodName, "tools/call"),
			attribute.String(semconv.AttrToolName, t.Name),
			attribute.String(semconv.AttrOperationName, semconv.OpExecuteTool),
		}
		if sid != "" {
			attrs = append(attrs, attribute.String(semconv.AttrMCPSessionID, sid))
		}
		ctx, span := s.tracer.Start(ctx, "tools/call "+t.Name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
		toolErr := func(msg string) *sdk.CallToolResult {
			span.SetAttributes(attribute.String(semconv.AttrErrorType, semconv.MCPErrorTypeTool))
			span.SetStatus(codes.Error, semconv.MCPErrorTypeTool)
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
		}
		args := json.RawMessage("{}")
		if req.Params != nil && len(req.Params.Arguments) > 0 && string(req.Params.Arguments) != "null" {
			args = req.Params.Arguments
		}
		// SEP-1303: arguments that do not validate are a tool execution
		// error the model can read and correct, not a protocol error.
		if err := sch.Validate(args); err != nil {
			return toolErr(fmt.Sprintf("invalid arguments for tool %s: %v", t.Name, err)), nil
		}
		if refusal, err := s.authorize(ctx, t, sid, args); err != nil {
			return toolErr(fmt.Sprintf("tool %s: authorization failed: %v", t.Name, err)), nil
		} else if refusal != "" {
			// The guard's policy_decision span (a child of this one) says why.
			return toolErr(refusal), nil
		}
		out, err := t.Run(ctx, runtime.ToolInput{RunID: "mcp:" + sid, CallID: "", Arguments: args, TaskAttributes: s.cfg.TaskAttributes})
		if err != nil {
			return toolErr(fmt.Sprintf("tool %s failed: %v", t.Name, err)), nil
		}
		res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out.Content}}}
		if len(out.Documents) > 0 {
			docs := make([]any, len(out.Documents))
			for i, d := range out.Documents {
				docs[i] = d
			}
			res.Meta = sdk.Meta{semconv.MCPMetaDocuments: docs}
		}
		return res, nil
	}
}

// AddReceivingMiddleware wraps the SDK server's method handling (e.g. to
// observe or refuse requests).
func (s *Server) AddReceivingMiddleware(mw ...sdk.Middleware) { s.srv.AddReceivingMiddleware(mw...) }

// Remove stops serving the named tools (clients are notified).
func (s *Server) Remove(names ...string) { s.srv.RemoveTools(names...) }

// ServeStdio serves one session on stdin/stdout until the client
// disconnects or ctx ends.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.srv.Run(ctx, &sdk.StdioTransport{})
}

// ServeTransport serves one session on t (e.g. an SDK in-memory transport).
func (s *Server) ServeTransport(ctx context.Context, t sdk.Transport) error {
	return s.srv.Run(ctx, t)
}

// HTTPHandler is the Streamable HTTP endpoint. With a non-empty token every
// request must carry "Authorization: Bearer TOKEN" (401 otherwise).
func (s *Server) HTTPHandler(token string) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{Logger: s.cfg.Logger})
	allowed := map[string]bool{}
	for _, o := range s.cfg.AllowedOrigins {
		if n, err := normOrigin(o); err == nil { // validated by NewServer
			allowed[n] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The MCP spec (Streamable HTTP, security warning): servers MUST
		// validate Origin and answer 403 when it is present and invalid.
		// Checked before the token, so a page cannot probe for it.
		if origins := r.Header.Values("Origin"); len(origins) > 0 {
			if len(origins) != 1 || !originAllowed(origins[0], allowed) {
				http.Error(w, fmt.Sprintf("origin %q is not allowed (localhost origins and --allow-origin only)", clipOrigin(strings.Join(origins, ", "))), http.StatusForbidden)
				return
			}
		}
		if token == "" {
			h.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !tokenEqual(got, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="loomwork-mcp"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ValidOrigin reports whether o is a browser origin AllowedOrigins can
// hold (scheme://host[:port], http or https).
func ValidOrigin(o string) error {
	_, err := normOrigin(o)
	return err
}

// normOrigin parses a browser origin (scheme://host[:port], nothing else)
// and returns it lower-cased with the default port dropped.
func normOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("want http:// or https://")
	}
	if u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", errors.New("want scheme://host[:port] only")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "80" && u.Scheme == "http" || port == "443" && u.Scheme == "https" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

// originAllowed reports whether a request's Origin is a localhost origin
// (localhost, 127.0.0.0/8, ::1; any port) or one of allowed.
func originAllowed(o string, allowed map[string]bool) bool {
	n, err := normOrigin(o)
	if err != nil {
		return false // "null", garbage: refused
	}
	if allowed[n] {
		return true
	}
	u, _ := url.Parse(n)
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

func clipOrigin(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// authorize asks the Authorizer about a client's call: the refusal the
// client reads ("" when the call may run). The call is modelled as one
// message of the client's, derived from its untrusted origin, so every
// argument carries the taint.
func (s *Server) authorize(ctx context.Context, t runtime.Tool, sid string, args json.RawMessage) (string, error) {
	if s.cfg.Authorizer == nil {
		return "", nil
	}
	call := llm.ToolCall{ID: "mcp-call", Name: t.Name, Arguments: args}
	a, err := s.cfg.Authorizer.Authorize(ctx, runtime.AuthCall{RunID: "mcp:" + sid, Agent: s.cfg.Name, Call: call, Arguments: args,
		Effect: t.Effect, Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}},
		ContextOrigins: []string{ClientOrigin}})
	if err != nil {
		return "", err
	}
	if a.Allow {
		return "", nil
	}
	return a.Observation, nil
}
