// Package workflowtest holds fixtures shared by the tests of workflows:
// the package's own (agents/workflow) and the CLI's (loom-eval workflow).
package workflowtest

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/loomwork/loomwork/agents/a2a"
	"github.com/loomwork/loomwork/agents/a2a/a2atest"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/scripted"
)

// Peer is what a workflow's a2a step asks: a real A2A server on loopback
// (agents/a2a) serving an agent called name, whose scripted model answers
// every message with reply. It returns the server's URL and the count of
// tasks it has been sent. Its journal is its own, in the test's temporary
// folder; the server and the journal close when the test ends.
//
// The agent's name is the peer's origin in what a step that reads its
// reply carries ("a2a:<name> via step <id>").
func Peer(t testing.TB, name, reply string) (url string, tasks *atomic.Int64) {
	t.Helper()
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "peer.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Shutdown(ctx) })
	tasks = &atomic.Int64{}
	model := scripted.NewFunc("scripted-peer", func(llm.Request, int) (scripted.Turn, error) {
		tasks.Add(1)
		return scripted.Turn{Content: reply}, nil
	})
	rt, err := runtime.New(runtime.Config{Model: model, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a2a.NewServer(a2a.ServerConfig{Agent: runtime.Agent{Name: name, System: "on-call desk"}, Runtime: rt, Description: "The on-call desk."})
	if err != nil {
		t.Fatal(err)
	}
	return a2atest.Serve(t, s).URL, tasks
}
