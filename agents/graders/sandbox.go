package graders

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/scorer/grade"
)

// Runner is the part of *sandbox.Runner a code grader needs.
type Runner interface {
	Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error)
}

// Sandbox runs code graders in the sandbox: every request in a fresh
// workspace (mounted at /work) and a fresh sandbox, under Limits — by
// default the coding agent's (no network, no host filesystem beyond the
// interpreter, 10 s wall, 5 s CPU, 256 MiB), with at least MinOutput of
// output. scorer/grade sends a code grader's two runs (the grader alone,
// then the solution under its driver) as two requests, so they never
// share a workspace, a process or a sandbox.
// It implements grade.CodeRunner.
type Sandbox struct {
	Runner Runner
	// Limits override the runner's limits field by field.
	Limits sandbox.Limits
	// TempDir holds the workspaces ("" is os.TempDir()).
	TempDir string
}

var _ grade.CodeRunner = (*Sandbox)(nil)

// MinOutput is the least stdout and stderr a grader's run may keep, each.
const MinOutput = 64 << 20

// RunCode implements grade.CodeRunner.
func (s *Sandbox) RunCode(ctx context.Context, req grade.CodeRequest) (grade.CodeResult, error) {
	if s.Runner == nil {
		return grade.CodeResult{}, errors.New("graders: sandbox runner is nil")
	}
	ws, err := os.MkdirTemp(s.TempDir, "loomwork-grader-")
	if err != nil {
		return grade.CodeResult{}, fmt.Errorf("graders: workspace: %w", err)
	}
	defer os.RemoveAll(ws)
	for p, content := range req.Files {
		if err := writeFile(ws, p, content); err != nil {
			return grade.CodeResult{}, err
		}
	}
	lim := s.Limits
	if lim.Output < MinOutput {
		// The grader's verdict, its plan and the solution's results travel
		// on stdout: a limit meant for an agent's program would cut them.
		lim.Output = MinOutput
	}
	res, err := s.Runner.Run(ctx, sandbox.Request{Command: req.Command, Workspace: ws, Stdin: req.Stdin, Limits: lim})
	if err != nil {
		return grade.CodeResult{}, fmt.Errorf("graders: %w", err)
	}
	return grade.CodeResult{Stdout: res.Stdout, Stderr: res.Stderr, Exited: res.Exited, ExitCode: res.ExitCode,
		Reason: string(res.Reason), Evidence: res.Evidence}, nil
}

// writeFile writes one workspace file, refusing a path that is not clean
// and relative (the grade package checks too; the host side never trusts
// it).
func writeFile(ws, p string, content []byte) error {
	clean := path.Clean(p)
	if p == "" || path.IsAbs(p) || clean != p || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("graders: file %q: want a clean relative path", p)
	}
	full := filepath.Join(ws, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return fmt.Errorf("graders: file %s: %w", p, err)
	}
	if err := os.WriteFile(full, content, 0o644); err != nil {
		return fmt.Errorf("graders: file %s: %w", p, err)
	}
	return nil
}
