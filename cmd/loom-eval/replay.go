package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/replay"
)

// replayAgents registers every agent whose journals replay can re-run. The
// reference agents' heavy parts start lazily, on their first tool call: the
// research agent's retrieval service over $LOOMWORK_DATASET (default: the
// shipped datasets/mkdocs-material; BM25 index cached in .loomwork/index)
// and the coding agent's sandbox, with workspaces in a temporary folder
// that cleanup removes.
func (m *Main) replayAgents() (*runtime.Registry, func(), error) {
	dataset, err := m.judgedDataset("")
	if err != nil {
		return nil, func() {}, err
	}
	idx := &research.DatasetIndex{Dir: dataset, CacheDir: ".loomwork/index"}
	sb := &coding.LazySandbox{Config: sandbox.Config{HelperArgs: []string{"sandbox"}}}
	work := filepath.Join(os.TempDir(), fmt.Sprintf("loomwork-replay-workspaces-%d", os.Getpid()))
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = sb.Shutdown(ctx)
		_ = idx.Close(ctx)
		_ = os.RemoveAll(work)
	}
	reg := runtime.NewRegistry()
	for _, register := range []func(*runtime.Registry) error{
		bookkeeper.Register,
		func(r *runtime.Registry) error { return research.Register(r, research.Config{Index: idx}) },
		func(r *runtime.Registry) error { return coding.Register(r, coding.Config{Sandbox: sb, WorkRoot: work}) },
	} {
		if err := register(reg); err != nil {
			return nil, cleanup, err
		}
	}
	return reg, cleanup, nil
}

type replayOutput struct {
	Reports []journal.ReplayReport `json:"reports"`
	Errors  []string               `json:"errors,omitempty"`
	OK      bool                   `json:"ok"`
	// Experiment is where --trials-out's experiment record went.
	Experiment *experimentPlace `json:"experiment,omitempty"`
}

// replayFlags are `loom-eval replay`'s own flags (the MCP, reference and
// output flags have their own types).
type replayFlags struct {
	rescore, strict                            *bool
	trialsOut, endpoint, policyFile, casesFile *string
}

func (f *replayFlags) register(fs *flag.FlagSet) {
	f.rescore = fs.Bool("rescore", false, "derive the reports from the recorded events alone; execute nothing")
	f.trialsOut = fs.String("trials-out", "", "write one trial record per run (JSONL) to this file, for loom-eval score")
	f.endpoint = fs.String("otlp-endpoint", "", "send the replay's spans over OTLP/gRPC to host:port (e.g. 127.0.0.1:4317 of loom-eval serve)")
	f.policyFile = fs.String("policy", "", "re-decide every tool call with this policy instead of the one each journal records it was decided under (the default: a journal records its policy, and one recorded without any replays without): a rules `file`, "+policy.DefaultName+" (the built-in policy), or "+policy.NoneName+" (no authorization: a journal's decisions then diverge)")
	f.strict = fs.Bool("strict", false, "also fail (exit 1) when a re-executed tool returns a different result")
	f.casesFile = fs.String("cases", "", "with --trials-out: the case file the journals' runs attempted, recorded in the experiment and graded on (default: a case file of the runs' own tasks, written into the experiment folder)")
}

// setPolicy applies --policy to the replay: nothing given, each run is
// re-decided under the policy its journal records; none, under none; a
// file or default, under it.
func (f *replayFlags) setPolicy(cfg *replay.Config) error {
	switch *f.policyFile {
	case "":
	case policy.NoneName:
		cfg.NoRecordedPolicy = true
	default:
		g, err := policyGuard(*f.policyFile)
		if err != nil {
			return err
		}
		cfg.Authorizer = g
	}
	return nil
}

