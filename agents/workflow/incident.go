package workflow

import (
	"context"
	"errors"
)

// PullRequestsDDL is the table the incident workflow's open_pr step writes:
// one row per side-effect key, so the data itself shows how often the
// effect happened.
const PullRequestsDDL = `CREATE TABLE IF NOT EXISTS workflow_pull_requests (
  run_id TEXT NOT NULL,
  key    TEXT NOT NULL,
  number INTEGER NOT NULL,
  url    TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
) WITHOUT ROWID`

// Incident is the reference design's incident workflow (plan →
// retrieve_runbook → open_pr with key pr:checkout-fix → approve_deploy →
// report) with deterministic actions, so `loom-eval workflow run incident`
// shows a durable run, a suspended approval and a resume without a model.
// open_pr writes its pull request into the journal database inside the
// step's transaction.
func Incident() (*Workflow, error) {
	return New("incident", []Step{
		{Name: "plan", Kind: KindModel, Action: func(context.Context, Input) (any, error) {
			return "diagnose checkout failures", nil
		}},
		{Name: "retrieve_runbook", Kind: KindTool, Requires: []string{"plan"}, Action: func(context.Context, Input) (any, error) {
			return []string{"runbook://checkout-timeout"}, nil
		}},
		{Name: "open_pr", Kind: KindTool, Requires: []string{"retrieve_runbook"}, Key: "pr:checkout-fix", EffectSchema: PullRequestsDDL,
			Action: func(ctx context.Context, in Input) (any, error) {
				if in.Tx == nil {
					return nil, errors.New("open_pr must run in the journal transaction")
				}
				const url = "https://example.invalid/pr/41"
				if err := in.Tx.Exec(ctx, `INSERT INTO workflow_pull_requests(key, run_id, number, url) VALUES (?,?,?,?)`, in.Key, in.RunID, 41, url); err != nil {
					return nil, err
				}
				return map[string]any{"pr": 41, "url": url}, nil
			}},
		{Name: "approve_deploy", Kind: KindApproval, Requires: []string{"open_pr"}, Action: func(_ context.Context, in Input) (any, error) {
			return "deploy approved by " + in.Approval.Approver, nil
		}},
		{Name: "report", Kind: KindModel, Requires: []string{"approve_deploy"}, Action: func(context.Context, Input) (any, error) {
			return "reported", nil
		}},
	})
}
