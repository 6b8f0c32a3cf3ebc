package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/baselines/experiment"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/report"
)

// runExperiment dispatches `loom-eval experiment run|list|show|compare`.
func (m *Main) runExperiment(ctx context.Context, args []string) error {
	usage := "experiment run --cases FILE (--cmd CMD | --openai URL --model M | --http URL --body TPL | --a2a CARD_URL | --mcp-cmd CMD --mcp-tool NAME) [--trials N] [--against ID|DIR] | experiment list [--store URL] | experiment show ID [--store URL] | experiment compare A B [--store URL] | experiment push ID --store URL"
	if len(args) == 0 {
		return usageError("experiment: want a subcommand: %s", usage)
	}
	switch args[0] {
	case "run":
		return m.runExperimentRun(ctx, args[1:])
	case "list":
		return m.runExperimentList(ctx, args[1:])
	case "show":
		return m.runExperimentShow(ctx, args[1:])
	case "compare":
		return m.runExperimentCompare(ctx, args[1:])
	case "push":
		return m.runExperimentPush(ctx, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintln(m.Stderr, "Usage: loom-eval "+usage)
		fmt.Fprintln(m.Stderr, "Runs your agent over a case file, cases × trials, traced and graded, and gates it against a previous experiment (docs/experiments.md).")
		return nil
	}
	return usageError("experiment: unknown subcommand %q (want run, list, show, compare or push)", args[0])
}

// experimentAuthorization is what `experiment run --help` says about
// authorization (docs/policy.md, "What is not authorized"): the agent is
// the user's own process, so no Loomwork policy decides its tool calls.
const experimentAuthorization = `Authorization: the agent here is yours, run as its own process (or reached at its
URL); Loomwork sees its answers and spans, not its tool calls before they happen, so
no authorization policy applies. Nothing it does is decided, held for approval,
journaled as a decision or audited, and it does not run in Loomwork's sandbox (the
coding agent's --egress allow-list and --sandbox-pool do not reach it). What Loomwork
does enforce here: the cases' code graders run their tests in the sandbox (no
network); a --mcp-cmd server starts with an allow-listed environment (--mcp-env names
what else it gets). To have Loomwork decide tool calls, serve them with
loom-eval mcp serve (its built-in policy, or --policy FILE, decides every call) or
run a reference agent with loom-eval run. --policy below is the gate policy.
`

// experimentRunFlags are `experiment run`'s flags.
type experimentRunFlags struct {
	cases, out, resume, name, label, against, policy, prices string
	cmd, answerJSONPath                                      string
	shell, trialsSet                                         bool
	openai, model, apiKeyEnv, system                         string
	httpURL, body, answerPath                                string
	headers, params                                          attrFlags
	trials, concurrency, retries                             int
	timeout, backoff, traceWait                              time.Duration
	otlpEndpoint, storeURL, modelLabel, agent, root          string
	grading                                                  gradingFlags
	output                                                   *outputFlags
	proto                                                    protocolTargetFlags
}

func (f *experimentRunFlags) register(m *Main, fs *flag.FlagSet) {
	fs.StringVar(&f.cases, "cases", "", "case file (JSONL, docs/scoring.md \"Cases and trials\"); required unless --resume")
	fs.IntVar(&f.trials, "trials", 3, "trials per case")
	fs.IntVar(&f.concurrency, "concurrency", 2, "trials run at once")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "per-trial timeout: an agent still running then failed the trial")
	fs.IntVar(&f.retries, "retries", 3, "retries of an infrastructure failure (the command could not start; connection refused; HTTP 429, 502, 503, 504), never of the agent's own")
	fs.DurationVar(&f.backoff, "backoff", 500*time.Millisecond, "first retry's wait, doubled each retry (at most 30s)")
	fs.StringVar(&f.cmd, "cmd", "", "the agent as a command (argv split like a shell would, no shell run): the task on stdin, or {input} in an argument, or {input_file} (a JSON file); the answer on stdout")
	fs.BoolVar(&f.shell, "shell", false, "run --cmd with /bin/sh -c")
	fs.StringVar(&f.answerJSONPath, "answer-json-path", "", "read the answer from this dotted path of stdout parsed as JSON (e.g. result.answer)")
	fs.StringVar(&f.openai, "openai", "", "the agent as an OpenAI-compatible chat-completions endpoint: its base URL (…/v1)")
	fs.StringVar(&f.model, "model", "", "model name sent to --openai")
	fs.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding --openai's API key (sent as a bearer token, never recorded)")
	fs.StringVar(&f.system, "system", "", "system message sent to --openai")
	fs.StringVar(&f.httpURL, "http", "", "the agent as a JSON endpoint: POST --body to this URL")
	fs.StringVar(&f.body, "body", "", `--http's body, a Go template: {"question": {{json .Task}}} (.Task, .CaseID, .Trial, .ExperimentID)`)
	fs.StringVar(&f.answerPath, "answer-path", "", "dotted path of the answer in --http's JSON response (e.g. data.answer); empty: the whole body")
	f.headers, f.params = attrFlags{}, attrFlags{}
	fs.Var(f.headers, "header", "extra --http header NAME=VALUE (repeatable; values never recorded)")
	fs.Var(f.params, "param", "a parameter of this run KEY=VALUE, recorded in experiment.json (repeatable)")
	fs.StringVar(&f.out, "out", "", "experiment folder (default "+experiment.DefaultRoot+"/ID); an existing one is resumed")
	fs.StringVar(&f.resume, "resume", "", "resume the experiment in this folder (or with this id): finished trials are not run again")
	fs.StringVar(&f.root, "experiments-dir", experiment.DefaultRoot, "where experiments are kept (ids resolve here)")
	fs.StringVar(&f.name, "name", "", "a name for the experiment")
	fs.StringVar(&f.label, "label", "", "the agent's version label (recorded; the git commit of the current folder is recorded too)")
	fs.StringVar(&f.against, "against", "", "gate against this experiment (folder or id): exit 1 naming the regressed cases")
	fs.StringVar(&f.policy, "policy", "", "gate policy JSON (default: the calibrated policy of baselines/policy.json)")
	fs.StringVar(&f.prices, "prices", "", "price table JSON overriding the built-in one")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "use this running collector's OTLP/HTTP base URL (a loom-eval serve writing --store) instead of starting one")
	fs.StringVar(&f.storeURL, "store", "", "trace store URL (default: traces.db in the experiment folder)")
	fs.StringVar(&f.modelLabel, "model-label", "", "label every trial live, scripted or replayed (default: scripted when the agent's spans say loomwork.model.label=scripted, else live)")
	fs.StringVar(&f.agent, "agent", "", "agent name recorded on the trials and the root spans")
	fs.DurationVar(&f.traceWait, "trace-wait", 2*time.Second, "how long to wait for a trial's spans after the agent returned")
	f.proto.register(fs)
	f.grading.register(fs)
	f.output = m.addOutputFlags(fs, report.Formats...)
}

