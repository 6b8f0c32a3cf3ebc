package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
)

// Authorizer decides whether a tool call the model made may run. It sits
// outside the model: the runtime asks it before every call (live or
// replayed), journals its decision as a policy_decision event and, when
// the call is not allowed, gives the model an error observation instead of
// running the tool. Package policy's Guard implements it.
type Authorizer interface {
	Authorize(ctx context.Context, call AuthCall) (Authorization, error)
}

// PolicySource is an Authorizer that can say what it decides by: the
// runtime records its answer in every run's run_started
// (journal.RunStarted.Policy), so a replay can rebuild the authorizer from
// the journal alone (package replay does, for package policy's Guard). A
// nil record records nothing.
type PolicySource interface {
	PolicyRecord() *journal.PolicyRecord
}

// AuthCall is what an Authorizer sees.
type AuthCall struct {
	RunID     string
	Agent     string
	Step      int
	Call      llm.ToolCall
	Arguments json.RawMessage // decoded arguments (valid JSON)
	// Effect is the tool's Effect flag (false for an unknown tool).
	Effect bool
	// Messages is the conversation the model had seen when it made the
	// call, ending with the assistant message that carries it: what the
	// call's arguments derive from.
	Messages []llm.Message
	// Documents maps a tool call id of Messages to the evidence ids its
	// result returned (retrieved documents and their origin).
	Documents map[string][]string
	// ContextOrigins name the untrusted material the model saw outside
	// the conversation, in the order it was given: the task when it came
	// from an untrusted party (Task.InputOrigin), then each piece of
	// evidence ("evidence:ID") and recalled memory ("memory:ID") offered
	// in the system prompt. Everything the model said after seeing them
	// derives from them.
	ContextOrigins []string
	// ToolOrigins maps each of the agent's tools that declares an Origin
	// (a remote tool) to it.
	ToolOrigins map[string]string
	// Rechecking is true when the journal already holds this decision (a
	// resumed or replayed run): the decision is made again and must match,
	// but side channels (an approval queue, an audit log) should not
	// record it a second time.
	Rechecking bool
}

// Authorization is an Authorizer's answer.
type Authorization struct {
	Allow bool
	// Decision is the payload of the policy_decision event (any JSON
	// value). Its hash is the event's args hash, so a resumed or replayed
	// run that decides differently diverges there.
	Decision any
	// Observation is what the model is told when the call is not allowed.
	Observation string
	// Approval, set on a call that is not allowed, says a human may allow
	// it. With an approvals source (Config.Approvals) the runtime holds
	// the call — journals approval_requested, suspends the run, and runs
	// the call once approved or gives the model the denial — instead of
	// giving the model Observation.
	Approval *ApprovalNeed
}

// authorize asks the Authorizer and journals (or, resuming, matches) the
// decision. It returns the observation when the call must not run, and
// what a human would need to allow it when one may.
func (r *run) authorize(ctx context.Context, step int, call llm.ToolCall, args json.RawMessage) (deny *journal.ToolResult, need *ApprovalNeed, err error) {
	az := r.rt.cfg.Authorizer
	if az == nil {
		return nil, nil, nil
	}
	if args == nil {
		args = json.RawMessage("null")
	}
	effect := false
	if t := r.agent.tools[call.Name]; t != nil {
		effect = t.Effect
	}
	a, err := az.Authorize(ctx, AuthCall{RunID: r.task.RunID, Agent: r.agent.Name, Step: step, Call: call, Arguments: args,
		Effect: effect, Messages: r.seen, Documents: r.callDocs, ContextOrigins: r.contextOrigins(), ToolOrigins: r.agent.origins, Rechecking: r.pos < len(r.recorded)})
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: step %d: authorize %s: %w", r.task.RunID, step, call.Name, err)
	}
	h, err := journal.HashValue(a.Decision)
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: step %d: decision of %s: %w", r.task.RunID, step, call.Name, err)
	}
	if _, _, err := r.record(ctx, journal.Record{Kind: journal.KindDecision, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: h, Payload: a.Decision}); err != nil {
		return nil, nil, err
	}
	if a.Allow {
		return nil, nil, nil
	}
	return &journal.ToolResult{IsError: true, Content: a.Observation}, a.Approval, nil
}

// contextOrigins lists the run's untrusted context (AuthCall.ContextOrigins).
// Evidence and memory count when offered, admitted or not: a conservative
// taint, and one that does not depend on a request's budget.
func (r *run) contextOrigins() []string {
	var out []string
	if r.task.InputOrigin != "" {
		out = append(out, "input from "+r.task.InputOrigin)
	}
	if s := r.ctxSpec; s != nil && s.Tiers != nil {
		for _, d := range s.Tiers.Evidence {
			out = append(out, "evidence:"+d.ID)
		}
		for _, d := range s.Tiers.Memory {
			out = append(out, "memory:"+d.ID)
		}
	}
	return out
}
