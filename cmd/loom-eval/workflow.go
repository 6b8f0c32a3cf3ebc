package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/workflow"
	"github.com/loomwork/loomwork/web"
)

// workflows are the step graphs this binary can run and resume by name.
func workflows() map[string]func() (*workflow.Workflow, error) {
	return map[string]func() (*workflow.Workflow, error){"incident": workflow.Incident}
}

func (m *Main) openJournal(ctx context.Context, path string) (*journaldb.Store, error) {
	j, err := journaldb.Open(ctx, journaldb.Config{Path: path})
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return j, nil
}

// runWorkflow: workflow run NAME --run ID | workflow status ID.
func (m *Main) runWorkflow(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "run" && args[0] != "status") {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval workflow run NAME --run ID [--journal F] [--crash-after STEP]\n       loom-eval workflow status ID [--journal F]")
		return usageError("workflow: want a subcommand: run or status")
	}
	sub := args[0]
	fs := m.newFlagSet("workflow "+sub, "workflow run NAME --run ID | workflow status ID")
	journalPath := fs.String("journal", ".loomwork/runs.journal.db", "SQLite journal holding the run")
	runID := fs.String("run", "", "run id (run: an id already in the journal is resumed)")
	crashAfter := fs.String("crash-after", "", "exit right after this step's success is durable (a simulated crash, to show the resume)")
	asJSON := fs.Bool("json", false, "print the step events as JSON lines")
	auditPath := fs.String("audit", "", "policy audit log (JSON lines) that receives the approval requests (run)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("workflow %s: want one argument, got %q", sub, fs.Args())
	}
	j, err := m.openJournal(ctx, *journalPath)
	if err != nil {
		return err
	}
	defer j.Shutdown(ctx)
	if sub == "status" {
		evs, approvals, pending, err := workflow.Status(ctx, j, fs.Arg(0))
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("workflow status: %w", err)}
		}
		m.printStepEvents(evs, *asJSON)
		for _, a := range approvals {
			verb := "approved"
			if !a.Approved {
				verb = "denied"
			}
			fmt.Fprintf(m.Stdout, "approval: %s %s by %s at %s %s\n", a.Step, verb, a.Approver, a.Time.Format(time.RFC3339), a.Reason)
		}
		for _, p := range pending {
			fmt.Fprintf(m.Stdout, "pending approval: %s (loom-eval approve %s %s --approver WHO)\n", p, fs.Arg(0), p)
		}
		return nil
	}
	return m.workflowRun(ctx, j, fs.Arg(0), *runID, *crashAfter, *auditPath, *asJSON)
}

// workflowRun runs or resumes workflow name as runID, its approval gates
// in the approval queue beside the journal.
func (m *Main) workflowRun(ctx context.Context, j *journaldb.Store, name, runID, crashAfter, auditPath string, asJSON bool) error {
	mk, ok := workflows()[name]
	if !ok {
		return usageError("workflow run: unknown workflow %q (known: incident)", name)
	}
	if runID == "" {
		return usageError("workflow run: --run must be set")
	}
	wf, err := mk()
	if err != nil {
		return err
	}
	// The gate is the approval queue beside the journal: a gate is listed
	// by loom-eval approvals and /approvals, answered by approve / deny.
	audit, err := openAuditFlag(auditPath)
	if err != nil {
		return err
	}
	q, _, err := openApprovalQueue(ctx, j, audit, time.Now)
	if err != nil {
		return err
	}
	rn, err := workflow.NewRunner(workflow.Config{Journal: j, Gate: q})
	if err != nil {
		return err
	}
	res, err := rn.Run(ctx, wf, runID, workflow.RunOptions{CrashAfter: crashAfter})
	m.printStepEvents(res.Events, asJSON)
	var sus *workflow.SuspendedError
	var den *workflow.DeniedError
	var crash *workflow.CrashError
	switch {
	case err == nil:
		fmt.Fprintf(m.Stdout, "run %s completed: %v\n", runID, res.Completed)
		return nil
	case errors.As(err, &sus):
		fmt.Fprintf(m.Stdout, "run %s suspended at %s: loom-eval approve %s %s --approver WHO (or deny), then run it again\n", runID, sus.Step, runID, sus.Step)
		return nil
	case errors.As(err, &crash):
		fmt.Fprintf(m.Stdout, "run %s crashed (simulated) after %s with %d steps done; run it again to resume\n", runID, crash.Step, len(res.Completed))
		return &ExitError{Code: ExitFailure, Err: err}
	case errors.As(err, &den):
		return &ExitError{Code: ExitFailure, Err: err}
	default:
		return &ExitError{Code: ExitFailure, Err: err}
	}
}

