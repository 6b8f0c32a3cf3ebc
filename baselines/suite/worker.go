package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/coord"
	"github.com/loomwork/loomwork/replay"
)

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	Coord *coord.Coordinator
	// ID names the worker in grants and refusals (e.g. host:pid).
	ID string
	// Index is the research agent's corpus (research suites).
	Index research.Index
	// Sandbox runs the coding agent's programs (coding suites).
	Sandbox coding.Sandbox
	// Poll is how long an idle worker waits before looking again. Default 100ms.
	Poll time.Duration
	// Log receives one line per trial (claimed, resumed, submitted,
	// refused). Default: nowhere.
	Log    io.Writer
	Logger *slog.Logger
	// TracerProvider receives each trial's spans (its invoke_agent root
	// carries the case id and trial); nil sends none.
	TracerProvider trace.TracerProvider
	// Authorizer decides each tool call (the suite's policy, see
	// Definition.Policy); nil: none.
	Authorizer runtime.Authorizer

	_ struct{}
}

// MaxClaims is how many times a trial may be claimed before a worker
// fails it instead of running it again.
const MaxClaims = 20

// Worker claims and runs a suite's trials until none is left.
type Worker struct {
	cfg WorkerConfig
	def Definition
	tok contextlayer.Counter
}

// NewWorker reads the suite definition from the coordinator.
func NewWorker(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	if cfg.Coord == nil || cfg.ID == "" {
		return nil, errors.New("suite worker: coordinator and id must be set")
	}
	def, err := LoadDefinition(ctx, cfg.Coord)
	if err != nil {
		return nil, fmt.Errorf("suite worker: %w", err)
	}
	switch def.Agent {
	case research.Name:
		if cfg.Index == nil {
			return nil, errors.New("suite worker: a research suite needs the judged dataset's index")
		}
	case coding.Name:
		if cfg.Sandbox == nil {
			return nil, errors.New("suite worker: a coding suite needs a sandbox")
		}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tok, err := contextlayer.NewTokenizer()
	if err != nil {
		return nil, fmt.Errorf("suite worker: %w", err)
	}
	return &Worker{cfg: cfg, def: def, tok: tok}, nil
}

// Definition is the suite this worker serves.
func (w *Worker) Definition() Definition { return w.def }

// Run claims trials until every trial task is accepted or failed (nil), or
// ctx ends. A claim that finds nothing claimable while trials are still
// held by other workers waits and looks again: a held trial may come back
// when its lease expires.
func (w *Worker) Run(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		g, err := w.cfg.Coord.ClaimNext(ctx, Kind, w.cfg.ID, time.Duration(w.def.Lease))
		if err != nil {
			return fmt.Errorf("suite worker %s: %w", w.cfg.ID, err)
		}
		if g == nil {
			n, err := w.cfg.Coord.Count(ctx, Kind)
			if err != nil {
				return fmt.Errorf("suite worker %s: %w", w.cfg.ID, err)
			}
			if n.Pending+n.Running == 0 {
				return nil // proposals are the driver's to accept
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(w.cfg.Poll):
			}
			continue
		}
		if err := w.runOne(ctx, *g); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("suite worker %s: %w", w.cfg.ID, err)
		}
	}
}

