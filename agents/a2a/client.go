package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/semconv"
)

// RemoteConfig is a remote A2A agent a run may call.
type RemoteConfig struct {
	// BaseURL is where the agent's card is served
	// (BaseURL/.well-known/agent-card.json). Required.
	BaseURL string
	// ToolName is the tool's name for the model (default
	// "ask_" + the card's name).
	ToolName string
	// CardPath is the card's path under BaseURL (default
	// /.well-known/agent-card.json).
	CardPath string
	// Timeout bounds one call (default 120 s).
	Timeout        time.Duration
	TracerProvider trace.TracerProvider
	// HTTPClient sends the card and JSON-RPC requests (default: the SDK's).
	HTTPClient *http.Client
	// Interceptors see every protocol call (e.g. to add headers per call).
	Interceptors []a2aclient.CallInterceptor
	// PollInterval is how often Ask polls tasks/get for a task the agent
	// returned unfinished (default 200 ms).
	PollInterval time.Duration
}

// w3c is the trace context and baggage on the wire, both ways.
var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// propagateInterceptor writes the call's trace context into its headers.
type propagateInterceptor struct {
	a2aclient.PassthroughInterceptor
}

func (propagateInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	h := http.Header{}
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
	if len(h) == 0 {
		return ctx, nil
	}
	if req.Meta == nil {
		req.Meta = a2aclient.CallMeta{}
	}
	for k, v := range h {
		req.Meta[strings.ToLower(k)] = v
	}
	return ctx, nil
}

// Remote is a connection to one remote agent.
type Remote struct {
	cfg    RemoteConfig
	tracer trace.Tracer
	card   *a2a.AgentCard
	client *a2aclient.Client
}

// NewRemote returns a remote; it does no I/O (Start resolves the card).
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("a2a remote: base_url must be set")
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("a2a remote: timeout must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 120 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	return &Remote{cfg: cfg, tracer: cfg.TracerProvider.Tracer("loomwork/agents/a2a")}, nil
}

// Start fetches the Agent Card and connects to the endpoint it names.
func (r *Remote) Start(ctx context.Context) error {
	resolver := agentcard.DefaultResolver
	if r.cfg.HTTPClient != nil {
		resolver = agentcard.NewResolver(r.cfg.HTTPClient)
	}
	var ropts []agentcard.ResolveOption
	if r.cfg.CardPath != "" {
		ropts = append(ropts, agentcard.WithPath(r.cfg.CardPath))
	}
	card, err := resolver.Resolve(ctx, r.cfg.BaseURL, ropts...)
	if err != nil {
		return fmt.Errorf("a2a remote %s: agent card: %w", r.cfg.BaseURL, err)
	}
	var copts []a2aclient.FactoryOption
	if r.cfg.HTTPClient != nil {
		copts = append(copts, a2aclient.WithJSONRPCTransport(r.cfg.HTTPClient))
	}
	// The caller's trace context always travels (W3C traceparent,
	// tracestate, baggage), so the remote agent's spans join the calling
	// run's trace; the caller's own interceptors run after it.
	copts = append(copts, a2aclient.WithInterceptors(append([]a2aclient.CallInterceptor{propagateInterceptor{}}, r.cfg.Interceptors...)...))
	c, err := a2aclient.NewFromCard(ctx, card, copts...)
	if err != nil {
		return fmt.Errorf("a2a remote %s: %w", r.cfg.BaseURL, err)
	}
	r.card, r.client = card, c
	if r.cfg.ToolName == "" {
		r.cfg.ToolName = "ask_" + toolSafe(card.Name)
	}
	return nil
}

// Shutdown releases the client.
func (r *Remote) Shutdown(context.Context) error {
	if r.client == nil {
		return nil
	}
	return r.client.Destroy()
}

// Card is the resolved Agent Card.
func (r *Remote) Card() *a2a.AgentCard { return r.card }

