package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/semconv"
)

// AttrServers is the Task.Attributes key under which a run journals the
// MCP servers it took tools from, with each one's pinned tool-list hash
// (run_started records the attributes, so a resume or replay under a
// changed list diverges at seq 1 and the pin is in the journal).
const AttrServers = "mcp_servers"

// ServerPin is what the journal records about one server.
type ServerPin struct {
	Pin       string   `json:"pin"`
	Transport string   `json:"transport"` // "stdio" or "http"
	Tools     []string `json:"tools"`
}

// Attributes returns base (a JSON object, or nil) with AttrServers set to
// the clients' pins.
func Attributes(base json.RawMessage, clients ...*Client) (json.RawMessage, error) {
	m := map[string]any{}
	if len(base) > 0 {
		if err := json.Unmarshal(base, &m); err != nil {
			return nil, fmt.Errorf("mcp attributes: task attributes are not a JSON object: %w", err)
		}
		if m == nil { // "null": no attributes
			m = map[string]any{}
		}
	}
	servers := map[string]ServerPin{}
	for _, c := range clients {
		p := ServerPin{Pin: c.Pin(), Transport: "stdio"}
		if c.cfg.URL != "" {
			p.Transport = "http"
		}
		for _, t := range c.tools {
			p.Tools = append(p.Tools, t.Name)
		}
		servers[c.Name()] = p
	}
	m[AttrServers] = servers
	return json.Marshal(m)
}

// Pins reads the servers a run journaled (nil when it used none).
func Pins(run journal.Run) (map[string]ServerPin, error) {
	task, err := runtime.ReplayTask(run)
	if err != nil {
		return nil, err
	}
	if len(task.Attributes) == 0 {
		return nil, nil
	}
	var a struct {
		Servers map[string]ServerPin `json:"mcp_servers"`
	}
	if err := json.Unmarshal(task.Attributes, &a); err != nil {
		return nil, fmt.Errorf("run %s: mcp_servers: %w", run.ID, err)
	}
	return a.Servers, nil
}

// ErrNotRecorded is returned by a recorded tool for a call the journal has
// no result for.
var ErrNotRecorded = errors.New("no recorded result for this call and no live MCP server (replay with a live server to re-execute)")

// RecordedTools rebuilds a run's tools from its journal — declarations
// from run_started, results from its tool_result events — so the run
// resumes and replays with no MCP server running. A call the journal
// has no result for fails the step (ErrNotRecorded).
func RecordedTools(run journal.Run) ([]runtime.Tool, error) {
	var started journal.RunStarted
	results := map[string]journal.ToolResult{}
	for _, e := range run.Events {
		switch e.Kind {
		case journal.KindRunStarted:
			if err := json.Unmarshal(e.Payload, &started); err != nil {
				return nil, fmt.Errorf("run %s: decode run_started: %w", run.ID, err)
			}
		case journal.KindToolResult:
			var tr journal.ToolResult
			if err := json.Unmarshal(e.Payload, &tr); err != nil {
				return nil, fmt.Errorf("run %s seq %d: decode tool_result: %w", run.ID, e.Seq, err)
			}
			results[callKey(e.Tool, e.Step, e.CallID)] = tr
		}
	}
	if started.Agent == "" {
		return nil, fmt.Errorf("run %s: journal has no run_started", run.ID)
	}
	tools := make([]runtime.Tool, 0, len(started.Tools))
	for _, ts := range started.Tools {
		name := ts.Name
		tools = append(tools, runtime.Tool{Name: name, Description: ts.Description, Parameters: ts.Parameters,
			Run: func(_ context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
				tr, ok := results[callKey(name, in.Step, in.CallID)]
				if !ok {
					return runtime.ToolOutput{}, &runtime.StepFailure{Code: "not_recorded", Err: fmt.Errorf("tool %s step %d call %s: %w", name, in.Step, in.CallID, ErrNotRecorded)}
				}
				if tr.IsError {
					// The runtime words a failed call's observation itself;
					// give it back the recorded cause.
					return runtime.ToolOutput{}, errors.New(strings.TrimPrefix(tr.Content, "error: tool "+name+" failed: "))
				}
				return runtime.ToolOutput{Content: tr.Content, Documents: tr.Documents, Events: tr.Events}, nil
			}})
	}
	return tools, nil
}

func callKey(tool string, step int, callID string) string {
	return fmt.Sprintf("%s\x00%d\x00%s", tool, step, callID)
}

// RecordedAgent is a run's agent rebuilt from its journal (name, system
// prompt, tool declarations) with RecordedTools: what `loom-eval replay`
// runs for a journal whose run used MCP servers, unless asked to call
// live servers (LiveAgent). citations may be nil.
func RecordedAgent(run journal.Run, citations func(string) []string) (runtime.Agent, error) {
	var started journal.RunStarted
	if len(run.Events) == 0 || run.Events[0].Kind != journal.KindRunStarted {
		return runtime.Agent{}, fmt.Errorf("run %s: journal does not start with run_started", run.ID)
	}
	if err := json.Unmarshal(run.Events[0].Payload, &started); err != nil {
		return runtime.Agent{}, fmt.Errorf("run %s: decode run_started: %w", run.ID, err)
	}
	tools, err := RecordedTools(run)
	if err != nil {
		return runtime.Agent{}, err
	}
	// The servers' tools keep the origin they were run with (what
	// Client.Tools declares), so a replay under a policy taints as the
	// recording did.
	pins, err := Pins(run)
	if err != nil {
		return runtime.Agent{}, err
	}
	for server, p := range pins {
		for _, name := range p.Tools {
			for i := range tools {
				if tools[i].Name == name {
					tools[i].Origin = semconv.MCPTaintOrigin + server + "/" + name
				}
			}
		}
	}
	return runtime.Agent{Name: started.Agent, System: started.System, Tools: tools, Citations: citations}, nil
}

// LiveAgent is RecordedAgent with the tools of the named servers taken
// from live clients (already started; each must still hash to the pin the
// run journaled, or it is a rug pull); tools of servers not given stay
// recorded.
func LiveAgent(run journal.Run, citations func(string) []string, clients ...*Client) (runtime.Agent, error) {
	a, err := RecordedAgent(run, citations)
	if err != nil {
		return a, err
	}
	pins, err := Pins(run)
	if err != nil {
		return a, err
	}
	for _, c := range clients {
		p, ok := pins[c.Name()]
		if !ok {
			return a, fmt.Errorf("run %s used no MCP server named %q (it used: %v)", run.ID, c.Name(), keys(pins))
		}
		if p.Pin != c.Pin() {
			return a, &RugPullError{Server: c.Name(), Pinned: p.Pin, Seen: c.Pin(), Changed: []string{"(list differs from the journaled pin)"}}
		}
		live := map[string]runtime.Tool{}
		for _, t := range c.Tools() {
			live[t.Name] = t
		}
		for i, t := range a.Tools {
			if lt, ok := live[t.Name]; ok {
				a.Tools[i].Run = lt.Run
			}
		}
	}
	return a, nil
}

func keys(m map[string]ServerPin) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Origins maps each tool the clients declared to its taint origin,
// "mcp:SERVER/TOOL", for policy.GuardConfig.ToolOrigins: MCP outputs are
// untrusted content from that server.
func Origins(clients ...*Client) map[string]string {
	out := map[string]string{}
	for _, c := range clients {
		for _, t := range c.tools {
			out[t.Name] = semconv.MCPTaintOrigin + c.Name() + "/" + t.Name
		}
	}
	return out
}
