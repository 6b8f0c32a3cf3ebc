// Package routines holds Loomwork's own scheduled evaluations as
// coordinator routines (internal/coord schedules): the nightly
// replay-and-gate of the committed baselines, and scoring the production
// traces that arrived since the previous occurrence against cases. A
// timer only creates occurrences; each occurrence's inspection is a task
// in the same queue as everything else, and what it finds is proposed as
// work with a stable intent key — the same regression on two nights, or
// the same trace window delivered twice, is one task — or recorded as a
// no-op with its evidence.
package routines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/loomwork/loomwork/internal/coord"
	"github.com/loomwork/loomwork/store"
)

// Routine names.
const (
	NightlyGate = "nightly-gate"
	ScoreTraces = "score-traces"
)

// Routine inspects the product for one occurrence.
type Routine interface {
	Name() string
	// Inspect returns what the occurrence found. since is the nominal time
	// of the routine's previous occurrence (zero for the first).
	Inspect(ctx context.Context, in coord.Inspection, since time.Time) (coord.Outcome, error)
}

// GateResult is one replay-and-gate run (the CI recipe, baselines/ci).
type GateResult struct {
	Passed  bool
	Verdict string // the recipe's one-line verdict
	Tokens  int64
}

// Gate is the nightly replay-and-gate routine: strict replay of the
// committed journals, a fresh scripted run, the gate against the committed
// baseline. A pass is a no-op with the verdict as evidence; a failure
// proposes one regression task keyed by the verdict, so the same
// regression seen on several nights is one task.
type Gate struct {
	// Run runs the recipe (cmd wires `loom-eval ci`).
	Run func(ctx context.Context) (GateResult, error)
}

func (Gate) Name() string { return NightlyGate }

func (g Gate) Inspect(ctx context.Context, in coord.Inspection, _ time.Time) (coord.Outcome, error) {
	r, err := g.Run(ctx)
	if err != nil {
		return coord.Outcome{}, fmt.Errorf("%s: %w", NightlyGate, err)
	}
	out := coord.Outcome{Tokens: r.Tokens, Evidence: "replay-and-gate of the committed baselines: " + r.Verdict}
	if r.Passed {
		return out, nil
	}
	// The payload is what the key means (the verdict) and nothing about
	// this night: the task records the occurrence that first proposed it.
	payload, _ := json.Marshal(map[string]string{"verdict": r.Verdict})
	out.Work = []coord.TaskSpec{{Key: "regression/" + coord.Digest([]byte(r.Verdict))[:16], Kind: "regression", Payload: payload}}
	return out, nil
}

// Lister is the part of a trace store the trace routine reads.
type Lister interface {
	ListTraces(ctx context.Context, q store.TraceQuery) (store.TracePage, error)
}

// Traces is the routine that scores new production traces against cases:
// it counts the traces that started in [previous occurrence, this
// occurrence) and proposes one scoring task for that window (key
// score-traces/SINCE/UNTIL: a window proposed twice is one task). No new
// trace is a no-op with the count as evidence. ScoreWork executes the
// scoring task: cases and trials from the window's traces (as `loom-eval
// cases from-traces --since SINCE --until UNTIL`), scored against the
// cases file named in the payload.
type Traces struct {
	Store Lister
	// Cases is the cases file the traces are scored against.
	Cases string
	// First bounds the first occurrence's window (default: 24h before it).
	First time.Duration
}

func (Traces) Name() string { return ScoreTraces }

func (t Traces) Inspect(ctx context.Context, in coord.Inspection, since time.Time) (coord.Outcome, error) {
	until := in.Nominal
	if since.IsZero() {
		w := t.First
		if w <= 0 {
			w = 24 * time.Hour
		}
		since = until.Add(-w)
	}
	n, err := countTraces(ctx, t.Store, since, until)
	if err != nil {
		return coord.Outcome{}, fmt.Errorf("%s: %w", ScoreTraces, err)
	}
	window := fmt.Sprintf("[%s, %s)", since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	out := coord.Outcome{Evidence: fmt.Sprintf("%d trace(s) started in %s", n, window)}
	if n == 0 {
		return out, nil
	}
	payload, _ := json.Marshal(map[string]any{"since": since.UTC(), "until": until.UTC(), "traces": n, "cases": t.Cases})
	out.Work = []coord.TaskSpec{{Key: fmt.Sprintf("score-traces/%s/%s", since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339)),
		Kind: ScoreTracesKind, Payload: payload}}
	return out, nil
}

