package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/loomwork/loomwork/agents/approvals"
)

// runApprovals: approvals [--journal F] [--all] [--json] — the approval
// queue: runs waiting for a human, workflow gates and held tool calls.
func (m *Main) runApprovals(ctx context.Context, args []string) error {
	fs := m.newFlagSet("approvals", "approvals [--journal F] [--all] [--json]")
	journalPath := fs.String("journal", ".loomwork/runs.journal.db", "SQLite journal holding the runs and their approval queue")
	all := fs.Bool("all", false, "list answered approvals too")
	asJSON := fs.Bool("json", false, "print one JSON object per approval")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("approvals: want no arguments, got %q", fs.Args())
	}
	j, err := m.openJournal(ctx, *journalPath)
	if err != nil {
		return err
	}
	defer j.Shutdown(ctx)
	q, _, err := openApprovalQueue(ctx, j, nil, time.Now)
	if err != nil {
		return err
	}
	list := q.Pending
	if *all {
		list = q.All
	}
	es, err := list(ctx)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	if *asJSON {
		for _, e := range es {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			fmt.Fprintln(m.Stdout, string(b))
		}
		return nil
	}
	if len(es) == 0 {
		fmt.Fprintln(m.Stdout, "no run is waiting for an approval")
		return nil
	}
	for _, e := range es {
		m.printApproval(e)
	}
	return nil
}

func (m *Main) printApproval(e approvals.Entry) {
	w := termSafe(m.Stdout)
	if e.Kind == approvals.KindToolCall {
		fmt.Fprintf(w, "%s  %s  tool call %s (agent %s, step %d)  %s  since %s\n", e.RunID, e.ID, e.Tool, e.Name, e.Step, e.Status, e.Requested.Format(time.RFC3339))
		fmt.Fprintf(w, "    arguments: %s\n", e.Arguments)
		fmt.Fprintf(w, "    why: %s\n", e.Reason)
		if e.Origin != "" {
			fmt.Fprintf(w, "    origin: %s\n", e.Origin)
		}
	} else {
		fmt.Fprintf(w, "%s  %s  workflow gate (%s)  %s  since %s\n", e.RunID, e.ID, e.Name, e.Status, e.Requested.Format(time.RFC3339))
		if e.Prompt != "" {
			fmt.Fprintf(w, "    asks: %s\n", oneLine(e.Prompt, 400))
		}
	}
	if e.Status != approvals.StatusPending {
		fmt.Fprintf(w, "    %s by %s at %s %s\n", e.Status, e.Approver, e.Answered.Format(time.RFC3339), e.AnswerReason)
		return
	}
	fmt.Fprintf(w, "    answer: loom-eval approve %s %s --approver WHO  (or deny … --reason WHY)\n", e.RunID, e.ID)
}