// Tool is the remote agent as a runtime tool: {"message": text} → the
// completed task's artifacts. A remote failure is an error observation.
func (r *Remote) Tool() runtime.Tool {
	var skills []string
	for _, s := range r.card.Skills {
		skills = append(skills, s.Name+": "+s.Description)
	}
	desc := fmt.Sprintf("Ask the remote agent %q (A2A). %s", r.card.Name, r.card.Description)
	if len(skills) > 0 {
		desc += " Skills: " + strings.Join(skills, "; ")
	}
	return runtime.Tool{
		Name:        r.cfg.ToolName,
		Description: desc,
		// The card's description and every reply are the peer's words.
		Origin: r.origin(),
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"message":{"type":"string","minLength":1,"maxLength":20000,"description":"the request for the remote agent"}},
			"required":["message"],"additionalProperties":false}`),
		Run: func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var a struct{ Message string }
			if err := json.Unmarshal(in.Arguments, &a); err != nil {
				return runtime.ToolOutput{}, err
			}
			return r.Send(ctx, a.Message)
		},
	}
}

// origin is the taint origin of the peer's words: "a2a:" and its card's
// name (its base URL when the card has none).
func (r *Remote) origin() string {
	if r.card.Name != "" {
		return "a2a:" + r.card.Name
	}
	return "a2a:" + r.cfg.BaseURL
}

// Send sends one message (message/send, blocking) and returns the text of
// the completed task's artifacts.
func (r *Remote) Send(ctx context.Context, text string) (runtime.ToolOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	ctx, span := r.tracer.Start(ctx, "a2a message/send "+r.card.Name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(semconv.AttrA2AAgentURL, r.card.URL), attribute.String(semconv.AttrToolName, r.cfg.ToolName)))
	defer span.End()
	fail := func(err error) (runtime.ToolOutput, error) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return runtime.ToolOutput{}, err
	}
	res, err := r.client.SendMessage(ctx, &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})})
	if err != nil {
		span.SetAttributes(attribute.String(semconv.AttrErrorType, semconv.ErrorTypeOther))
		return fail(fmt.Errorf("remote agent %s unreachable or refused the message: %w", r.card.Name, err))
	}
	switch v := res.(type) {
	case *a2a.Message:
		return runtime.ToolOutput{Content: partsText(v.Parts)}, nil
	case *a2a.Task:
		span.SetAttributes(attribute.String(semconv.AttrA2ATaskID, string(v.ID)), attribute.String(semconv.AttrA2ATaskState, string(v.Status.State)))
		if v.Status.State != a2a.TaskStateCompleted {
			why := ""
			if v.Status.Message != nil {
				why = ": " + partsText(v.Status.Message.Parts)
			}
			span.SetAttributes(attribute.String(semconv.AttrErrorType, string(v.Status.State)))
			return fail(fmt.Errorf("remote agent %s: task %s ended %s%s", r.card.Name, v.ID, v.Status.State, why))
		}
		var parts []string
		for _, a := range v.Artifacts {
			parts = append(parts, partsText(a.Parts))
		}
		return runtime.ToolOutput{Content: fmt.Sprintf("remote task %s completed:\n%s", v.ID, strings.Join(parts, "\n"))}, nil
	default:
		return fail(fmt.Errorf("remote agent %s: unexpected result %T", r.card.Name, res))
	}
}

// GetTask is tasks/get.
func (r *Remote) GetTask(ctx context.Context, id string) (*a2a.Task, error) {
	return r.client.GetTask(ctx, &a2a.TaskQueryParams{ID: a2a.TaskID(id)})
}

func toolSafe(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Reply is how a remote agent answered one message.
type Reply struct {
	// TaskID is the task the message started ("" when the agent answered
	// with a message).
	TaskID string
	// State is the task's last state (completed when the agent answered
	// with a message).
	State a2a.TaskState
	// Text is the answer: the completed task's artifacts (or, with none,
	// its status message), or the message's text parts; for a task that
	// did not complete, its status message.
	Text string
}

// Ask sends one message (message/send, blocking) and, when the agent
// returns the task unfinished, polls tasks/get until it is terminal or
// needs input, bounded by ctx. An error is the exchange failing (no
// answer, an HTTP or JSON-RPC error); a task that failed is a Reply.
func (r *Remote) Ask(ctx context.Context, text string) (Reply, error) {
	return r.send(ctx, a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text}))
}

// Continue sends text on an existing task — one the agent left in
// input-required, e.g. waiting for a person's approval — and waits as Ask
// does.
func (r *Remote) Continue(ctx context.Context, taskID, text string) (Reply, error) {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: text})
	m.TaskID = a2a.TaskID(taskID)
	return r.send(ctx, m)
}

func (r *Remote) send(ctx context.Context, m *a2a.Message) (Reply, error) {
	if r.client == nil {
		return Reply{}, errors.New("a2a remote: not started")
	}
	res, err := r.client.SendMessage(ctx, &a2a.MessageSendParams{Message: m})
	if err != nil {
		return Reply{}, err
	}
	switch v := res.(type) {
	case *a2a.Message:
		return Reply{State: a2a.TaskStateCompleted, Text: partsText(v.Parts)}, nil
	case *a2a.Task:
		task := v
		for !task.Status.State.Terminal() && task.Status.State != a2a.TaskStateInputRequired && task.Status.State != a2a.TaskStateAuthRequired {
			select {
			case <-ctx.Done():
				return Reply{TaskID: string(task.ID), State: task.Status.State}, fmt.Errorf("task %s still %s: %w", task.ID, task.Status.State, context.Cause(ctx))
			case <-time.After(r.cfg.PollInterval):
			}
			if task, err = r.client.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID}); err != nil {
				return Reply{TaskID: string(v.ID)}, fmt.Errorf("tasks/get %s: %w", v.ID, err)
			}
		}
		return taskReply(task), nil
	default:
		return Reply{}, fmt.Errorf("unexpected result %T", res)
	}
}

func taskReply(t *a2a.Task) Reply {
	rep := Reply{TaskID: string(t.ID), State: t.Status.State}
	var parts []string
	if t.Status.State == a2a.TaskStateCompleted {
		for _, a := range t.Artifacts {
			parts = append(parts, partsText(a.Parts))
		}
	}
	if len(parts) == 0 && t.Status.Message != nil {
		parts = append(parts, partsText(t.Status.Message.Parts))
	}
	rep.Text = strings.Join(parts, "\n")
	return rep
}
