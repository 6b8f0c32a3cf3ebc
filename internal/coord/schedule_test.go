package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func nightly() Schedule {
	return Schedule{Routine: "extend-book", Version: 1, Calendar: "17 2 * * *", Timezone: "UTC",
		Overlap: OverlapSkip, CatchUp: CatchUpCoalesceLatest, Budget: Budget{Wall: Duration(45 * time.Minute), Tokens: 80000, WIP: 8}}
}

func day(d int) time.Time { return time.Date(2026, 9, 30+d, 2, 17, 0, 0, time.UTC) }

// inspect runs one queued inspection: claim it, let propose decide the
// work from the nominal time, finish it.
func inspect(t *testing.T, c *Coordinator, s Schedule, propose func(nominal time.Time) []TaskSpec) []string {
	t.Helper()
	ctx := context.Background()
	g, err := c.ClaimNext(ctx, RoutineKind(s.Routine), "inspector", time.Minute)
	if err != nil || g == nil {
		t.Fatalf("claim inspection: %v %v", g, err)
	}
	task, _ := c.Get(ctx, g.Key)
	var in Inspection
	if err := jsonUnmarshal(task.Payload, &in); err != nil {
		t.Fatal(err)
	}
	work := propose(in.Nominal)
	ev := fmt.Sprintf("inspected the backlog at %s: %d open item(s)", in.Nominal.Format(time.RFC3339), len(work))
	created, err := c.FinishInspection(ctx, *g, Outcome{Work: work, Evidence: ev, Tokens: 1200})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// TestReplayAWeekOfTicks is practice exercise 4: a week of nightly ticks
// in which one occurrence is delivered twice and two different
// occurrences propose the same work gives one implementation task; once
// the work is accepted the later nights record a no-op with evidence.
// With work keys that include the inspection's occurrence (the subtest),
// the same unfinished fix is implemented twice: that is why proposed work
// needs a stable key while the inspection's key carries the occurrence.
func TestReplayAWeekOfTicks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		key       func(nominal time.Time) string
		wantImpls int
	}{
		{"stable work key", func(time.Time) string { return "learnllm:m29:lease-expiry-example-v1" }, 1},
		{"work keyed by inspection", func(n time.Time) string { return "learnllm:m29:lease-expiry-example-v1@" + n.Format("2006-01-02") }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clk := &manualClock{}
			c := open(t, filepath.Join(t.TempDir(), "schedule.sqlite"), clk)
			s := nightly()
			clk.t = day(0).Add(-time.Hour) // the schedule's first tick, before night 0
			if occ, err := c.Tick(ctx, s); err != nil || len(occ) != 0 {
				t.Fatalf("first tick: %+v %v", occ, err)
			}
			implDone := false
			for d := 0; d < 7; d++ {
				clk.t = day(d).Add(3 * time.Second) // arrival: a little after the nominal time
				occs, err := c.Tick(ctx, s)
				if err != nil || len(occs) != 1 || occs[0].Decision != OccDispatched || !occs[0].Nominal.Equal(day(d)) {
					t.Fatalf("night %d: %+v %v", d, occs, err)
				}
				if d == 2 {
					// The timer fires twice for night 2 (a CronJob's duplicate
					// Job): a redelivery arrives late and is the same occurrence.
					clk.t = day(d).Add(40 * time.Second)
					again, err := c.Deliver(ctx, s, day(d))
					if err != nil || again.Key != occs[0].Key || again.Deliveries != 2 || again.Task != occs[0].Task {
						t.Fatalf("redelivery: %+v %v", again, err)
					}
				}
				inspect(t, c, s, func(n time.Time) []TaskSpec {
					if implDone {
						return nil // an empty backlog
					}
					return []TaskSpec{{Key: tc.key(n), Kind: "change", Payload: []byte(`{"intent":"Teach lease expiry"}`)}}
				})
				if d == 1 {
					// The implementation lands after night 1's inspection.
					g, err := c.ClaimNext(ctx, "change", "worker-a", time.Hour)
					for g != nil && err == nil {
						cand := Digest([]byte(g.Key))
						_ = c.Submit(ctx, *g, cand, nil)
						_ = c.RecordValidation(ctx, Receipt{Candidate: cand, Environment: "e", Policy: "p", Passed: true, Report: "ok"})
						if err := c.Accept(ctx, g.Key, cand, "e", "p"); err != nil {
							t.Fatal(err)
						}
						g, err = c.ClaimNext(ctx, "change", "worker-a", time.Hour)
					}
					implDone = true
				}
			}
			occs, _ := c.Occurrences(ctx, s.Routine)
			impls, _ := c.Tasks(ctx, "change", false)
			inspections, _ := c.Tasks(ctx, RoutineKind(s.Routine), false)
			for _, o := range occs {
				t.Logf("%s deliveries=%d %s: %s", o.Key, o.Deliveries, o.Decision, o.Evidence)
			}
			if len(occs) != 7 || len(inspections) != 7 {
				t.Fatalf("%d occurrences, %d inspections; want 7 and 7", len(occs), len(inspections))
			}
			if len(impls) != tc.wantImpls {
				t.Fatalf("%d implementation tasks (%v), want %d", len(impls), impls, tc.wantImpls)
			}
			if occs[2].Deliveries != 2 {
				t.Fatalf("night 2 deliveries = %d", occs[2].Deliveries)
			}
			for _, o := range occs[2:] {
				if o.Decision != OccNoOp || !strings.Contains(o.Evidence, "0 open item(s)") {
					t.Fatalf("after the work landed, %s: %s %q; want a no-op with evidence", o.Key, o.Decision, o.Evidence)
				}
			}
			if occs[0].Decision != OccProposed || occs[1].Decision != OccProposed {
				t.Fatalf("nights 0 and 1: %s, %s; want proposed", occs[0].Decision, occs[1].Decision)
			}
		})
	}
}