func countTraces(ctx context.Context, l Lister, since, until time.Time) (int, error) {
	q := store.TraceQuery{Start: since, End: until}
	n := 0
	for {
		page, err := l.ListTraces(ctx, q)
		if err != nil {
			return n, err
		}
		n += len(page.Traces)
		if page.NextPageToken == "" {
			return n, nil
		}
		q.PageToken = page.NextPageToken
	}
}

// Runner runs the queued inspections of its routines.
type Runner struct {
	Coord    *coord.Coordinator
	Routines []Routine
	Worker   string
	// Lease is each inspection's lease (default 10m); the wall budget, when
	// shorter, bounds the run.
	Lease time.Duration
	Log   io.Writer
}

// RunQueued claims and runs every claimable inspection of the runner's
// routines once, enforcing each schedule's wall and token budgets (a run
// over either fails its occurrence), and returns how many it ran.
func (r *Runner) RunQueued(ctx context.Context) (int, error) {
	lease := r.Lease
	if lease <= 0 {
		lease = 10 * time.Minute
	}
	ran := 0
	for _, rt := range r.Routines {
		for {
			g, err := r.Coord.ClaimNext(ctx, coord.RoutineKind(rt.Name()), r.Worker, lease)
			if err != nil {
				return ran, err
			}
			if g == nil {
				break
			}
			if err := r.runOne(ctx, rt, *g); err != nil {
				return ran, err
			}
			ran++
		}
	}
	return ran, nil
}

func (r *Runner) runOne(ctx context.Context, rt Routine, g coord.Grant) error {
	task, err := r.Coord.Get(ctx, g.Key)
	if err != nil {
		return err
	}
	var in coord.Inspection
	if err := json.Unmarshal(task.Payload, &in); err != nil {
		return fmt.Errorf("inspection %s: payload: %w", g.Key, err)
	}
	var since time.Time
	occs, err := r.Coord.Occurrences(ctx, in.Routine)
	if err != nil {
		return err
	}
	for _, o := range occs {
		if o.Nominal.Before(in.Nominal) && o.Version == in.Version {
			since = o.Nominal
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	if in.Budget.Wall > 0 {
		rctx, cancel = context.WithTimeout(ctx, time.Duration(in.Budget.Wall))
	}
	start := time.Now()
	out, ierr := rt.Inspect(rctx, in, since)
	cancel()
	switch {
	case ierr != nil && errors.Is(ierr, context.DeadlineExceeded) && ctx.Err() == nil:
		out = coord.Outcome{Failed: true, Evidence: fmt.Sprintf("over the wall budget %s after %s: %v", time.Duration(in.Budget.Wall), time.Since(start).Round(time.Millisecond), ierr)}
	case ierr != nil:
		out = coord.Outcome{Failed: true, Evidence: "inspection failed: " + ierr.Error()}
	case in.Budget.Tokens > 0 && out.Tokens > in.Budget.Tokens:
		out = coord.Outcome{Failed: true, Tokens: out.Tokens, SpendUSD: out.SpendUSD,
			Evidence: fmt.Sprintf("over the token budget: %d tokens (budget %d); its proposals are dropped", out.Tokens, in.Budget.Tokens)}
	}
	created, err := r.Coord.FinishInspection(ctx, g, out)
	if err != nil {
		return err
	}
	if r.Log != nil {
		fmt.Fprintf(r.Log, "%s: %s; %d new task(s) %v\n", in.Occurrence, out.Evidence, len(created), created)
	}
	return nil
}
