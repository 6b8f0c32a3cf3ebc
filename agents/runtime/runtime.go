package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
)

// Model is what the runtime needs from a model: one call. The gateway (live
// providers with routing and retries) and the scripted model satisfy it.
type Model interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// Labeler is an optional Model capability: the label ("scripted", "live")
// its answers will carry, recorded on model_request events before the
// answer exists.
type Labeler interface {
	Label() string
}

// StepLimitPrompt is the user turn added before the last model call of a run
// that reached its step limit; that call is made with no tools.
const StepLimitPrompt = "You have reached the step limit and tools are no longer available. Answer now with what you have."

// Config configures a Runtime.
type Config struct {
	// Model answers model calls. Required.
	Model Model
	// Journal records every step and is replayed on resume: the journal
	// port, which any store implements (journaldb, durable; memjournal, in
	// memory). An agent with a tool that keeps tables in the journal
	// (Tool.EffectSchema) needs one that has them (journal.SchemaEnsurer).
	// Required.
	Journal journal.Journal
	// TracerProvider receives the spans (invoke_agent, chat, execute_tool,
	// retrieval). Default: no spans.
	TracerProvider trace.TracerProvider
	// Clock stamps spans. Default time.Now.
	Clock func() time.Time
	// MaxSteps is the default step limit: the number of model calls that may
	// request tools. Default 8.
	MaxSteps int
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger
	// Context switches the context layer on for every run whose Task.Context
	// is nil: before each model call the conversation is compacted to its
	// budget (see ContextSpec). nil: requests carry the whole conversation.
	Context *ContextSpec
	// Summarizer makes the summaries of a ContextSpec whose Summarizer is
	// "model" (e.g. contextlayer.ModelSummarizer over the gateway).
	Summarizer contextlayer.Summarizer
	// Authorizer, when set, decides every tool call before it runs (see
	// Authorizer); its decisions are journaled and re-checked on resume
	// and replay.
	Authorizer Authorizer
	// Approvals, when set, holds every call the Authorizer leaves to a
	// human (Authorization.Approval): the request is journaled
	// (approval_requested) and queued, and Run returns *SuspendedError
	// until it is answered; running the RunID again then runs the call
	// (approved) or gives the model the denial, with the answer journaled
	// (approval). nil: such a call is refused and the model told so.
	Approvals Approvals
	// CaptureContent records message content on every chat span: the
	// request's system instructions and input messages and the response's
	// output messages, as GenAI JSON (semconv.AttrSystemInstructions,
	// AttrInputMessages, AttrOutputMessages; see contentAttrs). Off by
	// default: content may be sensitive, and a collector whose project
	// does not capture content drops it anyway. Only what the model was
	// sent and answered is recorded — never a provider's key or header,
	// which the runtime never sees.
	CaptureContent bool

	_ struct{}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Model == nil {
		errs = append(errs, errors.New("model must be set"))
	}
	if c.Journal == nil {
		errs = append(errs, errors.New("journal must be set"))
	}
	if c.MaxSteps < 0 {
		errs = append(errs, fmt.Errorf("max_steps must not be negative (got %d)", c.MaxSteps))
	}
	if c.Context != nil {
		if err := c.Context.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Runtime runs agents: model → tool calls → results, until a final answer,
// journaling every step. It is safe for concurrent Runs of different run
// ids; one run id must be run by one caller at a time.
type Runtime struct {
	cfg    Config
	tracer trace.Tracer
}

// New returns a Runtime. It does no I/O.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("runtime config: %w", err)
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.MaxSteps == 0 {
		cfg.MaxSteps = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Runtime{cfg: cfg, tracer: cfg.TracerProvider.Tracer("github.com/loomwork/loomwork/agents/runtime")}, nil
}

// Task is one run of an agent.
type Task struct {
	// RunID names the run in the journal. Running an id that has events
	// resumes it: recorded model answers and tool results are reused,
	// never re-requested or re-executed.
	RunID string
	Input string
	// Model is the requested model; empty lets the gateway route.
	Model     string
	MaxSteps  int // 0: Config.MaxSteps
	MaxTokens int
	// CaseID and Trial tie the run to an evaluation case; they are
	// journaled, and a run with a CaseID carries both on its invoke_agent
	// span (semconv.AttrCaseID, AttrTrial), so its trace is a trial of that
	// case wherever it is stored.
	CaseID string
	Trial  int
	// Context overrides Config.Context for this run (see ContextSpec).
	Context *ContextSpec
	// Attributes is a JSON object the task hands to every tool call
	// (ToolInput.TaskAttributes) — e.g. the research agent's issue to
	// exclude from retrieval. It is journaled in run_started, so a resumed
	// or replayed run gives its tools the same values. Keys starting with
	// "loomwork." are reserved.
	Attributes json.RawMessage
	// InputOrigin, when set, says the task itself came from an untrusted
	// party (an A2A peer: "a2a:PEER"; a production request): an
	// Authorizer taints everything derived from it. It is journaled in
	// run_started, so a replay decides the same.
	InputOrigin string

	// contextFixed makes Context authoritative even when nil (ReplayTask:
	// a run recorded without a layer replays without one).
	contextFixed bool
	// summaries are recorded model summaries by step (ReplayTask).
	summaries map[int]string
	// approvals are the recorded answers to held calls, nil for one
	// still pending (ReplayTask).
	approvals map[heldCall]*journal.ApprovalAnswer
}

// Result is a finished run.
type Result struct {
	RunID            string
	Answer           string
	Citations        []string
	Documents        []string // evidence ids retrieved during the run, in order, without repeats
	Steps            int      // model calls in the run (recorded or made)
	StepLimitReached bool
	Usage            llm.Usage
	Label            string // label of the model answers ("scripted" or "live")
	// ModelCalls counts calls this process made to the model; Reused counts
	// model answers taken from the journal instead.
	ModelCalls int
	Reused     int
	// ToolRuns counts tool executions by this process; ToolsReused counts
	// results taken from the journal.
	ToolRuns    int
	ToolsReused int
	// TraceID is the hex trace id of the run's invoke_agent span ("" when
	// spans are not recorded).
	TraceID string
}

// run is the state of one Run.
type run struct {
	rt       *Runtime
	agent    *compiled
	task     Task
	recorded []journal.Event
	pos      int
	res      Result
	docs     map[string]bool
	span     trace.Span
	ctxSpec  *ContextSpec // the context layer of this run, normalised; nil: none
	// seen is the conversation up to the assistant message whose tool
	// calls are being run, and callDocs the evidence ids of each tool
	// result: what an Authorizer derives taint from.
	seen     []llm.Message
	callDocs map[string][]string
}

// Run executes task with agent, or resumes it if the journal has events for
// task.RunID. A recorded step that does not match what the run produces
// fails with a *journal.DivergenceError; the journal is left as it was.
func (rt *Runtime) Run(ctx context.Context, agent Agent, task Task) (res Result, err error) {
	if task.RunID == "" {
		return Result{}, errors.New("run agent: task has no run id")
	}
	c, err := compileAgent(agent)
	if err != nil {
		return Result{}, fmt.Errorf("run %s: %w", task.RunID, err)
	}
	if task.MaxSteps == 0 {
		task.MaxSteps = rt.cfg.MaxSteps
	}
	recorded, err := rt.cfg.Journal.Events(ctx, task.RunID)
	if err != nil {
		return Result{}, fmt.Errorf("run %s: %w", task.RunID, err)
	}
	r := &run{rt: rt, agent: c, task: task, recorded: recorded, docs: map[string]bool{}, callDocs: map[string][]string{}}
	if spec := rt.effectiveContext(task); spec != nil {
		if err := spec.Validate(); err != nil {
			return Result{}, fmt.Errorf("run %s: %w", task.RunID, err)
		}
		n := spec.normalized()
		if n.Summarizer == SummarizerModel && rt.cfg.Summarizer == nil && len(task.summaries) == 0 && len(recorded) == 0 {
			return Result{}, fmt.Errorf("run %s: context.summarizer is %q and the runtime has no Summarizer", task.RunID, SummarizerModel)
		}
		r.ctxSpec = &n
	}
	r.res.RunID = task.RunID
	if err := rt.ensureSchemas(ctx, c); err != nil {
		return Result{}, fmt.Errorf("run %s: %w", task.RunID, err)
	}
	ctx, r.span = rt.tracer.Start(ctx, "invoke_agent "+c.Name,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(rt.cfg.Clock()),
		trace.WithAttributes(rootAttrs(c.Name, task)...))
	defer func() { endSpan(r.span, rt.cfg.Clock(), err) }()
	if sc := r.span.SpanContext(); sc.HasTraceID() {
		r.res.TraceID = sc.TraceID().String()
	}
	if err := r.loop(ctx); err != nil {
		return Result{}, err
	}
	r.finishSpan()
	return r.res, nil
}

// ensureSchemas creates the tables the agent's tools keep in the journal
// (Tool.EffectSchema), which takes a journal that has tables.
func (rt *Runtime) ensureSchemas(ctx context.Context, c *compiled) error {
	for _, t := range c.Tools {
		if t.EffectSchema == "" {
			continue
		}
		se, ok := rt.cfg.Journal.(journal.SchemaEnsurer)
		if !ok {
			return fmt.Errorf("tool %s keeps tables in the journal (EffectSchema), and the journal (%T) has none: use a journal with tables, such as journaldb", t.Name, rt.cfg.Journal)
		}
		if err := se.EnsureSchema(ctx, t.EffectSchema); err != nil {
			return fmt.Errorf("tool %s: %w", t.Name, err)
		}
	}
	return nil
}

// next consumes the recorded event at the cursor if there is one and it
// matches want; it returns ok=false when the journal has no more events
// (the run continues live from here).
func (r *run) next(want journal.Record) (journal.Event, bool, error) {
	if r.pos >= len(r.recorded) {
		return journal.Event{}, false, nil
	}
	e := r.recorded[r.pos]
	got, rec := journal.RefOfRecord(want), journal.RefOf(e)
	if f := journal.Compare(rec, got); f != "" {
		return journal.Event{}, false, &journal.DivergenceError{Code: journal.CodeMismatch, RunID: r.task.RunID, Seq: e.Seq, Field: f, Recorded: &rec, Produced: &got}
	}
	r.pos++
	return e, true, nil
}

// record matches want against the journal or appends it.
func (r *run) record(ctx context.Context, want journal.Record) (journal.Event, bool, error) {
	e, reused, err := r.next(want)
	if err != nil || reused {
		return e, reused, err
	}
	evs, err := r.rt.cfg.Journal.Append(ctx, r.task.RunID, want)
	if err != nil {
		return journal.Event{}, false, err
	}
	return evs[0], false, nil
}

func (r *run) loop(ctx context.Context) error {
	c, task := r.agent, r.task
	toolSpecs := make([]journal.ToolSpec, 0, len(c.specs))
	for _, t := range c.Tools {
		toolSpecs = append(toolSpecs, journal.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters, Effect: t.Effect})
	}
	attrs, err := startedAttributes(task, r.ctxSpec)
	if err != nil {
		return fmt.Errorf("run %s: %w", task.RunID, err)
	}
	started := journal.RunStarted{Agent: c.Name, System: c.System, Input: task.Input, Model: task.Model,
		MaxSteps: task.MaxSteps, MaxTokens: task.MaxTokens, Tools: toolSpecs, CaseID: task.CaseID, Trial: task.Trial,
		Attributes: attrs}
	// The argument hash of run_started covers what the agent's code decides
	// (its prompt and tools) and the task, so resuming or replaying under a
	// changed agent is caught at seq 1. The policy is recorded beside it,
	// not hashed: its decisions are events of their own.
	h, err := journal.HashValue(started)
	if err != nil {
		return err
	}
	if ps, ok := r.rt.cfg.Authorizer.(PolicySource); ok {
		started.Policy = ps.PolicyRecord()
	}
	if _, _, err := r.record(ctx, journal.Record{Kind: journal.KindRunStarted, Tool: "", ArgsHash: h, Payload: started}); err != nil {
		return err
	}

	msgs := []llm.Message{{Role: llm.RoleUser, Content: task.Input}}
	sent := 0
	for step := 1; ; step++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("run %s: step %d: %w", task.RunID, step, err)
		}
		final := step > task.MaxSteps
		if final {
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: StepLimitPrompt})
			r.res.StepLimitReached = true
		}
		// The request sent — and hashed and journaled — is the compacted
		// conversation; the journal keeps the uncompacted new messages too,
		// so the full history is never lost.
		sendSystem, sendMsgs, ctxRec, err := r.compact(ctx, step, c.System, msgs)
		if err != nil {
			return fmt.Errorf("run %s: step %d: %w", task.RunID, step, err)
		}
		req := llm.Request{Model: task.Model, System: sendSystem, Messages: append([]llm.Message(nil), sendMsgs...), MaxTokens: task.MaxTokens}
		if !final {
			req.Tools = c.specs
		}
		resp, err := r.modelStep(ctx, step, req, msgs[sent:], final, ctxRec)
		if err != nil {
			return err
		}
		sent = len(msgs)
		r.res.Steps = step
		msg := resp.Message
		msg.Role = llm.RoleAssistant
		if final || len(msg.ToolCalls) == 0 {
			return r.finish(ctx, step, msg.Content)
		}
		msgs = append(msgs, msg)
		r.seen = msgs[:len(msgs):len(msgs)]
		for _, call := range msg.ToolCalls {
			obs, err := r.toolStep(ctx, step, call)
			if err != nil {
				return err
			}
			msgs = append(msgs, obs)
		}
	}
}

