package workflow

import (
	"context"

	"github.com/loomwork/loomwork/agents/runtime"
)

// AgentResult is the recorded result of an agent step.
type AgentResult struct {
	RunID     string   `json:"run_id"`
	Answer    string   `json:"answer"`
	Citations []string `json:"citations,omitempty"`
	Steps     int      `json:"steps"`
}

// AgentAction makes a whole model-directed agent loop one step: it runs
// agent on rt with the task built from the step's input, under the run id
// "WORKFLOWRUN/STEP" — so a crash inside the loop resumes the loop from
// its own journal (recorded model answers and tool results reused), and a
// completed loop is replayed as the step's recorded result, never run
// again.
func AgentAction(rt *runtime.Runtime, agent runtime.Agent, task func(in Input) runtime.Task) func(context.Context, Input) (any, error) {
	return func(ctx context.Context, in Input) (any, error) {
		t := task(in)
		t.RunID = in.RunID + "/" + in.Step
		res, err := rt.Run(ctx, agent, t)
		if err != nil {
			return nil, err
		}
		return AgentResult{RunID: t.RunID, Answer: res.Answer, Citations: res.Citations, Steps: res.Steps}, nil
	}
}