func (m *Main) printStepEvents(evs []workflow.StepEvent, asJSON bool) {
	for i, e := range evs {
		if asJSON {
			b, _ := json.Marshal(e)
			fmt.Fprintln(m.Stdout, string(b))
			continue
		}
		extra := ""
		if e.Approver != "" {
			extra = fmt.Sprintf("  by %s: %s", e.Approver, e.Reason)
		}
		if e.Error != "" {
			extra = "  " + e.Error
		}
		fmt.Fprintf(termSafe(m.Stdout), "%2d  %-17s %-12s attempt=%d%s\n", i, e.Step, e.Event, e.Attempt, extra)
	}
}

// runApprove and runDeny answer a run waiting for a human: a workflow at
// an approval gate (ID is the step) or an agent run at a held tool call
// (ID is the call id), through the approval queue beside the journal.
func (m *Main) runApprove(ctx context.Context, args []string) error {
	return m.answer(ctx, "approve", args)
}
func (m *Main) runDeny(ctx context.Context, args []string) error { return m.answer(ctx, "deny", args) }

func (m *Main) answer(ctx context.Context, verb string, args []string) error {
	fs := m.newFlagSet(verb, verb+" RUN ID --approver WHO [--reason TEXT] [--journal F] [--audit F]")
	journalPath := fs.String("journal", ".loomwork/runs.journal.db", "SQLite journal holding the run and its approval queue")
	approver := fs.String("approver", "", "who answers (required; journaled and audited)")
	reason := fs.String("reason", "", "why (required to deny; the run is told it)")
	auditPath := fs.String("audit", "", "policy audit log (JSON lines) that receives the answer")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError("%s: want RUN ID (the workflow step or the held tool call's id; loom-eval approvals lists them), got %q", verb, fs.Args())
	}
	if strings.TrimSpace(*approver) == "" {
		return usageError("%s: --approver must be set", verb)
	}
	if verb == "deny" && strings.TrimSpace(*reason) == "" {
		return usageError("deny: --reason must be set")
	}
	audit, err := openAuditFlag(*auditPath)
	if err != nil {
		return err
	}
	j, err := m.openJournal(ctx, *journalPath)
	if err != nil {
		return err
	}
	defer j.Shutdown(ctx)
	q, _, err := openApprovalQueue(ctx, j, audit, time.Now)
	if err != nil {
		return err
	}
	run, id := fs.Arg(0), fs.Arg(1)
	e, err := q.Answer(ctx, run, id, verb == "approve", *approver, *reason)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	if e.Kind == approvals.KindToolCall {
		fmt.Fprintf(termSafe(m.Stdout), "run %s call %s (tool %s): %s by %s; run it again (the same run id) to resume it\n", run, id, e.Tool, e.Status, e.Approver)
		return nil
	}
	fmt.Fprintf(termSafe(m.Stdout), "run %s step %s: %s by %s; run the workflow again (loom-eval workflow run WORKFLOW --run %s) to resume or stop it\n", run, id, e.Status, e.Approver, run)
	return nil
}

// webApprovals is the UI's view of the approval queue beside a journal
// (web.Approvals): workflow gates and held tool calls. audit, when set,
// receives every answer.
type webApprovals struct {
	j     *journaldb.Store
	clock func() time.Time
	audit *policy.AuditLog
}

func (a webApprovals) queue(ctx context.Context) (*approvals.Store, error) {
	return approvals.Open(ctx, approvals.Config{Journal: a.j, Audit: a.audit, Clock: a.clock})
}

func (a webApprovals) Pending(ctx context.Context) ([]web.PendingApproval, error) {
	q, err := a.queue(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := q.Pending(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.PendingApproval, 0, len(ps))
	for _, p := range ps {
		out = append(out, web.PendingApproval{RunID: p.RunID, Kind: p.Kind, Workflow: p.Name, Step: p.ID, Tool: p.Tool,
			Arguments: p.Arguments, Reason: p.Reason, Origin: p.Origin, Since: p.Requested})
	}
	return out, nil
}

func (a webApprovals) Answer(ctx context.Context, runID, step string, approved bool, approver, reason string) error {
	q, err := a.queue(ctx)
	if err != nil {
		return err
	}
	_, err = q.Answer(ctx, runID, step, approved, approver, reason)
	return err
}
