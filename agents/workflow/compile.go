package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	a2aproto "github.com/a2aproject/a2a-go/a2a"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/a2a"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/runtime"
)

// RefAgent is a reference agent with the model that drives it (its
// scripted policy; Label says so on every answer) and the function that
// releases what it holds (nil: nothing).
type RefAgent struct {
	Agent   runtime.Agent
	Model   runtime.Model
	Release func()
	// Attributes are every agent step's task attributes (e.g. the pinned
	// tool lists of the MCP servers whose tools the agent was given, so a
	// replay knows them); journaled in run_started.
	Attributes json.RawMessage
}

// StepTool is a tool a tool step runs: the rendered input in, text out.
type StepTool func(ctx context.Context, input string) (string, error)

// FileConfig is what the steps of a workflow file run on.
type FileConfig struct {
	// Input is the workflow's input ({{.Input}}).
	Input string
	// Journal journals agent steps' runs (run id WORKFLOWRUN/STEP);
	// required when the file has agent steps.
	Journal journal.Journal
	// Agents opens a reference agent (AgentResearch, AgentCoding) the
	// first time a step needs it: agent steps, and the research tools of
	// tool steps. Required when the file has either.
	Agents func(ctx context.Context, name string) (RefAgent, error)
	// Tools replaces tools of FileTools by name (tests).
	Tools map[string]StepTool
	// Authorizer and Approvals are every agent step's runtime's (--policy
	// and the approval queue).
	Authorizer runtime.Authorizer
	Approvals  runtime.Approvals
	// TracerProvider receives agent steps' runtime spans and A2A calls'
	// (under the step's span); the Runner's receives the workflow's.
	TracerProvider trace.TracerProvider
	// HTTPClient sends A2A requests (default: the A2A SDK's).
	HTTPClient *http.Client
	// Clock stamps agent steps' spans (default time.Now).
	Clock func() time.Time
}

// Validate reports what f needs from the configuration and it lacks.
func (c FileConfig) Validate(f *File) error {
	var errs []error
	for _, s := range f.Steps {
		needsAgents := s.Kind == KindAgent || (s.Kind == KindTool && s.Tool != "echo" && c.Tools[s.Tool] == nil)
		if needsAgents && c.Agents == nil {
			errs = append(errs, fmt.Errorf("workflow %s: step %s: no reference agents configured", f.Name, s.ID))
		}
		if s.Kind == KindAgent && c.Journal == nil {
			errs = append(errs, fmt.Errorf("workflow %s: step %s: an agent step needs a journal", f.Name, s.ID))
		}
	}
	return errors.Join(errs...)
}

// FileResult is the journaled result of a step of a workflow file.
type FileResult struct {
	// Output is what later templates read as {{.Steps.ID.Output}}: the
	// agent's answer, the peer's reply, the tool's output, the approval.
	Output string `json:"output"`
	// Origin is the untrusted party (or parties, joined by "; ") the
	// output derives from: "a2a:CARD via step ID" for a peer's reply, and
	// whatever a step's input read. An agent step whose input has an
	// origin runs with it as runtime.Task.InputOrigin, so a policy taints
	// everything the agent derives from it.
	Origin string `json:"origin,omitempty"`
	// RunID is an agent step's run in the journal; Label its model's label
	// ("scripted" for the reference policies); Citations its citations.
	RunID     string   `json:"run_id,omitempty"`
	Label     string   `json:"label,omitempty"`
	Citations []string `json:"citations,omitempty"`
	// Peer and TaskID are an A2A step's peer (its card's name) and task.
	Peer   string `json:"peer,omitempty"`
	TaskID string `json:"task_id,omitempty"`
	// Approver answered an approval step.
	Approver string `json:"approver,omitempty"`
}

// compiler holds what a compiled file's actions share: the configuration,
// the templates, and the reference agents opened so far.
type compiler struct {
	cfg   FileConfig
	anc   map[string]map[string]bool
	mu    sync.Mutex
	open  map[string]RefAgent
	input map[string]*stepTemplate
}

// Compile turns a decoded file into a Workflow whose steps run on cfg. It
// does no I/O: agents are opened when a step first needs them; release
// releases them.
func Compile(f *File, cfg FileConfig) (w *Workflow, release func(), err error) {
	if err := cfg.Validate(f); err != nil {
		return nil, nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	c := &compiler{cfg: cfg, anc: ancestors(f.Steps), open: map[string]RefAgent{}, input: map[string]*stepTemplate{}}
	steps := make([]Step, 0, len(f.Steps))
	for _, fs := range f.Steps {
		s, err := c.step(fs)
		if err != nil {
			return nil, nil, fmt.Errorf("workflow %s: step %s: %w", f.Name, fs.ID, err)
		}
		steps = append(steps, s)
	}
	w, err = New(f.Name, steps)
	if err != nil {
		return nil, nil, err
	}
	w.input = cfg.Input
	return w, c.release, nil
}

func (c *compiler) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, a := range c.open {
		if a.Release != nil {
			a.Release()
		}
		delete(c.open, name)
	}
}

