package main

import (
	"flag"

	"github.com/loomwork/loomwork/baselines/experiment"
)

// protocolTargetFlags are `experiment run`'s A2A and MCP target flags.
type protocolTargetFlags struct {
	a2a                                     string
	mcpCmd, mcpURL, mcpTool, mcpArgTemplate string
	mcpEnv                                  stringList
}

func (f *protocolTargetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.a2a, "a2a", "", "the agent over A2A: its Agent Card URL (…/.well-known/agent-card.json) or base URL; the task is sent as a message, the answer is the completed task's artifacts")
	fs.StringVar(&f.mcpCmd, "mcp-cmd", "", "the agent as a tool of a stdio MCP server started per trial (argv split like a shell would); its environment is HOME, LOGNAME, PATH, SHELL, TERM, USER, the trace context and OTEL_* settings, and --mcp-env")
	fs.StringVar(&f.mcpURL, "mcp-url", "", "the agent as a tool of a Streamable HTTP MCP server at this URL")
	fs.StringVar(&f.mcpTool, "mcp-tool", "", "the tool --mcp-cmd or --mcp-url calls per trial; the answer is the result's text")
	fs.StringVar(&f.mcpArgTemplate, "mcp-arg-template", "", `the tool's arguments, a Go template of a JSON object (default `+experiment.DefaultMCPArgTemplate+`; .Task, .CaseID, .Trial, .ExperimentID)`)
	fs.Var(&f.mcpEnv, "mcp-env", "a variable of this environment the --mcp-cmd server also gets (repeatable; nothing else of it is passed)")
}

// given is how many targets these flags name.
func (f *protocolTargetFlags) given() int {
	n := 0
	for _, s := range []string{f.a2a, f.mcpCmd, f.mcpURL} {
		if s != "" {
			n++
		}
	}
	return n
}

// target builds the A2A or MCP target the flags name (nil if none).
func (f *protocolTargetFlags) target(getenv func(string) string) (experiment.Target, error) {
	switch {
	case f.a2a != "":
		return experiment.NewA2ATarget(experiment.A2AConfig{CardURL: f.a2a})
	case f.mcpCmd != "" || f.mcpURL != "":
		var argv []string
		if f.mcpCmd != "" {
			var err error
			if argv, err = splitArgs(f.mcpCmd); err != nil {
				return nil, usageError("--mcp-cmd: %v", err)
			}
		}
		return experiment.NewMCPTarget(experiment.MCPConfig{Argv: argv, URL: f.mcpURL, Tool: f.mcpTool,
			ArgTemplate: f.mcpArgTemplate, PassEnv: f.mcpEnv, Getenv: getenv})
	}
	return nil, nil
}
