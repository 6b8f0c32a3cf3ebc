// Command loom-eval is Loomwork's one binary: it ingests traces, scores them,
// replays journals, runs the sandbox and the retrieval ablation. This package
// parses flags and wires components; the logic lives in the packages it calls.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/loomwork/loomwork/agents/sandbox"
)

// Exit codes, documented in the README.
const (
	ExitOK         = 0
	ExitFailure    = 1 // the command ran and found a failure (e.g. a gate regression)
	ExitUsage      = 2 // bad flags, bad input files
	ExitRuntimeErr = 3 // an operational error (store unreachable, I/O)
)

// ExitError carries an exit code with its error.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// usageError marks an error caused by how the command was called.
func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Main holds the process's dependencies so tests can run commands in-process.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// NewMain returns a Main wired to the process.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
}

type command struct {
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

// commands is the table of subcommands; each lives in its own file.
func commands() map[string]command {
	return map[string]command{
		"serve":            {"run the OTLP collector, trace store and web UI", (*Main).runServe},
		"traces":           {"list or show stored traces (traces list | traces get ID)", (*Main).runTraces},
		"demo":             {"send a realistic agent trace to a running serve over OTLP", (*Main).runDemo},
		"rollup":           {"roll up traces from an OTLP/JSON file (critical path, cost)", (*Main).runRollup},
		"score":            {"score trials and compare against a baseline", (*Main).runScore},
		"gate":             {"apply a gate policy to a score comparison (exit 1 on regression)", (*Main).runGate},
		"replay":           {"re-run committed journals without a model key", (*Main).runReplay},
		"run":              {"run a reference agent (research or coding), journaled and traced", (*Main).runRun},
		"sandbox":          {"run a command in the sandbox (sandbox exec [limits] -- CMD ARGS)", (*Main).runSandbox},
		"ablate":           {"run the retrieval ablation on a judged dataset", (*Main).runAblate},
		"datasets":         {"build judged query sets from a project's docs and issues", (*Main).runDatasets},
		"context":          {"measure context-layer strategies under token budgets", (*Main).runContext},
		"clickhouse-local": {"run a local ClickHouse 26.7 from libchdb (for tests and the local mode)", (*Main).runClickHouseLocal},
	}
}

// Run executes the command named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		m.usage(cmds)
		if len(args) == 0 {
			return &ExitError{Code: ExitUsage, Err: errors.New("no command given")}
		}
		return nil
	}
	c, ok := cmds[args[0]]
	if !ok {
		return usageError("unknown command %q", args[0])
	}
	return c.run(m, ctx, args[1:])
}

func (m *Main) usage(cmds map[string]command) {
	fmt.Fprintln(m.Stderr, "loom-eval: Loomwork's evaluation and observability harness for LLM agents.")
	fmt.Fprintln(m.Stderr, "\nUsage: loom-eval COMMAND [flags]\n\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(m.Stderr, "  %-17s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(m.Stderr, "\nRun 'loom-eval COMMAND -h' for a command's flags.")
}

// newFlagSet returns a FlagSet that reports errors instead of exiting.
func (m *Main) newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("loom-eval "+name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(m.Stderr, "Usage: loom-eval %s\n\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, mapping flag errors to usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &ExitError{Code: ExitOK, Err: err}
		}
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return nil
}

func main() {
	// When this process is the sandbox's init helper (re-executed by
	// agents/sandbox), Init runs the helper and never returns.
	sandbox.Init()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := NewMain().Run(ctx, os.Args[1:])
	os.Exit(exitCode(err, os.Stderr))
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Code == ExitOK {
			return ExitOK
		}
		fmt.Fprintf(stderr, "loom-eval: %v\n", ee.Err)
		if ee.Code == ExitUsage {
			fmt.Fprintln(stderr, "Try: loom-eval help, or loom-eval COMMAND -h")
		}
		return ee.Code
	}
	fmt.Fprintf(stderr, "loom-eval: %v\n", err)
	return ExitRuntimeErr
}
