package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/semconv"
)

// ContextSpec switches the context layer (package contextlayer) on for a
// run: before every model call the conversation is compacted to Budget
// tokens and the compacted request is the one sent, hashed and journaled.
//
// The spec is journaled in the run's run_started event (attribute
// "loomwork.context"), so a resumed or replayed run compacts exactly as the
// recorded one did, and resuming under a different spec is a divergence at
// seq 1. Extractive summaries are deterministic and recomputed; a model
// summary's text is journaled with its model_request event and reused on
// resume and replay, never requested again.
type ContextSpec struct {
	// Strategy is a contextlayer preset: "truncate", "shrink",
	// "shrink+summarise" or "shrink+summarise+pins".
	Strategy string `json:"strategy"`
	// Budget is the most tokens the system prompt and messages may count.
	Budget int `json:"budget"`
	// Tokenizer counts tokens: "o200k_base" (default, the real BPE) or
	// "estimate" (contextlayer.Estimate).
	Tokenizer string `json:"tokenizer,omitempty"`
	// ToolResultMaxTokens is the size above which a tool result is shrunk
	// (0: the layer's default, 400).
	ToolResultMaxTokens int `json:"tool_result_max_tokens,omitempty"`
	// Summarizer is "extractive" (default) or "model" (Config.Summarizer
	// makes the summaries).
	Summarizer string `json:"summarizer,omitempty"`
	// Pins are facts the task requires kept (contextlayer.Input.Pins).
	Pins []string `json:"pins,omitempty"`
	// Tiers, when set, assembles every request by tiers
	// (contextlayer.Builder) before the layer runs; see TierSpec.
	Tiers *TierSpec `json:"tiers,omitempty"`
}

// TierSpec assembles each model request by priority tiers: the system
// prompt and the task are the instructions, Evidence the retrieved
// evidence, the conversation's tool results the tool outputs, Memory the
// records recalled from earlier runs, and the other turns the history.
//
// The builder decides every item (kept, truncated, dropped) within
// Window - Reserve. Admitted evidence and memory, each with its
// provenance, are appended to the system prompt. The conversation (tool
// outputs and history) gets the tokens the tiers allotted it, and the
// layer (Strategy) packs it into them under its own rules: tool results
// shrink first, the middle is summarised, pins are restored, and a tool
// result never opens the window without its call. The builder's report is
// journaled under "tiers" in the model_request's context record.
//
// Evidence and memory are part of the spec, so they are journaled in
// run_started with it and a resumed or replayed run assembles the same
// requests.
type TierSpec struct {
	// Window is the model's context window in tokens.
	Window int `json:"window"`
	// Reserve is kept free for the completion; never used by the prompt.
	Reserve int `json:"reserve"`
	// Floors sets aside tokens per tier name (instructions, evidence,
	// tool_output, memory, history).
	Floors   map[string]int `json:"floors,omitempty"`
	Evidence []TierDoc      `json:"evidence,omitempty"`
	Memory   []TierDoc      `json:"memory,omitempty"`
}

// TierDoc is a piece of evidence or a recalled memory.
type TierDoc struct {
	ID         string   `json:"id"`
	Text       string   `json:"text"`
	Provenance []string `json:"provenance,omitempty"`
	Relevance  float64  `json:"relevance,omitempty"`
}

func (t *TierSpec) validate() []error {
	var errs []error
	b := contextlayer.Builder{Window: t.Window, Reserve: t.Reserve}
	if err := b.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("context.tiers: %w", err))
	}
	for name, f := range t.Floors {
		if _, err := contextlayer.ParseTier(name); err != nil {
			errs = append(errs, fmt.Errorf("context.tiers.floors: %w", err))
		}
		if f < 0 {
			errs = append(errs, fmt.Errorf("context.tiers.floors[%s]: must not be negative (got %d)", name, f))
		}
	}
	seen := map[string]bool{}
	for i, d := range append(append([]TierDoc(nil), t.Evidence...), t.Memory...) {
		if d.ID == "" {
			errs = append(errs, fmt.Errorf("context.tiers: document %d has no id", i))
		} else if seen[d.ID] {
			errs = append(errs, fmt.Errorf("context.tiers: duplicate document id %q", d.ID))
		}
		seen[d.ID] = true
	}
	return errs
}