// runReplay re-runs journals with their recorded model answers, executing
// the tools again; no model key is involved.
func (m *Main) runReplay(ctx context.Context, args []string) error {
	fs := m.newFlagSet("replay", "replay [flags] JOURNAL.jsonl... [--trials-out FILE [--cases FILE] [--experiment-out DIR | --no-experiment]]")
	var f replayFlags
	f.register(fs)
	outFmt := m.addOutputFlags(fs, "text", "json")
	var mcpLive mcpFlags
	mcpLive.add(fs, "re-execute the MCP tools of journals that used this server (default: their recorded results; no server needed)")
	var ref referenceFlags
	ref.register(fs, "true for journals of scripted answers, false for live ones")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	format, err := outFmt.Format()
	if err != nil {
		return err
	}
	asJSON := format == "json"
	if fs.NArg() == 0 {
		return usageError("replay: no journal given")
	}
	if err := ref.check("replay", *f.endpoint); err != nil {
		return err
	}
	if *f.rescore && *f.endpoint != "" {
		return usageError("replay: --rescore executes nothing and emits no spans; drop --otlp-endpoint")
	}
	reg, cleanup, err := m.replayAgents()
	defer cleanup()
	if err != nil {
		return err
	}
	r := &replayer{rescore: *f.rescore, cfg: replay.Config{Registry: reg, CaptureContent: ref.replayCapture()}, progress: m.Stderr}
	if err := f.setPolicy(&r.cfg); err != nil {
		return err
	}
	tp, flush, err := m.otlpTracing(ctx, "replay", *f.endpoint)
	if err != nil {
		return err
	}
	defer flush()
	r.cfg.TracerProvider = tp
	if r.engine, err = replay.New(r.cfg); err != nil {
		return err
	}
	liveMCP, stopMCP, err := m.mcpConnect(ctx, &mcpLive, r.cfg.TracerProvider)
	defer stopMCP()
	if err != nil {
		return err
	}
	r.liveMCP = liveMCP
	out, badInput, err := r.replayFiles(ctx, fs.Args())
	if err != nil {
		return err
	}
	// Every replayed run gets its trial, a diverged one too (its
	// divergence field says why), so the file names every case and the
	// scorer fails the diverged trials by name.
	diverged := divergedRuns(out.Reports, *f.strict)
	out.OK = len(out.Errors) == 0 && len(diverged) == 0
	if *f.trialsOut != "" {
		trials, err := writeTrials(*f.trialsOut, out.Reports, *f.endpoint != "", *f.strict)
		if err != nil {
			return err
		}
		if out.Experiment, err = m.recordReplay(ctx, &ref, trials, *f.trialsOut, *f.casesFile, asJSON); err != nil {
			return err
		}
	}
	if err := m.writeReplay(out, asJSON, *f.rescore); err != nil {
		return err
	}
	return replayExit(out, badInput, diverged)
}

// replayer replays the runs of journal files.
type replayer struct {
	rescore bool
	cfg     replay.Config
	engine  *replay.Engine
	liveMCP []*mcp.Client // the --mcp servers that re-execute their tools
	// progress receives a line before the first run and one per run, as
	// ablate and ci report their steps (nil: none).
	progress io.Writer
}

// say writes one progress line ("replay: …").
func (r *replayer) say(format string, args ...any) {
	if r.progress != nil {
		fmt.Fprintf(r.progress, "replay: "+format+"\n", args...)
	}
}

// replayFiles replays every run of the journals at paths, in order. A
// journal or run that fails is an entry of out.Errors (badInput when a
// journal is corrupt or missing); the error is the context's, when it
// ended.
func (r *replayer) replayFiles(ctx context.Context, paths []string) (out replayOutput, badInput bool, err error) {
	out = replayOutput{Reports: []journal.ReplayReport{}}
	var runs []journal.Run
	read := 0
	for _, path := range paths {
		rs, err := journal.ReadJSONLFile(path)
		if err != nil {
			var ce *journal.CorruptionError
			badInput = badInput || errors.As(err, &ce) || errors.Is(err, os.ErrNotExist)
			out.Errors = append(out.Errors, err.Error())
			continue
		}
		runs = append(runs, rs...)
		read++
	}
	how := "tools re-executed: the research index loads on the first search, the sandbox starts on the first program"
	if r.rescore {
		how = "rescored from their recorded events"
	}
	r.say("%d run(s) in %d journal(s), %s…", len(runs), read, how)
	for i, run := range runs {
		rep, err := r.replayRun(ctx, run)
		if err != nil {
			if ctx.Err() != nil {
				return out, badInput, err
			}
			r.say("%d/%d %s: ERROR %v", i+1, len(runs), run.ID, err)
			out.Errors = append(out.Errors, err.Error())
			continue
		}
		r.say("%d/%d %s (%s): %s", i+1, len(runs), rep.RunID, caseTrial(&rep), replayStatus(&rep, r.rescore))
		out.Reports = append(out.Reports, rep)
	}
	return out, badInput, nil
}

