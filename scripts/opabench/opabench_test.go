// Package opabench measures the decision latency of Loomwork's policy
// engine against Open Policy Agent evaluating the same rules in Rego
// behind the same question (docs/policy.md). It is its own module so the
// main module does not carry OPA's dependencies. Run: scripts/opabench.sh.
package opabench

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/loomwork/loomwork/agents/policy"
)

// The reference rules in Rego, in the reference order: a matching deny is
// terminal; a tainted write requires approval; then allow; else deny.
const module = `package loomwork.authz

import rego.v1

rules := [
	{"tool": "logs.*", "scope": "*", "decision": "allow"},
	{"tool": "github.create_pr", "scope": "repo:learnllm", "decision": "allow"},
	{"tool": "deploy.*", "scope": "*", "decision": "deny"},
]

matches(r) if {
	glob.match(r.tool, [], input.tool)
	glob.match(r.scope, [], input.scope)
}

denied if {
	some r in rules
	r.decision == "deny"
	matches(r)
}

allowed if {
	some r in rules
	r.decision == "allow"
	matches(r)
}

decision := "deny" if denied
else := "require_approval" if {
	input.writes
	input.tainted
}
else := "allow" if allowed
else := "deny"
`

var requests = []map[string]any{
	{"tool": "logs.query", "scope": "repo:learnllm", "writes": false, "tainted": true},
	{"tool": "github.create_pr", "scope": "repo:learnllm", "writes": true, "tainted": true},
	{"tool": "deploy.production", "scope": "repo:learnllm", "writes": true, "tainted": false},
	{"tool": "github.create_pr", "scope": "repo:learnllm", "writes": true, "tainted": false},
}

var want = []string{"allow", "require_approval", "deny", "allow"}

func engine(tb testing.TB) (*policy.Engine, *policy.Tracker) {
	e, err := policy.NewEngine(policy.Rules{Version: 1, Rules: []policy.Rule{
		{Tool: "logs.*", Decision: policy.Allow},
		{Tool: "github.create_pr", Scope: "repo:learnllm", Decision: policy.Allow},
		{Tool: "deploy.*", Decision: policy.Deny},
	}})
	if err != nil {
		tb.Fatal(err)
	}
	t := policy.NewTracker()
	t.MarkUntrusted("doc", "tool:search_runbooks")
	t.Propagate([]string{"doc"}, "body")
	return e, t
}

func loomRequests() []policy.Request {
	var out []policy.Request
	for _, r := range requests {
		req := policy.Request{Tool: r["tool"].(string), Scope: r["scope"].(string), Writes: r["writes"].(bool), Arguments: json.RawMessage(`{}`)}
		if r["tainted"].(bool) {
			req.ArgumentIDs = []string{"body"}
		}
		out = append(out, req)
	}
	return out
}

func prepared(tb testing.TB) rego.PreparedEvalQuery {
	q, err := rego.New(rego.Query("data.loomwork.authz.decision"), rego.Module("authz.rego", module)).PrepareForEval(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// Both engines give the same decisions on the same questions.
func TestSameDecisions(t *testing.T) {
	e, tr := engine(t)
	q := prepared(t)
	for i, req := range loomRequests() {
		if got := string(e.Authorize(req, tr).Decision); got != want[i] {
			t.Fatalf("loomwork %d: %s want %s", i, got, want[i])
		}
		rs, err := q.Eval(context.Background(), rego.EvalInput(requests[i]))
		if err != nil {
			t.Fatal(err)
		}
		if got := rs[0].Expressions[0].Value.(string); got != want[i] {
			t.Fatalf("opa %d: %s want %s", i, got, want[i])
		}
	}
}

func BenchmarkLoomworkEngine(b *testing.B) {
	e, tr := engine(b)
	reqs := loomRequests()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.Authorize(reqs[i%len(reqs)], tr)
	}
}

func BenchmarkOPAPrepared(b *testing.B) {
	q := prepared(b)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := q.Eval(ctx, rego.EvalInput(requests[i%len(requests)])); err != nil {
			b.Fatal(err)
		}
	}
}
