package mcp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/semconv"
)

// ClientConfig is one MCP server a run takes tools from: a command to start
// (stdio) or a Streamable HTTP endpoint.
type ClientConfig struct {
	// Name identifies the server in spans, pins and taint origins.
	Name string
	// Command and Args start a stdio server (exactly one of Command and
	// URL).
	Command string
	Args    []string
	// PassEnv names variables of Loomwork's own environment a stdio
	// server also receives (e.g. a key the server needs). A stdio server
	// never inherits the whole environment: it gets DefaultPassEnv, these
	// names, and Env — so OPENAI_API_KEY, LOOMWORK_MCP_TOKEN and the like
	// reach a server only when named here (see StdioEnv).
	PassEnv []string
	// Env is extra NAME=VALUE entries for a stdio server, on top of the
	// passed variables (a later entry wins).
	Env []string
	// URL is a Streamable HTTP endpoint.
	URL string
	// BearerToken is sent as "Authorization: Bearer …" to URL.
	BearerToken string
	// Pin, when set, is the tool-list hash the run approved earlier (from
	// its journal): Start refuses a server whose list hashes differently.
	Pin string
	// TracerProvider receives one CLIENT span per MCP request. Default: none.
	TracerProvider trace.TracerProvider
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
	// Timeout bounds one request (default 60 s).
	Timeout time.Duration
}

// Validate reports every problem with the configuration.
func (c ClientConfig) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("mcp client: name must be set"))
	}
	if (c.Command == "") == (c.URL == "") {
		errs = append(errs, fmt.Errorf("mcp client %s: set exactly one of command and url", c.Name))
	}
	if c.BearerToken != "" && c.URL == "" {
		errs = append(errs, fmt.Errorf("mcp client %s: bearer_token needs url", c.Name))
	}
	if c.Pin != "" && !strings.HasPrefix(c.Pin, "sha256:") {
		errs = append(errs, fmt.Errorf("mcp client %s: pin %q is not a sha256: hash", c.Name, c.Pin))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("mcp client %s: timeout must not be negative", c.Name))
	}
	if (len(c.PassEnv) > 0 || len(c.Env) > 0) && c.Command == "" {
		errs = append(errs, fmt.Errorf("mcp client %s: pass_env and env need command (a stdio server)", c.Name))
	}
	for _, n := range c.PassEnv {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			errs = append(errs, fmt.Errorf("mcp client %s: pass_env name %q is not a variable name", c.Name, n))
		}
	}
	for _, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("mcp client %s: env entry %q is not NAME=VALUE", c.Name, kv))
		}
	}
	return errors.Join(errs...)
}

// DefaultPassEnv is what a stdio MCP server inherits from Loomwork's
// environment unless more is named: the official TypeScript SDK's default
// list. A server is third-party code whose tool outputs go to the model
// and the journal, so the run's secrets must not reach it by default.
var DefaultPassEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

