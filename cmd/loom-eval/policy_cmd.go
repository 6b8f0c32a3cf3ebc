package main

import (
	"context"
	"fmt"

	"github.com/loomwork/loomwork/agents/policy"
)

// runPolicy: policy default | policy check FILE — the built-in default
// policy, printed as the file it is (docs/policy.md holds the same bytes),
// and a rules file checked as --policy would read it.
func (m *Main) runPolicy(_ context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "default" && args[0] != "check") {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval policy default          print the built-in default policy (what --policy default, and no --policy, applies)\n       loom-eval policy check FILE       read a rules file as --policy does; exit 2 naming the problem")
		if len(args) > 0 && isHelp(args[0]) {
			return nil
		}
		return usageError("policy: want a subcommand: default or check")
	}
	fs := m.newFlagSet("policy "+args[0], "policy default | policy check FILE")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if args[0] == "default" {
		if fs.NArg() != 0 {
			return usageError("policy default: want no arguments, got %q", fs.Args())
		}
		_, err := m.Stdout.Write(policy.DefaultJSON())
		return err
	}
	if fs.NArg() != 1 {
		return usageError("policy check: want one rules file, got %q", fs.Args())
	}
	r, err := policy.LoadRules(fs.Arg(0))
	if err != nil {
		return usageError("policy check: %v", err)
	}
	fmt.Fprintf(m.Stdout, "%s: %d rule(s), %d tool spec(s); valid\n", fs.Arg(0), len(r.Rules), len(r.Tools))
	return nil
}
