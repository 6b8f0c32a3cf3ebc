package web

import (
	"context"
	"net/http"
	"time"
)

// Workflows lists the workflow runs of a journal as the UI sees them. cmd
// wires it to the journal beside the approval queue (agents/workflow's
// summaries); the UI never opens the journal itself.
type Workflows interface {
	WorkflowRuns(ctx context.Context) ([]WorkflowRun, error)
}

// WorkflowRun is one workflow run: its state, each step's, and the traces
// of the processes that ran it.
type WorkflowRun struct {
	RunID    string
	Workflow string
	// State is completed, suspended, denied, failed or in progress.
	State   string
	Started time.Time
	Updated time.Time
	Steps   []WorkflowStep
	// TraceIDs are the traces the run's processes recorded, oldest first
	// (exported only when the run was sent here with --otlp-endpoint).
	TraceIDs []string
}

// WorkflowStep is one step of a WorkflowRun.
type WorkflowStep struct {
	Step, Kind, State string
	Attempts, Retries int
	// Detail is the step's error, an approval's prompt or approver, or its
	// output, clipped.
	Detail string
}

// WorkflowsView is the /workflows page.
type WorkflowsView struct {
	Configured bool
	Runs       []WorkflowRun
	// Stored says which trace ids this server's store holds (the others
	// were not exported here).
	Stored map[string]bool
	Err    string
}

func (s *Server) registerWorkflows() {
	s.mux.HandleFunc("GET /workflows", s.workflowsPage)
}

func (s *Server) workflowsPage(w http.ResponseWriter, r *http.Request) {
	v := WorkflowsView{Configured: s.deps.Workflows != nil, Stored: map[string]bool{}}
	if v.Configured {
		runs, err := s.deps.Workflows.WorkflowRuns(r.Context())
		if err != nil {
			v.Err = err.Error()
		}
		// Newest first: the run a user just started is on top.
		for i := len(runs) - 1; i >= 0; i-- {
			v.Runs = append(v.Runs, runs[i])
		}
		for _, run := range runs {
			for _, id := range run.TraceIDs {
				if _, err := s.deps.Traces.ResolveTraceID(r.Context(), id); err == nil {
					v.Stored[id] = true
				}
			}
		}
	}
	render(w, r, WorkflowsPage(v))
}

// stateClass is the CSS class of a run's or a step's state.
func stateClass(state string) string {
	switch state {
	case "completed", "succeeded", "approved":
		return "pass"
	case "failed", "denied":
		return "fail"
	case "suspended", "waiting for approval", "retrying", "running":
		return "wf-warn"
	}
	return "dim"
}
