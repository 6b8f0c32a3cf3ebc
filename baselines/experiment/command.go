package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/loomwork/loomwork/datasets"
)

// Placeholders in a command's arguments.
const (
	// PlaceholderInput is replaced by the case's task.
	PlaceholderInput = "{input}"
	// PlaceholderInputFile is replaced by the path of a JSON file holding
	// {"experiment_id", "case_id", "trial", "task"}.
	PlaceholderInputFile = "{input_file}"
)

// CommandConfig runs the agent as a process per trial.
type CommandConfig struct {
	// Argv is the program and its arguments (no shell), or with Shell one
	// element: a script for /bin/sh -c.
	Argv  []string
	Shell bool
	// AnswerJSONPath, when set, reads the answer from this dotted path of
	// stdout parsed as JSON; otherwise the answer is stdout, trimmed.
	AnswerJSONPath string
	// Dir is the working directory ("" the runner's).
	Dir string
	// Env is the base environment (nil: the runner's), to which the
	// trial's trace context and OTLP settings are added.
	Env []string
	// TempDir holds {input_file} files ("" the system's).
	TempDir string
	// StderrTail bounds how much of stderr a failure quotes.
	StderrTail int
}

// Validate reports every problem with the configuration.
func (c *CommandConfig) Validate() error {
	var errs []error
	if len(c.Argv) == 0 || strings.TrimSpace(c.Argv[0]) == "" {
		errs = append(errs, errors.New("command: empty (give the agent's program and arguments, e.g. --cmd 'python3 agent.py')"))
	}
	if c.Shell && len(c.Argv) != 1 {
		errs = append(errs, fmt.Errorf("command: with a shell, one script (got %d arguments)", len(c.Argv)))
	}
	in, file := 0, 0
	for _, a := range c.Argv {
		in += strings.Count(a, PlaceholderInput)
		file += strings.Count(a, PlaceholderInputFile)
	}
	if in > 0 && file > 0 {
		errs = append(errs, fmt.Errorf("command: %s and %s: give the input one way", PlaceholderInput, PlaceholderInputFile))
	}
	if c.StderrTail < 0 {
		errs = append(errs, fmt.Errorf("stderr_tail: %d is negative", c.StderrTail))
	}
	return errors.Join(errs...)
}

// InputMode is how the case's task reaches the command: "stdin", "arg"
// ({input}) or "file" ({input_file}).
func (c *CommandConfig) InputMode() string {
	for _, a := range c.Argv {
		if strings.Contains(a, PlaceholderInputFile) {
			return "file"
		}
		if strings.Contains(a, PlaceholderInput) {
			return "arg"
		}
	}
	return "stdin"
}

// CommandTarget runs a command per trial.
type CommandTarget struct{ cfg CommandConfig }

// NewCommandTarget validates cfg; it starts nothing.
func NewCommandTarget(cfg CommandConfig) (*CommandTarget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.StderrTail == 0 {
		cfg.StderrTail = 2000
	}
	return &CommandTarget{cfg: cfg}, nil
}

// Describe implements Target.
func (t *CommandTarget) Describe() datasets.ExperimentTarget {
	d := strings.Join(t.cfg.Argv, " ")
	if t.cfg.Shell {
		d = "sh -c " + d
	}
	d += " (input on " + t.cfg.InputMode()
	if t.cfg.AnswerJSONPath != "" {
		d += "; answer at " + t.cfg.AnswerJSONPath + " of stdout)"
	} else {
		d += "; answer on stdout)"
	}
	return datasets.ExperimentTarget{Kind: "command", Description: d}
}

// FlushedOnReturn implements Flusher: the process has exited.
func (t *CommandTarget) FlushedOnReturn() bool { return true }

// Run implements Target: the process's start failing is a retryable
// infrastructure error; a non-zero exit, a signal or the trial's deadline
// is the agent's failure.
func (t *CommandTarget) Run(ctx context.Context, req Request) (Response, error) {
	argv, cleanup, err := t.argv(req)
	if err != nil {
		return Response{}, &InfraError{Err: err}
	}
	defer cleanup()
	var cmd *exec.Cmd
	if t.cfg.Shell {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", argv[0])
	} else {
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	}
	cmd.Dir = t.cfg.Dir
	base := t.cfg.Env
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = req.Trace.Env(base)
	if t.cfg.InputMode() == "stdin" {
		cmd.Stdin = strings.NewReader(req.Case.Task)
	}
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: t.cfg.StderrTail}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return Response{}, &InfraError{Retryable: true, Err: fmt.Errorf("start %s: %w", argv[0], err)}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return Response{Failure: fmt.Sprintf("no answer before the trial's deadline (%v)%s", context.Cause(ctx), stderr.suffix())}, nil
	}
	if err != nil {
		return Response{Failure: fmt.Sprintf("%s: %v%s", argv[0], err, stderr.suffix())}, nil
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if len(out) == 0 {
		return Response{}, nil
	}
	if t.cfg.AnswerJSONPath == "" {
		return Response{Answer: string(out)}, nil
	}
	ans, err := answerAt(out, t.cfg.AnswerJSONPath)
	if err != nil {
		return Response{Failure: fmt.Sprintf("stdout: %v", err)}, nil
	}
	return Response{Answer: ans}, nil
}

// argv substitutes the placeholders; cleanup removes an input file.
func (t *CommandTarget) argv(req Request) ([]string, func(), error) {
	argv := append([]string(nil), t.cfg.Argv...)
	cleanup := func() {}
	switch t.cfg.InputMode() {
	case "arg":
		for i := range argv {
			argv[i] = strings.ReplaceAll(argv[i], PlaceholderInput, req.Case.Task)
		}
	case "file":
		f, err := os.CreateTemp(t.cfg.TempDir, "loomwork-input-*.json")
		if err != nil {
			return nil, cleanup, fmt.Errorf("input file: %w", err)
		}
		cleanup = func() { os.Remove(f.Name()) }
		b, _ := json.Marshal(map[string]any{"experiment_id": req.ExperimentID, "case_id": req.Case.ID, "trial": req.Trial, "task": req.Case.Task})
		if _, err := f.Write(b); err != nil {
			f.Close()
			return nil, cleanup, fmt.Errorf("input file %s: %w", f.Name(), err)
		}
		if err := f.Close(); err != nil {
			return nil, cleanup, fmt.Errorf("input file %s: %w", f.Name(), err)
		}
		path, _ := filepath.Abs(f.Name())
		for i := range argv {
			argv[i] = strings.ReplaceAll(argv[i], PlaceholderInputFile, path)
		}
	}
	return argv, cleanup, nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) suffix() string {
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}