// StdioEnv is the environment a stdio server gets: DefaultPassEnv and
// pass (each only if set in lookup's environment), then extra
// (NAME=VALUE; a later entry for a name replaces an earlier one).
func StdioEnv(lookup func(string) (string, bool), pass, extra []string) []string {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, n := range append(append([]string(nil), DefaultPassEnv...), pass...) {
		if v, ok := lookup(n); ok {
			set(n, v)
		}
	}
	for _, kv := range extra {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			set(k, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out
}

// Client is a connection to one MCP server whose tools a run uses. Start
// connects, negotiates capabilities and pins the tool list; Tools returns
// them as runtime tools; Shutdown closes the session (and stops a stdio
// server).
type Client struct {
	cfg    ClientConfig
	tracer trace.Tracer

	mu      sync.Mutex // one request at a time: the request-id capture relies on it
	session *sdk.ClientSession
	ids     *idRecorder
	tools   []*sdk.Tool
	pin     string
}

// NewClient returns a client; it does no I/O.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	return &Client{cfg: cfg, tracer: cfg.TracerProvider.Tracer("loomwork/agents/mcp")}, nil
}

// ErrNoTools is returned by Start when the server did not declare the
// tools capability: tools/list is then never sent.
var ErrNoTools = errors.New("server did not declare the tools capability")

// RugPullError says a server's tool list no longer hashes to the pinned
// value: a description or schema changed after the run approved them.
type RugPullError struct {
	Server       string
	Pinned, Seen string
	Changed      []string // tools added, removed or changed
}

func (e *RugPullError) Error() string {
	return fmt.Sprintf("mcp server %s: tool list changed since it was pinned (pinned %s, now %s; changed: %s): refused until re-approved",
		e.Server, e.Pinned, e.Seen, strings.Join(e.Changed, ", "))
}

// Start connects, checks that the server declares tools, lists them and
// pins the list's hash (or checks it against ClientConfig.Pin).
func (c *Client) Start(ctx context.Context) error {
	var t sdk.Transport
	transport := semconv.NetworkTransportPipe
	if c.cfg.Command != "" {
		cmd := exec.Command(c.cfg.Command, c.cfg.Args...)
		// Never nil: a nil Env would hand the server our whole
		// environment, secrets included.
		cmd.Env = StdioEnv(os.LookupEnv, c.cfg.PassEnv, c.cfg.Env)
		t = &sdk.CommandTransport{Command: cmd}
	} else {
		transport = semconv.NetworkTransportTCP
		c.ids = &idRecorder{}
		hc := &http.Client{Transport: &httpIDs{ids: c.ids, token: c.cfg.BearerToken, next: http.DefaultTransport}}
		t = &sdk.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: hc, DisableStandaloneSSE: true}
	}
	if c.cfg.Command != "" {
		// Only the stdio connection is wrapped: the SDK's Streamable HTTP
		// connection has unexported hooks a wrapper would hide, so there
		// the ids are read from the POST bodies instead (httpIDs).
		it := &idTransport{inner: t}
		t = it
	}
	ctx, span := c.start(ctx, "initialize", "", transport)
	client := sdk.NewClient(&sdk.Implementation{Name: "loomwork", Version: "1"}, &sdk.ClientOptions{Logger: c.cfg.Logger, Capabilities: &sdk.ClientCapabilities{}})
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		c.end(span, err)
		return fmt.Errorf("mcp server %s: connect: %w", c.cfg.Name, err)
	}
	c.session = cs
	if it, ok := t.(*idTransport); ok {
		c.ids = it.ids()
	}
	ir := cs.InitializeResult()
	if ir != nil {
		span.SetAttributes(attribute.String(semconv.AttrMCPProtocolVersion, ir.ProtocolVersion))
	}
	c.end(span, nil)
	if ir == nil || ir.Capabilities == nil || ir.Capabilities.Tools == nil {
		return fmt.Errorf("mcp server %s: %w", c.cfg.Name, ErrNoTools)
	}
	tools, hash, err := c.list(ctx)
	if err != nil {
		return err
	}
	if c.cfg.Pin != "" && c.cfg.Pin != hash {
		return &RugPullError{Server: c.cfg.Name, Pinned: c.cfg.Pin, Seen: hash, Changed: []string{"(list differs from the journaled pin)"}}
	}
	c.tools, c.pin = tools, hash
	return nil
}

// Shutdown closes the session; a stdio server is stopped.
func (c *Client) Shutdown(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil
	}
	err := c.session.Close()
	c.session = nil
	return err
}

// Pin is the hash of the tool list pinned by Start ("sha256:…").
func (c *Client) Pin() string { return c.pin }

// Name is the configured server name.
func (c *Client) Name() string { return c.cfg.Name }

// Approve re-pins the server's current tool list (after a human reviewed
// a change a RugPullError reported).
func (c *Client) Approve(ctx context.Context) (string, error) {
	tools, hash, err := c.list(ctx)
	if err != nil {
		return "", err
	}
	c.tools, c.pin = tools, hash
	return hash, nil
}

