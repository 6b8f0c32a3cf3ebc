package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/llm"
)

// FormatVersion is the version of the event format and of the JSONL
// framing, written as "v" on every exported line.
const FormatVersion = 1

// Kind is an event's type.
type Kind string

// Event kinds. A reader meets kinds it does not know (from a later Loomwork)
// and must skip them rather than fail: the hash chain still covers them.
const (
	KindRunStarted    Kind = "run_started"    // the task: agent, system prompt hash, input, tools, step limit
	KindModelRequest  Kind = "model_request"  // a model call about to be made (messages added since the last one)
	KindModelResponse Kind = "model_response" // the model's answer, with usage, provider, model and label
	KindToolCall      Kind = "tool_call"      // a tool call about to be executed
	KindEffect        Kind = "effect"         // one statement a side-effecting tool executed, committed with its tool_result
	KindToolResult    Kind = "tool_result"    // the observation returned to the model
	KindRunFinished   Kind = "run_finished"   // the final answer
	// Workflow and policy kinds (packages agents/workflow, agents/policy).
	KindWorkflowStarted Kind = "workflow_started" // a workflow run: its name and step graph
	KindStep            Kind = "step"             // a workflow step's lifecycle: started, failed, retried, succeeded, replayed, approval_required, denied, interrupted
	KindApproval        Kind = "approval"         // a human's answer to an approval gate or a held tool call: approved or denied, approver, reason
	KindDecision        Kind = "policy_decision"  // an authorization decision on a tool call: allow, deny or require_approval, rule, taint
	// KindApprovalRequested: a runtime run held a tool call for a human's
	// answer (the decision required approval and the runtime has an
	// approvals source); the run suspends until an approval event follows.
	KindApprovalRequested Kind = "approval_requested"
	// KindSeal closes a run in an exported JSONL journal. It is never stored
	// in the database; it lets a reader tell a complete export from a
	// truncated one.
	KindSeal Kind = "seal"
)

// Known reports whether k is a kind this version defines.
func (k Kind) Known() bool {
	switch k {
	case KindRunStarted, KindModelRequest, KindModelResponse, KindToolCall,
		KindEffect, KindToolResult, KindRunFinished, KindSeal,
		KindWorkflowStarted, KindStep, KindApproval, KindDecision, KindApprovalRequested:
		return true
	}
	return false
}

// Event is one journal entry. Seq, Time, Prev and Hash are assigned by the
// Store when the event is appended; the other fields come from a Record.
type Event struct {
	RunID    string          `json:"run"`
	Seq      int64           `json:"seq"`
	Kind     Kind            `json:"kind"`
	Step     int             `json:"step"`
	Tool     string          `json:"tool,omitempty"`
	CallID   string          `json:"call_id,omitempty"`
	ArgsHash string          `json:"args_hash,omitempty"`
	Label    string          `json:"label,omitempty"` // the model label ("scripted", "live") on model events
	Time     time.Time       `json:"time"`
	Payload  json.RawMessage `json:"payload"`
	Prev     string          `json:"prev"` // Hash of the previous event of the run; "" for seq 1
	Hash     string          `json:"hash"`
}

// Record is an event as a caller asks for it to be appended.
type Record struct {
	Kind     Kind
	Step     int
	Tool     string
	CallID   string
	ArgsHash string
	Label    string
	// Payload is marshalled to JSON (a json.RawMessage is taken as is).
	Payload any
}