// TestCatchUpAfterAnOutage: no tick for four nights, then one. Coalesce-
// latest dispatches only the latest night and records the others as
// coalesced into it; "all" dispatches every one (and, with overlap skip,
// the later ones are skipped behind the first still-queued inspection).
func TestCatchUpAfterAnOutage(t *testing.T) {
	for _, tc := range []struct {
		catchUp, overlap string
		want             []string
	}{
		{CatchUpCoalesceLatest, OverlapSkip, []string{OccCoalesced, OccCoalesced, OccCoalesced, OccDispatched}},
		{CatchUpAll, OverlapSkip, []string{OccDispatched, OccSkipped, OccSkipped, OccSkipped}},
		{CatchUpAll, OverlapBufferOne, []string{OccDispatched, OccBuffered, OccSkipped, OccSkipped}},
	} {
		t.Run(tc.catchUp+"/"+tc.overlap, func(t *testing.T) {
			ctx := context.Background()
			clk := &manualClock{}
			c := open(t, filepath.Join(t.TempDir(), "s.db"), clk)
			s := nightly()
			s.CatchUp, s.Overlap = tc.catchUp, tc.overlap
			clk.t = day(0).Add(-time.Hour)
			_, _ = c.Tick(ctx, s)
			clk.t = day(3).Add(5 * time.Hour) // back after the outage
			occs, err := c.Tick(ctx, s)
			if err != nil || len(occs) != 4 {
				t.Fatalf("%+v %v", occs, err)
			}
			for i, o := range occs {
				if o.Decision != tc.want[i] {
					t.Fatalf("night %d: %s (%s), want %s", i, o.Decision, o.Reason, tc.want[i])
				}
			}
			// A second tick at the same time finds nothing new.
			if again, err := c.Tick(ctx, s); err != nil || len(again) != 0 {
				t.Fatalf("second tick: %+v %v", again, err)
			}
			if tc.overlap == OverlapBufferOne {
				// The buffered inspection waits for the first to be accepted.
				g, _ := c.ClaimNext(ctx, RoutineKind(s.Routine), "i", time.Minute)
				if g == nil || g.Key != occs[0].Task {
					t.Fatalf("first claim: %+v", g)
				}
				if g2, _ := c.ClaimNext(ctx, RoutineKind(s.Routine), "j", time.Minute); g2 != nil {
					t.Fatalf("the buffered inspection ran beside the active one: %+v", g2)
				}
				if _, err := c.FinishInspection(ctx, *g, Outcome{Evidence: "nothing to do"}); err != nil {
					t.Fatal(err)
				}
				if g2, _ := c.ClaimNext(ctx, RoutineKind(s.Routine), "j", time.Minute); g2 == nil || g2.Key != occs[1].Task {
					t.Fatalf("buffered inspection not released: %+v", g2)
				}
			}
		})
	}
}