// Tokenizer and summarizer names in a ContextSpec.
const (
	TokenizerO200k    = "o200k_base"
	TokenizerEstimate = "estimate"
	SummarizerExtract = "extractive"
	SummarizerModel   = "model"
)

// Validate reports every problem with the spec.
func (s ContextSpec) Validate() error {
	var errs []error
	if _, err := contextlayer.Preset(s.Strategy, max(s.Budget, 1)); err != nil {
		errs = append(errs, fmt.Errorf("context.strategy: %w", err))
	}
	switch {
	case s.Tiers != nil:
		errs = append(errs, s.Tiers.validate()...)
		if usable := s.Tiers.Window - s.Tiers.Reserve; s.Budget != 0 && s.Budget != usable {
			errs = append(errs, fmt.Errorf("context.budget: with tiers the budget is window - reserve (%d); got %d (leave it 0)", usable, s.Budget))
		}
	case s.Budget <= 0:
		errs = append(errs, fmt.Errorf("context.budget: must be a positive token count (got %d)", s.Budget))
	}
	switch s.Tokenizer {
	case "", TokenizerO200k, TokenizerEstimate:
	default:
		errs = append(errs, fmt.Errorf("context.tokenizer: want %q or %q (got %q)", TokenizerO200k, TokenizerEstimate, s.Tokenizer))
	}
	if s.ToolResultMaxTokens < 0 {
		errs = append(errs, fmt.Errorf("context.tool_result_max_tokens: must not be negative (got %d)", s.ToolResultMaxTokens))
	}
	switch s.Summarizer {
	case "", SummarizerExtract, SummarizerModel:
	default:
		errs = append(errs, fmt.Errorf("context.summarizer: want %q or %q (got %q)", SummarizerExtract, SummarizerModel, s.Summarizer))
	}
	return errors.Join(errs...)
}

// normalized fills the defaults, so the journaled spec says what ran.
func (s ContextSpec) normalized() ContextSpec {
	if s.Tokenizer == "" {
		s.Tokenizer = TokenizerO200k
	}
	if s.Summarizer == "" {
		s.Summarizer = SummarizerExtract
	}
	if s.Tiers != nil && s.Budget == 0 {
		s.Budget = s.Tiers.Window - s.Tiers.Reserve
	}
	return s
}

// o200k is loaded once per process: the ranks take ~0.3 s and ~60 MB, and a
// Tokenizer is immutable and safe for concurrent use, so sharing it is a
// cache, not shared mutable state.
var o200k = sync.OnceValues(contextlayer.NewTokenizer)

func counterFor(name string) (contextlayer.Counter, error) {
	switch name {
	case TokenizerEstimate:
		return contextlayer.Estimate{}, nil
	default:
		return o200k()
	}
}

// ContextRecord is the journal's record of one compaction.
type ContextRecord = journal.ContextRecord

// stepSummarizer serves one model call's summary: the recorded text when the
// journal has one for this step, otherwise the configured summarizer.
type stepSummarizer struct {
	recorded *string
	live     contextlayer.Summarizer
	used     string
}

func (s *stepSummarizer) Summarize(ctx context.Context, msgs []llm.Message, maxTokens int) (string, error) {
	if s.recorded != nil {
		s.used = *s.recorded
		return s.used, nil
	}
	if s.live == nil {
		return "", errors.New(`the context spec asks for model summaries and the runtime has no Summarizer (a resume or replay reuses recorded summaries; this step has none)`)
	}
	text, err := s.live.Summarize(ctx, msgs, maxTokens)
	s.used = text
	return text, err
}

// effectiveContext is the spec a task runs under.
func (rt *Runtime) effectiveContext(task Task) *ContextSpec {
	if task.Context != nil || task.contextFixed {
		return task.Context
	}
	return rt.cfg.Context
}

