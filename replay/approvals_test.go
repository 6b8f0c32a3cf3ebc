package replay_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/loomwork/loomwork/agents/approvals"
	"github.com/loomwork/loomwork/agents/approvals/approvalstest"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/replay"
)

// heldRun records a run whose write the policy held: it suspends; with
// answer set, the answer is given through the queue and the run resumed to
// its end. It returns the run's events and its JSONL export.
func heldRun(t *testing.T, approved *bool) ([]journal.Event, journal.Run) {
	t.Helper()
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db"), Clock: journaldb.DeterministicClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	q, err := approvals.Open(ctx, approvals.Config{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	g, err := approvalstest.Guard(nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Model: approvalstest.Obeying(), Journal: j, Authorizer: g, Approvals: q})
	if err != nil {
		t.Fatal(err)
	}
	task := runtime.Task{RunID: "held-1", Input: "why do checkouts time out?"}
	if _, err := rt.Run(ctx, approvalstest.MailAgent(), task); !errors.As(err, new(*runtime.SuspendedError)) {
		t.Fatalf("run: %v, want suspended", err)
	}
	if approved != nil {
		if _, err := q.Answer(ctx, "held-1", "c2", *approved, "alice", map[bool]string{true: "", false: "no"}[*approved]); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Run(ctx, approvalstest.MailAgent(), task); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := j.Events(ctx, "held-1")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf, "held-1"); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(&buf, "held.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return evs, runs[0]
}

func replayHeld(t *testing.T, run journal.Run, work string) journal.ReplayReport {
	t.Helper()
	reg := runtime.NewRegistry()
	if err := reg.Register(approvalstest.MailAgent()); err != nil {
		t.Fatal(err)
	}
	g, err := approvalstest.Guard(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The policy re-decides; no approvals source: the answers come from
	// the journal.
	eng, err := replay.New(replay.Config{Registry: reg, Authorizer: g, WorkDir: work, KeepDatabases: work != "", Clock: journaldb.DeterministicClock()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := eng.Replay(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// A finished run whose write was held, answered and resumed replays with
// the policy and no approvals source: every event the replay writes has the
// recorded kind, step, tool, call, argument hash and payload, byte for
// byte — approved (the mail re-sent in the scratch database) and denied.
func TestReplayOfAHeldCallNeedsNoQueue(t *testing.T) {
	for _, approved := range []bool{true, false} {
		recorded, run := heldRun(t, &approved)
		work := t.TempDir()
		rep := replayHeld(t, run, work)
		if rep.Divergence != nil || len(rep.ResultDiffs) > 0 || rep.MatchedEvents != len(recorded) || !rep.Complete {
			t.Fatalf("approved=%v: divergence %v, result diffs %v, %d of %d events matched", approved, rep.Divergence, rep.ResultDiffs, rep.MatchedEvents, len(recorded))
		}
		scratch, err := journaldb.Open(context.Background(), journaldb.Config{Path: rep.Database})
		if err != nil {
			t.Fatal(err)
		}
		got, err := scratch.Events(context.Background(), run.ID)
		scratch.Shutdown(context.Background())
		if err != nil || len(got) != len(recorded) {
			t.Fatalf("approved=%v: replay wrote %d events (%v), recorded %d", approved, len(got), err, len(recorded))
		}
		held := 0
		for i := range got {
			if journal.Compare(journal.RefOf(got[i]), journal.RefOf(recorded[i])) != "" || !bytes.Equal(got[i].Payload, recorded[i].Payload) {
				t.Fatalf("approved=%v: event %d: replayed %s %s, recorded %s %s", approved, i+1, journal.RefOf(got[i]), got[i].Payload, journal.RefOf(recorded[i]), recorded[i].Payload)
			}
			if got[i].Kind == journal.KindApprovalRequested || got[i].Kind == journal.KindApproval {
				held++
			}
		}
		if held != 2 {
			t.Fatalf("approved=%v: %d approval events replayed, want the request and the answer", approved, held)
		}
	}
}

// A suspended run's journal replays to its request and stops there, with
// no queue and no divergence.
func TestSuspendedJournalReplaysToItsRequest(t *testing.T) {
	recorded, run := heldRun(t, nil)
	rep := replayHeld(t, run, "")
	if rep.Divergence != nil || rep.MatchedEvents != len(recorded) || recorded[len(recorded)-1].Kind != journal.KindApprovalRequested {
		t.Fatalf("divergence %v, %d of %d matched", rep.Divergence, rep.MatchedEvents, len(recorded))
	}
}