// TestPauseAndBudgets: the operator's pause switch records occurrences
// as paused and dispatches nothing; the WIP cap and the daily spend cap
// record over-budget occurrences; an inspection cannot finish without
// evidence, nor with a stale grant.
func TestPauseAndBudgets(t *testing.T) {
	ctx := context.Background()
	clk := &manualClock{}
	c := open(t, filepath.Join(t.TempDir(), "s.db"), clk)
	s := nightly()
	s.Calendar = "17 * * * *" // hourly
	s.Budget = Budget{WIP: 2, SpendUSDPerDay: 1}
	hour := func(h int) time.Time { return time.Date(2026, 10, 1, h, 17, 0, 0, time.UTC) }
	if err := c.SetPaused(ctx, s.Routine, true, "investigating a bad patch"); err != nil {
		t.Fatal(err)
	}
	o, err := c.Deliver(ctx, s, hour(0))
	if err != nil || o.Decision != OccPaused || o.Task != "" || !strings.Contains(o.Reason, "investigating") {
		t.Fatalf("paused: %+v %v", o, err)
	}
	_ = c.SetPaused(ctx, s.Routine, false, "")
	// Spend: hour 1's inspection spends $1.20, over the day's cap.
	o, _ = c.Deliver(ctx, s, hour(1))
	clk.t = hour(1)
	g, _ := c.ClaimNext(ctx, RoutineKind(s.Routine), "i", time.Minute)
	if _, err := c.FinishInspection(ctx, *g, Outcome{}); err == nil {
		t.Fatal("an inspection finished without evidence")
	}
	stale := *g
	stale.Fence++
	if _, err := c.FinishInspection(ctx, stale, Outcome{Evidence: "x"}); err == nil {
		t.Fatal("a stale inspector finished")
	}
	if _, err := c.FinishInspection(ctx, *g, Outcome{Evidence: "scored 3 traces", SpendUSD: 1.2, Tokens: 9000,
		Work: []TaskSpec{{Key: "w1", Kind: "change"}, {Key: "w2", Kind: "change"}}}); err != nil {
		t.Fatal(err)
	}
	o, _ = c.Deliver(ctx, s, hour(2))
	if o.Decision != OccOverBudget || !strings.Contains(o.Reason, "WIP cap: 2 active") {
		t.Fatalf("WIP: %+v", o)
	}
	s.Budget.WIP = 0
	o, _ = c.Deliver(ctx, s, hour(3))
	if o.Decision != OccOverBudget || !strings.Contains(o.Reason, "daily spend cap") {
		t.Fatalf("spend: %+v", o)
	}
	// The next UTC day has its own cap.
	o, _ = c.Deliver(ctx, s, time.Date(2026, 10, 2, 0, 17, 0, 0, time.UTC))
	if o.Decision != OccDispatched {
		t.Fatalf("next day: %+v", o)
	}
	// Off-calendar deliveries are refused.
	if _, err := c.Deliver(ctx, s, hour(4).Add(time.Minute)); err == nil {
		t.Fatal("delivered an occurrence not on the calendar")
	}
}

func TestScheduleValidateNamesFields(t *testing.T) {
	err := Schedule{Routine: "a/b", Calendar: "61 * * *", Timezone: "Mars/Olympus", Overlap: "queue", CatchUp: "none", Budget: Budget{WIP: -1}}.Validate()
	for _, want := range []string{"routine:", "schedule_version:", "calendar:", "timezone:", "overlap:", "catch_up:", "budget:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v lacks %q", err, want)
		}
	}
}

func TestCalendarInTimezone(t *testing.T) {
	cal, err := parseCalendar("30 1 * * 1-5")
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := time.LoadLocation("Europe/Paris")
	// Week of 2026-10-19 (Mon) .. 25 (Sun), Paris is UTC+2 until the 25th.
	due := cal.due(time.Date(2026, 10, 18, 0, 0, 0, 0, time.UTC), time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC), loc)
	if len(due) != 5 || !due[0].Equal(time.Date(2026, 10, 18, 23, 30, 0, 0, time.UTC)) {
		t.Fatalf("due = %v", due)
	}
	if _, err := parseCalendar("*/0 * * * *"); err == nil {
		t.Fatal("step 0 accepted")
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