func (r *run) modelLabel() string {
	if l, ok := r.rt.cfg.Model.(Labeler); ok {
		return l.Label()
	}
	return ""
}

func (r *run) modelStep(ctx context.Context, step int, req llm.Request, newMsgs []llm.Message, final bool, ctxRec *ContextRecord) (llm.Response, error) {
	reqHash, err := journal.HashValue(req)
	if err != nil {
		return llm.Response{}, err
	}
	mr := journal.ModelRequest{Model: req.Model, MessageCount: len(req.Messages), NewMessages: newMsgs,
		Tools: r.agent.toolNames(), ToolsWithheld: final, MaxTokens: req.MaxTokens}
	if final {
		mr.Tools = nil
	}
	mr.Context = ctxRec
	var payload any = mr
	label := r.modelLabel()
	reqEv, reused, err := r.record(ctx, journal.Record{Kind: journal.KindModelRequest, Step: step, ArgsHash: reqHash, Label: label, Payload: payload})
	if err != nil {
		return llm.Response{}, err
	}
	if reused && reqEv.Label != "" {
		label = reqEv.Label
	}
	ctx, span := r.startChat(ctx, req, ctxRec)
	// A recorded answer is reused and the model is not asked again: asking
	// would produce different text for the same step.
	if r.pos < len(r.recorded) {
		e, ok, err := r.next(journal.Record{Kind: journal.KindModelResponse, Step: step})
		if err != nil {
			return llm.Response{}, err
		}
		if ok {
			var resp llm.Response
			if err := json.Unmarshal(e.Payload, &resp); err != nil {
				return llm.Response{}, fmt.Errorf("run %s seq %d: decode recorded model response: %w", r.task.RunID, e.Seq, err)
			}
			r.res.Reused++
			r.endChat(span, req, resp, true, nil, ctxRec)
			r.account(resp)
			return resp, nil
		}
	}
	resp, err := r.rt.cfg.Model.Complete(withStep(ctx, step), req)
	r.res.ModelCalls++
	if err != nil {
		r.endChat(span, req, llm.Response{Label: label}, false, err, ctxRec)
		return llm.Response{}, fmt.Errorf("run %s: step %d: model call: %w", r.task.RunID, step, err)
	}
	sanitizeArguments(&resp)
	if resp.Label == "" {
		resp.Label = label
	}
	if resp.Label == "" {
		resp.Label = llm.LabelLive
	}
	evs, err := r.rt.cfg.Journal.Append(ctx, r.task.RunID, journal.Record{Kind: journal.KindModelResponse, Step: step, Label: resp.Label, Payload: resp})
	if err != nil {
		err = fmt.Errorf("run %s: step %d: %w", r.task.RunID, step, err)
		r.endChat(span, req, resp, false, err, ctxRec)
		return llm.Response{}, err
	}
	// The run goes on with the answer as the journal holds it, not as the
	// model sent it: the journal's canonical JSON writes `<>&` in tool-call
	// arguments as themselves where a provider (or json.Marshal) may have
	// sent \u003c…, and a resumed run reads the journal's form. Counting
	// tokens over two spellings of one answer made a resumed run differ
	// from an uninterrupted one (TestResumedRunMatchesTheUninterruptedOne).
	var journaled llm.Response
	if err := json.Unmarshal(evs[0].Payload, &journaled); err != nil {
		err = fmt.Errorf("run %s seq %d: decode the journaled model response: %w", r.task.RunID, evs[0].Seq, err)
		r.endChat(span, req, resp, false, err, ctxRec)
		return llm.Response{}, err
	}
	resp = journaled
	r.endChat(span, req, resp, false, nil, ctxRec)
	r.account(resp)
	return resp, nil
}

