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

// policyFlags are --policy and --audit, for the commands that run agents
// through the runtime (run, a2a serve): one policy file format, one
// audit log (docs/policy.md).
type policyFlags struct{ file, audit string }

func (p *policyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.file, "policy", "", "authorize every tool call with this policy rules `file` (docs/policy.md): a matching deny is final, a write whose arguments derive from untrusted content (tool results, MCP tools' descriptions, evidence, memory, a peer's task) is held for approval, else allow, else deny; each decision is journaled (replay it with replay --policy FILE)")
	fs.StringVar(&p.audit, "audit", defaultAuditFile, "with --policy: append every decision to this hash-chained audit `log` (check it with loom-eval audit verify; serve --audit shows it); empty: none")
}

// guard is the Authorizer of --policy (nil without it) and the --audit
// log it appends to (nil without one), which an approval queue must share:
// one writer per log; origins are the remote tools' taint origins
// (mcp.Origins).
func (p *policyFlags) guard(cmd string, origins map[string]string, tp trace.TracerProvider) (runtime.Authorizer, *policy.AuditLog, error) {
	if p.file == "" {
		return nil, nil, nil
	}
	r, err := policy.LoadRules(p.file)
	if err != nil {
		return nil, nil, usageError("%s: --policy: %v", cmd, err)
	}
	if p.audit != "" {
		if err := mkdirFor(p.audit); err != nil {
			return nil, nil, usageError("%s: --audit %s: %v", cmd, p.audit, err)
		}
	}
	g, audit, err := rulesGuard(cmd+": --policy "+p.file, r, p.audit, cmd+": --audit", policy.GuardConfig{ToolOrigins: origins, TracerProvider: tp})
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
		if cfg.Audit, err = policy.OpenAudit(auditFile, nil); err != nil {
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
