package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/baselines/suite"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/coord"
)

const suiteUsage = "suite run --cases FILE [--tag T] [--agent research|coding] [--trials N] [--workers K] [--out DIR] [--lease D] [--otlp-endpoint host:4317 [--store URL]] [--capture-content=true|false] [--policy default|FILE|none] [--experiment-out DIR | --no-experiment] [--json]\n" +
	"       loom-eval suite status [--out DIR] [--json]"

// runSuite is `loom-eval suite run|status`: an eval suite split into
// (case, trial) tasks in the coordinator (baselines/suite, internal/coord)
// and run by worker processes.
func (m *Main) runSuite(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError("suite: want a subcommand: run or status\nUsage: loom-eval %s", suiteUsage)
	}
	if isHelp(args[0]) {
		fmt.Fprintf(m.Stderr, "Usage: loom-eval %s\n", suiteUsage)
		return nil
	}
	switch args[0] {
	case "run":
		return m.runSuiteRun(ctx, args[1:])
	case "status":
		return m.runSuiteStatus(ctx, args[1:])
	}
	return usageError("suite: unknown subcommand %q (want run or status)", args[0])
}

type suiteReport struct {
	Trials   string         `json:"trials_file"`
	Progress suite.Progress `json:"progress"`
	Workers  int            `json:"workers"`
	Restarts int            `json:"worker_restarts"`
	Seconds  float64        `json:"seconds"`
	// Experiment is where the suite's experiment record went.
	Experiment *experimentPlace `json:"experiment,omitempty"`
}

// suiteRunFlags are `loom-eval suite run`'s flags.
type suiteRunFlags struct {
	casesFile, tag, agentName, out, dataset, indexCache *string
	otlpEndpoint, policyFile                            *string
	trials, workers                                     *int
	lease                                               *time.Duration
}

func (f *suiteRunFlags) register(fs *flag.FlagSet) {
	f.casesFile = fs.String("cases", "", "cases JSONL `file` (datasets.Case)")
	f.tag = fs.String("tag", "", "run only the cases carrying this tag (default: the --agent's name when the file tags cases by agent, else all)")
	f.agentName = fs.String("agent", research.Name, "reference agent on its scripted policy: research or coding")
	f.trials = fs.Int("trials", 1, "trials per case")
	f.workers = fs.Int("workers", 0, "worker processes to start (0: run the trials in this process; more workers may join with loom-eval worker --coordinator OUT/coord.db)")
	f.out = fs.String("out", ".loomwork/suite", "suite `folder`: coord.db, trials.jsonl, journals/, attempts/ (running the same suite again resumes it)")
	f.lease = fs.Duration("lease", 30*time.Second, "lease of a claimed trial; a killed worker's trial is reclaimed after it (renewed every third)")
	f.dataset = fs.String("dataset", "", "the research agent's judged dataset `folder` (default "+datasets.DescribeDefault()+")")
	f.indexCache = fs.String("index-cache", ".loomwork/index", "folder for the persisted BM25 index")
	f.policyFile = fs.String("policy", policy.DefaultName, policyUsage("every trial's tool calls")+". The rules go into the suite's definition, so every worker applies them, and each worker appends its decisions to OUT/audit/WORKER.jsonl")
	f.otlpEndpoint = fs.String("otlp-endpoint", "", "send each trial's spans over OTLP/gRPC to host:port (e.g. 127.0.0.1:4317 of loom-eval serve); the workers this run starts send there too")
}

// validate checks the flags that need no file.
func (f *suiteRunFlags) validate() error {
	if *f.casesFile == "" {
		return usageError("suite run: --cases is required")
	}
	if *f.trials < 1 || *f.workers < 0 || *f.lease <= 0 {
		return usageError("suite run: need --trials >= 1, --workers >= 0 and a positive --lease")
	}
	if *f.agentName != research.Name && *f.agentName != coding.Name {
		return usageError("suite run: --agent must be research or coding (got %q)", *f.agentName)
	}
	return nil
}

// loadCases reads --cases and keeps the cases of --tag (by default the
// agent's name, when the file tags cases by agent).
func (f *suiteRunFlags) loadCases() ([]datasets.Case, error) {
	cases, err := datasets.LoadCases(*f.casesFile)
	if err != nil {
		return nil, usageError("suite run: %v", err)
	}
	if *f.tag == "" && slices.ContainsFunc(cases, func(c datasets.Case) bool { return slices.Contains(c.Tags, *f.agentName) }) {
		*f.tag = *f.agentName
	}
	if *f.tag != "" {
		cases = slices.DeleteFunc(cases, func(c datasets.Case) bool { return !slices.Contains(c.Tags, *f.tag) })
	}
	if len(cases) == 0 {
		return nil, usageError("suite run: %s has no cases (tag %q)", *f.casesFile, *f.tag)
	}
	return cases, nil
}

