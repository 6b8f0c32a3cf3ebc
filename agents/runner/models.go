package runner

import (
	"fmt"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
)

// ScriptedPolicies are a reference agent's own scripted policies, one per
// trial (for Config.Models): trial t of the research policy uses query
// formulation t mod 3 (research.QueryStyleForTrial), the coding policy
// plays its tasks' trial-t script. counter computes the usage they report.
func ScriptedPolicies(agent string, counter contextlayer.Counter) (func(trial int) runtime.Model, error) {
	switch agent {
	case research.Name:
		return func(trial int) runtime.Model {
			return research.Policy(research.PolicyConfig{QueryStyle: research.QueryStyleForTrial(trial), Counter: counter})
		}, nil
	case coding.Name:
		return func(trial int) runtime.Model {
			return coding.Policy(coding.PolicyConfig{Trial: trial, Counter: counter})
		}, nil
	}
	return nil, fmt.Errorf("runner: no scripted policy for agent %q (want %s or %s)", agent, research.Name, coding.Name)
}
