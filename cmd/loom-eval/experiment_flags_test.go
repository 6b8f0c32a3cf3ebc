package main

import (
	"errors"
	"strings"
	"testing"
)

// A flag that configures one kind of target, given with another, would be
// silently ignored: the user believes the run used it. It is refused,
// naming the flag and the target it belongs to.
func TestExperimentRunRefusesAnotherTargetsFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cmd", "true", "--mcp-tool", "add"}, "--mcp-tool applies only to --mcp-cmd or --mcp-url"},
		{[]string{"--cmd", "true", "--mcp-env", "HOME"}, "--mcp-env applies only to --mcp-cmd"},
		{[]string{"--mcp-url", "http://127.0.0.1:1/mcp", "--mcp-tool", "add", "--mcp-env", "HOME"}, "--mcp-env applies only to --mcp-cmd"},
		{[]string{"--http", "http://127.0.0.1:1/", "--model", "m"}, "--model applies only to --openai"},
		{[]string{"--openai", "http://127.0.0.1:1/v1", "--body", "{}"}, "--body applies only to --http"},
		{[]string{"--a2a", "http://127.0.0.1:1/", "--shell"}, "--shell applies only to --cmd"},
		{[]string{"--cmd", "true", "--header", "A=b"}, "--header applies only to --http"},
	} {
		_, _, err := runLoom(t, append([]string{"experiment", "run", "--cases", "x.jsonl"}, tc.args...)...)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want exit 2 saying %q", tc.args, err, tc.want)
		}
	}
}