// targetOwnFlags maps a flag that configures one kind of target to the
// target flags it belongs with; given without any of them it would be
// silently ignored, so it is refused.
var targetOwnFlags = map[string][]string{
	"shell": {"cmd"}, "answer-json-path": {"cmd"},
	"model": {"openai"}, "api-key-env": {"openai"}, "system": {"openai"},
	"body": {"http"}, "answer-path": {"http"}, "header": {"http"},
	"mcp-tool": {"mcp-cmd", "mcp-url"}, "mcp-arg-template": {"mcp-cmd", "mcp-url"}, "mcp-env": {"mcp-cmd"},
}

// checkTargetFlags refuses a target's own flag given without its target.
func checkTargetFlags(set map[string]bool) error {
	names := make([]string, 0, len(targetOwnFlags))
	for name := range targetOwnFlags {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		owners := targetOwnFlags[name]
		if !set[name] || slices.ContainsFunc(owners, func(o string) bool { return set[o] }) {
			continue
		}
		return usageError("experiment run: --%s applies only to --%s, which is not given", name, strings.Join(owners, " or --"))
	}
	return nil
}

// target builds the one target the flags name.
func (f *experimentRunFlags) target(getenv func(string) string) (experiment.Target, error) {
	n := f.proto.given()
	for _, s := range []string{f.cmd, f.openai, f.httpURL} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return nil, usageError("experiment run: give exactly one of --cmd, --openai, --http, --a2a, --mcp-cmd, --mcp-url (got %d)", n)
	}
	var t experiment.Target
	var err error
	switch {
	case f.cmd != "":
		argv := []string{f.cmd}
		if !f.shell {
			if argv, err = splitArgs(f.cmd); err != nil {
				return nil, usageError("--cmd: %v", err)
			}
		}
		t, err = experiment.NewCommandTarget(experiment.CommandConfig{Argv: argv, Shell: f.shell, AnswerJSONPath: f.answerJSONPath})
	case f.openai != "":
		key := ""
		if f.apiKeyEnv != "" {
			if key = getenv(f.apiKeyEnv); key == "" {
				return nil, usageError("--api-key-env: $%s is empty", f.apiKeyEnv)
			}
		}
		t, err = experiment.NewOpenAITarget(experiment.OpenAIConfig{URL: f.openai, Model: f.model, System: f.system, APIKey: key})
	case f.proto.given() > 0:
		t, err = f.proto.target(getenv)
	default:
		t, err = experiment.NewHTTPTarget(experiment.HTTPConfig{URL: f.httpURL, Body: f.body, AnswerPath: f.answerPath, Headers: f.headers})
	}
	if err != nil {
		return nil, usageError("experiment run: %v", err)
	}
	return t, nil
}

