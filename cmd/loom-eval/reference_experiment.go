package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/baselines/experiment"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/replay"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/store/storeurl"
)

// The reference agents' commands (`run --case`, `replay --trials-out`,
// `suite run`) record their trials as an experiment, as `experiment run`
// does, so `experiment list|show|compare` and the UI read them too
// (experiment.WriteReference). These are their shared flags.

// optBool is a boolean flag that knows whether it was given
// (--capture-content, --capture-content=false).
type optBool struct{ v *bool }

func (o *optBool) String() string {
	if o == nil || o.v == nil {
		return ""
	}
	return strconv.FormatBool(*o.v)
}

func (o *optBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false (got %q)", s)
	}
	o.v = &b
	return nil
}

func (o *optBool) IsBoolFlag() bool { return true }

// or is the flag's value, else def.
func (o *optBool) or(def bool) bool {
	if o.v == nil {
		return def
	}
	return *o.v
}

// referenceFlags are the experiment-record and content-capture flags of
// the reference agents' commands.
type referenceFlags struct {
	out, root, label, store string
	none                    bool
	capture                 optBool
}

// register adds the flags; captureDefault says what --capture-content is
// without the flag ("": the command sends no spans, and has neither
// --capture-content nor --store).
func (f *referenceFlags) register(fs *flag.FlagSet, captureDefault string) {
	fs.StringVar(&f.out, "experiment-out", "", "write the experiment record into this `folder` (default --experiments-dir/ID)")
	fs.StringVar(&f.root, "experiments-dir", experiment.DefaultRoot, "where experiments are kept (loom-eval experiment list reads it)")
	fs.BoolVar(&f.none, "no-experiment", false, "write no experiment record")
	fs.StringVar(&f.label, "label", "", "the agent's version label recorded in the experiment (default: the agent's name; the git commit of the current folder is recorded too)")
	if captureDefault == "" {
		return // a command that sends no spans
	}
	fs.StringVar(&f.store, "store", "", "with --otlp-endpoint: the trace store URL that collector writes (recorded in the experiment, which is saved there too, for the UI)")
	fs.Var(&f.capture, "capture-content", "record message content (input and output messages) on chat spans: true or false (default "+captureDefault+")")
}

// check refuses flags that contradict each other.
func (f *referenceFlags) check(cmd, endpoint string) error {
	if f.store != "" && endpoint == "" {
		return usageError("%s: --store names the store behind --otlp-endpoint; give both", cmd)
	}
	if f.none && f.out != "" {
		return usageError("%s: --no-experiment and --experiment-out: give one", cmd)
	}
	if f.out != "" {
		if _, err := os.Stat(filepath.Join(f.out, experiment.RecordFile)); err == nil {
			return usageError("%s: --experiment-out %s already holds an experiment (drop the flag for a new one under %s)", cmd, f.out, f.root)
		}
	}
	return nil
}

// replayCapture is replay's content setting: the flag, else the scripted
// journals' content only.
func (f *referenceFlags) replayCapture() replay.Capture {
	switch {
	case f.capture.v == nil:
		return replay.CaptureScripted
	case *f.capture.v:
		return replay.CaptureAll
	}
	return replay.CaptureNone
}

// experimentPlace is where a command's experiment went, in its --json
// output.
type experimentPlace struct {
	ID  string `json:"id"`
	Dir string `json:"dir"`
}

// writeExperiment writes the record (unless --no-experiment) and returns
// where it went (nil: none); announce says so on stderr. With --store it
// is saved into that store as well. A case file whose graders need a
// backend this command does not start (a judge) leaves no record, with a
// note: the command itself succeeded.
func (m *Main) writeExperiment(ctx context.Context, f *referenceFlags, cfg experiment.ReferenceConfig, announce bool) (*experimentPlace, error) {
	if f.none {
		return nil, nil
	}
	cfg.Root, cfg.Dir, cfg.Label, cfg.Store = f.root, f.out, f.label, f.store
	score, err := experimentScoreConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Score = score
	env, stop, err := (&gradingFlags{}).env(ctx, m.Stderr, m.getenv, cfg.Cases)
	if err != nil {
		return nil, err
	}
	defer stop()
	cfg.Grading = env
	rec, dir, err := experiment.WriteReference(ctx, cfg)
	switch {
	case errors.Is(err, grade.ErrNoBackend):
		fmt.Fprintf(m.Stderr, "loom-eval %s: no experiment record: %v (grade the trials with loom-eval grade, or run the agent with loom-eval experiment run)\n", cfg.Command, err)
		return nil, nil
	case err != nil:
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("%s: %w (--no-experiment skips the record)", cfg.Command, err)}
	}
	place := &experimentPlace{ID: rec.ID, Dir: dir}
	if announce {
		fmt.Fprintf(m.Stderr, "experiment %s: %d of %d trials passed, in %s (loom-eval experiment show %s)\n",
			rec.ID, rec.Summary.Passed, rec.Summary.Recorded, dir, dir)
	}
	if f.store == "" {
		return place, nil
	}
	st, err := storeurl.Open(ctx, f.store, false)
	if err != nil {
		return place, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("%s: --store %s: %w (the folder %s is whole: retry with loom-eval experiment push %s --store %s)", cfg.Command, f.store, err, dir, dir, f.store)}
	}
	defer st.Shutdown(context.WithoutCancel(ctx))
	if _, err := saveToStore(ctx, st, f.store, dir); err != nil {
		return place, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("%s: %w (retry with loom-eval experiment push %s --store %s)", cfg.Command, err, dir, f.store)}
	}
	if announce {
		fmt.Fprintf(m.Stderr, "experiment %s saved to the trace store %s\n", rec.ID, f.store)
	}
	return place, nil
}

