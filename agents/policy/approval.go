package policy

import (
	"fmt"
	"sync"
	"time"
)

// ApprovalStatus is where an approval request stands.
type ApprovalStatus string

// Approval statuses.
const (
	Pending  ApprovalStatus = "pending"
	Approved ApprovalStatus = "approved"
	Denied   ApprovalStatus = "denied"
)

// ApprovalRequest is one entry of the queue.
type ApprovalRequest struct {
	ID        string         `json:"id"`
	Tool      string         `json:"tool"`
	Principal string         `json:"principal"`
	Verdict   Verdict        `json:"verdict"`
	Status    ApprovalStatus `json:"status"`
	Requested time.Time      `json:"requested"`
	Approver  string         `json:"approver,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Answered  time.Time      `json:"answered,omitzero"`
}

// ApprovalQueue holds require_approval decisions until a human answers.
// Every request and answer is appended to the audit log when one is set.
type ApprovalQueue struct {
	mu    sync.Mutex
	clock func() time.Time
	audit *AuditLog
	items map[string]*ApprovalRequest
	order []string // ids, oldest first
}

// NewApprovalQueue returns an empty queue; audit may be nil, clock nil is
// time.Now.
func NewApprovalQueue(audit *AuditLog, clock func() time.Time) *ApprovalQueue {
	if clock == nil {
		clock = time.Now
	}
	return &ApprovalQueue{clock: clock, audit: audit, items: map[string]*ApprovalRequest{}}
}

// Request queues v (which must be require_approval) for req and returns
// its id.
func (q *ApprovalQueue) Request(v Verdict, req Request) (string, error) {
	if v.Decision != RequireApproval {
		return "", fmt.Errorf("approval request for %s: decision is %s, not require_approval", req.Tool, v.Decision)
	}
	q.mu.Lock()
	a := &ApprovalRequest{ID: fmt.Sprintf("approval-%d", len(q.order)+1), Tool: req.Tool, Principal: req.Principal, Verdict: v, Status: Pending, Requested: q.clock().UTC()}
	q.items[a.ID] = a
	q.order = append(q.order, a.ID)
	q.mu.Unlock()
	if q.audit != nil {
		if _, err := q.audit.Append(req.Principal, "approval_requested", map[string]any{"id": a.ID, "tool": req.Tool, "reason": v.Reason}); err != nil {
			return "", err
		}
	}
	return a.ID, nil
}

func (q *ApprovalQueue) answer(id, approver, reason string, s ApprovalStatus) error {
	if approver == "" {
		return fmt.Errorf("answer %s: approver must be set", id)
	}
	q.mu.Lock()
	a, ok := q.items[id]
	switch {
	case !ok:
		q.mu.Unlock()
		return fmt.Errorf("answer %s: no such approval request", id)
	case a.Status != Pending:
		q.mu.Unlock()
		return fmt.Errorf("answer %s: already %s by %s", id, a.Status, a.Approver)
	}
	a.Status, a.Approver, a.Reason, a.Answered = s, approver, reason, q.clock().UTC()
	tool := a.Tool
	q.mu.Unlock()
	if q.audit != nil {
		action := "approval_granted"
		if s == Denied {
			action = "approval_denied"
		}
		if _, err := q.audit.Append(approver, action, map[string]any{"id": id, "tool": tool, "reason": reason}); err != nil {
			return err
		}
	}
	return nil
}

// Approve answers yes.
func (q *ApprovalQueue) Approve(id, approver string) error {
	return q.answer(id, approver, "", Approved)
}

// Deny answers no, with a reason.
func (q *ApprovalQueue) Deny(id, approver, reason string) error {
	return q.answer(id, approver, reason, Denied)
}

// IsApproved reports whether id was approved.
func (q *ApprovalQueue) IsApproved(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	a, ok := q.items[id]
	return ok && a.Status == Approved
}

// Pending lists the unanswered requests, oldest first.
func (q *ApprovalQueue) Pending() []ApprovalRequest { return q.list(Pending) }

// All lists every request, oldest first.
func (q *ApprovalQueue) All() []ApprovalRequest { return q.list("") }

func (q *ApprovalQueue) list(s ApprovalStatus) []ApprovalRequest {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []ApprovalRequest
	for _, id := range q.order {
		if a := q.items[id]; s == "" || a.Status == s {
			out = append(out, *a)
		}
	}
	return out
}