// runOne runs the trial g grants: a heartbeat renews the lease at a third
// of its length and cancels the trial when a renewal is refused (the grant
// is lost: another worker owns the trial now); then it submits, fenced.
func (w *Worker) runOne(ctx context.Context, g coord.Grant) error {
	task, err := w.cfg.Coord.Get(ctx, g.Key)
	if err != nil {
		return err
	}
	var spec TrialSpec
	if err := json.Unmarshal(task.Payload, &spec); err != nil {
		return fmt.Errorf("task %s: payload: %w", g.Key, err)
	}
	if task.Claims > MaxClaims {
		// Claimed again and again without a result: every worker that took
		// it died or gave it back. Stop feeding it workers.
		why := fmt.Sprintf("claimed %d times without an accepted result (limit %d)", task.Claims, MaxClaims)
		fmt.Fprintf(w.cfg.Log, "%s: %s: %s: failing it\n", w.cfg.ID, g.Key, why)
		return w.cfg.Coord.Fail(ctx, g.Key, why)
	}
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	grant := make(chan coord.Grant, 1)
	grant <- g
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		lease := time.Duration(w.def.Lease)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		cur := g
		for {
			select {
			case <-tctx.Done():
				return
			case <-t.C:
			}
			ng, err := w.cfg.Coord.Renew(tctx, cur, lease)
			if errors.Is(err, coord.ErrStaleGrant) {
				fmt.Fprintf(w.cfg.Log, "%s: %s: lease lost, stopping: %v\n", w.cfg.ID, g.Key, err)
				cancel(err)
				return
			}
			if err != nil {
				// A busy database or a closing one: the lease runs on; the
				// next tick tries again, and a refused submit settles it.
				w.cfg.Logger.Warn("renew failed", "task", g.Key, "err", err)
				continue
			}
			cur = ng
			<-grant
			grant <- cur
		}
	}()

	rec, journalText, resumed, runErr := w.runTrial(tctx, spec, g.Fence)
	cancel(nil)
	<-hbDone
	cur := <-grant
	if runErr != nil {
		if cause := context.Cause(tctx); errors.Is(cause, coord.ErrStaleGrant) {
			return nil // the trial is another worker's now
		}
		if ctx.Err() != nil {
			// Stopping (SIGTERM, the suite done): give the trial back now
			// rather than at the end of the lease; its journal stays for
			// the next attempt to resume from.
			if err := w.cfg.Coord.Release(context.WithoutCancel(ctx), cur, "worker stopping"); err != nil && !errors.Is(err, coord.ErrStaleGrant) {
				w.cfg.Logger.Warn("release on stop", "task", g.Key, "err", err)
			}
			return ctx.Err()
		}
		// An operational failure (a journal that cannot be opened, a full
		// disk): give the trial back at once rather than holding it to
		// the end of the lease; MaxClaims bounds the retries.
		fmt.Fprintf(w.cfg.Log, "%s: %s: %v: released\n", w.cfg.ID, g.Key, runErr)
		if err := w.cfg.Coord.Release(ctx, cur, runErr.Error()); err != nil && !errors.Is(err, coord.ErrStaleGrant) {
			return err
		}
		return nil
	}
	line, err := encodeTrial(rec)
	if err != nil {
		return err
	}
	res, err := json.Marshal(Result{Trial: json.RawMessage(bytes.TrimSpace(line)), Journal: journalText})
	if err != nil {
		return err
	}
	err = w.cfg.Coord.Submit(ctx, cur, coord.Digest(res), res)
	switch {
	case errors.Is(err, coord.ErrStaleGrant):
		fmt.Fprintf(w.cfg.Log, "%s: %s: late result refused: %v\n", w.cfg.ID, g.Key, err)
		return nil
	case err != nil:
		return err
	}
	how := "ran"
	if resumed > 0 {
		how = fmt.Sprintf("resumed from %d journaled events", resumed)
	}
	fmt.Fprintf(w.cfg.Log, "%s: %s (fence %d): %s, submitted\n", w.cfg.ID, g.Key, g.Fence, how)
	return nil
}

// attemptDir is one grant's private folder for a trial: its journal and
// its workspace. No other attempt writes it.
func (w *Worker) attemptDir(spec TrialSpec, fence int64) string {
	return filepath.Join(w.def.AbsDir, "attempts", trialName(spec.CaseID, spec.Trial), "f"+strconv.FormatInt(fence, 10))
}

