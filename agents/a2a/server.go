// Package a2a serves Loomwork's agents over the Agent2Agent protocol and
// lets a run call a remote A2A agent as a tool, with the maintained Go SDK
// (github.com/a2aproject/a2a-go, protocol 0.3: JSON-RPC 2.0 over HTTP,
// the Agent Card at /.well-known/agent-card.json, message/send,
// tasks/get, tasks/cancel).
//
// Server: each A2A task is one Loomwork run whose run id is the task id,
// on the runtime (so it is journaled, traced and scorable like any run).
// The task goes submitted → working → completed (the answer is an
// artifact) | failed (the error is the status message) | canceled
// (tasks/cancel cancels the run). A SERVER span carries the task id and
// final state, with the run's invoke_agent span beneath it.
//
// Client: RemoteTool is a runtime tool that sends the model's message to
// a remote agent (message/send, blocking) and returns the task's artifacts;
// the remote task id and state are on the call's CLIENT span. A remote
// failure — a failed, canceled or rejected task, or an unreachable agent —
// is an error observation the model reads, never a crashed run.
package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/semconv"
)

// RPCPath is where the JSON-RPC endpoint is mounted.
const RPCPath = "/a2a"

// ServerConfig configures one agent served over A2A.
type ServerConfig struct {
	// Agent runs each task. Required.
	Agent runtime.Agent
	// Runtime journals and traces each task's run. Required.
	Runtime *runtime.Runtime
	// Description and Skills go on the Agent Card (the agent's name is its
	// card name).
	Description string
	Skills      []a2a.AgentSkill
	// TaskAttributes is every run's Task.Attributes.
	TaskAttributes json.RawMessage
	// TracerProvider receives the task spans. Default: none.
	TracerProvider trace.TracerProvider
}

// Validate reports every problem with the configuration.
func (c ServerConfig) Validate() error {
	var errs []error
	if c.Agent.Name == "" {
		errs = append(errs, errors.New("a2a server: agent must be set"))
	}
	if c.Runtime == nil {
		errs = append(errs, errors.New("a2a server: runtime must be set"))
	}
	return errors.Join(errs...)
}

// PeerOrigin is the taint origin of a task an A2A peer sent
// (runtime.Task.InputOrigin).
const PeerOrigin = "a2a:peer"

// Server is one agent as an A2A server.
type Server struct {
	cfg    ServerConfig
	tracer trace.Tracer

	mu      sync.Mutex
	running map[a2a.TaskID]context.CancelFunc
}

// NewServer returns the server; it does no I/O.
func NewServer(cfg ServerConfig) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	return &Server{cfg: cfg, tracer: cfg.TracerProvider.Tracer("loomwork/agents/a2a"), running: map[a2a.TaskID]context.CancelFunc{}}, nil
}

// Card is the Agent Card for a server reachable at baseURL.
func (s *Server) Card(baseURL string) *a2a.AgentCard {
	skills := s.cfg.Skills
	if len(skills) == 0 {
		skills = []a2a.AgentSkill{{ID: s.cfg.Agent.Name, Name: s.cfg.Agent.Name, Description: s.cfg.Description, Tags: []string{"loomwork"}}}
	}
	return &a2a.AgentCard{
		Name:               s.cfg.Agent.Name,
		Description:        s.cfg.Description,
		URL:                strings.TrimSuffix(baseURL, "/") + RPCPath,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            "1",
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Capabilities:       a2a.AgentCapabilities{},
		Skills:             skills,
	}
}

// Handler serves the Agent Card and the JSON-RPC endpoint for baseURL
// (the URL clients reach this handler at).
func (s *Server) Handler(baseURL string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(s.Card(baseURL)))
	mux.Handle(RPCPath, joinCallersTrace(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(executor{s}))))
	return mux
}

// joinCallersTrace reads the caller's W3C trace context (traceparent,
// tracestate, baggage) so a task's spans are children of the call that
// sent it. The headers are the caller's word: they choose only where the
// spans hang, never what the task may do.
func joinCallersTrace(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(w3c.Extract(r.Context(), propagation.HeaderCarrier(r.Header))))
	})
}

type executor struct{ s *Server }