func (r *run) account(resp llm.Response) {
	r.res.Usage = r.res.Usage.Add(resp.Usage)
	switch {
	case r.res.Label == "":
		r.res.Label = resp.Label
	case resp.Label == llm.LabelScripted:
		r.res.Label = llm.LabelScripted // a run with any scripted answer is a scripted run
	}
}

// toolStep journals a call, executes it (or reuses its recorded result) and
// returns the observation for the model.
func (r *run) toolStep(ctx context.Context, step int, call llm.ToolCall) (llm.Message, error) {
	args, herr := decodeArguments(call.Arguments)
	argsHash, err := journal.HashJSON(args)
	if err != nil {
		return llm.Message{}, fmt.Errorf("run %s: step %d: call %s: %w", r.task.RunID, step, call.ID, err)
	}
	if _, _, err := r.record(ctx, journal.Record{Kind: journal.KindToolCall, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: argsHash, Payload: call}); err != nil {
		return llm.Message{}, err
	}
	ctx, span := r.startTool(ctx, call)
	deny, need, err := r.authorize(ctx, step, call, args)
	if err == nil && deny != nil && need != nil && r.holds(step, call) {
		// Held for a human: approved, it runs below; denied, the denial
		// is the observation; unanswered, the run suspends here.
		deny, err = r.awaitApproval(ctx, step, call, args, need)
	}
	if err != nil {
		r.endTool(span, journal.ToolResult{}, false, err)
		return llm.Message{}, err
	} else if deny != nil {
		// Not allowed: the tool does not run; the refusal is the
		// observation, journaled (or matched, resuming) like any result.
		_, reused, err := r.record(ctx, journal.Record{Kind: journal.KindToolResult, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: argsHash, Payload: *deny})
		r.endTool(span, *deny, reused, err)
		if err != nil {
			return llm.Message{}, err
		}
		return r.observe(call, *deny), nil
	}
	// Recorded result (with its effects, committed atomically before it):
	// the call is complete and is not executed again.
	if r.pos < len(r.recorded) {
		for r.pos < len(r.recorded) && r.recorded[r.pos].Kind == journal.KindEffect {
			if _, _, err := r.next(journal.Record{Kind: journal.KindEffect, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: r.recorded[r.pos].ArgsHash}); err != nil {
				r.endTool(span, journal.ToolResult{}, false, err)
				return llm.Message{}, err
			}
		}
		e, ok, err := r.next(journal.Record{Kind: journal.KindToolResult, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: argsHash})
		if err != nil {
			r.endTool(span, journal.ToolResult{}, false, err)
			return llm.Message{}, err
		}
		if ok {
			var tr journal.ToolResult
			if err := json.Unmarshal(e.Payload, &tr); err != nil {
				err = fmt.Errorf("run %s seq %d: decode recorded tool result: %w", r.task.RunID, e.Seq, err)
				r.endTool(span, journal.ToolResult{}, false, err)
				return llm.Message{}, err
			}
			r.res.ToolsReused++
			r.endTool(span, tr, true, nil)
			return r.observe(call, tr), nil
		}
	}
	tr, err := r.execute(ctx, step, call, args, herr)
	if err != nil {
		r.endTool(span, journal.ToolResult{}, false, err)
		return llm.Message{}, err
	}
	r.res.ToolRuns++
	r.endTool(span, tr, false, nil)
	return r.observe(call, tr), nil
}