// runExperimentRun runs (or resumes) an experiment, scores it and gates it.
func (m *Main) runExperimentRun(ctx context.Context, args []string) error {
	fs := m.newFlagSet("experiment run", "experiment run --cases FILE (--cmd CMD | --openai URL --model M | --http URL --body TPL | --a2a CARD_URL | --mcp-cmd CMD --mcp-tool NAME) [--trials N] [--concurrency N] [--out DIR | --resume DIR] [--against ID|DIR [--policy FILE]] [--json]\n\n"+experimentAuthorization)
	var f experimentRunFlags
	f.register(m, fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("experiment run: unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	f.trialsSet = set["trials"]
	if err := checkTargetFlags(set); err != nil {
		return err
	}
	format, err := f.output.Format()
	if err != nil {
		return err
	}
	target, err := f.target(m.getenv)
	if err != nil {
		return err
	}
	rec, dir, cases, err := f.record(ctx, target)
	if err != nil {
		return err
	}
	var base *experiment.Side
	policy, err := f.gatePolicy()
	if err != nil {
		return err
	}
	if f.against != "" {
		bdir, err := experiment.Resolve(f.root, f.against)
		if err != nil {
			return usageError("--against: %v", err)
		}
		if base, err = experiment.Load(ctx, bdir, nil, openStoreReadOnly); err != nil {
			return inputError("--against", err)
		}
		rec.Against = &datasets.ExperimentRef{ID: base.Record.ID, Dir: bdir}
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	backend, err := startTraceBackend(ctx, rec.Store, f.otlpEndpoint, log)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	defer backend.Shutdown(ctx)
	traces, err := experiment.NewTraces(experiment.TracesConfig{Backend: backend, Wait: f.traceWait, Logger: log})
	if err != nil {
		return usageError("experiment run: %v", err)
	}
	if err := traces.Start(ctx); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	defer traces.Shutdown(context.WithoutCancel(ctx))
	fmt.Fprintf(m.Stderr, "experiment %s: %d cases × %d trials of %s; traces to %s (OTLP/HTTP %s), folder %s\n",
		rec.ID, len(cases), f.trials, rec.Target.Description, rec.Store, traces.Endpoint(), dir)
	save := func(ctx context.Context) error { return m.saveRun(ctx, backend, rec, dir) }
	return m.experimentRunAndGate(ctx, &f, rec, dir, cases, target, traces, base, policy, format, log, save)
}

// experimentRunAndGate runs the trials, then scores and gates them; save
// puts the experiment into the trace store once the run has ended (an
// incomplete one too, so the store shows what resuming will finish).
func (m *Main) experimentRunAndGate(ctx context.Context, f *experimentRunFlags, rec *datasets.Experiment, dir string, cases []datasets.Case,
	target experiment.Target, traces *experiment.Traces, base *experiment.Side, policy *gate.Policy, format string, log *slog.Logger,
	save func(context.Context) error) error {
	cfg, err := experimentScoreConfig(f.prices)
	if err != nil {
		return err
	}
	env, stop, err := f.grading.env(ctx, m.Stderr, m.Getenv, cases)
	if err != nil {
		return err
	}
	defer stop()
	r, err := experiment.New(experiment.Config{Record: rec, Dir: dir, Cases: cases, Trials: f.trials, Concurrency: f.concurrency,
		Timeout: f.timeout, Retries: f.retries, Backoff: f.backoff, ModelLabel: f.modelLabel, Agent: f.agent, Score: cfg},
		experiment.Deps{Target: target, Traces: traces, Grading: env, Progress: m.Stderr, Logger: log})
	if err != nil {
		return usageError("experiment run: %v", err)
	}
	if _, err := r.Run(ctx); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("experiment %s (resume with --resume %s): %w", rec.ID, dir, err)}
	}
	if rec.Status != datasets.ExperimentComplete {
		if err := save(ctx); err != nil {
			return err
		}
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("experiment %s is incomplete: %d of %d trials recorded, %d not run after infrastructure failures (resume with --resume %s)",
			rec.ID, rec.Summary.Recorded, rec.Summary.Expected, rec.Summary.InfraFailures, dir)}
	}
	cand, err := experiment.Load(ctx, dir, traces.Reader(), nil)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	rep, err := experiment.Evaluate(ctx, cfg, cases, rec.Dataset.Path, cand, base, policy, report.Inputs{Grading: env})
	if err != nil {
		return evaluateError(err)
	}
	if rep.Gate != nil && rec.Against != nil {
		passed := rep.Gate.Passed
		rec.Against.GatePassed = &passed
		if err := experiment.WriteRecord(dir, rec); err != nil {
			return &ExitError{Code: ExitRuntimeErr, Err: err}
		}
	}
	if err := save(ctx); err != nil {
		return err
	}
	return m.writeExperimentReport(dir, format, rep)
}

