package main

import (
	"fmt"
	"os"

	"github.com/loomwork/loomwork/agents/policy"
)

// loadAuditKey is this machine's audit key (policy.DefaultAuditKeyPath:
// $LOOMWORK_AUDIT_KEY, else loomwork/audit.key in the user's config
// folder), made on first use. Every command that appends to, verifies or
// shows an audit log uses it, so a log is signed and checked with one key;
// it stays out of the log's folder, where an agent's tools may reach.
func loadAuditKey() (*policy.AuditKey, error) {
	path, err := policy.DefaultAuditKeyPath(os.Getenv)
	if err != nil {
		return nil, err
	}
	return policy.LoadAuditKey(path)
}

// openAudit opens the audit log at file signed with the machine's key:
// policy.OpenAudit refuses a log whose chain or signatures do not verify.
func openAudit(file string) (*policy.AuditLog, error) {
	key, err := loadAuditKey()
	if err != nil {
		return nil, fmt.Errorf("audit log %s: %w", file, err)
	}
	return policy.OpenAudit(file, nil, policy.SignedWith(key))
}