// previousAttempt is the latest earlier attempt of the trial that has a
// journal, "" if none.
func (w *Worker) previousAttempt(spec TrialSpec, fence int64) string {
	root := filepath.Dir(w.attemptDir(spec, fence))
	ents, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	var fences []int64
	for _, e := range ents {
		if f, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), "f"), 10, 64); err == nil && f < fence {
			if _, err := os.Stat(filepath.Join(root, e.Name(), "journal.db")); err == nil {
				fences = append(fences, f)
			}
		}
	}
	if len(fences) == 0 {
		return ""
	}
	sort.Slice(fences, func(i, j int) bool { return fences[i] > fences[j] })
	return filepath.Join(root, "f"+strconv.FormatInt(fences[0], 10))
}

// runTrial runs one trial in its attempt folder and returns its record and
// exported journal. An earlier attempt's journal is imported first, and its
// workspace copied, so the run resumes where that attempt stopped. The
// journal clock is logical and continues from the last journaled event,
// so the journal (and the record's duration) is the same as an
// uninterrupted run's.
func (w *Worker) runTrial(ctx context.Context, spec TrialSpec, fence int64) (datasets.Trial, string, int, error) {
	dir := w.attemptDir(spec, fence)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return datasets.Trial{}, "", 0, err
	}
	var prior []journal.Event
	if prev := w.previousAttempt(spec, fence); prev != "" {
		evs, err := priorEvents(ctx, filepath.Join(prev, "journal.db"), spec.RunID)
		if err != nil {
			return datasets.Trial{}, "", 0, fmt.Errorf("read the previous attempt's journal: %w", err)
		}
		prior = evs
		if err := copyTree(filepath.Join(prev, "workspaces"), filepath.Join(dir, "workspaces")); err != nil {
			return datasets.Trial{}, "", 0, fmt.Errorf("copy the previous attempt's workspace: %w", err)
		}
	}
	clock := journaldb.DeterministicClock()
	if len(prior) > 0 {
		clock = journaldb.LogicalClock(prior[len(prior)-1].Time, time.Millisecond)
	}
	jpath := filepath.Join(dir, "journal.db")
	_ = os.Remove(jpath) // a fence is granted once; a leftover is from a crash of this very attempt's setup
	j, err := journaldb.Open(ctx, journaldb.Config{Path: jpath, Clock: clock, Logger: w.cfg.Logger})
	if err != nil {
		return datasets.Trial{}, "", 0, err
	}
	defer j.Shutdown(context.WithoutCancel(ctx))
	if len(prior) > 0 {
		if err := j.Import(ctx, []journal.Run{{ID: spec.RunID, Events: prior}}); err != nil {
			return datasets.Trial{}, "", 0, fmt.Errorf("import the previous attempt's journal: %w", err)
		}
	}

	var agent runtime.Agent
	var cspec runtime.ContextSpec
	switch w.def.Agent {
	case research.Name:
		agent, err = research.New(research.Config{Index: w.cfg.Index})
		cspec = research.DefaultContext()
	case coding.Name:
		agent, err = coding.New(coding.Config{Sandbox: w.cfg.Sandbox, WorkRoot: filepath.Join(dir, "workspaces")})
		cspec = coding.DefaultContext()
	}
	if err != nil {
		return datasets.Trial{}, "", 0, err
	}
	models, err := runner.ScriptedPolicies(w.def.Agent, w.tok)
	if err != nil {
		return datasets.Trial{}, "", 0, err
	}
	model := models(spec.Trial)
	cspec.Summarizer = runtime.SummarizerExtract
	rt, err := runtime.New(runtime.Config{Model: model, Journal: j, Context: &cspec, Logger: w.cfg.Logger,
		TracerProvider: w.cfg.TracerProvider, CaptureContent: w.def.CaptureContent, Authorizer: w.cfg.Authorizer})
	if err != nil {
		return datasets.Trial{}, "", 0, err
	}
	_, runErr := rt.Run(ctx, agent, runtime.Task{RunID: spec.RunID, Input: spec.Input, CaseID: spec.CaseID, Trial: spec.Trial, Attributes: spec.Attributes})
	if runErr != nil && ctx.Err() != nil {
		return datasets.Trial{}, "", len(prior), runErr
	}
	// A run that stopped with an error keeps what it journaled, and its
	// trial fails (as in the CI recipe's fresh run).
	return w.record(ctx, j, spec, len(prior))
}