func evaluateError(err error) error {
	if errors.Is(err, report.ErrBadInput) {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return &ExitError{Code: ExitRuntimeErr, Err: err}
}

func experimentScoreConfig(prices string) (scorer.Config, error) {
	cfg := scorer.DefaultConfig()
	p, err := scorerLoadPrices(prices)
	if err != nil {
		return cfg, err
	}
	cfg.Prices = p
	return cfg, nil
}

// writeExperimentReport writes report.json into dir and the report in
// format to stdout; a failed gate is exit 1 naming the regressed cases.
func (m *Main) writeExperimentReport(dir, format string, rep *report.Report) error {
	var b strings.Builder
	if err := report.Write(&b, report.JSON, rep); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	if err := experiment.WriteReport(dir, []byte(b.String())); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	if err := report.Write(m.Stdout, format, rep); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return gateError(rep)
}

// gateError is exit 1 for a failed gate, naming the failed checks and the
// regressed cases.
func gateError(rep *report.Report) error {
	if rep.Gate == nil || rep.Gate.Passed {
		return nil
	}
	var names []string
	for _, c := range rep.Gate.Failed() {
		names = append(names, c.Name)
	}
	msg := "gate failed: " + strings.Join(names, ", ")
	if rep.Comparison != nil && len(rep.Comparison.Regressed) > 0 {
		msg += "; regressed cases: " + strings.Join(rep.Comparison.Regressed, ", ")
	}
	return &ExitError{Code: ExitFailure, Err: errors.New(msg)}
}

func (f *experimentRunFlags) gatePolicy() (*gate.Policy, error) {
	if f.policy != "" {
		return loadPolicy(f.policy)
	}
	p, err := experiment.ParseDefaultPolicy()
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return p, nil
}

// record reads the experiment to resume, or makes a new one.
func (f *experimentRunFlags) record(ctx context.Context, target experiment.Target) (*datasets.Experiment, string, []datasets.Case, error) {
	dir := f.out
	if f.resume != "" {
		d, err := experiment.Resolve(f.root, f.resume)
		if err != nil {
			return nil, "", nil, usageError("--resume: %v", err)
		}
		dir = d
	}
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, experiment.RecordFile)); err == nil {
			return f.resumeRecord(dir, target)
		}
	}
	if f.cases == "" {
		return nil, "", nil, usageError("experiment run: --cases is required")
	}
	cases, err := loadCasesFlag(f.cases)
	if err != nil {
		return nil, "", nil, err
	}
	ds, err := experiment.Digest(f.cases, cases)
	if err != nil {
		return nil, "", nil, inputError("--cases", err)
	}
	now := time.Now().UTC()
	id := experiment.NewID(now, rand.Uint32)
	if dir == "" {
		dir = filepath.Join(f.root, id)
	}
	store := f.storeURL
	if store == "" {
		store = filepath.Join(dir, experiment.TracesFile)
	}
	wd, _ := os.Getwd()
	commit, dirty := experiment.GitInfo(ctx, wd)
	rec := &datasets.Experiment{Version: datasets.ExperimentVersion, ID: id, Name: f.name, Created: now, Status: datasets.ExperimentRunning,
		Dataset: ds, Agent: datasets.ExperimentAgent{Label: f.label, GitCommit: commit, GitDirty: dirty, Params: f.params},
		Target: target.Describe(), Trials: f.trials, Cases: len(cases), Store: store}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", nil, &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return rec, dir, cases, nil
}