func (r *run) observe(call llm.ToolCall, tr journal.ToolResult) llm.Message {
	if len(tr.Documents) > 0 {
		r.callDocs[call.ID] = tr.Documents
	}
	for _, d := range tr.Documents {
		if !r.docs[d] {
			r.docs[d] = true
			r.res.Documents = append(r.res.Documents, d)
		}
	}
	return llm.Message{Role: llm.RoleTool, Content: tr.Content, ToolCallID: call.ID, ToolName: call.Name, IsError: tr.IsError}
}

// execute runs the call live and journals its result (with its effects, for
// a side-effecting tool, in one transaction).
func (r *run) execute(ctx context.Context, step int, call llm.ToolCall, args json.RawMessage, argsErr error) (journal.ToolResult, error) {
	argsHash, _ := journal.HashJSON(args)
	resultRec := func(tr journal.ToolResult) journal.Record {
		return journal.Record{Kind: journal.KindToolResult, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: argsHash, Payload: tr}
	}
	appendResult := func(tr journal.ToolResult) (journal.ToolResult, error) {
		if _, err := r.rt.cfg.Journal.Append(ctx, r.task.RunID, resultRec(tr)); err != nil {
			return journal.ToolResult{}, fmt.Errorf("run %s: step %d: %w", r.task.RunID, step, err)
		}
		return tr, nil
	}
	tool := r.agent.tools[call.Name]
	if tool == nil {
		return appendResult(journal.ToolResult{IsError: true,
			Content: fmt.Sprintf("error: unknown tool %q; available tools: %s", call.Name, strings.Join(r.agent.toolNames(), ", "))})
	}
	if argsErr != nil {
		return appendResult(journal.ToolResult{IsError: true, Content: fmt.Sprintf("error: invalid arguments for tool %s: not valid JSON: %v", call.Name, argsErr)})
	}
	if err := r.agent.schemas[call.Name].Validate(args); err != nil {
		return appendResult(journal.ToolResult{IsError: true, Content: fmt.Sprintf("error: invalid arguments for tool %s: %v", call.Name, err)})
	}
	key, err := journal.IdempotencyKey(r.task.RunID, step, call.ID, args)
	if err != nil {
		return journal.ToolResult{}, err
	}
	in := ToolInput{RunID: r.task.RunID, Step: step, CallID: call.ID, Arguments: args, IdempotencyKey: key, TaskAttributes: r.task.Attributes}
	if !tool.Effect {
		out, err := safeRun(ctx, tool, in)
		if sf := (*StepFailure)(nil); errors.As(err, &sf) {
			// The caller's bug, not an observation: nothing is journaled.
			return journal.ToolResult{}, fmt.Errorf("run %s: step %d: tool %s: %w", r.task.RunID, step, call.Name, err)
		}
		if cerr := ctx.Err(); cerr != nil {
			// Cancelled, not failed: nothing is journaled, so a resume runs
			// the call again.
			return journal.ToolResult{}, fmt.Errorf("run %s: step %d: tool %s: %w", r.task.RunID, step, call.Name, cerr)
		}
		return appendResult(toolResult(call.Name, out, err, ""))
	}
	var (
		out ToolOutput
		ran bool
	)
	evs, err := r.rt.cfg.Journal.AppendEffect(ctx, r.task.RunID, journal.EffectCall{Step: step, Tool: call.Name, CallID: call.ID, Key: key},
		func(ctx context.Context, tx journal.EffectTx) (journal.Record, error) {
			ran = true
			in.Tx, _ = tx.(journal.SQLTx) // nil on a journal without tables
			o, err := tool.Run(ctx, in)
			if err != nil {
				return journal.Record{}, err
			}
			out = o
			return resultRec(toolResult(call.Name, o, nil, key)), nil
		})
	switch {
	case err == nil && ran:
		return toolResult(call.Name, out, nil, key), nil
	case err == nil:
		// The journal had the key's result already (another caller ran the
		// call): the effect is not repeated, its recorded result stands.
		return recordedResult(r.task.RunID, evs)
	}
	if cerr := ctx.Err(); cerr != nil {
		return journal.ToolResult{}, fmt.Errorf("run %s: step %d: tool %s: %w", r.task.RunID, step, call.Name, cerr)
	}
	// The tool failed: its effects were rolled back with the transaction.
	// The failure is an observation for the model, journaled on its own.
	return appendResult(toolResult(call.Name, ToolOutput{}, err, key))
}