// digest is the hash of a step's declaration, journaled with the graph.
func digest(fs FileStep) string {
	b, _ := json.Marshal(fs) // a FileStep always encodes
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

func (c *compiler) step(fs FileStep) (Step, error) {
	s := Step{Name: fs.ID, Kind: fs.Kind, Requires: fs.Needs, Retries: fs.Retries,
		Backoff: time.Duration(fs.Backoff), Timeout: time.Duration(fs.Timeout), Digest: digest(fs)}
	text, field := fs.Input, "input"
	if fs.Kind == KindApproval {
		text, field = fs.Prompt, "prompt"
	}
	st, err := parseTemplate(fs.ID, field, text, c.anc[fs.ID])
	if err != nil {
		return Step{}, fmt.Errorf("%s: %w", field, err)
	}
	switch fs.Kind {
	case KindAgent:
		s.Action = c.agentAction(fs, st)
	case KindA2A:
		s.Action = c.a2aAction(fs, st)
	case KindTool:
		s.Action = c.toolAction(fs, st)
	case KindApproval:
		s.Prompt = func(in Input) (string, error) {
			p, _, err := c.render(fs.ID, st, in)
			return p, err
		}
		s.Action = func(_ context.Context, in Input) (any, error) {
			out := "approved by " + in.Approval.Approver
			if in.Approval.Reason != "" {
				out += ": " + in.Approval.Reason
			}
			return FileResult{Output: out, Approver: in.Approval.Approver}, nil
		}
	default:
		return Step{}, fmt.Errorf("kind: unknown kind %q", fs.Kind)
	}
	return s, nil
}

// render executes a step's template over the run's input and the outputs
// of the steps it needs, and returns the text and the joined origins of
// the outputs it read.
func (c *compiler) render(step string, st *stepTemplate, in Input) (string, string, error) {
	data := TemplateData{Input: c.cfg.Input, RunID: in.RunID, Steps: map[string]StepData{}}
	var origins []string
	for id := range c.anc[step] {
		raw, ok := in.Results[id]
		if !ok {
			continue
		}
		var r FileResult
		if err := json.Unmarshal(raw, &r); err != nil {
			return "", "", fmt.Errorf("step %s's recorded result: %w", id, err)
		}
		data.Steps[id] = StepData{Output: r.Output}
		if st.readsAll || slices.Contains(st.reads, id) {
			origins = append(origins, splitOrigins(r.Origin)...)
		}
	}
	b := &cappedBuilder{max: MaxRenderBytes}
	if err := st.tmpl.Execute(b, data); err != nil {
		return "", "", fmt.Errorf("template: %w", err)
	}
	return b.String(), joinOrigins(origins...), nil
}

// cappedBuilder is a strings.Builder that refuses to grow past max bytes,
// which stops a template's execution.
type cappedBuilder struct {
	strings.Builder
	max int
}

func (b *cappedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, fmt.Errorf("rendered text longer than %d bytes", b.max)
	}
	return b.Builder.Write(p)
}

func splitOrigins(o string) []string {
	if o == "" {
		return nil
	}
	return strings.Split(o, "; ")
}