// suiteDefinition is the suite the flags define (the research agent's
// dataset and index cache as absolute paths), validated.
func (m *Main) suiteDefinition(f *suiteRunFlags, ref *referenceFlags) (suite.Definition, error) {
	raw, err := os.ReadFile(*f.casesFile)
	if err != nil {
		return suite.Definition{}, usageError("suite run: %v", err)
	}
	absOut, err := filepath.Abs(*f.out)
	if err != nil {
		return suite.Definition{}, usageError("suite run: --out %s: %v", *f.out, err)
	}
	def := suite.Definition{Agent: *f.agentName, Trials: *f.trials, Dir: filepath.Clean(*f.out), AbsDir: absOut,
		Lease: suite.Duration(*f.lease), CasesDigest: coord.Digest(raw),
		OTLPEndpoint: *f.otlpEndpoint, CaptureContent: ref.capture.or(true)}
	if def.Policy, def.PolicyName, err = policyFileBytes("suite run", *f.policyFile); err != nil {
		return suite.Definition{}, err
	}
	if *f.agentName == research.Name {
		ds, err := m.judgedDataset(*f.dataset)
		if err != nil {
			return suite.Definition{}, err
		}
		if def.Dataset, err = filepath.Abs(ds); err != nil {
			return suite.Definition{}, usageError("suite run: %v", err)
		}
		if def.IndexCache, err = filepath.Abs(*f.indexCache); err != nil {
			return suite.Definition{}, usageError("suite run: %v", err)
		}
	}
	if err := def.Validate(); err != nil {
		return suite.Definition{}, usageError("suite run: %v", err)
	}
	return def, nil
}

// openSuiteCoordinator opens the suite's coordinator (creating its
// folder) and enqueues the plan's trials; the caller shuts it down.
func openSuiteCoordinator(ctx context.Context, def suite.Definition, plan []suite.TrialSpec) (*coord.Coordinator, error) {
	if err := os.MkdirAll(def.AbsDir, 0o755); err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite run: %w", err)}
	}
	c, err := coord.Open(ctx, coord.Config{Path: suite.CoordinatorPath(def.AbsDir)})
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite run: %w", err)}
	}
	if err := suite.Enqueue(ctx, c, def, plan); err != nil {
		c.Shutdown(context.WithoutCancel(ctx))
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("suite run: %w", err)}
	}
	return c, nil
}

// startSuiteWorkers starts the suite's workers: with workers 0 this
// process is the one worker, else that many worker processes under a
// supervisor (nil for the single process). stop reports a worker's
// failure to the driver; release stops them and waits until they have
// stopped (safe to call more than once), so the coordinator is shut down
// under no worker.
func (m *Main) startSuiteWorkers(ctx context.Context, c *coord.Coordinator, def suite.Definition, workers int) (stop func() error, sup *suite.Supervisor, release func(), err error) {
	if workers == 0 {
		// The single-process run: this process is the one worker.
		w, closeW, err := m.newSuiteWorker(ctx, c, def, fmt.Sprintf("local-%d", os.Getpid()))
		if err != nil {
			return nil, nil, nil, err
		}
		stop, release := suite.RunLocal(ctx, w, closeW)
		return stop, nil, release, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite run: find this binary to start workers: %w", err)}
	}
	db := suite.CoordinatorPath(def.AbsDir)
	sup, err = suite.NewSupervisor(suite.SupervisorConfig{Log: m.Stderr, Command: func(slot int) *exec.Cmd {
		cmd := exec.Command(exe, "worker", "--coordinator", db, "--id", fmt.Sprintf("w%d", slot))
		cmd.Stdout, cmd.Stderr, cmd.Env = m.Stderr, m.Stderr, os.Environ()
		return cmd
	}})
	if err != nil {
		return nil, nil, nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite run: %w", err)}
	}
	sup.Start(ctx, workers)
	return sup.Err, sup, func() { _ = sup.Shutdown(context.WithoutCancel(ctx)) }, nil
}

func (m *Main) runSuiteRun(ctx context.Context, args []string) error {
	fs := m.newFlagSet("suite run", suiteUsage)
	var f suiteRunFlags
	f.register(fs)
	var ref referenceFlags
	ref.register(fs, "true (the policies are scripted)")
	outFmt := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("suite run: unexpected argument %q", fs.Arg(0))
	}
	if err := ref.check("suite run", *f.otlpEndpoint); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	cases, err := f.loadCases()
	if err != nil {
		return err
	}
	def, err := m.suiteDefinition(&f, &ref)
	if err != nil {
		return err
	}
	plan, err := suite.Plan(*f.agentName, cases, *f.trials, *f.casesFile)
	if err != nil {
		return usageError("suite run: %v", err)
	}
	c, err := openSuiteCoordinator(ctx, def, plan)
	if err != nil {
		return err
	}
	defer c.Shutdown(context.WithoutCancel(ctx))
	start := time.Now()
	if err := suite.WarmIndex(ctx, def); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite run: %w", err)}
	}
	fmt.Fprintf(m.Stderr, "suite: %d cases × %d trials = %d trials of the %s agent (scripted), coordinator %s\n",
		len(cases), *f.trials, len(plan), *f.agentName, suite.CoordinatorPath(def.Dir))

	drv := &suite.Driver{Coord: c, Def: def, Progress: m.Stderr}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop, sup, release, err := m.startSuiteWorkers(runCtx, c, def, *f.workers)
	if err != nil {
		return err
	}
	defer release()
	p, err := drv.Wait(runCtx, stop)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite run: %w (%s)", err, p)}
	}
	path, err := drv.Write(ctx)
	if err != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("suite run: %w", err)}
	}
	place, err := m.recordSuite(ctx, &ref, path, *f.casesFile, *f.agentName)
	if err != nil {
		return err
	}
	rep := suiteReport{Trials: path, Progress: p, Workers: *f.workers, Seconds: time.Since(start).Seconds(), Experiment: place}
	if sup != nil {
		rep.Restarts = sup.Restarts()
	}
	return m.writeSuiteReport(rep, format)
}

