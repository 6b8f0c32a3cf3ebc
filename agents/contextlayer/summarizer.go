package contextlayer

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/semconv"
)

// Completer is the one method of the model gateway a summary needs.
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// Trigger names the model call whose compaction asked for a summary. The
// runtime puts it on the context it passes to Layer.Apply, so the summary's
// span can say which run and step it belongs to.
type Trigger struct {
	RunID string
	Agent string
	Step  int
}

type triggerKey struct{}

// WithTrigger returns ctx carrying t.
func WithTrigger(ctx context.Context, t Trigger) context.Context {
	return context.WithValue(ctx, triggerKey{}, t)
}

// TriggerFromContext returns the Trigger set by WithTrigger.
func TriggerFromContext(ctx context.Context) (Trigger, bool) {
	t, ok := ctx.Value(triggerKey{}).(Trigger)
	return t, ok
}

// Pricer prices one call's normalised usage for the model that answered;
// ok is false when no price is known (the cost is then unknown, never 0).
type Pricer func(model string, u llm.Usage) (usd float64, ok bool)

// SummaryCall is one summary model call a ModelSummarizer made.
type SummaryCall struct {
	RunID    string
	Step     int
	Provider string
	Model    string // the response model ("" when the call failed)
	Label    string
	Usage    llm.Usage
	// CostUSD is nil when the call could not be priced (no Pricer, or the
	// model has no price).
	CostUSD *float64
	Err     error
}

// CallLog collects the summary calls made through a ModelSummarizer, so the
// caller can account for them: their usage is not part of the run's
// journaled usage (the journal keeps only the summary text). It is safe for
// concurrent use; the zero value is ready.
type CallLog struct {
	mu    sync.Mutex
	calls []SummaryCall
}

func (l *CallLog) add(c SummaryCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

// Calls returns the calls recorded so far, in order.
func (l *CallLog) Calls() []SummaryCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]SummaryCall(nil), l.calls...)
}

// ModelSummarizer asks a model (through the gateway) for the summary.
//
// With a Tracer, each call is a `chat {model}` span (kind CLIENT) under the
// caller's span with the GenAI attributes of a model call
// (semconv.ChatAttributes) — operation, provider, request and response
// model, usage, finish reason — plus llm.cost.total when Price knows the
// model and semconv.AttrSummaryCall=true. Under the runtime that is the
// run's invoke_agent span: the summary is a sibling of the chat span of the
// step that triggered it (semconv.AttrSummaryStep), never its child,
// because a step's chat span carries that step's own usage and the trace
// rollup does not add a span whose descendants carry usage. When the gateway
// traces too, its attempt spans are children of this span, which then
// counts as an aggregate: the usage is billed once either way.
type ModelSummarizer struct {
	Model Completer
	// ModelName is passed as Request.Model ("" lets the gateway route).
	ModelName string
	// Tracer, if set, records each call as a chat span.
	Tracer trace.Tracer
	// Price, if set, prices each call for its span and its SummaryCall.
	Price Pricer
	// Log, if set, records each call.
	Log *CallLog
}

// Summarize implements Summarizer. The transcript is sent as one user
// message, so the request carries no tool results whose calls are missing.
func (s ModelSummarizer) Summarize(ctx context.Context, msgs []llm.Message, maxTokens int) (string, error) {
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(&b, "assistant called %s(%s) [call %s]\n", tc.Name, tc.Arguments, tc.ID)
			}
			if m.Content != "" {
				fmt.Fprintf(&b, "assistant: %s\n", m.Content)
			}
		case llm.RoleTool:
			fmt.Fprintf(&b, "result of %s [call %s]: %s\n", m.ToolName, m.ToolCallID, m.Content)
		default:
			fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Content)
		}
	}
	req := llm.Request{
		Model: s.ModelName,
		System: "You compress agent transcripts. Summarise the steps below in at most " +
			fmt.Sprint(maxTokens) + " tokens: what was tried, what was found, and every identifier, path, " +
			"number and ticket id that a later step could need, verbatim. No preamble.",
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: b.String()}},
		MaxTokens: maxTokens,
	}
	trig, _ := TriggerFromContext(ctx)
	ctx, span := s.startSpan(ctx, req, trig, len(msgs))
	resp, err := s.Model.Complete(ctx, req)
	call := SummaryCall{RunID: trig.RunID, Step: trig.Step, Err: err}
	if err == nil {
		call.Provider, call.Model, call.Label, call.Usage = resp.Provider, resp.Model, resp.Label, resp.Usage
		if s.Price != nil {
			name := resp.Model
			if name == "" {
				name = s.ModelName
			}
			if usd, ok := s.Price(name, resp.Usage); ok {
				call.CostUSD = &usd
			}
		}
	}
	s.endSpan(span, req, resp, call)
	if s.Log != nil {
		s.Log.add(call)
	}
	if err != nil {
		return "", fmt.Errorf("summary model call: %w", err)
	}
	text := strings.TrimSpace(resp.Message.Content)
	if text == "" {
		return "", fmt.Errorf("summary model returned no text (stop reason %q)", resp.StopReason)
	}
	if resp.Label == llm.LabelScripted {
		text = "(scripted summary) " + text
	}
	return text, nil
}

func (s ModelSummarizer) startSpan(ctx context.Context, req llm.Request, trig Trigger, n int) (context.Context, trace.Span) {
	if s.Tracer == nil {
		return ctx, nil
	}
	name := "chat"
	if req.Model != "" {
		name += " " + req.Model
	}
	attrs := append(semconv.ChatAttributes(semconv.Chat{
		Operation:      semconv.OpChat,
		RequestModel:   req.Model,
		MaxTokens:      req.MaxTokens,
		AgentName:      trig.Agent,
		ConversationID: trig.RunID,
	}),
		attribute.Bool(semconv.AttrSummaryCall, true),
		attribute.Int(semconv.AttrSummaryMessages, n),
	)
	if trig.Step > 0 {
		attrs = append(attrs, attribute.Int(semconv.AttrSummaryStep, trig.Step))
	}
	return s.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func (s ModelSummarizer) endSpan(span trace.Span, req llm.Request, resp llm.Response, call SummaryCall) {
	if span == nil {
		return
	}
	defer span.End()
	if call.Err != nil {
		span.RecordError(call.Err)
		span.SetStatus(codes.Error, call.Err.Error())
		span.SetAttributes(semconv.ChatAttributes(semconv.Chat{ErrorType: "summary_model_error"})...)
		return
	}
	if resp.Model != "" && req.Model == "" {
		span.SetName("chat " + resp.Model)
	}
	u := semconv.Usage(resp.Usage)
	span.SetAttributes(semconv.ChatAttributes(semconv.Chat{
		Provider:      resp.Provider,
		ResponseModel: resp.Model,
		FinishReasons: []string{resp.StopReason},
		Label:         resp.Label,
		Usage:         &u,
		CostUSD:       call.CostUSD,
	})...)
}
