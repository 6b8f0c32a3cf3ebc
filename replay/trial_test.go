package replay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/replay"
)

// A run whose control flow departs from its journal keeps its trial, and
// the trial says why: the divergence code, message and journal line.
func TestTrialRecordOfADivergedRunCarriesTheDivergence(t *testing.T) {
	a := bookkeeper.Agent()
	a.System = "You are an accountant."
	e, _ := replay.New(replay.Config{Registry: registry(t, a)})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	tr := replay.TrialRecord(&reps[0], false)
	if err := tr.Validate(); err != nil {
		t.Fatalf("the trial of a diverged run does not validate: %v", err)
	}
	want := fmt.Sprintf("[LWR1100] nondeterministic run %s at seq 1", reps[0].RunID)
	if !strings.HasPrefix(tr.Divergence, want) || !strings.HasSuffix(tr.Divergence, "(journal line 1)") {
		t.Fatalf("divergence = %q, want it to start %q and name journal line 1", tr.Divergence, want)
	}
	if tr.CaseID != "lunch" || tr.Success == nil || *tr.Success {
		t.Fatalf("trial = %+v, want case lunch, success false", tr)
	}
}

// A differing tool result is a divergence of the trial only for a strict
// replay; the message names the first differing call and counts the rest.
func TestDivergedCountsADifferingResultOnlyWhenStrict(t *testing.T) {
	changed := withTool("calculator", func(inner func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error)) func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
		return func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			out, err := inner(ctx, in)
			out.Content += ".00"
			return out, err
		}
	})
	e, _ := replay.New(replay.Config{Registry: registry(t, changed)})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := &reps[0]
	if got := replay.TrialRecord(r, false).Divergence; got != "" {
		t.Fatalf("non-strict trial divergence = %q, want none (only the tool result differs)", got)
	}
	_, line := seqOf(t, "tool_result", "calculator", 0)
	got := replay.Diverged(r, true)
	if !strings.HasPrefix(got, "[LWR1200] tool result differs") || !strings.Contains(got, `recorded "2500", replayed "2500.00"`) ||
		!strings.HasSuffix(got, fmt.Sprintf("(journal line %d)", line)) {
		t.Fatalf("strict divergence = %q", got)
	}
	if ok := replay.Diverged(&reps[0], false); ok != "" {
		t.Fatalf("Diverged(non-strict) = %q", ok)
	}
}

func TestDivergedIsEmptyForAReproducedRun(t *testing.T) {
	e, _ := replay.New(replay.Config{Registry: registry(t)})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if got := replay.Diverged(&reps[0], true); got != "" {
		t.Fatalf("Diverged = %q for a run that reproduced", got)
	}
}
