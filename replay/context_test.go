package replay_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/agents/runtime/runtimetest"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/replay"
)

// Runs under a context layer replay from their journal alone: the engine's
// runtime is configured with no context layer and no summariser, so the
// spec (and a model summary's text) must come from the journal. The
// runtime's own tests (agents/runtime/context_test.go) check the layer,
// resume and the journal records; these check the engine with them.

// recordContextRun runs runtimetest.LogAgent under spec (with summariser sum, which may
// be nil) into a fresh journal and returns its answer and the recorded run.
func recordContextRun(t *testing.T, runID string, spec *runtime.ContextSpec, sum contextlayer.Summarizer) (string, journal.Run) {
	t.Helper()
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "journal.db"), Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	rt, err := runtime.New(runtime.Config{Model: &runtimetest.StepModel{Pages: 10}, Journal: j, Clock: fakeClock(), MaxSteps: 20, Context: spec, Summarizer: sum})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.Run(ctx, runtimetest.LogAgent(), runtime.Task{RunID: runID, Input: "Find the incident id in the logs."})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf, runID); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(&buf, runID+".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs exported, want 1", len(runs))
	}
	return res.Answer, runs[0]
}

func TestContextRunReplaysIdenticallyWithNoContextLayerConfigured(t *testing.T) {
	testtier.NoRace(t, "TestReplayOfARecordedRunIsTheIdentity")
	testtier.Slow(t) // the layer counts every request with o200k_base, CPU-heavy under -race
	t.Parallel()
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500}
	want, run := recordContextRun(t, "ctx-2", spec, nil)
	eng, err := replay.New(replay.Config{Registry: registry(t, runtimetest.LogAgent()), WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Replay(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.MatchedEvents != rep.RecordedEvents || rep.Answer != want || rep.ModelCalls != 0 {
		t.Fatalf("replay: ok=%v matched %d/%d divergence %v answer %q", rep.OK(), rep.MatchedEvents, rep.RecordedEvents, rep.Divergence, rep.Answer)
	}
}

func TestModelSummariesAreReusedOnReplay(t *testing.T) {
	testtier.NoRace(t, "TestReplayOfARecordedRunIsTheIdentity")
	testtier.Slow(t) // the layer counts every request with o200k_base, CPU-heavy under -race
	t.Parallel()
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Budget: 1500, Summarizer: runtime.SummarizerModel}
	sum := &runtimetest.CountingSummarizer{}
	want, run := recordContextRun(t, "ctx-3", spec, sum)
	calls := sum.N.Load()
	if calls == 0 {
		t.Fatal("the model summariser was never asked")
	}
	// The engine has no summariser: the replay must take each summary's
	// text from the journal, and never ask sum again.
	eng, err := replay.New(replay.Config{Registry: registry(t, runtimetest.LogAgent()), WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Replay(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Answer != want || sum.N.Load() != calls {
		t.Fatalf("replay: ok=%v divergence %v, summariser calls %d → %d", rep.OK(), rep.Divergence, calls, sum.N.Load())
	}
}

// An agent whose tools keep no tables in the journal replays into memory:
// no scratch database is made, even when databases are to be kept.
func TestAgentWithoutTablesReplaysInMemory(t *testing.T) {
	want, run := recordContextRun(t, "mem-1", nil, nil)
	work := t.TempDir()
	eng, err := replay.New(replay.Config{Registry: registry(t, runtimetest.LogAgent()), WorkDir: work, KeepDatabases: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Replay(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.MatchedEvents != rep.RecordedEvents || rep.Answer != want || rep.ToolRuns == 0 {
		t.Fatalf("replay: ok=%v matched %d/%d divergence %v answer %q tool runs %d", rep.OK(), rep.MatchedEvents, rep.RecordedEvents, rep.Divergence, rep.Answer, rep.ToolRuns)
	}
	if files, _ := os.ReadDir(work); rep.Database != "" || len(files) != 0 {
		t.Fatalf("the replay made a scratch database (%q, %d files in the work dir)", rep.Database, len(files))
	}
}