// runExperimentTrials are the trials of `run`'s results, read back from
// the journal (with their transcripts, trace ids and costs), and the
// runs' journal exported as JSONL, which the experiment folder keeps.
func runExperimentTrials(ctx context.Context, j *journaldb.Store, results []runner.Result) ([]datasets.Trial, []byte, error) {
	trials := make([]datasets.Trial, 0, len(results))
	ids := make([]string, 0, len(results))
	for _, r := range results {
		evs, err := j.Events(ctx, r.RunID)
		if err != nil {
			return nil, nil, fmt.Errorf("run %s: %w", r.RunID, err)
		}
		t, err := replay.FreshTrial(journal.Run{ID: r.RunID, Events: evs, File: r.Journal}, r.TraceID, experiment.JournalFile)
		if err != nil {
			return nil, nil, err
		}
		t.CostUSD = r.CostUSD
		trials = append(trials, t)
		ids = append(ids, r.RunID)
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf, ids...); err != nil {
		return nil, nil, fmt.Errorf("export the runs' journal: %w", err)
	}
	return trials, buf.Bytes(), nil
}

// recordRun is `run --case`'s experiment: its results' trials over the
// case file.
func (m *Main) recordRun(ctx context.Context, f *referenceFlags, j *journaldb.Store, results []runner.Result, agent, caseFile, model string) error {
	if f.none || caseFile == "" {
		return nil
	}
	cases, err := loadCasesFlag(caseFile)
	if err != nil {
		return err
	}
	trials, journalJSONL, err := runExperimentTrials(ctx, j, results)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("run: experiment record: %w", err)}
	}
	_, err = m.writeExperiment(ctx, f, experiment.ReferenceConfig{CasesFile: caseFile, Cases: cases,
		Agent: agent, Command: "run", Model: model, Trials: trials, Journal: journalJSONL}, true)
	return err
}

// runModelDescription is what answered `run`'s calls.
func runModelDescription(provider, model string) string {
	if provider == "scripted" {
		return "scripted"
	}
	return "live " + provider + " " + model
}

// recordReplay is `replay --trials-out`'s experiment: the replayed runs'
// trials over --cases (or the runs' own tasks). With --json its place is
// in the output document, not on stderr.
func (m *Main) recordReplay(ctx context.Context, f *referenceFlags, trials []datasets.Trial, trialsFile, casesFile string, asJSON bool) (*experimentPlace, error) {
	if f.none || len(trials) == 0 {
		return nil, nil
	}
	var cases []datasets.Case
	if casesFile != "" {
		var err error
		if cases, err = loadCasesFlag(casesFile); err != nil {
			return nil, err
		}
	}
	var agents []string
	for _, t := range trials {
		if t.Agent != "" && !slices.Contains(agents, t.Agent) {
			agents = append(agents, t.Agent)
		}
	}
	agent := strings.Join(agents, "+")
	if agent == "" {
		agent = "unknown"
	}
	return m.writeExperiment(ctx, f, experiment.ReferenceConfig{CasesFile: casesFile, Cases: cases,
		Agent: agent, Command: "replay", Model: "replayed journals", Trials: trials, TrialsFile: trialsFile}, !asJSON)
}

// recordSuite is `suite run`'s experiment: the suite's trials file over
// its case file.
func (m *Main) recordSuite(ctx context.Context, f *referenceFlags, trialsFile, casesFile, agent string) (*experimentPlace, error) {
	if f.none {
		return nil, nil
	}
	cases, err := loadCasesFlag(casesFile)
	if err != nil {
		return nil, err
	}
	trials, err := datasets.LoadTrials(trialsFile)
	if err != nil {
		return nil, &ExitError{Code: ExitRuntimeErr, Err: fmt.Errorf("suite run: experiment record: %w", err)}
	}
	return m.writeExperiment(ctx, f, experiment.ReferenceConfig{CasesFile: casesFile, Cases: cases,
		Agent: agent, Command: "suite run", Model: "scripted", Trials: trials, TrialsFile: trialsFile}, true)
}
