package main

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/baselines/suite"
	"github.com/loomwork/loomwork/datasets"
)

// TestSuiteRunReleaseStopsAndJoinsTheInProcessWorker: with --workers 0
// suite run is its own worker, running in a goroutine. The function that
// releases the workers must stop that goroutine and wait for it, so that
// on every way out of suite run (an error of the driver, a cancelled run)
// no worker still uses the coordinator when it is shut down. It used to
// only close the worker's dependencies, leaving the worker running.
func TestSuiteRunReleaseStopsAndJoinsTheInProcessWorker(t *testing.T) {
	ctx := context.Background()
	all, err := datasets.LoadCases("../../baselines/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var cases []datasets.Case
	for _, c := range all {
		if len(cases) == 0 && slices.Contains(c.Tags, coding.Name) {
			cases = append(cases, c)
		}
	}
	dir := t.TempDir()
	def := suite.Definition{Agent: coding.Name, Trials: 1, Dir: dir, AbsDir: dir, Lease: suite.Duration(time.Hour), CasesDigest: "test"}
	plan, err := suite.Plan(coding.Name, cases, 1, "cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	c, err := openSuiteCoordinator(ctx, def, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown(ctx) })
	// Another worker holds the only trial for an hour: ours idles, polling
	// for work, until it is told to stop.
	if g, err := c.ClaimNext(ctx, suite.Kind, "other", time.Hour); err != nil || g == nil {
		t.Fatalf("claim the trial for another worker: %v, %v", g, err)
	}

	ignore := goleak.IgnoreCurrent()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := &Main{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	stop, sup, release, err := m.startSuiteWorkers(runCtx, c, def, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sup != nil {
		t.Fatal("--workers 0 started a supervisor")
	}
	time.Sleep(200 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatalf("the idle worker stopped on its own: %v", err)
	}
	release() // runCtx is still live, as it is when suite run's driver fails
	goleak.VerifyNone(t, ignore)
	release() // a second release is harmless
	if _, err := c.Count(ctx, suite.Kind); err != nil {
		t.Errorf("coordinator after release: %v", err)
	}
}
