package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/securityeval"
)

// The markers between which security-eval --surfaces writes its table.
const (
	surfacesBegin = "<!-- surfaces-table:begin -->\n"
	surfacesEnd   = "<!-- surfaces-table:end -->"
)

// runSecurityEvalSurfaces runs the injection suite across surfaces
// (securityeval.RunSurfaces: every payload through real MCP, A2A and
// journal components, policy off and on, with benign controls), checks
// the policy-on runs' audit log (its chain, and that it holds exactly the
// journal's decisions), and prints (or writes into doc) the table.
func (m *Main) runSecurityEvalSurfaces(ctx context.Context, doc, work string) error {
	dir, removeDir, err := securityEvalWorkDir(work)
	if err != nil {
		return err
	}
	defer removeDir()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(dir, "surfaces.journal.db")})
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("security-eval --surfaces: journal in %s: %w", dir, err)}
	}
	defer j.Shutdown(context.WithoutCancel(ctx))
	audit := filepath.Join(dir, "surfaces.audit.jsonl")
	key, err := policy.GenerateAuditKey() // the log lives as long as this command
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("security-eval --surfaces: %w", err)}
	}
	trials, err := securityeval.RunSurfaces(ctx, securityeval.SurfacesConfig{Journal: j, AuditFile: audit, AuditKey: key, Controls: true})
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("security-eval --surfaces: %w", err)}
	}
	entries, err := securityeval.VerifyAuditFile(audit, key)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("security-eval --surfaces: the audit log does not verify: %w", err)}
	}
	var onRuns []string
	for _, t := range trials {
		if t.Guard == securityeval.GuardOn {
			onRuns = append(onRuns, t.RunID)
		}
	}
	if err := securityeval.CrossCheckAudit(ctx, j, onRuns, entries); err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("security-eval --surfaces: the audit log does not match the journal: %w", err)}
	}
	table := securityeval.MarkdownSurfaces(trials)
	fmt.Fprint(m.Stdout, table)
	fmt.Fprintf(m.Stderr, "security-eval --surfaces: %d trials; the audit log (%d entries) verifies and matches the journal\n", len(trials), len(entries))
	if doc == "" {
		return nil
	}
	if err := replaceBetweenMarkers("security-eval --surfaces", doc, surfacesBegin, surfacesEnd, table); err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "security-eval --surfaces: table written to %s\n", doc)
	return nil
}