// replayRun rescored or replays one run, on an engine with the live MCP
// servers of its pins when it has them.
func (r *replayer) replayRun(ctx context.Context, run journal.Run) (journal.ReplayReport, error) {
	if r.rescore {
		return replay.Rescore(run)
	}
	if e, ok, err := mcpReplayEngine(run, r.cfg, r.liveMCP); ok || err != nil {
		if err != nil {
			return journal.ReplayReport{}, err
		}
		return e.Replay(ctx, run)
	}
	return r.engine.Replay(ctx, run)
}

// divergedRuns names (case/trial) the reports that did not reproduce their
// journal.
func divergedRuns(reports []journal.ReplayReport, strict bool) []string {
	var diverged []string
	for i := range reports {
		r := &reports[i]
		if replay.Diverged(r, strict) != "" {
			diverged = append(diverged, caseTrial(r))
		}
	}
	return diverged
}

// writeReplay writes the reports as JSON or text to stdout.
func (m *Main) writeReplay(out replayOutput, asJSON, rescore bool) error {
	if asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	m.printReplay(out, rescore)
	return nil
}

// replayExit is replay's exit: a rejected journal, a run that could not be
// replayed, or runs that diverged.
func replayExit(out replayOutput, badInput bool, diverged []string) error {
	switch {
	case badInput:
		return &ExitError{Code: ExitUsage, Err: errors.New("replay: a journal was rejected")}
	case len(out.Errors) > 0:
		return &ExitError{Code: ExitRuntimeErr, Err: errors.New("replay: a run could not be replayed")}
	case !out.OK:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("replay: %d run(s) did not reproduce their journal: %s", len(diverged), strings.Join(diverged, ", "))}
	}
	return nil
}

func (m *Main) printReplay(out replayOutput, rescore bool) {
	for _, r := range out.Reports {
		fmt.Fprintf(m.Stdout, "%-8s %s (%s; %s, agent %s, model label %s): %d/%d events matched, %d tool runs, %d model calls\n",
			replayStatus(&r, rescore), r.RunID, caseTrial(&r), r.File, r.Agent, r.Label, r.MatchedEvents, r.RecordedEvents, r.ToolRuns, r.ModelCalls)
		if d := r.Divergence; d != nil {
			fmt.Fprintf(m.Stdout, "  %v (journal line %d)\n", d, r.DivergeLine)
		}
		for _, d := range r.ResultDiffs {
			fmt.Fprintf(m.Stdout, "  %v (journal line %d)\n", d, d.Line)
		}
		if !r.Complete {
			fmt.Fprintln(m.Stdout, "  the journal ends before run_finished: only its prefix was checked")
		}
	}
	for _, e := range out.Errors {
		fmt.Fprintf(m.Stdout, "ERROR    %s\n", e)
	}
	fmt.Fprintf(m.Stdout, "%d run(s), %d error(s), ok=%v\n", len(out.Reports), len(out.Errors), out.OK)
}

// replayStatus is one word for how a run replayed: PASS, DIVERGED,
// DIFFERS (a re-executed tool's result differs), PARTIAL (the journal
// ends early) or RESCORED.
func replayStatus(r *journal.ReplayReport, rescore bool) string {
	switch {
	case rescore:
		return "RESCORED"
	case r.Divergence != nil:
		return "DIVERGED"
	case len(r.ResultDiffs) > 0:
		return "DIFFERS"
	case !r.Complete:
		return "PARTIAL"
	}
	return "PASS"
}

// caseTrial names a replayed run by what the scorer calls it: "case ID
// trial N" (the run id when the journal recorded no case).
func caseTrial(r *journal.ReplayReport) string {
	if r.CaseID == "" {
		return fmt.Sprintf("run %s", r.RunID)
	}
	return fmt.Sprintf("case %s trial %d", r.CaseID, r.Trial)
}

func writeTrials(path string, reps []journal.ReplayReport, withTrace, strict bool) ([]datasets.Trial, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("replay: write trials: %w", err)
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	trials := make([]datasets.Trial, 0, len(reps))
	for i := range reps {
		t := replay.TrialRecord(&reps[i], withTrace)
		t.Divergence = replay.Diverged(&reps[i], strict)
		if err := t.Validate(); err != nil {
			f.Close()
			return nil, fmt.Errorf("replay: trial for run %s: %w", reps[i].RunID, err)
		}
		if err := enc.Encode(t); err != nil {
			f.Close()
			return nil, fmt.Errorf("replay: write trials: %w", err)
		}
		trials = append(trials, t)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("replay: write trials: %w", err)
	}
	return trials, nil
}
