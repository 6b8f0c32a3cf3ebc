package replay_test

import (
	"context"
	"testing"

	"github.com/loomwork/loomwork/replay"
)

// BenchmarkReplayGoodJournal measures replaying the committed 20-event
// bookkeeper journal: verification, a scratch database, four tool runs
// (two effects) and lockstep checking.
func BenchmarkReplayGoodJournal(b *testing.B) {
	e, err := replay.New(replay.Config{Registry: registry(b), WorkDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
		if err != nil || !reps[0].OK() {
			b.Fatal(err)
		}
	}
}
