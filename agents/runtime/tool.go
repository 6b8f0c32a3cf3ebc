package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime/schema"
)

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (see package schema for
	// the keywords enforced). Arguments are validated before Run is called;
	// a call that does not validate gets an error observation naming the
	// field, and Run never sees it.
	Parameters json.RawMessage
	// Effect marks a tool with side effects. Its Run is called through the
	// journal's AppendEffect (journal.Journal), once per idempotency key:
	// its tool_result is recorded only if it succeeds. On a journal with
	// tables (journaldb) In.Tx is set, and every statement Run executes
	// through it commits in the same transaction as the call's tool_result
	// event, so after a crash the effect has happened exactly once (both
	// committed) or not at all (neither). An effect Run causes anywhere
	// else (an HTTP request, a message) is at-least-once: a crash after it
	// and before the result is recorded repeats the call on resume with the
	// same In.IdempotencyKey, which the receiver must deduplicate on.
	Effect bool
	// EffectSchema is idempotent DDL (CREATE TABLE IF NOT EXISTS ...) for
	// the tables the tool's effects write in the journal's database; the
	// runtime applies it before the run starts. A tool with an
	// EffectSchema needs a journal with tables (journal.SchemaEnsurer,
	// e.g. journaldb): on any other, Run fails before the first step.
	EffectSchema string
	// Origin, when set, says the tool is someone else's: its description
	// and its results come from a remote party (an MCP server:
	// "mcp:SERVER/TOOL"; an A2A peer: "a2a:CARDNAME"). The adapters that make
	// such tools set it (mcp.Client.Tools, a2a.Remote.Tool), and an
	// Authorizer gets it with every call (AuthCall.ToolOrigins), so a
	// remote tool is untrusted however it was wired.
	Origin string
	// Run executes the call. A returned error, or a panic, becomes an error
	// observation for the model (IsError), and the run goes on.
	Run func(ctx context.Context, in ToolInput) (ToolOutput, error)
}

// ToolInput is one call of a tool.
type ToolInput struct {
	RunID     string
	Step      int
	CallID    string
	Arguments json.RawMessage
	// IdempotencyKey is derived from the run id, step, call id and the
	// canonical arguments (journal.IdempotencyKey): the same call gets the
	// same key in the process that resumes the run after a crash. Pass it
	// to any external system that deduplicates requests.
	IdempotencyKey string
	// Tx is the journal's SQL transaction for a tool with Effect set, on
	// a journal with tables (journal.SQLTx, from journaldb); nil otherwise.
	Tx journal.SQLTx
	// TaskAttributes is the run's Task.Attributes (a JSON object, or nil):
	// per-run facts the tool must honour whatever the model asks, e.g. the
	// issue a research run must never retrieve.
	TaskAttributes json.RawMessage
}

// ToolOutput is what a tool returns.
type ToolOutput struct {
	// Content is the observation given to the model.
	Content string
	// Documents are the evidence ids a retrieval tool returned; the runtime
	// journals them and puts them on a retrieval span
	// (gen_ai.retrieval.documents).
	Documents []string
	// Events are what the tool observed (a sandbox's network attempts and
	// verdicts), in a deterministic order: journaled with the result, added
	// as span events to the execute_tool span, compared by replay.
	Events []journal.ToolEvent
	// Attrs say how the tool ran, not what it returned (keys from
	// semconv, e.g. loomwork.sandbox.start: a warm or cold sandbox):
	// journaled with the result and set on the execute_tool span, not
	// compared by replay (a replay may run the tool another way).
	Attrs map[string]string
}

func (t Tool) spec() llm.ToolSpec {
	return llm.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
}

// Agent is what an agent supplies to the runtime: a name, a system prompt
// and tools. The runtime knows nothing else about it.
type Agent struct {
	Name   string
	System string
	Tools  []Tool
	// Citations, when set, extracts the evidence ids the final answer cites
	// (they go on the invoke_agent span as loomwork.citations and into the
	// run_finished event).
	Citations func(answer string) []string
}

// compiled is an agent with its schemas compiled.
type compiled struct {
	Agent
	tools   map[string]*Tool
	origins map[string]string // remote tools' Origin (nil: none)
	schemas map[string]*schema.Schema
	specs   []llm.ToolSpec
}

func compileAgent(a Agent) (*compiled, error) {
	if a.Name == "" {
		return nil, errors.New("agent name must be set")
	}
	c := &compiled{Agent: a, tools: map[string]*Tool{}, schemas: map[string]*schema.Schema{}}
	var errs []error
	for i := range a.Tools {
		t := &a.Tools[i]
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("agent %s: tool %d has no name", a.Name, i))
			continue
		case c.tools[t.Name] != nil:
			errs = append(errs, fmt.Errorf("agent %s: tool %q declared twice", a.Name, t.Name))
			continue
		case t.Run == nil:
			errs = append(errs, fmt.Errorf("agent %s: tool %q has no Run function", a.Name, t.Name))
			continue
		}
		s, err := schema.Compile(t.Parameters)
		if err != nil {
			errs = append(errs, fmt.Errorf("agent %s: tool %q: %w", a.Name, t.Name, err))
			continue
		}
		c.tools[t.Name] = t
		if t.Origin != "" {
			if c.origins == nil {
				c.origins = map[string]string{}
			}
			c.origins[t.Name] = t.Origin
		}
		c.schemas[t.Name] = s
		c.specs = append(c.specs, t.spec())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *compiled) toolNames() []string {
	names := make([]string, 0, len(c.specs))
	for _, s := range c.specs {
		names = append(names, s.Name)
	}
	return names
}

// Registry maps agent names to agents. Agents register into it at start-up
// (cmd wires one per process; there is no global registry), and the replay
// engine resolves a journal's recorded agent — and so the tools to
// re-execute — through it.
type Registry struct {
	agents map[string]*compiled
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{agents: map[string]*compiled{}} }

// Register adds an agent after checking its tools (names unique, schemas
// compile). Registering a name twice is an error.
func (r *Registry) Register(a Agent) error {
	if _, dup := r.agents[a.Name]; dup {
		return fmt.Errorf("register agent %s: already registered", a.Name)
	}
	c, err := compileAgent(a)
	if err != nil {
		return fmt.Errorf("register agent: %w", err)
	}
	r.agents[a.Name] = c
	return nil
}

// Agent returns the agent registered under name.
func (r *Registry) Agent(name string) (Agent, bool) {
	c, ok := r.agents[name]
	if !ok {
		return Agent{}, false
	}
	return c.Agent, true
}

// Names lists the registered agents, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.agents))
	for n := range r.agents {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (r *Registry) String() string { return strings.Join(r.Names(), ", ") }

// StepFailure is an error a Tool's Run returns when the call failed in a
// way the model cannot act on — the caller's bug, e.g. an MCP server
// answering a JSON-RPC protocol error (-32601, -32602) or a tool list that
// changed under the run. Unlike every other tool error it is not an
// observation: the run stops with it, and nothing is journaled for the
// call, so a resume (after the cause is fixed) calls again.
type StepFailure struct {
	// Code is a stable machine-readable class ("-32602", "rug_pull").
	Code string
	Err  error
}

func (e *StepFailure) Error() string { return e.Err.Error() }
func (e *StepFailure) Unwrap() error { return e.Err }
