package routines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/coord"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/report"
	"github.com/loomwork/loomwork/scorer/tracecases"
)

// ScoreTracesKind is the kind of the work task the score-traces routine
// proposes and ScoreWork executes.
const ScoreTracesKind = "score-traces"

// ScorePolicy names the check a score-traces result passes before it is
// accepted: the files the result names are on disk with the digests it
// records.
const ScorePolicy = "score-traces-files-v1"

// Report file names inside a task's output folder.
const (
	TrialsFile  = "trials.jsonl"
	CasesFile   = "cases.jsonl"
	SummaryFile = "score.json"
)

// TraceStore is what scoring a window reads: the trace list and each
// trace's spans (tracecases.Reader; its GetTrace is also the scorer's
// scorer.TraceReader).
type TraceStore interface {
	tracecases.Reader
}

// ScorePayload is a score-traces task's payload, as Traces.Inspect writes it.
type ScorePayload struct {
	Since  time.Time `json:"since"`
	Until  time.Time `json:"until"`
	Traces int       `json:"traces"`
	Cases  string    `json:"cases"`
}

// ScoreResult is what an executed score-traces task submits: the folder it
// wrote and the digests of its files, so the acceptance check can compare
// them with the disk.
type ScoreResult struct {
	Dir string `json:"dir"`
	// Trials is how many trials (traces) were scored; CasesFromFile and
	// CasesFromTraces split the scored cases by where their expectations
	// came from (the payload's cases file, else what the traces did).
	Trials          int               `json:"trials"`
	CasesFromFile   int               `json:"cases_from_file"`
	CasesFromTraces int               `json:"cases_from_traces"`
	SuccessRate     float64           `json:"success_rate"`
	Files           map[string]string `json:"files"` // name → sha256 hex
}

// ScoreWork executes the score-traces tasks the Traces routine proposes:
// for each it builds cases and trials from the window's traces
// (scorer/tracecases, as `loom-eval cases from-traces --since --until`),
// scores the trials against the payload's cases file (scorer/report, as
// `loom-eval score --cases --store`; a case id the file lacks is scored
// against the case built from its traces), writes trials.jsonl,
// cases.jsonl and score.json into Out/KEY, and submits under its grant.
// Being the trusted runner here, it then checks the files against the
// submitted digests, records the receipt and accepts the task, so an
// executed window is never claimed again.
type ScoreWork struct {
	Coord *coord.Coordinator
	Store TraceStore
	// Out is the root of the output folders; a task's folder is
	// Out/score-traces/SINCE/UNTIL (its key).
	Out    string
	Worker string
	// Lease is each task's lease (default 10m). Scoring a window is one
	// pass with no heartbeat: a run longer than the lease has its submit
	// refused (fenced) and the task is claimed again.
	Lease time.Duration
	// Config is the scorer's configuration (default scorer.DefaultConfig).
	Config *scorer.Config
	Log    io.Writer
}

// RunQueued claims and executes every claimable score-traces task once
// and returns how many it accepted. A task that cannot be executed (a
// malformed payload, an empty window, a missing cases file, scoring bad
// input) is failed with the reason, naming it, and the others still run;
// the returned error joins those reasons. A coordinator error stops the run.
func (w *ScoreWork) RunQueued(ctx context.Context) (int, error) {
	if w.Coord == nil || w.Store == nil || w.Out == "" || w.Worker == "" {
		return 0, errors.New("score-traces work: coordinator, store, output folder and worker must be set")
	}
	lease := w.Lease
	if lease <= 0 {
		lease = 10 * time.Minute
	}
	done := 0
	var failed []error
	for {
		g, err := w.Coord.ClaimNext(ctx, ScoreTracesKind, w.Worker, lease)
		if err != nil {
			return done, err
		}
		if g == nil {
			return done, errors.Join(failed...)
		}
		res, taskErr, err := w.runOne(ctx, *g)
		switch {
		case err != nil:
			return done, err
		case taskErr != nil:
			failed = append(failed, taskErr)
			if ferr := w.Coord.Fail(ctx, g.Key, taskErr.Error()); ferr != nil {
				return done, ferr
			}
			w.logf("%s: failed: %v\n", g.Key, taskErr)
		case res != nil:
			done++
			w.logf("%s: scored %d trial(s) (success rate %.2f) into %s; accepted\n", g.Key, res.Trials, res.SuccessRate, res.Dir)
		}
	}
}