// resumeRecord reads back an experiment: the case file must be unchanged.
func (f *experimentRunFlags) resumeRecord(dir string, target experiment.Target) (*datasets.Experiment, string, []datasets.Case, error) {
	rec, err := experiment.ReadRecord(dir)
	if err != nil {
		return nil, "", nil, inputError("resume", err)
	}
	path := rec.Dataset.Path
	if f.cases != "" {
		path = f.cases
	}
	cases, err := loadCasesFlag(path)
	if err != nil {
		return nil, "", nil, err
	}
	ds, err := experiment.Digest(path, cases)
	if err != nil {
		return nil, "", nil, inputError("resume", err)
	}
	if diff := experiment.SameDataset(rec.Dataset, ds); diff != "" {
		return nil, "", nil, usageError("resume %s: %s since the experiment started: start a new experiment", rec.ID, diff)
	}
	if got := target.Describe(); got != rec.Target {
		return nil, "", nil, usageError("resume %s: the target changed (was %s %q, now %s %q)", rec.ID, rec.Target.Kind, rec.Target.Description, got.Kind, got.Description)
	}
	if f.trialsSet && f.trials != rec.Trials {
		return nil, "", nil, usageError("resume %s: --trials %d, but the experiment runs %d per case: start a new experiment", rec.ID, f.trials, rec.Trials)
	}
	f.trials = rec.Trials
	return rec, dir, cases, nil
}
