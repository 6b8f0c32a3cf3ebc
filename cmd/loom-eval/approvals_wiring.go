package main

import (
	"context"
	"fmt"
	"time"

	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/web"
)

// ExitSuspended is the exit code of a command whose run is suspended,
// waiting for a human's answer (loom-eval approve / deny, or /approvals):
// not a failure, and not done.
const ExitSuspended = 4

// openApprovalQueue opens the approval queue beside journal j (a table in
// the journal's own database): the runtime's approvals source
// (runtime.Config.Approvals; also a workflow.Gate) and the UI's view of it
// (web.Deps.Approvals). audit, when set, receives every request and
// answer; it should be the log the policy guard writes to.
func openApprovalQueue(ctx context.Context, j *journaldb.Store, audit *policy.AuditLog, clock func() time.Time) (*approvals.Store, web.Approvals, error) {
	q, err := approvals.Open(ctx, approvals.Config{Journal: j, Audit: audit, Clock: clock})
	if err != nil {
		return nil, nil, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return q, webApprovals{j: j, clock: clock, audit: audit}, nil
}

// approvalsFile is the approval queue of a journal file opened on its own
// (a command that does not hold the journal already, e.g. serve's UI).
type approvalsFile struct {
	Runtime runtime.Approvals
	Web     web.Approvals
	Close   func()
}

// openApprovalsFile opens the journal at journalPath and its approval
// queue; audit may be nil. Close releases the journal.
func openApprovalsFile(ctx context.Context, journalPath string, audit *policy.AuditLog) (*approvalsFile, error) {
	j, err := journaldb.Open(ctx, journaldb.Config{Path: journalPath})
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("approvals journal: %w", err)}
	}
	q, w, err := openApprovalQueue(ctx, j, audit, time.Now)
	if err != nil {
		j.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	return &approvalsFile{Runtime: q, Web: w, Close: func() { j.Shutdown(context.WithoutCancel(ctx)) }}, nil
}

// openAuditFlag opens an --audit log ("": none).
func openAuditFlag(path string) (*policy.AuditLog, error) {
	if path == "" {
		return nil, nil
	}
	if err := mkdirFor(path); err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("--audit %s: %w", path, err)}
	}
	l, err := openAudit(path)
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("--audit %s: %w", path, err)}
	}
	return l, nil
}