// list sends tools/list (all pages) and hashes the result.
func (c *Client) list(ctx context.Context) ([]*sdk.Tool, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil, "", fmt.Errorf("mcp server %s: not connected", c.cfg.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ctx, span := c.start(ctx, "tools/list", "", c.transport())
	var tools []*sdk.Tool
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			c.endRPC(span, err)
			return nil, "", fmt.Errorf("mcp server %s: tools/list: %w", c.cfg.Name, err)
		}
		tools = append(tools, t)
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	hash, err := HashTools(tools)
	if err != nil {
		c.endRPC(span, err)
		return nil, "", fmt.Errorf("mcp server %s: %w", c.cfg.Name, err)
	}
	span.SetAttributes(attribute.String(semconv.AttrMCPToolsHash, hash))
	c.endRPC(span, nil)
	return tools, hash, nil
}

// HashTools is the pin of a tool list: sha256 over each tool's name,
// description and input schema, in name order (canonical JSON: Go's
// encoder sorts map keys).
func HashTools(tools []*sdk.Tool) (string, error) {
	type pinned struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		InputSchema any    `json:"inputSchema"`
	}
	ps := make([]pinned, 0, len(tools))
	for _, t := range tools {
		var schema any
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return "", fmt.Errorf("hash tool %s: %w", t.Name, err)
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			return "", fmt.Errorf("hash tool %s: %w", t.Name, err)
		}
		ps = append(ps, pinned{t.Name, t.Description, schema})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	b, err := json.Marshal(ps)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Tools returns the pinned tools as runtime tools: their declarations are
// the server's (name, description, JSON Schema); calling one re-lists the
// server's tools first and refuses the call if the list no longer hashes
// to the pin.
func (c *Client) Tools() []runtime.Tool {
	out := make([]runtime.Tool, 0, len(c.tools))
	for _, t := range c.tools {
		params, err := json.Marshal(t.InputSchema)
		if err != nil || string(params) == "null" {
			params = json.RawMessage(`{"type":"object"}`)
		}
		name := t.Name
		out = append(out, runtime.Tool{
			Name:        name,
			Description: t.Description,
			Parameters:  params,
			Origin:      semconv.MCPTaintOrigin + c.Name() + "/" + name,
			Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
				return c.Call(ctx, name, in.Arguments)
			},
		})
	}
	return out
}

// Call re-checks the pin and sends tools/call. A result with isError set is
// returned as an error (the runtime's error observation, which the model
// reads); a JSON-RPC error or a changed tool list is a
// *runtime.StepFailure (the run stops with it).
func (c *Client) Call(ctx context.Context, name string, args json.RawMessage) (runtime.ToolOutput, error) {
	tools, hash, err := c.list(ctx)
	if err != nil {
		return runtime.ToolOutput{}, stepFailure(err)
	}
	if hash != c.pin {
		return runtime.ToolOutput{}, &runtime.StepFailure{Code: "rug_pull",
			Err: &RugPullError{Server: c.cfg.Name, Pinned: c.pin, Seen: hash, Changed: diffTools(c.tools, tools)}}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ctx, span := c.start(ctx, "tools/call", name, c.transport())
	var argv any = map[string]any{}
	if len(args) > 0 {
		argv = args
	}
	res, err := c.session.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: argv})
	if err != nil {
		c.endRPC(span, err)
		return runtime.ToolOutput{}, stepFailure(fmt.Errorf("mcp server %s: tools/call %s: %w", c.cfg.Name, name, err))
	}
	text := resultText(res)
	if res.IsError {
		span.SetAttributes(attribute.String(semconv.AttrErrorType, semconv.MCPErrorTypeTool))
		span.SetStatus(codes.Error, semconv.MCPErrorTypeTool)
		c.endRPC(span, nil)
		return runtime.ToolOutput{}, errors.New(text)
	}
	c.endRPC(span, nil)
	return runtime.ToolOutput{Content: text, Documents: metaDocuments(res.Meta)}, nil
}

// stepFailure classifies err: a JSON-RPC error keeps its code.
func stepFailure(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return &runtime.StepFailure{Code: strconv.FormatInt(we.Code, 10), Err: fmt.Errorf("%w (JSON-RPC error %d)", err, we.Code)}
	}
	return &runtime.StepFailure{Code: "transport", Err: err}
}

func resultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, ct := range res.Content {
		switch v := ct.(type) {
		case *sdk.TextContent:
			parts = append(parts, v.Text)
		default:
			b, _ := json.Marshal(ct)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

func metaDocuments(m sdk.Meta) []string {
	raw, ok := m[semconv.MCPMetaDocuments].([]any)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range raw {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func diffTools(a, b []*sdk.Tool) []string {
	key := func(t *sdk.Tool) string {
		s, _ := json.Marshal(t.InputSchema)
		return t.Description + "\x00" + string(s)
	}
	am, bm := map[string]string{}, map[string]string{}
	for _, t := range a {
		am[t.Name] = key(t)
	}
	for _, t := range b {
		bm[t.Name] = key(t)
	}
	var out []string
	for n, k := range am {
		if bk, ok := bm[n]; !ok {
			out = append(out, n+" (removed)")
		} else if bk != k {
			out = append(out, n+" (changed)")
		}
	}
	for n := range bm {
		if _, ok := am[n]; !ok {
			out = append(out, n+" (added)")
		}
	}
	sort.Strings(out)
	return out
}

func (c *Client) transport() string {
	if c.cfg.Command != "" {
		return semconv.NetworkTransportPipe
	}
	return semconv.NetworkTransportTCP
}

// start opens a CLIENT span named per the MCP conventions.
func (c *Client) start(ctx context.Context, method, tool, transport string) (context.Context, trace.Span) {
	name := method
	attrs := []attribute.KeyValue{
		attribute.String(semconv.AttrMCPMethodName, method),
		attribute.String(semconv.AttrNetworkTransport, transport),
		attribute.String(semconv.AttrMCPServerName, c.cfg.Name),
	}
	if tool != "" {
		name += " " + tool
		attrs = append(attrs, attribute.String(semconv.AttrToolName, tool),
			attribute.String(semconv.AttrOperationName, semconv.OpExecuteTool))
	}
	if c.session != nil {
		if id := c.session.ID(); id != "" {
			attrs = append(attrs, attribute.String(semconv.AttrMCPSessionID, id))
		}
	}
	if c.pin != "" {
		attrs = append(attrs, attribute.String(semconv.AttrMCPToolsHash, c.pin))
	}
	return c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func (c *Client) end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attribute.String(semconv.AttrErrorType, semconv.ErrorTypeOther))
	}
	span.End()
}

// endRPC ends a request span with its JSON-RPC id and, on failure, its
// error code as error.type.
func (c *Client) endRPC(span trace.Span, err error) {
	if c.ids != nil {
		if id := c.ids.lastID(); id != "" {
			span.SetAttributes(attribute.String(semconv.AttrJSONRPCRequestID, id))
		}
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		code := strconv.FormatInt(we.Code, 10)
		span.SetAttributes(attribute.String(semconv.AttrErrorType, code), attribute.String(semconv.AttrRPCResponseStatusCode, code))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return
	}
	c.end(span, err)
}

// tokenEqual compares bearer tokens in constant time.
func tokenEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// idRecorder holds the JSON-RPC id of the last request the client wrote
// (the SDK does not expose it); Client serialises its requests, so that is
// the current request's.
type idRecorder struct {
	mu   sync.Mutex
	last string
}

func (r *idRecorder) write(m jsonrpc.Message) {
	if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
		r.mu.Lock()
		r.last = fmt.Sprint(req.ID.Raw())
		r.mu.Unlock()
	}
}

func (r *idRecorder) lastID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// httpIDs adds the bearer token and records the id of each POSTed request.
type httpIDs struct {
	ids   *idRecorder
	token string
	next  http.RoundTripper
}

func (h *httpIDs) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	if r.Method == http.MethodPost && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(body, 1<<20))
			body.Close()
			if m, err := jsonrpc.DecodeMessage(b); err == nil {
				h.ids.write(m)
			}
		}
	}
	return h.next.RoundTrip(r)
}

// idTransport wraps the stdio transport to record request ids.
type idTransport struct {
	inner sdk.Transport
	rec   idRecorder
}

func (t *idTransport) ids() *idRecorder { return &t.rec }

func (t *idTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &idConn{Connection: c, rec: &t.rec}, nil
}

type idConn struct {
	sdk.Connection
	rec *idRecorder
}

func (c *idConn) Write(ctx context.Context, m jsonrpc.Message) error {
	c.rec.write(m)
	return c.Connection.Write(ctx, m)
}