// compact applies the context layer to msgs for the model call of step and
// returns the system prompt and messages to send. It returns them
// unchanged (and a nil record) when the run has no layer.
func (r *run) compact(ctx context.Context, step int, system string, msgs []llm.Message) (string, []llm.Message, *ContextRecord, error) {
	spec := r.ctxSpec
	if spec == nil {
		return system, msgs, nil, nil
	}
	budget := spec.Budget
	var tiers *journal.TierReport
	if spec.Tiers != nil {
		counter, err := counterFor(spec.Tokenizer)
		if err != nil {
			return "", nil, nil, fmt.Errorf("context tiers: %w", err)
		}
		asm, err := assembleTiers(counter, spec.Tiers, system, msgs)
		if err != nil {
			return "", nil, nil, err
		}
		system, budget, tiers = asm.system, asm.budget, &asm.report
	}
	sendMsgs, rec, err := r.applyLayer(ctx, step, spec, budget, system, msgs)
	if err != nil {
		return "", nil, nil, err
	}
	rec.Tiers = tiers
	return system, sendMsgs, rec, nil
}

// applyLayer runs the shrink / summarise / pin layer at budget.
func (r *run) applyLayer(ctx context.Context, step int, spec *ContextSpec, budget int, system string, msgs []llm.Message) ([]llm.Message, *ContextRecord, error) {
	cfg, err := contextlayer.Preset(spec.Strategy, budget)
	if err != nil {
		return nil, nil, err
	}
	if spec.ToolResultMaxTokens > 0 {
		cfg.ToolResultMaxTokens = spec.ToolResultMaxTokens
	}
	counter, err := counterFor(spec.Tokenizer)
	if err != nil {
		return nil, nil, fmt.Errorf("context layer: %w", err)
	}
	var sum *stepSummarizer
	var layerSum contextlayer.Summarizer
	if spec.Summarizer == SummarizerModel {
		sum = &stepSummarizer{recorded: r.recordedSummary(step), live: r.rt.cfg.Summarizer}
		layerSum = sum
	}
	layer, err := contextlayer.New(cfg, counter, layerSum)
	if err != nil {
		return nil, nil, err
	}
	// The trigger lets a model summariser name the run and step on its span.
	ctx = contextlayer.WithTrigger(ctx, contextlayer.Trigger{RunID: r.task.RunID, Agent: r.agent.Name, Step: step})
	out, err := layer.Apply(ctx, contextlayer.Input{System: system, Messages: msgs, Pins: spec.Pins})
	if err != nil {
		return nil, nil, fmt.Errorf("context layer: %w", err)
	}
	rec := &ContextRecord{Strategy: spec.Strategy, ContextReport: out.Report}
	if sum != nil && out.Report.Summary != nil && out.Report.Summary.By == "model" {
		rec.SummaryText = sum.used
	}
	return out.Messages, rec, nil
}

// recordedSummary finds the model summary journaled for step: in the
// journal being resumed, or in the task built by ReplayTask.
func (r *run) recordedSummary(step int) *string {
	if s, ok := r.task.summaries[step]; ok {
		return &s
	}
	if r.pos < len(r.recorded) {
		e := r.recorded[r.pos]
		if e.Kind == journal.KindModelRequest && e.Step == step {
			var p journal.ModelRequest
			if json.Unmarshal(e.Payload, &p) == nil && p.Context != nil && p.Context.SummaryText != "" {
				s := p.Context.SummaryText
				return &s
			}
		}
	}
	return nil
}

// startedAttributes merges the task's attributes and the context spec into
// the run_started attributes object (nil when there is neither, so runs
// without them hash exactly as before).
func startedAttributes(task Task, spec *ContextSpec) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(task.Attributes) > 0 {
		if err := json.Unmarshal(task.Attributes, &m); err != nil || m == nil {
			return nil, fmt.Errorf("task attributes: must be a JSON object")
		}
		for k := range m {
			if strings.HasPrefix(k, semconv.Prefix) {
				return nil, fmt.Errorf("task attributes: key %q: the %s prefix is reserved for the runtime", k, semconv.Prefix)
			}
		}
	}
	if spec != nil {
		b, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		m[semconv.AttrRunContextSpec] = b
	}
	if task.InputOrigin != "" {
		b, _ := json.Marshal(task.InputOrigin)
		m[semconv.AttrRunInputOrigin] = b
	}
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}

