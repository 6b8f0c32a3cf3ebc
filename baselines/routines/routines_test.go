package routines

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/coord"
	"github.com/loomwork/loomwork/store/sqlite"
	"github.com/loomwork/loomwork/store/storetest"
)

// TestProductRoutinesShareTheQueue: the nightly gate and the trace-scoring
// routine deliver occurrences into one coordinator; their inspections are
// tasks in its queue; a regression seen on two nights is one task, a
// trace window delivered twice is one scoring task, and a night with no
// new traces is a no-op with its evidence.
func TestProductRoutinesShareTheQueue(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(ctx)
	day0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	// Three production traces between 01:00 and 03:00 on day 0.
	if err := st.WriteSpans(ctx, storetest.GenerateConversation("conv-1", 3, 4, 7, day0.Add(time.Hour), time.Hour)); err != nil {
		t.Fatal(err)
	}

	now := day0
	c, err := coord.Open(ctx, coord.Config{Path: filepath.Join(dir, "coord.db"), Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(ctx)
	gateSched := coord.Schedule{Routine: NightlyGate, Version: 1, Calendar: "0 6 * * *", Timezone: "UTC",
		Overlap: coord.OverlapSkip, CatchUp: coord.CatchUpCoalesceLatest, Budget: coord.Budget{Wall: coord.Duration(time.Minute)}}
	traceSched := coord.Schedule{Routine: ScoreTraces, Version: 1, Calendar: "0 6 * * *", Timezone: "UTC",
		Overlap: coord.OverlapBufferOne, CatchUp: coord.CatchUpAll}
	gateRuns := 0
	gate := Gate{Run: func(context.Context) (GateResult, error) {
		gateRuns++
		return GateResult{Passed: false, Verdict: "FAIL: coding-roman pass rate 1.00 -> 0.33 (gate: drop > 0.20)"}, nil
	}}
	var log strings.Builder
	r := &Runner{Coord: c, Routines: []Routine{gate, Traces{Store: st, Cases: "baselines/cases.jsonl"}}, Worker: "routine-runner", Log: &log}

	for _, s := range []coord.Schedule{gateSched, traceSched} {
		if _, err := c.Tick(ctx, s); err != nil { // first tick: registers the schedule
			t.Fatal(err)
		}
	}
	for d := 0; d < 2; d++ {
		now = day0.Add(time.Duration(d)*24*time.Hour + 6*time.Hour + 2*time.Second)
		for _, s := range []coord.Schedule{gateSched, traceSched} {
			occs, err := c.Tick(ctx, s)
			if err != nil || len(occs) != 1 {
				t.Fatalf("day %d %s: %+v %v", d, s.Routine, occs, err)
			}
			if d == 0 && s.Routine == ScoreTraces {
				again, err := c.Deliver(ctx, s, occs[0].Nominal) // a duplicate delivery
				if err != nil || again.Deliveries != 2 || again.Task != occs[0].Task {
					t.Fatalf("redelivery: %+v %v", again, err)
				}
			}
		}
		if n, err := r.RunQueued(ctx); err != nil || n != 2 {
			t.Fatalf("day %d: ran %d inspections: %v", d, n, err)
		}
	}
	t.Log("\n" + log.String())
	regs, _ := c.Tasks(ctx, "regression", false)
	scores, _ := c.Tasks(ctx, "score-traces", false)
	if gateRuns != 2 || len(regs) != 1 {
		t.Fatalf("%d gate runs, %d regression tasks; want 2 and 1", gateRuns, len(regs))
	}
	if len(scores) != 1 || scores[0].Key != "score-traces/2026-09-30T06:00:00Z/2026-10-01T06:00:00Z" {
		t.Fatalf("scoring tasks: %+v", scores)
	}
	occs, _ := c.Occurrences(ctx, ScoreTraces)
	if len(occs) != 2 || occs[0].Decision != coord.OccProposed || occs[1].Decision != coord.OccNoOp ||
		occs[1].Evidence != "0 trace(s) started in [2026-10-01T06:00:00Z, 2026-10-02T06:00:00Z)" {
		t.Fatalf("trace occurrences: %+v", occs)
	}
	if !strings.Contains(occs[0].Evidence, "3 trace(s) started in") {
		t.Fatalf("day 0 evidence: %q", occs[0].Evidence)
	}
}

// TestRunnerEnforcesTheWallBudget: an inspection over its wall budget
// fails its occurrence with the evidence, and proposes nothing.
func TestRunnerEnforcesTheWallBudget(t *testing.T) {
	ctx := context.Background()
	c, err := coord.Open(ctx, coord.Config{Path: filepath.Join(t.TempDir(), "c.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(ctx)
	s := coord.Schedule{Routine: NightlyGate, Version: 1, Calendar: "* * * * *", Timezone: "UTC", Overlap: coord.OverlapSkip,
		CatchUp: coord.CatchUpCoalesceLatest, Budget: coord.Budget{Wall: coord.Duration(50 * time.Millisecond)}}
	if _, err := c.Deliver(ctx, s, time.Now().UTC().Truncate(time.Minute)); err != nil {
		t.Fatal(err)
	}
	slow := Gate{Run: func(ctx context.Context) (GateResult, error) {
		<-ctx.Done()
		return GateResult{}, ctx.Err()
	}}
	r := &Runner{Coord: c, Routines: []Routine{slow}, Worker: "w"}
	if n, err := r.RunQueued(ctx); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	occs, _ := c.Occurrences(ctx, NightlyGate)
	if len(occs) != 1 || occs[0].Decision != coord.OccFailed || !strings.Contains(occs[0].Evidence, "over the wall budget 50ms") {
		t.Fatalf("%+v", occs)
	}
}
