package runtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
)

// Approvals is a durable approval queue as the runtime sees it: a call the
// Authorizer holds for a human (Authorization.Approval) is requested there,
// and the run suspends until it is answered. Package agents/approvals
// implements it on the journal's database.
type Approvals interface {
	// Request queues req, or finds it queued (a resumed run asks again:
	// that must not queue or audit it twice), and returns its answer:
	// nil while it is pending.
	Request(ctx context.Context, req ApprovalRequest) (*journal.ApprovalAnswer, error)
}

// ApprovalRequest is a held tool call as the queue receives it.
type ApprovalRequest struct {
	RunID  string
	Agent  string
	Step   int
	CallID string
	Tool   string
	// Arguments are the call's decoded arguments (valid JSON).
	Arguments json.RawMessage
	// Reason and Origin say why approval is required (the verdict's
	// reason and the taint origin of the arguments).
	Reason string
	Origin string
}

// ApprovalNeed marks an Authorization whose call may run once a human
// approves it.
type ApprovalNeed struct {
	Reason string
	Origin string
}

// SuspendedError is what Run returns when a call waits for a human's
// answer: its approval_requested event is durable and the process may exit.
// Running the same RunID again resumes the run at that call.
type SuspendedError struct {
	RunID  string
	Step   int
	CallID string
	Tool   string
}

func (e *SuspendedError) Error() string {
	return fmt.Sprintf("run %s suspended at step %d, call %s (tool %s): waiting for approval", e.RunID, e.Step, e.CallID, e.Tool)
}

// heldCall names a held call: call ids are unique within a step.
type heldCall struct {
	step int
	id   string
}

// holds reports whether a call the Authorizer held for approval takes the
// durable path (request, suspend, resume on the answer) rather than being
// refused: the runtime has an approvals source, the journal being resumed
// already took that path, or the task (ReplayTask) carries the journaled
// answer.
func (r *run) holds(step int, call llm.ToolCall) bool {
	if r.rt.cfg.Approvals != nil {
		return true
	}
	if _, ok := r.task.approvals[heldCall{step, call.ID}]; ok {
		return true
	}
	return r.pos < len(r.recorded) && r.recorded[r.pos].Kind == journal.KindApprovalRequested
}

// awaitApproval journals (or, resuming, matches) the request of a held
// call and its answer. It returns nil when the call was approved and may
// run, the observation when it was denied, and *SuspendedError while no
// answer exists.
func (r *run) awaitApproval(ctx context.Context, step int, call llm.ToolCall, args json.RawMessage, need *ApprovalNeed) (*journal.ToolResult, error) {
	req := journal.ApprovalRequested{Tool: call.Name, CallID: call.ID, Reason: need.Reason, Origin: need.Origin}
	h, err := journal.HashValue(req)
	if err != nil {
		return nil, fmt.Errorf("run %s: step %d: approval request of %s: %w", r.task.RunID, step, call.ID, err)
	}
	if _, _, err := r.record(ctx, journal.Record{Kind: journal.KindApprovalRequested, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: h, Payload: req}); err != nil {
		return nil, err
	}
	ans, err := r.answer(ctx, step, call, args, need)
	if err != nil || ans == nil {
		return nil, err
	}
	if ans.Approved {
		return nil, nil
	}
	return &journal.ToolResult{IsError: true, Content: fmt.Sprintf("error: tool %s was not run: approval denied by %s: %s", call.Name, ans.Approver, ans.Reason)}, nil
}

// answer finds the answer to a held call — in the journal (a resume), in
// the task (a replay), or from the approvals source, in which case it is
// journaled — or returns *SuspendedError.
func (r *run) answer(ctx context.Context, step int, call llm.ToolCall, args json.RawMessage, need *ApprovalNeed) (*journal.ApprovalAnswer, error) {
	if r.pos < len(r.recorded) && r.recorded[r.pos].Kind == journal.KindApproval {
		e := r.recorded[r.pos]
		var a journal.ApprovalAnswer
		if err := json.Unmarshal(e.Payload, &a); err != nil {
			return nil, fmt.Errorf("run %s seq %d: decode recorded approval: %w", r.task.RunID, e.Seq, err)
		}
		h, err := journal.HashValue(a)
		if err != nil {
			return nil, err
		}
		if _, _, err := r.next(journal.Record{Kind: journal.KindApproval, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: h}); err != nil {
			return nil, err
		}
		return &a, nil
	}
	var a *journal.ApprovalAnswer
	if rec, ok := r.task.approvals[heldCall{step, call.ID}]; ok {
		a = rec
	} else if src := r.rt.cfg.Approvals; src != nil {
		var err error
		a, err = src.Request(ctx, ApprovalRequest{RunID: r.task.RunID, Agent: r.agent.Name, Step: step, CallID: call.ID, Tool: call.Name,
			Arguments: args, Reason: need.Reason, Origin: need.Origin})
		if err != nil {
			return nil, fmt.Errorf("run %s: step %d: approval of %s: %w", r.task.RunID, step, call.ID, err)
		}
	}
	if a == nil {
		return nil, &SuspendedError{RunID: r.task.RunID, Step: step, CallID: call.ID, Tool: call.Name}
	}
	ans := *a
	ans.CallID, ans.Time = call.ID, ans.Time.UTC()
	h, err := journal.HashValue(ans)
	if err != nil {
		return nil, err
	}
	if _, _, err := r.record(ctx, journal.Record{Kind: journal.KindApproval, Step: step, Tool: call.Name, CallID: call.ID, ArgsHash: h, Payload: ans}); err != nil {
		return nil, err
	}
	return &ans, nil
}