func (w *ScoreWork) logf(format string, args ...any) {
	if w.Log != nil {
		fmt.Fprintf(w.Log, format, args...)
	}
}

// ParseScorePayload decodes and checks a score-traces payload; errors name
// the field.
func ParseScorePayload(b []byte) (ScorePayload, error) {
	var p ScorePayload
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("payload: %w", err)
	}
	var errs []error
	if p.Since.IsZero() {
		errs = append(errs, errors.New("payload: since is missing"))
	}
	if p.Until.IsZero() {
		errs = append(errs, errors.New("payload: until is missing"))
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Until.After(p.Since) {
		errs = append(errs, fmt.Errorf("payload: until %s is not after since %s", p.Until.Format(time.RFC3339), p.Since.Format(time.RFC3339)))
	}
	if p.Traces <= 0 {
		errs = append(errs, fmt.Errorf("payload: traces is %d; the routine proposes a window only when it has traces", p.Traces))
	}
	return p, errors.Join(errs...)
}

// runOne executes one granted task. taskErr is the task's own failure (it
// is failed with it); err is the coordinator's or the disk's (the run
// stops). A refused submit (the grant went stale) is neither: another
// worker owns the task now.
func (w *ScoreWork) runOne(ctx context.Context, g coord.Grant) (res *ScoreResult, taskErr, err error) {
	task, err := w.Coord.Get(ctx, g.Key)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*ScoreResult, error, error) {
		return nil, fmt.Errorf("score-traces task %s: %w", g.Key, err), nil
	}
	p, perr := ParseScorePayload(task.Payload)
	if perr != nil {
		return fail(perr)
	}
	cases, trials, rep, berr := tracecases.Build(ctx, w.Store, tracecases.Filter{Since: p.Since, Until: p.Until})
	if berr != nil {
		// The store, not the task: give the task back for a later run.
		err := fmt.Errorf("score-traces task %s: read the traces of [%s, %s): %w", g.Key, p.Since.Format(time.RFC3339), p.Until.Format(time.RFC3339), berr)
		if rerr := w.Coord.Release(ctx, g, err.Error()); rerr != nil && !errors.Is(rerr, coord.ErrStaleGrant) {
			return nil, nil, errors.Join(err, rerr)
		}
		return nil, nil, err
	}
	if len(trials) == 0 {
		return fail(fmt.Errorf("no trace started in [%s, %s) (the routine counted %d); nothing to score",
			p.Since.Format(time.RFC3339), p.Until.Format(time.RFC3339), p.Traces))
	}
	scored, fromFile, cerr := casesFor(p.Cases, cases)
	if cerr != nil {
		return fail(cerr)
	}
	dir := filepath.Join(w.Out, filepath.FromSlash(g.Key))
	trialsPath := filepath.Join(dir, TrialsFile)
	cfg := scorer.DefaultConfig()
	if w.Config != nil {
		cfg = *w.Config
	}
	r, eerr := report.Evaluate(ctx, cfg, report.Inputs{Cases: scored, CasesFile: p.Cases,
		Candidate: report.Trials{Source: trialsPath, Trials: trials}, Traces: w.Store})
	if eerr != nil {
		return fail(fmt.Errorf("score: %w", eerr))
	}
	files := map[string][]byte{}
	var b bytes.Buffer
	if err := tracecases.WriteJSONL(&b, trials); err != nil {
		return nil, nil, err
	}
	files[TrialsFile] = bytes.Clone(b.Bytes())
	b.Reset()
	if err := tracecases.WriteJSONL(&b, scored); err != nil {
		return nil, nil, err
	}
	files[CasesFile] = bytes.Clone(b.Bytes())
	b.Reset()
	if err := report.Write(&b, report.JSON, r); err != nil {
		return nil, nil, err
	}
	files[SummaryFile] = bytes.Clone(b.Bytes())

	out := ScoreResult{Dir: dir, Trials: rep.Trials, CasesFromFile: fromFile, CasesFromTraces: len(scored) - fromFile,
		SuccessRate: float64(r.Suite.Successes) / float64(r.Suite.NTrials), Files: map[string]string{}}
	for name, data := range files {
		out.Files[name] = coord.Digest(data)
	}
	result, err := json.Marshal(out)
	if err != nil {
		return nil, nil, err
	}
	// Submit first, then write: a worker whose grant went stale is refused
	// here and never touches the folder.
	cand := coord.Digest(result)
	if err := w.Coord.Submit(ctx, g, cand, result); err != nil {
		if errors.Is(err, coord.ErrStaleGrant) {
			w.logf("%s: result refused: %v\n", g.Key, err)
			return nil, nil, nil
		}
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("score-traces task %s: %w", g.Key, err)
	}
	for name, data := range files {
		if err := writeFileAtomic(filepath.Join(dir, name), data); err != nil {
			return nil, nil, fmt.Errorf("score-traces task %s: %w", g.Key, err)
		}
	}
	verr := checkFiles(out)
	rc := coord.Receipt{Candidate: cand, Environment: "local:" + w.Out, Policy: ScorePolicy, Passed: verr == nil, Report: "ok"}
	if verr != nil {
		rc.Report = verr.Error()
	}
	if err := w.Coord.RecordValidation(ctx, rc); err != nil {
		return nil, nil, err
	}
	if verr != nil {
		return fail(verr)
	}
	if err := w.Coord.Accept(ctx, g.Key, cand, rc.Environment, ScorePolicy); err != nil {
		if errors.Is(err, coord.ErrNotAccepted) {
			// Reclaimed between the submit and the accept: the new grant
			// proposes again.
			w.logf("%s: not accepted: %v\n", g.Key, err)
			return nil, nil, nil
		}
		return nil, nil, err
	}
	return &out, nil, nil
}

