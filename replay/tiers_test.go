package replay_test

import (
	"context"
	"testing"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/runtimetest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/replay"
)

// A run whose requests were assembled by tiers (evidence and a recalled
// memory in the spec) replays from its journal alone: the spec, with its
// documents, is journaled in run_started, so the engine rebuilds every
// request and its hash.
func TestTieredRunReplaysIdentically(t *testing.T) {
	testtier.NoRace(t, "TestReplayOfARecordedRunIsTheIdentity")
	testtier.Slow(t) // the layer counts every request with o200k_base, CPU-heavy under -race
	t.Parallel()
	spec := &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Tiers: &runtime.TierSpec{
		Window: 2500, Reserve: 500, Floors: map[string]int{"tool_output": 600},
		Evidence: []runtime.TierDoc{{ID: "runbook", Text: "Incident ids look like INC-NNNNN.", Provenance: []string{"docs/runbook.md"}}},
		Memory:   []runtime.TierDoc{{ID: "memory:ep-1", Text: "run run-1: the incident was on page 3", Provenance: []string{"run-1#7"}}},
	}}
	want, run := recordContextRun(t, "tier-replay", spec, nil)
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