// joinOrigins is the sorted, distinct origins joined by "; ".
func joinOrigins(os ...string) string {
	var out []string
	for _, o := range os {
		if o != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// agent returns the reference agent name, opening it the first time.
func (c *compiler) agent(ctx context.Context, name string) (RefAgent, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.open[name]; ok {
		return a, nil
	}
	a, err := c.cfg.Agents(ctx, name)
	if err != nil {
		return RefAgent{}, fmt.Errorf("open reference agent %s: %w", name, err)
	}
	c.open[name] = a
	return a, nil
}

// AgentRunID is the journal run id of an agent step's attempt: RUN/STEP
// for the first (so a crash inside the loop resumes it), RUN/STEP/N for a
// retry (a fresh loop, not a replay of the failed one).
func AgentRunID(runID, step string, attempt int) string {
	if attempt <= 1 {
		return runID + "/" + step
	}
	return runID + "/" + step + "/" + strconv.Itoa(attempt)
}

func (c *compiler) agentAction(fs FileStep, st *stepTemplate) func(context.Context, Input) (any, error) {
	return func(ctx context.Context, in Input) (any, error) {
		task, origin, err := c.render(fs.ID, st, in)
		if err != nil {
			return nil, err
		}
		ra, err := c.agent(ctx, fs.Agent)
		if err != nil {
			return nil, err
		}
		rt, err := runtime.New(runtime.Config{Model: ra.Model, Journal: c.cfg.Journal, TracerProvider: c.cfg.TracerProvider,
			Clock: c.cfg.Clock, Authorizer: c.cfg.Authorizer, Approvals: c.cfg.Approvals})
		if err != nil {
			return nil, err
		}
		t := runtime.Task{RunID: AgentRunID(in.RunID, in.Step, in.Attempt), Input: task, InputOrigin: origin, Attributes: ra.Attributes}
		if fs.Options != nil {
			t.MaxSteps = fs.Options.MaxSteps
		}
		res, err := rt.Run(ctx, ra.Agent, t)
		if err != nil {
			return nil, err
		}
		return FileResult{Output: res.Answer, Origin: origin, RunID: t.RunID, Label: res.Label, Citations: res.Citations}, nil
	}
}

func (c *compiler) a2aAction(fs FileStep, st *stepTemplate) func(context.Context, Input) (any, error) {
	return func(ctx context.Context, in Input) (any, error) {
		msg, origin, err := c.render(fs.ID, st, in)
		if err != nil {
			return nil, err
		}
		r, err := a2a.NewRemote(a2a.RemoteConfig{BaseURL: fs.URL, TracerProvider: c.cfg.TracerProvider, HTTPClient: c.cfg.HTTPClient,
			Timeout: time.Duration(fs.Timeout), PollInterval: 100 * time.Millisecond})
		if err != nil {
			return nil, err
		}
		if err := r.Start(ctx); err != nil {
			return nil, err
		}
		defer r.Shutdown(context.WithoutCancel(ctx))
		peer := r.Card().Name
		if peer == "" {
			peer = fs.URL
		}
		rep, err := r.Ask(ctx, msg)
		if err != nil {
			return nil, fmt.Errorf("peer %s: %w", peer, err)
		}
		if rep.State != a2aproto.TaskStateCompleted {
			return nil, fmt.Errorf("peer %s: task %s ended %s: %s", peer, rep.TaskID, rep.State, rep.Text)
		}
		// The reply is the peer's words: untrusted, whatever it says.
		origin = joinOrigins(append(splitOrigins(origin), "a2a:"+peer+" via step "+fs.ID)...)
		return FileResult{Output: rep.Text, Origin: origin, Peer: peer, TaskID: rep.TaskID}, nil
	}
}

func (c *compiler) toolAction(fs FileStep, st *stepTemplate) func(context.Context, Input) (any, error) {
	return func(ctx context.Context, in Input) (any, error) {
		text, origin, err := c.render(fs.ID, st, in)
		if err != nil {
			return nil, err
		}
		run, err := c.tool(ctx, fs.Tool, in)
		if err != nil {
			return nil, err
		}
		out, err := run(ctx, text)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", fs.Tool, err)
		}
		return FileResult{Output: out, Origin: origin}, nil
	}
}

// tool resolves a tool of FileTools: an override, echo, or one of the
// research agent's tools with the input as its one argument.
func (c *compiler) tool(ctx context.Context, name string, in Input) (StepTool, error) {
	if t := c.cfg.Tools[name]; t != nil {
		return t, nil
	}
	arg := map[string]string{"search_docs": "query", "read_doc": "id"}[name]
	if name == "echo" {
		return func(_ context.Context, s string) (string, error) { return s, nil }, nil
	}
	if arg == "" {
		return nil, fmt.Errorf("unknown tool %q", name)
	}
	ra, err := c.agent(ctx, AgentResearch)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(ra.Agent.Tools, func(t runtime.Tool) bool { return t.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("the research agent has no tool %s", name)
	}
	t := ra.Agent.Tools[i]
	return func(ctx context.Context, s string) (string, error) {
		args, err := json.Marshal(map[string]string{arg: s})
		if err != nil {
			return "", err
		}
		key, err := journal.IdempotencyKey(in.RunID, in.Attempt, in.Step, args)
		if err != nil {
			return "", err
		}
		out, err := t.Run(ctx, runtime.ToolInput{RunID: in.RunID + "/" + in.Step, CallID: in.Step, Arguments: args, IdempotencyKey: key})
		return out.Content, err
	}, nil
}

// RecordedInput is the input run was started with (ok false when the
// journal has no such run).
func RecordedInput(ctx context.Context, j journal.Journal, runID string) (input string, ok bool, err error) {
	evs, err := j.Events(ctx, runID)
	if err != nil {
		return "", false, err
	}
	for _, e := range evs {
		if e.Kind == journal.KindWorkflowStarted {
			var s Started
			if err := json.Unmarshal(e.Payload, &s); err != nil {
				return "", false, fmt.Errorf("run %s: decode workflow_started: %w", runID, err)
			}
			return s.Input, true, nil
		}
	}
	return "", false, nil
}