// computeHash returns the content hash of e: SHA-256 over the canonical JSON
// array ["loomwork.journal/1", run, seq, kind, step, tool, call_id,
// args_hash, label, time, prev, payload], where time is RFC 3339 UTC with
// nanoseconds and trailing zeros removed and payload is canonical JSON.
// docs/format/journal.md specifies the same computation.
func computeHash(e *Event) (string, error) {
	payload := e.Payload
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = json.RawMessage("null")
	}
	cp, err := Canonical(payload)
	if err != nil {
		return "", fmt.Errorf("payload: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString(`["loomwork.journal/1",`)
	writeString(&buf, e.RunID)
	buf.WriteByte(',')
	buf.WriteString(strconv.FormatInt(e.Seq, 10))
	buf.WriteByte(',')
	writeString(&buf, string(e.Kind))
	buf.WriteByte(',')
	buf.WriteString(strconv.Itoa(e.Step))
	buf.WriteByte(',')
	writeString(&buf, e.Tool)
	buf.WriteByte(',')
	writeString(&buf, e.CallID)
	buf.WriteByte(',')
	writeString(&buf, e.ArgsHash)
	buf.WriteByte(',')
	writeString(&buf, e.Label)
	buf.WriteByte(',')
	writeString(&buf, formatTime(e.Time))
	buf.WriteByte(',')
	writeString(&buf, e.Prev)
	buf.WriteByte(',')
	buf.Write(cp)
	buf.WriteByte(']')
	return sumHex(buf.Bytes()), nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Payload types. The runtime writes them; the replay engine and the scorer
// read them. Fields are only ever added.

// RunStarted is the payload of KindRunStarted.
type RunStarted struct {
	Agent      string          `json:"agent"`
	System     string          `json:"system"`
	Input      string          `json:"input"`
	Model      string          `json:"model,omitempty"` // the requested model; empty lets the gateway route
	MaxSteps   int             `json:"max_steps"`
	MaxTokens  int             `json:"max_tokens,omitempty"`
	Tools      []ToolSpec      `json:"tools"`
	CaseID     string          `json:"case_id,omitempty"`
	Trial      int             `json:"trial,omitempty"`
	Attributes json.RawMessage `json:"attributes,omitempty"`
	// Policy is the authorization policy the run's tool calls were decided
	// under (a runtime whose Authorizer says what it decides by), so a
	// replay can re-decide from the journal alone. It is left out of the
	// event's argument hash: a run resumed or replayed under other rules
	// diverges at the first decision that changes, not at run_started.
	Policy *PolicyRecord `json:"policy,omitempty"`
}

// PolicyRecord is the policy of RunStarted.Policy: its name ("default" for
// the built-in policy, else the rules file as given) and its rules, the
// policy file's JSON in canonical form (package agents/policy reads it).
type PolicyRecord struct {
	Name  string          `json:"name,omitempty"`
	Rules json.RawMessage `json:"rules"`
}

// ToolSpec is a tool as declared to the model.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Effect      bool            `json:"effect,omitempty"`
}

// ToolResult is the payload of KindToolResult.
type ToolResult struct {
	Content   string   `json:"content"`
	IsError   bool     `json:"is_error,omitempty"`
	Documents []string `json:"documents,omitempty"` // evidence ids a retrieval tool returned
	// Key is the idempotency key the call ran under (side-effecting tools).
	Key string `json:"idempotency_key,omitempty"`
	// Events are what the tool observed while it ran (a sandbox's network
	// attempts and their verdicts), in a deterministic order. They are span
	// events on the execute_tool span, and replay compares them.
	Events []ToolEvent `json:"events,omitempty"`
	// Attrs say how the tool ran, not what it returned (keys from semconv,
	// e.g. loomwork.sandbox.start = warm or cold): the execute_tool span
	// carries them too. Replay does not compare them.
	Attrs map[string]string `json:"attrs,omitempty"`
}

// ToolEvent is one observation of a tool: a name and string attributes
// (keys from semconv).
type ToolEvent struct {
	Name  string            `json:"name"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

// String renders the event on one line, attributes sorted by key.
func (e ToolEvent) String() string {
	keys := make([]string, 0, len(e.Attrs))
	for k := range e.Attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(e.Name)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%q", k, e.Attrs[k])
	}
	return b.String()
}

// Effect is the payload of KindEffect: one statement executed through an
// EffectTx, with its arguments as JSON values.
type Effect struct {
	Key       string          `json:"idempotency_key"`
	Index     int             `json:"index"` // position among the call's effects, from 0
	Statement string          `json:"statement"`
	Args      json.RawMessage `json:"args"`
}

// RunFinished is the payload of KindRunFinished.
type RunFinished struct {
	Answer           string   `json:"answer"`
	Citations        []string `json:"citations,omitempty"`
	Steps            int      `json:"steps"`
	StepLimitReached bool     `json:"step_limit_reached,omitempty"`
	Usage            Usage    `json:"usage"`
}

// Usage totals the token usage of a run's model responses.
type Usage struct {
	InputTokens         int64 `json:"input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64 `json:"cache_creation_tokens,omitempty"`
	ReasoningTokens     int64 `json:"reasoning_tokens,omitempty"`
}

// ApprovalRequested is the payload of KindApprovalRequested: the call held
// and why (the decision's reason and the taint origin of its arguments).
// Its hash is the event's args hash, so a replay that holds a different
// call, or for another reason, diverges there.
type ApprovalRequested struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	Reason string `json:"reason,omitempty"`
	Origin string `json:"origin,omitempty"`
}

// ApprovalAnswer is the payload of a runtime run's KindApproval event: a
// human's answer to a held tool call. Its hash is the event's args hash.
// (A workflow's approval event carries "step" instead of "call_id".)
type ApprovalAnswer struct {
	CallID   string    `json:"call_id"`
	Approved bool      `json:"approved"`
	Approver string    `json:"approver"`
	Reason   string    `json:"reason,omitempty"`
	Time     time.Time `json:"time"`
}

// Seal is the payload of KindSeal.
type Seal struct {
	Events int64 `json:"events"`
}

// ModelRequest is the payload of KindModelRequest. To keep a long run's
// journal linear in its length, it carries only the messages added since
// the previous request; RequestHash (also the event's ArgsHash) covers the
// whole request, so a resumed run can prove it rebuilt the same one.
type ModelRequest struct {
	Model         string        `json:"model,omitempty"`
	MessageCount  int           `json:"message_count"`
	NewMessages   []llm.Message `json:"new_messages"`
	Tools         []string      `json:"tools,omitempty"`
	ToolsWithheld bool          `json:"tools_withheld,omitempty"`
	MaxTokens     int           `json:"max_tokens,omitempty"`
	// Context is what the context layer did to this request, when it ran.
	Context *ContextRecord `json:"context,omitempty"`
}

// Next builds the event that follows prev in run runID (prev nil: the
// run's first event) from r, stamped t: it assigns the sequence number,
// the previous hash and the content hash. The Store appends what Next
// builds; tests and tools can build valid chains with it directly.
func Next(runID string, prev *Event, r Record, t time.Time) (Event, error) {
	if r.Kind == "" {
		return Event{}, errors.New("record has no kind")
	}
	var payload json.RawMessage
	switch p := r.Payload.(type) {
	case json.RawMessage:
		payload = p
	case nil:
		payload = json.RawMessage("null")
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return Event{}, fmt.Errorf("marshal payload: %w", err)
		}
		payload = b
	}
	cp, err := Canonical(payload)
	if err != nil {
		return Event{}, fmt.Errorf("payload: %w", err)
	}
	e := Event{RunID: runID, Seq: 1, Kind: r.Kind, Step: r.Step, Tool: r.Tool, CallID: r.CallID,
		ArgsHash: r.ArgsHash, Label: r.Label, Time: t.UTC(), Payload: cp}
	if prev != nil {
		e.Seq, e.Prev = prev.Seq+1, prev.Hash
	}
	if e.Hash, err = computeHash(&e); err != nil {
		return Event{}, err
	}
	return e, nil
}
