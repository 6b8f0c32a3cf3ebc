package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/loomwork/loomwork/agents/policy"
)

// runAudit: audit verify FILE — checks a policy audit log's hash chain.
func (m *Main) runAudit(_ context.Context, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval audit verify FILE [--json]\nChecks the hash chain of a policy audit log; exits 1 naming the first edited, dropped or reordered entry.")
		return usageError("audit: want a subcommand: verify")
	}
	fs := m.newFlagSet("audit verify", "audit verify FILE [--json]")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("audit verify: want one audit log file, got %q", fs.Args())
	}
	file := fs.Arg(0)
	f, err := os.Open(file)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("audit verify: %w", err)}
	}
	defer f.Close()
	entries, err := policy.ReadAudit(f, file)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	verr := policy.VerifyAudit(entries)
	if *asJSON {
		out := map[string]any{"file": file, "entries": len(entries), "ok": verr == nil}
		var ae *policy.AuditError
		if errors.As(verr, &ae) {
			out["line"], out["seq"], out["problem"] = ae.Line, ae.Seq, ae.What
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(m.Stdout, string(b))
	} else if verr == nil {
		fmt.Fprintf(m.Stdout, "%s: %d entries, chain verifies\n", file, len(entries))
	}
	if verr != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: chain broken at %w", file, verr)}
	}
	return nil
}

// policyGuard builds the runtime guard of a policy rules file.
func policyGuard(file string) (*policy.Guard, error) {
	r, _, err := policy.RulesNamed(file)
	if err != nil {
		return nil, usageError("%v", err)
	}
	e, err := policy.NewEngine(r)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return policy.NewGuard(policy.GuardConfig{Engine: e, Rules: r, Name: file})
}
