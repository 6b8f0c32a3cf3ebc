package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal/memjournal"
	"github.com/loomwork/loomwork/agents/workflow"
)

// The workflow runs on any store of the journal port: on the in-memory
// journal the keyed step runs once across a crash and a resume, with no
// SQL transaction (and so no ledger row), its result kept by the journal.
func TestIncidentOnAJournalWithoutTables(t *testing.T) {
	ctx := context.Background()
	j := memjournal.New(memjournal.Config{})
	calls := 0
	steps := incident(&calls)
	open := steps[2].Action
	steps[2].Action = func(ctx context.Context, in workflow.Input) (any, error) {
		if in.Tx != nil {
			return nil, errors.New("a journal without tables gave a SQL transaction")
		}
		return open(ctx, in)
	}
	wf, err := workflow.New("incident", steps)
	if err != nil {
		t.Fatal(err)
	}
	approve := workflow.GateFunc(func(string) bool { return true })
	rn, _ := workflow.NewRunner(workflow.Config{Journal: j, Gate: approve})
	if _, err := rn.Run(ctx, wf, "incident-1", workflow.RunOptions{CrashAfter: "open_pr"}); !errors.As(err, new(*workflow.CrashError)) {
		t.Fatalf("want a crash, got %v", err)
	}
	rn2, _ := workflow.NewRunner(workflow.Config{Journal: j, Gate: approve})
	res, err := rn2.Run(ctx, wf, "incident-1", workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Completed); got != "[plan retrieve_runbook open_pr approve_deploy report]" || calls != 1 {
		t.Fatalf("completed %s with open_pr run %d time(s), want all steps and once", got, calls)
	}
}

// A step that keeps tables in the journal needs a journal with tables.
func TestStepWithTablesNeedsAJournalWithTables(t *testing.T) {
	wf, err := workflow.Incident()
	if err != nil {
		t.Fatal(err)
	}
	rn, _ := workflow.NewRunner(workflow.Config{Journal: memjournal.New(memjournal.Config{})})
	_, err = rn.Run(context.Background(), wf, "incident-1", workflow.RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "step open_pr keeps tables in the journal (EffectSchema), and the journal (*memjournal.Journal) has none") {
		t.Fatalf("err = %v", err)
	}
}
