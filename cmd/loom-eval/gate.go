package main

import (
	"context"
	"fmt"
	"os"

	"github.com/loomwork/loomwork/scorer/gate"
)

// runGate applies a policy to a candidate run compared with a baseline.
// Exit 0: the gate passed; 1: it failed (a regression); 2: bad input.
func (m *Main) runGate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("gate", "gate --policy POLICY.json --candidate TRIALS.jsonl --baseline TRIALS.jsonl [--cases CASES.jsonl] [--format text|json|markdown|junit]")
	var f scoreFlags
	f.register(m, fs)
	refuseRemoved(fs)
	policyPath := fs.String("policy", "", "gate policy JSON (required; see docs/scoring.md)")
	candidate := fs.String("candidate", "", "candidate trials JSONL (required)")
	baseline := fs.String("baseline", "", "baseline trials JSONL (checks that compare need it)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) != 0 {
		return usageError("gate: unexpected arguments %q (use --candidate and --baseline)", pos)
	}
	if *policyPath == "" || *candidate == "" {
		return usageError("gate: --policy and --candidate are required")
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	policy, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	return m.evaluate(ctx, &f, cfg, *candidate, *baseline, policy)
}

// loadPolicy reads and parses the gate policy file at path (the scorer does
// no I/O). An unreadable or invalid file is a usage error (exit 2).
func loadPolicy(path string) (*gate.Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("read policy: %w", err)}
	}
	p, err := gate.ParseNamed(b, path)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	return p, nil
}
