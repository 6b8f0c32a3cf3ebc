package suite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/coord"
)

// Environment is the receipt environment the driver records: what checked
// the candidate. The check is deterministic given the candidate bytes, so
// the environment is the validator's identity and the suite's agent.
func (d Definition) Environment() string {
	return "loom-eval suite validator; agent " + d.Agent + " (scripted policy)"
}

// Progress is one look at a suite.
type Progress struct {
	Total     int `json:"total"`
	Accepted  int `json:"accepted"`
	Proposed  int `json:"proposed"`
	Running   int `json:"running"`
	Pending   int `json:"pending"`
	Failed    int `json:"failed"`
	Reclaimed int `json:"reclaimed"` // claims beyond the first, over all trials
	Refused   int `json:"refused"`   // worker renewals and submissions refused by the fence
}

func (p Progress) String() string {
	return fmt.Sprintf("%d/%d accepted, %d running, %d pending, %d awaiting validation, %d reclaimed, %d stale renewals/results refused",
		p.Accepted, p.Total, p.Running, p.Pending, p.Proposed, p.Reclaimed, p.Refused)
}

// Done is true when every trial is accepted or failed.
func (p Progress) Done() bool { return p.Total > 0 && p.Accepted+p.Failed == p.Total }

// Driver validates and accepts a suite's proposals and writes its output.
type Driver struct {
	Coord *coord.Coordinator
	Def   Definition
	// Progress receives a line whenever the counts change (at most once
	// per ProgressEvery, default 1s). nil: silent.
	Progress      io.Writer
	ProgressEvery time.Duration
	// Poll is how often the driver looks for proposals. Default 50ms.
	Poll time.Duration
}

// Status counts the suite's trials.
func (d *Driver) Status(ctx context.Context) (Progress, error) {
	n, err := d.Coord.Count(ctx, Kind)
	if err != nil {
		return Progress{}, err
	}
	return Progress{Total: n.Total(), Accepted: n.Accepted, Proposed: n.Proposed, Running: n.Running, Pending: n.Pending,
		Failed: n.Failed, Reclaimed: max(0, n.Claims-(n.Total()-n.Pending)), Refused: n.Refused}, nil
}

// Validate checks every proposal once, records its receipt and accepts
// the passing ones; a failing proposal fails its trial (the suite then
// ends in error: a worker produced a record the scorer must not read).
func (d *Driver) Validate(ctx context.Context) error {
	tasks, err := d.Coord.InState(ctx, Kind, coord.Proposed)
	if err != nil {
		return err
	}
	env := d.Def.Environment()
	for _, t := range tasks {
		var spec TrialSpec
		if err := json.Unmarshal(t.Payload, &spec); err != nil {
			return fmt.Errorf("task %s: payload: %w", t.Key, err)
		}
		_, verr := validate(d.Def, spec, t.Result)
		r := coord.Receipt{Candidate: t.Candidate, Environment: env, Policy: ValidationPolicy, Passed: verr == nil, Report: "ok"}
		if verr != nil {
			r.Report = verr.Error()
		}
		if err := d.Coord.RecordValidation(ctx, r); err != nil {
			return err
		}
		err := d.Coord.Accept(ctx, t.Key, t.Candidate, env, ValidationPolicy)
		switch {
		case err == nil:
		case errors.Is(err, coord.ErrNotAccepted) && verr == nil:
			// Reclaimed between the listing and the accept: the new grant
			// will propose again.
		case errors.Is(err, coord.ErrNotAccepted):
			if ferr := d.Coord.Fail(ctx, t.Key, "validation: "+verr.Error()); ferr != nil {
				return ferr
			}
		default:
			return err
		}
	}
	return nil
}

// Wait validates and accepts proposals until every trial is accepted or
// failed, printing progress; stop, when it returns an error, ends the wait
// early (e.g. every local worker exited while trials remain).
func (d *Driver) Wait(ctx context.Context, stop func() error) (Progress, error) {
	poll, every := d.Poll, d.ProgressEvery
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	if every <= 0 {
		every = time.Second
	}
	var last Progress
	var lastAt time.Time
	for {
		if err := d.Validate(ctx); err != nil {
			return last, err
		}
		p, err := d.Status(ctx)
		if err != nil {
			return last, err
		}
		if d.Progress != nil && p != last && (time.Since(lastAt) >= every || p.Done()) {
			fmt.Fprintf(d.Progress, "suite: %s\n", p)
			lastAt = time.Now()
		}
		last = p
		if p.Done() {
			return p, nil
		}
		if stop != nil {
			if err := stop(); err != nil {
				return p, err
			}
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// Write publishes the accepted trials: each trial's journal under
// Dir/journals and the trials file Dir/trials.jsonl, in plan order. It
// fails when a trial is not accepted.
func (d *Driver) Write(ctx context.Context) (string, error) {
	tasks, err := d.Coord.Tasks(ctx, Kind, true)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	var failed []string
	for _, t := range tasks {
		if t.State != coord.Accepted {
			failed = append(failed, fmt.Sprintf("%s (%s: %s)", t.Key, t.State, t.Note))
			continue
		}
		var spec TrialSpec
		if err := json.Unmarshal(t.Payload, &spec); err != nil {
			return "", fmt.Errorf("task %s: payload: %w", t.Key, err)
		}
		var r Result
		if err := json.Unmarshal(t.Result, &r); err != nil {
			return "", fmt.Errorf("task %s: result: %w", t.Key, err)
		}
		if r.Journal != "" {
			if err := writeFileAtomic(abs(d.Def, d.Def.JournalPath(spec.CaseID, spec.Trial)), []byte(r.Journal)); err != nil {
				return "", fmt.Errorf("publish journal of %s: %w", t.Key, err)
			}
		}
		out.Write(r.Trial)
		out.WriteByte('\n')
	}
	if len(failed) > 0 {
		return "", fmt.Errorf("%d trial(s) not accepted: %s", len(failed), strings.Join(failed, "; "))
	}
	// The file must read back as the scorer reads it.
	if _, err := datasets.ReadTrials(strings.NewReader(out.String()), d.Def.TrialsPath()); err != nil {
		return "", fmt.Errorf("trials file: %w", err)
	}
	path := abs(d.Def, d.Def.TrialsPath())
	if err := writeFileAtomic(path, []byte(out.String())); err != nil {
		return "", fmt.Errorf("write trials: %w", err)
	}
	return d.Def.TrialsPath(), nil
}

// abs maps a path below Def.Dir (as records name it) to the folder the
// suite really lives in, whatever this process's working directory.
func abs(def Definition, p string) string {
	rel, err := filepath.Rel(filepath.Clean(def.Dir), p)
	if err != nil {
		return p
	}
	return filepath.Join(def.AbsDir, rel)
}