// ReplayTask rebuilds, from a recorded run, the Task that produced it: the
// input, limits and case from run_started, the task attributes, the context
// spec (or explicitly none), the model summaries each step used and the
// answers to held calls. The replay engine runs it so a replay compacts
// exactly as the recording did and takes a held call's journaled answer.
func ReplayTask(run journal.Run) (Task, error) {
	if len(run.Events) == 0 || run.Events[0].Kind != journal.KindRunStarted {
		return Task{}, fmt.Errorf("replay task %s: the journal does not start with run_started", run.ID)
	}
	var started journal.RunStarted
	if err := json.Unmarshal(run.Events[0].Payload, &started); err != nil {
		return Task{}, fmt.Errorf("replay task %s: decode run_started: %w", run.ID, err)
	}
	task := Task{RunID: run.ID, Input: started.Input, Model: started.Model, MaxSteps: started.MaxSteps,
		MaxTokens: started.MaxTokens, CaseID: started.CaseID, Trial: started.Trial, contextFixed: true}
	if len(started.Attributes) > 0 {
		m := map[string]json.RawMessage{}
		if err := json.Unmarshal(started.Attributes, &m); err != nil {
			return Task{}, fmt.Errorf("replay task %s: run_started attributes: %w", run.ID, err)
		}
		if raw, ok := m[semconv.AttrRunContextSpec]; ok {
			var spec ContextSpec
			if err := json.Unmarshal(raw, &spec); err != nil {
				return Task{}, fmt.Errorf("replay task %s: run_started attributes.%s: %w", run.ID, semconv.AttrRunContextSpec, err)
			}
			task.Context = &spec
			delete(m, semconv.AttrRunContextSpec)
		}
		if raw, ok := m[semconv.AttrRunInputOrigin]; ok {
			if err := json.Unmarshal(raw, &task.InputOrigin); err != nil {
				return Task{}, fmt.Errorf("replay task %s: run_started attributes.%s: %w", run.ID, semconv.AttrRunInputOrigin, err)
			}
			delete(m, semconv.AttrRunInputOrigin)
		}
		if len(m) > 0 {
			b, err := json.Marshal(m)
			if err != nil {
				return Task{}, err
			}
			task.Attributes = b
		}
	}
	for _, e := range run.Events {
		switch e.Kind {
		case journal.KindApprovalRequested, journal.KindApproval:
			// A held call replays from its journaled answer, without an
			// approvals source; one still pending suspends the replay.
			if task.approvals == nil {
				task.approvals = map[heldCall]*journal.ApprovalAnswer{}
			}
			k := heldCall{e.Step, e.CallID}
			if e.Kind == journal.KindApprovalRequested {
				if _, ok := task.approvals[k]; !ok {
					task.approvals[k] = nil
				}
				continue
			}
			var a journal.ApprovalAnswer
			if err := json.Unmarshal(e.Payload, &a); err != nil {
				return Task{}, fmt.Errorf("replay task %s: seq %d: decode approval: %w", run.ID, e.Seq, err)
			}
			task.approvals[k] = &a
			continue
		}
		if e.Kind != journal.KindModelRequest {
			continue
		}
		var p journal.ModelRequest
		if json.Unmarshal(e.Payload, &p) == nil && p.Context != nil && p.Context.SummaryText != "" {
			if task.summaries == nil {
				task.summaries = map[int]string{}
			}
			task.summaries[e.Step] = p.Context.SummaryText
		}
	}
	return task, nil
}

type stepKey struct{}

// StepFromContext returns the step of the model call a context belongs to.
// The runtime sets it on the context it passes to Model.Complete, so a model
// that serves recorded answers can find the step even when the context layer
// has summarised earlier assistant turns away (counting them would be
// wrong then).
func StepFromContext(ctx context.Context) (int, bool) {
	s, ok := ctx.Value(stepKey{}).(int)
	return s, ok
}

func withStep(ctx context.Context, step int) context.Context {
	return context.WithValue(ctx, stepKey{}, step)
}
