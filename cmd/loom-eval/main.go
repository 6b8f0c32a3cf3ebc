// Command loom-eval is Loomwork's one binary: it ingests traces, scores them,
// replays journals, runs the sandbox and the retrieval ablation. This package
// parses flags and wires components; the logic lives in the packages it calls.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/loomwork/loomwork/internal/service"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/store"
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

// isHelp reports whether arg, in a subcommand's place, asks for help.
func isHelp(arg string) bool { return arg == "-h" || arg == "--help" || arg == "help" }

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
	// Prog is how the user ran loom-eval ("" is "loom-eval"), for
	// commands printed to be run next: bin/loom-eval when run by that
	// path (make demo, before make install), loom-eval from the PATH.
	Prog string

	// width is what human tables fit (0: no limit), set by Run from
	// Stdout before it is wrapped: see outputWidth.
	width int
}

// NewMain returns a Main wired to the process.
func NewMain() *Main {
	return &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Prog: progName(os.Args[0])}
}

// progName is how to run this binary again from the same folder: argv[0]
// as typed when it names a path (bin/loom-eval), else loom-eval (found on
// the PATH).
func progName(arg0 string) string {
	if strings.ContainsRune(arg0, '/') {
		return arg0
	}
	return "loom-eval"
}

// prog is Prog, or loom-eval.
func (m *Main) prog() string {
	if m.Prog == "" {
		return "loom-eval"
	}
	return m.Prog
}

