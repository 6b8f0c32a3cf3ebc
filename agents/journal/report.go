package journal

import (
	"fmt"

	"github.com/loomwork/loomwork/agents/llm"
)

// ReplayReport is what a replay (or a rescore) concludes about one
// recorded run: how much of the journal the re-run matched, where it
// diverged, which re-executed results differ, and the run's outcome as
// recorded. The replay engine (package replay) writes it; the UI and the
// scorer read it as a format.
type ReplayReport struct {
	File     string `json:"file,omitempty"`
	RunID    string `json:"run_id"`
	Agent    string `json:"agent"`
	CaseID   string `json:"case_id,omitempty"`
	Trial    int    `json:"trial"`
	Rescored bool   `json:"rescored,omitempty"` // from recorded events alone, nothing executed
	// Label is the label of the recorded model answers ("scripted", "live").
	Label string `json:"model_label"`
	Model string `json:"model,omitempty"`

	RecordedEvents int `json:"recorded_events"`
	MatchedEvents  int `json:"matched_events"` // replayed events identical in kind, step, tool, call id and argument hash
	// Complete is false when the journal ends before run_finished (a run
	// that crashed and was never resumed): the replay checks the recorded
	// prefix and stops there.
	Complete bool `json:"complete"`
	// Policy says what re-decided the replay's tool calls: "recorded NAME"
	// (the policy the journal records it was decided under), "given" (the
	// replay's own), or "" (none: the run was recorded without one, or the
	// replay was told to use none).
	Policy string `json:"policy,omitempty"`

	Divergence  *DivergenceError `json:"divergence,omitempty"`
	DivergeLine int              `json:"divergence_line,omitempty"` // the journal line of the divergent event
	ResultDiffs []ResultDiff     `json:"result_diffs,omitempty"`

	Answer           string    `json:"answer"`
	Citations        []string  `json:"citations,omitempty"`
	Documents        []string  `json:"documents,omitempty"`
	ToolsCalled      []string  `json:"tools_called,omitempty"`
	Steps            int       `json:"steps"`
	StepLimitReached bool      `json:"step_limit_reached,omitempty"`
	Usage            llm.Usage `json:"usage"`
	DurationMS       float64   `json:"duration_ms"` // recorded: run_started to run_finished
	ModelCalls       int       `json:"model_calls"` // calls to a model: always 0
	ToolRuns         int       `json:"tool_runs"`
	TraceID          string    `json:"trace_id,omitempty"`
	Database         string    `json:"database,omitempty"`
}

// OK reports whether the replay found no divergence and no differing result.
func (r *ReplayReport) OK() bool { return r.Divergence == nil && len(r.ResultDiffs) == 0 }

// ResultDiff is a re-executed tool whose result differs from the journal.
type ResultDiff struct {
	Code     string `json:"code"` // CodeResultDiffers
	Seq      int64  `json:"seq"`
	Line     int    `json:"line,omitempty"`
	Step     int    `json:"step"`
	Tool     string `json:"tool"`
	CallID   string `json:"call_id"`
	Recorded string `json:"recorded"`
	Replayed string `json:"replayed"`
}

func (d ResultDiff) String() string {
	return fmt.Sprintf("[%s] tool result differs at seq %d (step %d, %s call %s): recorded %q, replayed %q",
		d.Code, d.Seq, d.Step, d.Tool, d.CallID, d.Recorded, d.Replayed)
}
