package replay_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/replay"
)

func guardFor(t *testing.T, rules string) *policy.Guard {
	t.Helper()
	r, err := policy.ParseRules(strings.NewReader(rules), "test")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := policy.NewEngine(r)
	g, err := policy.NewGuard(policy.GuardConfig{Engine: e, Rules: r})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A journal recorded under a policy replays with the same policy (its
// decisions re-made and matched), and diverges at the decision when the
// policy is missing or decides otherwise.
func TestReplayRechecksPolicyDecisions(t *testing.T) {
	ctx := context.Background()
	// ledger_append is declared local (not a write), so the scripted run is
	// not escalated; what is tested is that the decisions are re-made.
	const allowAll = `{"version":1,"tools":{"ledger_append":{}},"rules":[{"tool":"*","decision":"allow"}]}`
	const denyAll = `{"version":1,"rules":[{"tool":"*","decision":"deny"}]}`
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	script, err := scripted.LoadFile("testdata/bookkeeper.script.json")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := scripted.New(script)
	rt, _ := runtime.New(runtime.Config{Model: m, Journal: j, Clock: fakeClock(), Authorizer: guardFor(t, allowAll)})
	if _, err := rt.Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: "pol-1", Input: "Book the team lunch of 25.00 EUR paid in cash.", CaseID: "lunch"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(&buf, "pol.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		az    runtime.Authorizer
		clean bool
	}{{"same policy", guardFor(t, allowAll), true}, {"no policy", nil, false}, {"other policy", guardFor(t, denyAll), false}} {
		e, _ := replay.New(replay.Config{Registry: registry(t), Authorizer: c.az})
		r, err := e.Replay(ctx, runs[0])
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.clean != (r.Divergence == nil) {
			t.Fatalf("%s: divergence %+v", c.name, r.Divergence)
		}
		if !c.clean && (r.Divergence.Recorded == nil || r.Divergence.Recorded.Kind != journal.KindDecision) {
			t.Fatalf("%s: diverged elsewhere: %+v", c.name, r.Divergence)
		}
	}
}