// recordedResult is the tool result among the events AppendEffect returned
// for a key it had completed before (the last of them).
func recordedResult(runID string, evs []journal.Event) (journal.ToolResult, error) {
	if len(evs) == 0 || evs[len(evs)-1].Kind != journal.KindToolResult {
		return journal.ToolResult{}, fmt.Errorf("run %s: the journal answered a completed effect without its tool_result", runID)
	}
	e := evs[len(evs)-1]
	var tr journal.ToolResult
	if err := json.Unmarshal(e.Payload, &tr); err != nil {
		return journal.ToolResult{}, fmt.Errorf("run %s seq %d: decode recorded tool result: %w", runID, e.Seq, err)
	}
	return tr, nil
}

// sanitizeArguments makes every tool call's arguments valid JSON before the
// response is journaled: arguments that are not (a model can emit broken
// JSON) are kept verbatim as a JSON string, which decodeArguments
// recognises. (Their spelling is made the journal's when the run goes on
// with the journaled answer: see the model call.)
func sanitizeArguments(resp *llm.Response) {
	for i, c := range resp.Message.ToolCalls {
		a := strings.TrimSpace(string(c.Arguments))
		if a == "" {
			resp.Message.ToolCalls[i].Arguments = json.RawMessage("{}")
		} else if !json.Valid([]byte(a)) {
			b, _ := json.Marshal(a)
			resp.Message.ToolCalls[i].Arguments = b
		}
	}
}

