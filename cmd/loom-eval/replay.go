package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/journal"
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

// runReplay re-runs journals with their recorded model answers, executing
// the tools again; no model key is involved.
func (m *Main) runReplay(ctx context.Context, args []string) error {
	fs := m.newFlagSet("replay", "replay [flags] JOURNAL.jsonl... [--trials-out FILE [--cases FILE] [--experiment-out DIR | --no-experiment]]")
	rescore := fs.Bool("rescore", false, "derive the reports from the recorded events alone; execute nothing")
	trialsOut := fs.String("trials-out", "", "write one trial record per run (JSONL) to this file, for loom-eval score")
	endpoint := fs.String("otlp-endpoint", "", "send the replay's spans over OTLP/gRPC to host:port (e.g. 127.0.0.1:4317 of loom-eval serve)")
	outFmt := m.addOutputFlags(fs, "text", "json")
	policyFile := fs.String("policy", "", "re-decide every tool call with this policy rules `file` (journals recorded under a policy carry its decisions)")
	strict := fs.Bool("strict", false, "also fail (exit 1) when a re-executed tool returns a different result")
	var mcpLive mcpFlags
	mcpLive.add(fs, "re-execute the MCP tools of journals that used this server (default: their recorded results; no server needed)")
	var ref referenceFlags
	ref.register(fs, "true for journals of scripted answers, false for live ones")
	casesFile := fs.String("cases", "", "with --trials-out: the case file the journals' runs attempted, recorded in the experiment and graded on (default: a case file of the runs' own tasks, written into the experiment folder)")
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
	if err := ref.check("replay", *endpoint); err != nil {
		return err
	}
	if *rescore && *endpoint != "" {
		return usageError("replay: --rescore executes nothing and emits no spans; drop --otlp-endpoint")
	}
	reg, cleanup, err := m.replayAgents()
	defer cleanup()
	if err != nil {
		return err
	}
	cfg := replay.Config{Registry: reg, CaptureContent: ref.replayCapture()}
	if *policyFile != "" {
		g, err := policyGuard(*policyFile)
		if err != nil {
			return err
		}
		cfg.Authorizer = g
	}
	if *endpoint != "" {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(*endpoint), otlptracegrpc.WithInsecure())
		if err != nil {
			return fmt.Errorf("replay: otlp exporter: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "loom-eval-replay"))))
		defer func() {
			if err := tp.Shutdown(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(m.Stderr, "loom-eval replay: flush spans to %s: %v\n", *endpoint, err)
			}
		}()
		cfg.TracerProvider = tp
	}
	engine, err := replay.New(cfg)
	if err != nil {
		return err
	}
	liveMCP, stopMCP, err := m.mcpConnect(ctx, &mcpLive, cfg.TracerProvider)
	defer stopMCP()
	if err != nil {
		return err
	}

	out := replayOutput{Reports: []journal.ReplayReport{}}
	badInput := false
	for _, path := range fs.Args() {
		runs, err := journal.ReadJSONLFile(path)
		if err != nil {
			var ce *journal.CorruptionError
			badInput = badInput || errors.As(err, &ce) || errors.Is(err, os.ErrNotExist)
			out.Errors = append(out.Errors, err.Error())
			continue
		}
		for _, run := range runs {
			var rep journal.ReplayReport
			if *rescore {
				rep, err = replay.Rescore(run)
			} else if e, ok, merr := mcpReplayEngine(run, cfg, liveMCP); ok || merr != nil {
				err = merr
				if err == nil {
					rep, err = e.Replay(ctx, run)
				}
			} else {
				rep, err = engine.Replay(ctx, run)
			}
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				out.Errors = append(out.Errors, err.Error())
				continue
			}
			out.Reports = append(out.Reports, rep)
		}
	}
	// Every replayed run gets its trial, a diverged one too (its
	// divergence field says why), so the file names every case and the
	// scorer fails the diverged trials by name.
	var diverged []string
	for i := range out.Reports {
		r := &out.Reports[i]
		if replay.Diverged(r, *strict) != "" {
			diverged = append(diverged, caseTrial(r))
		}
	}
	failed := len(out.Errors) > 0 || len(diverged) > 0
	out.OK = !failed

	if *trialsOut != "" {
		trials, err := writeTrials(*trialsOut, out.Reports, *endpoint != "", *strict)
		if err != nil {
			return err
		}
		if out.Experiment, err = m.recordReplay(ctx, &ref, trials, *trialsOut, *casesFile, asJSON); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		m.printReplay(out, *rescore)
	}
	switch {
	case badInput:
		return &ExitError{Code: ExitUsage, Err: errors.New("replay: a journal was rejected")}
	case len(out.Errors) > 0:
		return &ExitError{Code: ExitRuntimeErr, Err: errors.New("replay: a run could not be replayed")}
	case failed:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("replay: %d run(s) did not reproduce their journal: %s", len(diverged), strings.Join(diverged, ", "))}
	}
	return nil
}

func (m *Main) printReplay(out replayOutput, rescore bool) {
	for _, r := range out.Reports {
		status := "PASS"
		switch {
		case r.Divergence != nil:
			status = "DIVERGED"
		case len(r.ResultDiffs) > 0:
			status = "DIFFERS"
		case !r.Complete:
			status = "PARTIAL"
		}
		if rescore {
			status = "RESCORED"
		}
		fmt.Fprintf(m.Stdout, "%-8s %s (%s; %s, agent %s, model label %s): %d/%d events matched, %d tool runs, %d model calls\n",
			status, r.RunID, caseTrial(&r), r.File, r.Agent, r.Label, r.MatchedEvents, r.RecordedEvents, r.ToolRuns, r.ModelCalls)
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