func (w *Worker) record(ctx context.Context, j *journaldb.Store, spec TrialSpec, resumed int) (datasets.Trial, string, int, error) {
	jp := w.def.JournalPath(spec.CaseID, spec.Trial)
	evs, err := j.Events(ctx, spec.RunID)
	if err != nil {
		return datasets.Trial{}, "", resumed, err
	}
	if len(evs) == 0 {
		f := false
		return datasets.Trial{CaseID: spec.CaseID, Trial: spec.Trial, ModelLabel: datasets.LabelScripted,
			Journal: &datasets.JournalRef{Path: jp, RunID: spec.RunID}, Success: &f}, "", resumed, nil
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf, spec.RunID); err != nil {
		return datasets.Trial{}, "", resumed, err
	}
	runs, err := journal.ReadJSONL(bytes.NewReader(buf.Bytes()), jp)
	if err != nil {
		return datasets.Trial{}, "", resumed, fmt.Errorf("read back the exported journal: %w", err)
	}
	if len(runs) != 1 {
		return datasets.Trial{}, "", resumed, fmt.Errorf("exported journal holds %d runs", len(runs))
	}
	rep, err := replay.Rescore(runs[0])
	if err != nil {
		return datasets.Trial{}, "", resumed, err
	}
	return replay.TrialRecord(&rep, false), buf.String(), resumed, nil
}

// priorEvents reads a run's events from an earlier attempt's journal. That
// attempt's worker may be dead mid-write (SQLite recovers its WAL on open)
// or, paused, still alive: what it writes after this read belongs to its
// own attempt only.
func priorEvents(ctx context.Context, path, runID string) ([]journal.Event, error) {
	j, err := journaldb.Open(ctx, journaldb.Config{Path: path})
	if err != nil {
		return nil, err
	}
	defer j.Shutdown(context.WithoutCancel(ctx))
	return j.Events(ctx, runID)
}

func readJSONL(s, name string) ([]journal.Run, error) {
	return journal.ReadJSONL(strings.NewReader(s), name)
}

// copyTree copies the regular files and folders below src to dst (a
// missing src copies nothing).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == src {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, info.Mode().Perm())
	})
}

// WarmIndex builds (or checks) the research agent's persisted index in
// def.IndexCache once, before workers start: the index's files are opened
// with an exclusive lock, so workers cannot share them and each works on
// a private copy (WorkerIndex).
func WarmIndex(ctx context.Context, def Definition) error {
	if def.Agent != research.Name {
		return nil
	}
	idx := &research.DatasetIndex{Dir: def.Dataset, CacheDir: def.IndexCache}
	_, err := idx.Duplicates(ctx) // opens (building if needed) the index
	return errors.Join(err, idx.Close(context.WithoutCancel(ctx)))
}

// WorkerIndex is a worker's private copy of the warmed index (under the
// suite folder's workers/ID), and a function that closes and removes it.
// Fresh persisted builds of one corpus rank alike, and a copy of one build
// ranks as the build does, so every worker retrieves what the
// single-process run retrieves.
func WorkerIndex(def Definition, id string) (*research.DatasetIndex, func(context.Context) error, error) {
	dir := filepath.Join(def.AbsDir, "workers", unsafeName.ReplaceAllString(id, "_"), "index")
	if err := os.RemoveAll(dir); err != nil {
		return nil, nil, err
	}
	if err := copyTree(def.IndexCache, dir); err != nil {
		return nil, nil, fmt.Errorf("copy the index cache %s: %w", def.IndexCache, err)
	}
	idx := &research.DatasetIndex{Dir: def.Dataset, CacheDir: dir}
	return idx, func(ctx context.Context) error {
		return errors.Join(idx.Close(ctx), os.RemoveAll(filepath.Dir(dir)))
	}, nil
}