// decodeArguments returns the JSON arguments of a call. Arguments sent as a
// JSON string (some providers double-encode, and sanitizeArguments keeps
// broken JSON that way) are unwrapped; if the string is not JSON, the
// returned error says so and the returned value is the string literal.
func decodeArguments(raw json.RawMessage) (json.RawMessage, error) {
	a := strings.TrimSpace(string(raw))
	if a == "" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid([]byte(a)) {
		b, _ := json.Marshal(a)
		return b, fmt.Errorf("%.80q is not valid JSON", a)
	}
	if a[0] != '"' {
		return json.RawMessage(a), nil
	}
	var text string
	if err := json.Unmarshal([]byte(a), &text); err != nil {
		return json.RawMessage(a), err
	}
	if !json.Valid([]byte(text)) {
		return json.RawMessage(a), fmt.Errorf("%.80q is not valid JSON", text)
	}
	return json.RawMessage(text), nil
}

func safeRun(ctx context.Context, t *Tool, in ToolInput) (out ToolOutput, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &journal.PanicError{Value: p}
		}
	}()
	return t.Run(ctx, in)
}

func toolResult(name string, out ToolOutput, err error, key string) journal.ToolResult {
	if err != nil {
		return journal.ToolResult{IsError: true, Content: fmt.Sprintf("error: tool %s failed: %v", name, err), Key: key}
	}
	return journal.ToolResult{Content: out.Content, Documents: out.Documents, Events: out.Events, Attrs: out.Attrs, Key: key}
}