type command struct {
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

// commands is the table of subcommands; each lives in its own file.
func commands() map[string]command {
	return map[string]command{
		"serve":            {"run the OTLP collector, trace store and web UI", (*Main).runServe},
		"keys":             {"projects and their API keys: keys create --project P [--kind read], keys list, keys revoke ID, keys project P --retention 30d", (*Main).runKeys},
		"traces":           {"list or show stored traces (traces list | traces get ID)", (*Main).runTraces},
		"sessions":         {"list sessions (traces of one conversation) or show one with its turns (sessions list | sessions get ID)", (*Main).runSessions},
		"cases":            {"stored traces become cases and trials (cases from-traces)", (*Main).runCases},
		"demo":             {"send a realistic agent trace to a running serve over OTLP", (*Main).runDemo},
		"rollup":           {"roll up traces from an OTLP/JSON file (critical path, cost)", (*Main).runRollup},
		"score":            {"score trials and compare against a baseline", (*Main).runScore},
		"experiment":       {"run your agent over a case file, cases × trials, traced, graded and gated (experiment run | list | show ID | compare A B)", (*Main).runExperiment},
		"grade":            {"run a case file's graders on trials and write the trials with their verdicts", (*Main).runGrade},
		"gate":             {"apply a gate policy to a score comparison (exit 1 on regression)", (*Main).runGate},
		"calibrate":        {"measure a gate policy on simulated random agents: false alarms, detection, coverage (exit 1 if a requirement fails)", (*Main).runCalibrate},
		"plan":             {"how many cases × trials detect a given pass-rate drop, simulated from a baseline", (*Main).runPlan},
		"ci":               {"the CI recipe: strict replay, a fresh scripted run, the gate against the baseline", (*Main).runCI},
		"replay":           {"re-run committed journals without a model key", (*Main).runReplay},
		"suite":            {"run an eval suite (cases × trials) on many worker processes through the coordinator (suite run | suite status)", (*Main).runSuite},
		"schedule":         {"scheduled evaluations: occurrences, pause switch, the product's routines (schedule tick|deliver|pause|resume|list|run)", (*Main).runSchedule},
		"worker":           {"claim and run a suite's trials from its coordinator database (worker --coordinator OUT/coord.db)", (*Main).runWorker},
		"run":              {"run a reference agent (research or coding), journaled and traced", (*Main).runRun},
		"sandbox":          {"run a command in the sandbox (sandbox exec [limits] -- CMD ARGS)", (*Main).runSandbox},
		"ablate":           {"run the retrieval ablation on a judged dataset", (*Main).runAblate},
		"datasets":         {"keep versioned case datasets; build judged query sets from a project's docs and issues", (*Main).runDatasets},
		"context":          {"measure context-layer strategies under token budgets", (*Main).runContext},
		"memory-ablate":    {"memory off vs on vs stale for the research agent on a multi-run task set from the judged data (scripted; --doc docs/context.md rewrites its section)", (*Main).runMemoryAblate},
		"memory":           {"the memory store between runs (memory list | show KEY | forget KEY|--decayed | distill RUN-ID)", (*Main).runMemory},
		"labels":           {"add human pass/fail labels and report graders' agreement with them (Cohen's κ)", (*Main).runLabels},
		"spool":            {"repair a corrupt ingest spool (spool repair DIR)", (*Main).runSpool},
		"workflow":         {"run or resume a durable step graph (workflow run incident|FILE --run ID), or show a run (workflow status ID)", (*Main).runWorkflow},
		"approve":          {"approve a run waiting for a human: a workflow gate or a held tool call (approve RUN ID --approver WHO)", (*Main).runApprove},
		"deny":             {"deny a run's approval: a workflow stops there, an agent is told who denied it and why (deny RUN ID --approver WHO --reason TEXT)", (*Main).runDeny},
		"approvals":        {"list the runs waiting for a human: workflow gates and held tool calls, with the tool, arguments and why (approvals [--json])", (*Main).runApprovals},
		"policy":           {"the authorization policy of run, suite run, ci, a2a/mcp serve and workflow run: print the built-in default (policy default) or check a rules file (policy check FILE)", (*Main).runPolicy},
		"audit":            {"verify a policy audit log's hash chain, naming any edited, dropped or reordered entry (audit verify FILE)", (*Main).runAudit},
		"security-eval":    {"the prompt-injection suite: both reference agents, planted instructions, scripted models, policy off/on/strict (table of attack success and utility)", (*Main).runSecurityEval},
		"a2a":              {"serve a reference agent over the Agent2Agent protocol (a2a serve --agent research|coding), see docs/protocols.md", (*Main).runA2A},
		"mcp":              {"serve Loomwork's tools over the Model Context Protocol (mcp serve [--http ADDR]), see docs/protocols.md", (*Main).runMCP},
		"clickhouse-local": {"run a local ClickHouse 26.7 from libchdb (for tests and the local mode)", (*Main).runClickHouseLocal},
		"version":          {"print the module version and the commit this binary was built from (also --version)", (*Main).runVersion},
	}
}

// Run executes the command named by args[0].
func (m *Main) Run(ctx context.Context, args []string) error {
	cmds := commands()
	if len(args) > 1 && args[0] == "help" {
		// loom-eval help CMD [SUB] is loom-eval CMD [SUB] -h.
		return m.Run(ctx, append(args[1:len(args):len(args)], "-h"))
	}
	if len(args) == 1 && args[0] == "--version" {
		args = []string{"version"}
	}
	if len(args) == 0 || isHelp(args[0]) {
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
	m.width = outputWidth(m.Stdout, m.getenv)
	// Commands write progress, logs and results from several goroutines
	// (an experiment's trial pool, a serve's components); one lock per
	// stream keeps their lines whole whatever the writer is.
	m.Stdout, m.Stderr = service.Serialized(m.Stdout), service.Serialized(m.Stderr)
	// The CLI reads the default project unless $LOOMWORK_KEY scopes it
	// (scopeStore): stated here, because the ClickHouse store refuses a
	// read that names no project.
	return c.run(m, store.WithDefaultProject(ctx), args[1:])
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

// outputWidth is the width human tables are laid out in: $COLUMNS when
// set, else the terminal's when w is one, else 0 (no limit: output piped
// to a file or another program keeps every value whole).
func outputWidth(w io.Writer, getenv func(string) string) int {
	if n, err := strconv.Atoi(strings.TrimSpace(getenv("COLUMNS"))); err == nil && n > 0 {
		return n
	}
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	return 0
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

// parseFlags parses args, mapping flag errors to usage errors. Flags may
// come before or after positional arguments (`score trials.jsonl --json`
// and `score --json trials.jsonl` mean the same); everything after a
// literal "--" is positional, as for `sandbox exec -- CMD ARGS`.
// fs.Args() holds the positional arguments afterwards, in order.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return flagError(err)
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" && !isFlagValue(fs, args[:consumed-1]) {
			positional = append(positional, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parse stops at "--": this leaves fs.Args() == positional.
	return fs.Parse(append([]string{"--"}, positional...))
}

// parseFlagsThenCommand parses flags up to the first positional argument
// (or "--"), which starts a command line of its own: in `sandbox exec
// --wall 5s python3 -c ...`, -c belongs to python3. Like env(1) and
// docker run.
func parseFlagsThenCommand(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	return nil
}

// flagError maps a FlagSet.Parse error: -h is success (the usage was
// printed), anything else bad usage.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return &ExitError{Code: ExitOK, Err: err}
	}
	return &ExitError{Code: ExitUsage, Err: err}
}

// isFlagValue reports whether the "--" that follows before was the value
// of a flag that takes one (`--task -- `), not the end of the flags.
func isFlagValue(fs *flag.FlagSet, before []string) bool {
	if len(before) == 0 {
		return false
	}
	last := before[len(before)-1]
	if !strings.HasPrefix(last, "-") || strings.Contains(last, "=") || last == "--" {
		return false
	}
	f := fs.Lookup(strings.TrimLeft(last, "-"))
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}

// outputFlags registers the two spellings every report-printing command
// takes: --format NAME (one of formats, the first being the default) and
// --json, shorthand for --format json.
type outputFlags struct {
	cmd     string
	format  string
	json    bool
	formats []string
}

func (m *Main) addOutputFlags(fs *flag.FlagSet, formats ...string) *outputFlags {
	o := &outputFlags{cmd: strings.TrimPrefix(fs.Name(), "loom-eval "), formats: formats}
	fs.StringVar(&o.format, "format", formats[0], "output `format`: "+strings.Join(formats, ", "))
	fs.BoolVar(&o.json, "json", false, "print JSON (the same as --format json)")
	return o
}

// Format returns the chosen format, or a usage error for an unknown one or
// for --json with another --format.
func (o *outputFlags) Format() (string, error) {
	cmd := o.cmd
	if !slices.Contains(o.formats, o.format) {
		return "", usageError("%s: --format must be one of %s (got %q)", cmd, strings.Join(o.formats, ", "), o.format)
	}
	if o.json {
		if o.format != o.formats[0] && o.format != "json" {
			return "", usageError("%s: --json and --format %s disagree", cmd, o.format)
		}
		return "json", nil
	}
	return o.format, nil
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
