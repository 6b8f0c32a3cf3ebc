package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
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

// A journal recorded under a policy records it in run_started, and
// replays under it with no Authorizer given (auto-detected: its decisions
// re-made and matched); a given policy re-decides instead and diverges at
// the decision when it decides otherwise, as does replaying with none
// (NoRecordedPolicy). A journal that records no policy — recorded without
// one, or before policies were recorded — replays without one.
func TestReplayRechecksPolicyDecisions(t *testing.T) {
	ctx := context.Background()
	// ledger_append is declared local (not a write), so the scripted run is
	// not escalated; what is tested is that the decisions are re-made.
	const allowAll = `{"version":1,"tools":{"ledger_append":{}},"rules":[{"tool":"*","decision":"allow"}]}`
	const denyAll = `{"version":1,"rules":[{"tool":"*","decision":"deny"}]}`
	policied := recordBookkeeper(t, guardFor(t, allowAll))
	started := string(policied.Events[0].Payload)
	if !strings.Contains(started, `"policy":{"rules":`) || !strings.Contains(started, `"decision":"allow"`) {
		t.Fatalf("run_started does not record the policy: %s", started)
	}
	plain := recordBookkeeper(t, nil)
	if policied.Events[0].ArgsHash != plain.Events[0].ArgsHash {
		t.Fatalf("the recorded policy changed run_started's argument hash: %s vs %s", policied.Events[0].ArgsHash, plain.Events[0].ArgsHash)
	}
	// A journal of decisions whose run_started lacks the record (what one
	// recorded before policies were recorded looks like).
	stripped := policied
	stripped.Events = append([]journal.Event(nil), policied.Events...)
	stripped.Events[0].Payload = []byte(strings.Replace(started, started[strings.Index(started, `,"policy":`):len(started)-1], "", 1))
	for _, c := range []struct {
		name   string
		run    journal.Run
		az     runtime.Authorizer
		none   bool
		clean  bool
		policy string
	}{
		{"recorded policy, auto-detected", policied, nil, false, true, "recorded"},
		{"same policy given", policied, guardFor(t, allowAll), false, true, "given"},
		{"other policy given", policied, guardFor(t, denyAll), false, false, "given"},
		{"none", policied, nil, true, false, ""},
		{"recorded without a policy", plain, nil, false, true, ""},
		{"decisions without a record, no policy given", stripped, nil, false, false, ""},
		{"decisions without a record, the policy given", stripped, guardFor(t, allowAll), false, true, "given"},
	} {
		e, _ := replay.New(replay.Config{Registry: registry(t), Authorizer: c.az, NoRecordedPolicy: c.none})
		r, err := e.Replay(ctx, c.run)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.clean != (r.Divergence == nil) || r.Policy != c.policy {
			t.Fatalf("%s: divergence %+v, policy %q (want clean %v, policy %q)", c.name, r.Divergence, r.Policy, c.clean, c.policy)
		}
		if !c.clean && (r.Divergence.Recorded == nil || r.Divergence.Recorded.Kind != journal.KindDecision) {
			t.Fatalf("%s: diverged elsewhere: %+v", c.name, r.Divergence)
		}
	}
}

// recordBookkeeper records the bookkeeper's scripted lunch run under az
// (nil: no policy) and returns it as exported.
func recordBookkeeper(t *testing.T, az runtime.Authorizer) journal.Run {
	t.Helper()
	ctx := context.Background()
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
	cfg := runtime.Config{Model: m, Journal: j, Clock: fakeClock()}
	if az != nil {
		cfg.Authorizer = az
	}
	rt, _ := runtime.New(cfg)
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
	return runs[0]
}

// After a re-executed tool returns something else (other documents), the
// next decision's record names another taint origin (the documents it
// returned): the same verdict on the same call still matches, so the
// replay reports the differing result (LWR1200), not a divergence at the
// decision.
func TestADifferingResultDoesNotDivergeAtTheNextDecision(t *testing.T) {
	ctx := context.Background()
	agentFor := func(doc string) runtime.Agent {
		obj := json.RawMessage(`{"type":"object"}`)
		return runtime.Agent{Name: "reader", System: "s", Tools: []runtime.Tool{
			{Name: "search", Parameters: obj, Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
				return runtime.ToolOutput{Content: "hit " + doc, Documents: []string{doc}}, nil
			}},
			{Name: "read", Parameters: obj, Run: func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
				return runtime.ToolOutput{Content: "page"}, nil
			}}}}
	}
	model := scripted.NewFunc("scripted-reader", func(_ llm.Request, turn int) (scripted.Turn, error) {
		switch turn {
		case 0:
			return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "search", Arguments: json.RawMessage(`{}`)}}}, nil
		case 1:
			return scripted.Turn{ToolCalls: []llm.ToolCall{{ID: "c2", Name: "read", Arguments: json.RawMessage(`{}`)}}}, nil
		}
		return scripted.Turn{Content: "done"}, nil
	})
	const rules = `{"version":1,"rules":[{"tool":"*","decision":"allow"}]}`
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	rt, _ := runtime.New(runtime.Config{Model: model, Journal: j, Clock: fakeClock(), Authorizer: guardFor(t, rules)})
	if _, err := rt.Run(ctx, agentFor("doc:a"), runtime.Task{RunID: "r-1", Input: "x"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(&buf, "r.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := replay.New(replay.Config{Registry: registry(t, agentFor("doc:b"))})
	rep, err := e.Replay(ctx, runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil || len(rep.ResultDiffs) != 1 || rep.ResultDiffs[0].Tool != "search" || rep.MatchedEvents != rep.RecordedEvents {
		t.Fatalf("divergence %+v, result diffs %+v, matched %d/%d", rep.Divergence, rep.ResultDiffs, rep.MatchedEvents, rep.RecordedEvents)
	}
}
