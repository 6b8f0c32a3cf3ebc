package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"go.opentelemetry.io/otel/trace"

	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/runtime"
)

// defaultAuditFile is where commands that authorize tool calls append
// their decisions, and what serve's /audit shows, by default.
const defaultAuditFile = ".loomwork/audit.jsonl"

// policyFlags are --policy and --audit, for the commands that run or serve
// agents (run, a2a serve, mcp serve, workflow run): one policy file format,
// one audit log (docs/policy.md). Without --policy the built-in default
// policy applies; --policy none is the explicit opt-out.
type policyFlags struct{ file, audit string }

// policyUsage describes a --policy flag; what says what it authorizes.
func policyUsage(what string) string {
	return "authorize " + what + " with this policy: " + policy.DefaultName + " (the built-in policy: the reference agents' own tools and mcp serve's; everything else denied; loom-eval policy default prints it), " +
		"a rules `file` (docs/policy.md), or " + policy.NoneName + " (no authorization, no decisions journaled or audited: e.g. to resume a run recorded without a policy). " +
		"A matching deny is final, a write whose arguments derive from untrusted content (tool results, MCP tools' descriptions, evidence, memory, a peer's task) is held for approval, else allow, else deny; " +
		"each decision is journaled with the policy, so replay re-decides without being told"
}

func (p *policyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.file, "policy", policy.DefaultName, policyUsage("every tool call"))
	fs.StringVar(&p.audit, "audit", defaultAuditFile, "append every decision to this hash-chained audit `log` (check it with loom-eval audit verify; serve --audit shows it); empty: none")
}

// rules are the rules --policy names (ok false for none), and the name a
// run records them under.
func (p *policyFlags) rules(cmd string) (r policy.Rules, name string, ok bool, err error) {
	r, ok, err = policy.RulesNamed(p.file)
	if err != nil {
		return r, "", false, usageError("%s: --policy: %v", cmd, err)
	}
	name = p.file
	if name == "" {
		name = policy.DefaultName
	}
	return r, name, ok, nil
}

// guard is the Authorizer of --policy (nil with --policy none) and the
// --audit log it appends to (nil without one), which an approval queue
// must share: one writer per log; origins are the remote tools' taint
// origins (mcp.Origins).
func (p *policyFlags) guard(cmd string, origins map[string]string, tp trace.TracerProvider) (runtime.Authorizer, *policy.AuditLog, error) {
	r, name, ok, err := p.rules(cmd)
	if err != nil || !ok {
		return nil, nil, err
	}
	if p.audit != "" {
		if err := mkdirFor(p.audit); err != nil {
			return nil, nil, usageError("%s: --audit %s: %v", cmd, p.audit, err)
		}
	}
	g, audit, err := rulesGuard(cmd+": --policy "+name, r, p.audit, cmd+": --audit", policy.GuardConfig{Name: name, ToolOrigins: origins, TracerProvider: tp})
	if err != nil {
		return nil, nil, err // not a nil *Guard in a non-nil Authorizer
	}
	return g, audit, nil
}

// rulesGuard is the guard of parsed rules with cfg's other settings,
// auditing to auditFile (its folder made; "" for none), and its audit log.
// what prefixes the rules' errors, auditWhat the log's. OpenAudit verifies
// the chain it finds: a tampered log is never appended to (ExitFailure).
func rulesGuard(what string, r policy.Rules, auditFile, auditWhat string, cfg policy.GuardConfig) (*policy.Guard, *policy.AuditLog, error) {
	e, err := policy.NewEngine(r)
	if err != nil {
		return nil, nil, usageError("%s: %v", what, err)
	}
	cfg.Engine, cfg.Rules = e, r
	if auditFile != "" {
		if cfg.Audit, err = openAudit(auditFile); err != nil {
			return nil, nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: %w", auditWhat, err)}
		}
	}
	g, err := policy.NewGuard(cfg)
	if err != nil {
		return nil, nil, usageError("%s: %v", what, err)
	}
	return g, cfg.Audit, nil
}

// mkdirFor makes the folder a file goes in (private: an audit log names
// what agents did).
func mkdirFor(file string) error {
	return os.MkdirAll(filepath.Dir(file), 0o700)
}

// policyFileBytes is the policy a --policy flag names as a file's bytes
// (what travels in a suite's definition) and its name: the built-in
// default policy's file, a rules file as read (checked), or nothing for
// none.
func policyFileBytes(cmd, flagValue string) ([]byte, string, error) {
	if _, ok, err := policy.RulesNamed(flagValue); err != nil {
		return nil, "", usageError("%s: --policy: %v", cmd, err)
	} else if !ok {
		return nil, "", nil
	}
	if flagValue == "" || flagValue == policy.DefaultName {
		return policy.DefaultJSON(), policy.DefaultName, nil
	}
	b, err := os.ReadFile(flagValue)
	if err != nil {
		return nil, "", usageError("%s: --policy: %v", cmd, err)
	}
	return b, flagValue, nil
}