// writeSuiteReport writes suite run's report in format to stdout.
func (m *Main) writeSuiteReport(rep suiteReport, format string) error {
	if format == "json" {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	p := rep.Progress
	fmt.Fprintf(m.Stdout, "%d trial records in %s (%d reclaimed, %d stale renewals/results refused, %d worker restarts, %.1fs)\n",
		p.Accepted, rep.Trials, p.Reclaimed, p.Refused, rep.Restarts, rep.Seconds)
	return nil
}

func (m *Main) runSuiteStatus(ctx context.Context, args []string) error {
	fs := m.newFlagSet("suite status", suiteUsage)
	out := fs.String("out", ".loomwork/suite", "suite `folder`")
	outFmt := m.addOutputFlags(fs, "text", "json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	path := suite.CoordinatorPath(*out)
	if _, err := os.Stat(path); err != nil {
		return usageError("suite status: %s: %v", path, err)
	}
	c, err := coord.Open(ctx, coord.Config{Path: path})
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite status: %w", err)}
	}
	defer c.Shutdown(context.WithoutCancel(ctx))
	def, err := suite.LoadDefinition(ctx, c)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("suite status: %w", err)}
	}
	p, err := (&suite.Driver{Coord: c, Def: def}).Status(ctx)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite status: %w", err)}
	}
	if format == "json" {
		return json.NewEncoder(m.Stdout).Encode(p)
	}
	fmt.Fprintf(m.Stdout, "suite %s (%s agent, %d trials per case): %s\n", def.Dir, def.Agent, def.Trials, p)
	return nil
}

// newSuiteWorker builds a worker for the suite in c with the agent's
// dependencies (the research index or the sandbox); close releases them.
func (m *Main) newSuiteWorker(ctx context.Context, c *coord.Coordinator, def suite.Definition, id string) (*suite.Worker, func(), error) {
	cfg := suite.WorkerConfig{Coord: c, ID: id, Log: m.Stderr}
	closeFn := func() {}
	switch def.Agent {
	case research.Name:
		if _, err := os.Stat(filepath.Join(def.Dataset, "qrels.jsonl")); err != nil {
			return nil, nil, usageError("suite: research dataset %s: %v", def.Dataset, err)
		}
		idx, closeIdx, err := suite.WorkerIndex(def, id)
		if err != nil {
			return nil, nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite worker %s: %w", id, err)}
		}
		cfg.Index = idx
		closeFn = func() { _ = closeIdx(context.WithoutCancel(ctx)) }
	case coding.Name:
		sb, stopSandbox := lazySandbox(ctx)
		cfg.Sandbox = sb
		closeFn = func() { _ = stopSandbox() }
	}
	if err := suiteWorkerGuard(&cfg, def, id); err != nil {
		closeFn()
		return nil, nil, err
	}
	if def.OTLPEndpoint != "" {
		tp, flush, err := m.otlpTracing(ctx, "suite", def.OTLPEndpoint)
		if err != nil {
			closeFn()
			return nil, nil, usageError("suite worker %s: %v", id, err)
		}
		cfg.TracerProvider = tp
		closeDeps := closeFn
		closeFn = func() { flush(); closeDeps() }
	}
	w, err := suite.NewWorker(ctx, cfg)
	if err != nil {
		closeFn()
		return nil, nil, &ExitError{Code: ExitUsage, Err: err}
	}
	return w, closeFn, nil
}

// suiteWorkerGuard gives a worker the suite's policy (Definition.Policy),
// auditing to OUT/audit/ID.jsonl: a log per worker, since one hash chain
// has one writer.
func suiteWorkerGuard(cfg *suite.WorkerConfig, def suite.Definition, id string) error {
	if len(def.Policy) == 0 {
		return nil
	}
	r, err := policy.ParseRules(bytes.NewReader(def.Policy), "the suite's policy")
	if err != nil {
		return usageError("suite worker %s: %v", id, err)
	}
	auditFile := filepath.Join(def.AbsDir, "audit", id+".jsonl")
	if err := mkdirFor(auditFile); err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite worker %s: audit: %w", id, err)}
	}
	what := "suite worker " + id
	g, _, err := rulesGuard(what, r, auditFile, what, policy.GuardConfig{Principal: "agent:" + def.Agent, Name: def.PolicyName})
	if err != nil {
		return err
	}
	cfg.Authorizer = g
	return nil
}