// Execute runs the task as a Loomwork run (run id = task id).
func (e executor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	s := e.s
	if rc.StoredTask != nil && rc.StoredTask.Status.State.Terminal() {
		return fmt.Errorf("a2a task %s is already %s", rc.TaskID, rc.StoredTask.Status.State)
	}
	ctx, span := s.tracer.Start(ctx, "a2a task "+s.cfg.Agent.Name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(semconv.AttrA2ATaskID, string(rc.TaskID)), attribute.String(semconv.AttrAgentName, s.cfg.Agent.Name)))
	defer span.End()
	state := func(st a2a.TaskState, msg *a2a.Message, final bool) error {
		span.SetAttributes(attribute.String(semconv.AttrA2ATaskState, string(st)))
		ev := a2a.NewStatusUpdateEvent(rc, st, msg)
		ev.Final = final
		return q.Write(ctx, ev)
	}
	if rc.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(rc, rc.Message)); err != nil {
			return err
		}
		span.SetAttributes(attribute.String(semconv.AttrA2ATaskState, string(a2a.TaskStateSubmitted)))
	}
	runCtx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.running[rc.TaskID] = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, rc.TaskID)
		s.mu.Unlock()
		cancel()
	}()
	if err := state(a2a.TaskStateWorking, nil, false); err != nil {
		return err
	}
	input := messageText(rc.Message)
	if rc.StoredTask != nil && rc.StoredTask.Status.State == a2a.TaskStateInputRequired {
		// A task waiting for a person's approval resumes on the peer's next
		// message. The run resumes from its journal with the task it began
		// with; the new message's words are not read (they are not the
		// approval, which only a person gives, outside A2A).
		input = firstUserText(rc.StoredTask.History)
	}
	if input == "" {
		span.SetStatus(codes.Error, "empty message")
		return state(a2a.TaskStateRejected, agentText(rc, "the message has no text part"), true)
	}
	// A peer's message is untrusted input (InputOrigin): under a policy,
	// no write the run makes from it goes through without approval.
	res, err := s.cfg.Runtime.Run(runCtx, s.cfg.Agent, runtime.Task{RunID: string(rc.TaskID), Input: input, Attributes: s.cfg.TaskAttributes,
		InputOrigin: PeerOrigin})
	var held *runtime.SuspendedError
	switch {
	case errors.As(err, &held):
		// Held for a person's approval (the runtime's Approvals): the task
		// waits in input-required, as durable as the journal's queue.
		return state(a2a.TaskStateInputRequired, agentText(rc, heldMessage(held)), true)
	case err != nil && runCtx.Err() != nil:
		// Cancelled by tasks/cancel: either this server's cancel or the SDK
		// ending the execution once it has read the canceled event.
		span.SetStatus(codes.Error, "canceled")
		return state(a2a.TaskStateCanceled, agentText(rc, "canceled"), true)
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return state(a2a.TaskStateFailed, agentText(rc, err.Error()), true)
	}
	art := a2a.NewArtifactEvent(rc, a2a.TextPart{Text: res.Answer})
	art.Artifact.Name = "answer"
	cites := make([]any, len(res.Citations)) // the SDK's metadata takes []any, not []string
	for i, c := range res.Citations {
		cites[i] = c
	}
	art.Artifact.Metadata = map[string]any{"run_id": res.RunID, "trace_id": res.TraceID, "citations": cites, "model_label": res.Label}
	art.LastChunk = true
	if err := q.Write(ctx, art); err != nil {
		return err
	}
	return state(a2a.TaskStateCompleted, nil, true)
}

// Cancel stops a running task's run. The canceled event goes on the
// execution's queue first: a2a-go's execution manager ends the execution
// when it reads that final event and cancels Execute's context, which stops
// the run. Cancelling the run first raced it: Execute could finish, and the
// SDK close the queue, before this write, and tasks/cancel then answered
// "internal error" (TestCancelStopsTheRun failed so once in CI; a 200 ms
// sleep before the write made it fail every run, and after the write every
// run passes). The explicit cancel after the write is kept so the run stops
// whatever the SDK does.
func (e executor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(rc, a2a.TaskStateCanceled, agentText(rc, "canceled"))
	ev.Final = true
	err := q.Write(ctx, ev)
	e.s.mu.Lock()
	cancel := e.s.running[rc.TaskID]
	e.s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return err
}

// heldMessage tells the peer why its task waits and how it goes on.
func heldMessage(h *runtime.SuspendedError) string {
	return fmt.Sprintf("waiting for a person's approval of %s (call %s, step %d). Once it is answered "+
		"(loom-eval approve|deny %s %s --approver WHO --journal JOURNAL, or /approvals), send any message on this task to resume it; "+
		"the message's words are not read.", h.Tool, h.CallID, h.Step, h.RunID, h.CallID)
}

// firstUserText is the text of the first message the peer sent on a task:
// the task the run began with.
func firstUserText(history []*a2a.Message) string {
	for _, m := range history {
		if m != nil && m.Role == a2a.MessageRoleUser {
			return messageText(m)
		}
	}
	return ""
}

func agentText(rc *a2asrv.RequestContext, text string) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, a2a.TextPart{Text: text})
}

func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return partsText(m.Parts)
}

func partsText(parts []a2a.Part) string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case a2a.TextPart:
			out = append(out, v.Text)
		case *a2a.TextPart:
			out = append(out, v.Text)
		case a2a.DataPart:
			b, _ := json.Marshal(v.Data)
			out = append(out, string(b))
		}
	}
	return strings.Join(out, "\n")
}