// casesFor returns the cases the trials are scored against: the cases
// file's, plus, for a case id the file lacks, the case built from its
// traces. fromFile counts the file's cases among them. No cases file
// scores against the built cases alone.
func casesFor(path string, built []datasets.Case) (cases []datasets.Case, fromFile int, err error) {
	if path == "" {
		return built, 0, nil
	}
	file, err := datasets.LoadCases(path)
	if err != nil {
		return nil, 0, fmt.Errorf("cases file: %w", err)
	}
	have := map[string]bool{}
	for _, c := range file {
		have[c.ID] = true
	}
	needed := map[string]bool{}
	for _, c := range built {
		needed[c.ID] = true
	}
	for _, c := range file {
		if needed[c.ID] {
			cases = append(cases, c)
			fromFile++
		}
	}
	for _, c := range built {
		if !have[c.ID] {
			cases = append(cases, c)
		}
	}
	return cases, fromFile, nil
}

// checkFiles is the acceptance check: every file the result names is on
// disk with the recorded digest.
func checkFiles(r ScoreResult) error {
	var bad []string
	for name, want := range r.Files {
		b, err := os.ReadFile(filepath.Join(r.Dir, name))
		switch {
		case err != nil:
			bad = append(bad, err.Error())
		case coord.Digest(b) != want:
			bad = append(bad, fmt.Sprintf("%s: digest %s, result says %s", name, coord.Digest(b)[:12], want[:12]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("report files do not match the result: %s", strings.Join(bad, "; "))
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