func (r *run) finish(ctx context.Context, step int, answer string) error {
	if r.agent.Citations != nil {
		r.res.Citations = r.agent.Citations(answer)
	}
	r.res.Answer = answer
	u := r.res.Usage
	fin := journal.RunFinished{Answer: answer, Citations: r.res.Citations, Steps: step, StepLimitReached: r.res.StepLimitReached,
		Usage: journal.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
			CacheCreationTokens: u.CacheCreationTokens, ReasoningTokens: u.ReasoningTokens}}
	h, err := journal.HashValue(fin)
	if err != nil {
		return err
	}
	if _, _, err := r.record(ctx, journal.Record{Kind: journal.KindRunFinished, Step: step, ArgsHash: h, Payload: fin}); err != nil {
		return err
	}
	if r.pos < len(r.recorded) {
		rec := journal.RefOf(r.recorded[r.pos])
		return &journal.DivergenceError{Code: journal.CodeMissing, RunID: r.task.RunID, Seq: r.recorded[r.pos].Seq, Recorded: &rec}
	}
	return nil
}

// RunID is the run id scheme of loom-eval run: AGENT-CASE-tTRIAL for a case
// (stable, so running a case again resumes its run), and
// AGENT-TASKHASH-UNIXTIME-tTRIAL for a free-text task (the hash is of the
// task text; the time keeps two invocations apart).
func RunID(agent, caseID, input string, trial int, now time.Time) string {
	if caseID != "" {
		return fmt.Sprintf("%s-%s-t%d", agent, caseID, trial)
	}
	sum := sha256.Sum256([]byte(input))
	return fmt.Sprintf("%s-%s-%d-t%d", agent, hex.EncodeToString(sum[:4]), now.Unix(), trial)
}
