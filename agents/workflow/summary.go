package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
)

// Step states of a Summary.
const (
	StateNotStarted = "not started"
	StateRunning    = "running" // started, no outcome yet (or the process died: resuming journals interrupted)
	StateRetrying   = "retrying"
	StateSucceeded  = "succeeded"
	StateFailed     = "failed"
	StateWaiting    = "waiting for approval"
	StateApproved   = "approved" // the gate's answer is in; the next run goes on through it
	StateDenied     = "denied"
)

// Run states of a Summary.
const (
	RunCompleted = "completed"
	RunSuspended = "suspended"
	RunDenied    = "denied"
	RunFailed    = "failed"
	RunPending   = "in progress" // neither finished nor waiting: running, crashed, or resumable
)

// StepState is one step of a run as its journal shows it.
type StepState struct {
	Step     string `json:"step"`
	Kind     Kind   `json:"kind"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"` // attempts started (a replay is not one)
	Retries  int    `json:"retries"`  // retries declared
	Error    string `json:"error,omitempty"`
	Prompt   string `json:"prompt,omitempty"`
	Approver string `json:"approver,omitempty"`
	// Output is the recorded result's output (a file workflow's step), or
	// the result as JSON.
	Output string `json:"output,omitempty"`
}

// Summary is a workflow run as its journal shows it: per-step state, the
// run's state, and the traces of the processes that ran it.
type Summary struct {
	RunID    string      `json:"run_id"`
	Workflow string      `json:"workflow"`
	Input    string      `json:"input,omitempty"`
	State    string      `json:"state"`
	Started  time.Time   `json:"started"`
	Updated  time.Time   `json:"updated"`
	Steps    []StepState `json:"steps"`
	// TraceIDs are the traces of the processes that ran the run, oldest
	// first (empty when none exported spans).
	TraceIDs []string `json:"trace_ids,omitempty"`
}

// Summarize reads run's journal into a Summary; ok is false when the run
// is not a workflow run (no workflow_started event).
func Summarize(ctx context.Context, j journal.Journal, runID string) (s Summary, ok bool, err error) {
	evs, err := j.Events(ctx, runID)
	if err != nil {
		return Summary{}, false, fmt.Errorf("run %s: %w", runID, err)
	}
	s = Summary{RunID: runID}
	idx := map[string]int{}
	for _, e := range evs {
		switch e.Kind {
		case journal.KindWorkflowStarted:
			var st Started
			if err := json.Unmarshal(e.Payload, &st); err != nil {
				return Summary{}, false, fmt.Errorf("run %s seq %d: decode workflow_started: %w", runID, e.Seq, err)
			}
			ok, s.Workflow, s.Input, s.Started = true, st.Workflow, st.Input, e.Time
			for _, sp := range st.Steps {
				idx[sp.Name] = len(s.Steps)
				s.Steps = append(s.Steps, StepState{Step: sp.Name, Kind: sp.Kind, State: StateNotStarted, Retries: sp.Retries})
			}
		case journal.KindApproval:
			var a Approval
			if json.Unmarshal(e.Payload, &a) == nil {
				if i, known := idx[a.Step]; known && s.Steps[i].State == StateWaiting {
					s.Steps[i].State, s.Steps[i].Approver = StateApproved, a.Approver
					if !a.Approved {
						s.Steps[i].State = StateDenied
					}
				}
			}
		case journal.KindStep:
			var se StepEvent
			if err := json.Unmarshal(e.Payload, &se); err != nil {
				return Summary{}, false, fmt.Errorf("run %s seq %d: decode step event: %w", runID, e.Seq, err)
			}
			if i, known := idx[se.Step]; known {
				s.Steps[i].apply(se)
			}
			if se.TraceID != "" && !slices.Contains(s.TraceIDs, se.TraceID) {
				s.TraceIDs = append(s.TraceIDs, se.TraceID)
			}
		}
		s.Updated = e.Time
	}
	if !ok {
		return Summary{}, false, nil
	}
	s.State = runStateOf(s.Steps)
	return s, true, nil
}

func (st *StepState) apply(se StepEvent) {
	switch se.Event {
	case StatusStarted:
		st.State, st.Attempts, st.Error = StateRunning, max(st.Attempts, se.Attempt), ""
	case StatusFailed:
		st.State, st.Error = StateFailed, se.Error
	case StatusRetried:
		st.State = StateRetrying
	case StatusSucceeded, StatusReplayed:
		st.State, st.Error = StateSucceeded, ""
		st.Output = resultOutput(se.Result)
	case StatusApprovalRequired:
		st.State, st.Prompt = StateWaiting, se.Prompt
	case StatusDenied:
		st.State, st.Approver = StateDenied, se.Approver
	}
}

// resultOutput is a FileResult's output, else the result's JSON.
func resultOutput(raw json.RawMessage) string {
	var r FileResult
	if json.Unmarshal(raw, &r) == nil && r.Output != "" {
		return r.Output
	}
	return string(raw)
}

func runStateOf(steps []StepState) string {
	done := 0
	for _, s := range steps {
		switch s.State {
		case StateDenied:
			return RunDenied
		case StateWaiting:
			return RunSuspended
		case StateFailed:
			return RunFailed
		case StateSucceeded:
			done++
		}
	}
	if done == len(steps) {
		return RunCompleted
	}
	return RunPending
}

// Summaries summarizes every workflow run of the journal, by run id
// (agent runs, which have no workflow_started event, are left out). It
// reads every run's events.
func Summaries(ctx context.Context, j RunLister) ([]Summary, error) {
	runs, err := j.Runs(ctx)
	if err != nil {
		return nil, err
	}
	var out []Summary
	for _, id := range runs {
		s, ok, err := Summarize(ctx, j, id)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}
