package policy

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/loomwork/loomwork/agents/journal"
)

// The built-in default policy: what authorizes the tool calls of every
// command that runs or serves the reference agents when it is given no
// --policy (docs/policy.md prints it verbatim; TestDefaultPolicyInDocs
// keeps the two identical). It allows the reference agents' own tools —
// the research agent's reads, the coding agent's sandbox-local writes and
// programs — and the tools `loom-eval mcp serve` serves; everything else
// (an MCP server's tools, a peer's) is denied by default.
//
//go:embed default.json
var defaultJSON []byte

// Names of policies that are not files.
const (
	// DefaultName names the built-in default policy (--policy default, and
	// the name a run under it records).
	DefaultName = "default"
	// NoneName is the explicit opt-out (--policy none): no authorization.
	NoneName = "none"
)

// DefaultJSON returns the built-in default policy file, byte for byte.
func DefaultJSON() []byte { return bytes.Clone(defaultJSON) }

// DefaultRules returns the built-in default policy's rules.
func DefaultRules() (Rules, error) {
	return ParseRules(bytes.NewReader(defaultJSON), DefaultName)
}

// RulesNamed reads the rules a --policy flag names: the built-in default
// policy for "" or DefaultName, a rules file otherwise; ok is false for
// NoneName (no policy).
func RulesNamed(name string) (r Rules, ok bool, err error) {
	switch name {
	case NoneName:
		return Rules{}, false, nil
	case "", DefaultName:
		r, err = DefaultRules()
	default:
		r, err = LoadRules(name)
	}
	return r, err == nil, err
}

// recordOf is the journal record of rules under name: the rules in
// canonical JSON.
func recordOf(name string, r Rules) (*journal.PolicyRecord, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	c, err := journal.Canonical(b)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return &journal.PolicyRecord{Name: name, Rules: c}, nil
}

// PolicyRecord implements runtime.PolicySource: the guard's rules, when its
// engine is an *Engine (another engine's decisions cannot be rebuilt from
// rules), with GuardConfig.Name.
func (g *Guard) PolicyRecord() *journal.PolicyRecord { return g.record }

// RecordedGuard is the guard a run recorded under rec decided with (no
// audit log, no queue: a replay re-decides, it does not decide anew); cfg
// supplies the tracer and clock. The rules are read as strictly as a
// policy file.
func RecordedGuard(rec journal.PolicyRecord, cfg GuardConfig) (*Guard, error) {
	name := rec.Name
	if name == "" {
		name = "recorded"
	}
	r, err := ParseRules(bytes.NewReader(rec.Rules), "recorded in the journal ("+name+")")
	if err != nil {
		return nil, err
	}
	e, err := NewEngine(r)
	if err != nil {
		return nil, err
	}
	cfg.Engine, cfg.Rules, cfg.Name, cfg.Audit, cfg.Queue = e, r, rec.Name, nil, nil
	return NewGuard(cfg)
}
