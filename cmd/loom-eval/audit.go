package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/loomwork/loomwork/agents/policy"
)

// runAudit: audit verify FILE — checks a policy audit log's hash chain
// and every entry's signature under the machine's audit key.
func (m *Main) runAudit(_ context.Context, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprintln(m.Stderr, "Usage: loom-eval audit verify FILE [--key FILE | --unsigned] [--json]\nChecks a policy audit log's hash chain and its entries' signatures; exits 1 naming the first edited, dropped, reordered or forged entry.")
		if len(args) > 0 && isHelp(args[0]) {
			return nil
		}
		return usageError("audit: want a subcommand: verify")
	}
	fs := m.newFlagSet("audit verify", "audit verify FILE [--key FILE | --unsigned] [--json]")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	keyFile := fs.String("key", "", "audit key file the entries must be signed with (default $"+policy.EnvAuditKey+", else loomwork/audit.key in the user's config folder)")
	unsigned := fs.Bool("unsigned", false, "check the hash chain only (a log from before signing, or from a machine whose key you do not have): it cannot tell a decision rewritten with every hash recomputed")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("audit verify: want one audit log file, got %q", fs.Args())
	}
	if *unsigned && *keyFile != "" {
		return usageError("audit verify: --key and --unsigned exclude each other")
	}
	file := fs.Arg(0)
	f, err := os.Open(file)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("audit verify: %w", err)}
	}
	defer f.Close()
	entries, err := policy.ReadAudit(f, file)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	key, err := m.verifyKey(*keyFile, *unsigned)
	if err != nil {
		return err
	}
	verr := policy.VerifyAudit(entries)
	if key != nil {
		verr = policy.VerifyAuditSigned(entries, key)
	}
	m.printAuditVerdict(file, entries, key, verr, *asJSON)
	if verr != nil {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s: does not verify at %w", file, verr)}
	}
	return nil
}

// verifyKey is the key audit verify checks signatures with: --key's, the
// machine's, or none with --unsigned. Verifying never makes a key: a
// missing key file is an error saying what to do.
func (m *Main) verifyKey(keyFile string, unsigned bool) (*policy.AuditKey, error) {
	if unsigned {
		return nil, nil
	}
	what := "--key " + keyFile
	if keyFile == "" {
		p, err := policy.DefaultAuditKeyPath(os.Getenv)
		if err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("audit verify: %w", err)}
		}
		keyFile, what = p, "this machine's audit key "+p
	}
	if _, err := os.Stat(keyFile); err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("audit verify: %s: %w (a log signed elsewhere is checked with --key FILE, its chain alone with --unsigned)", what, err)}
	}
	k, err := policy.LoadAuditKey(keyFile)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("audit verify: %w", err)}
	}
	return k, nil
}

func (m *Main) printAuditVerdict(file string, entries []policy.AuditEntry, key *policy.AuditKey, verr error, asJSON bool) {
	if asJSON {
		out := map[string]any{"file": file, "entries": len(entries), "ok": verr == nil, "signed": key != nil}
		if key != nil {
			out["key"] = key.ID()
		}
		var ae *policy.AuditError
		if errors.As(verr, &ae) {
			out["line"], out["seq"], out["problem"] = ae.Line, ae.Seq, ae.What
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(m.Stdout, string(b))
		return
	}
	switch {
	case verr != nil:
	case key != nil:
		fmt.Fprintf(m.Stdout, "%s: %d entries, chain verifies, every entry signed with key %s\n", file, len(entries), key.ID())
	default:
		fmt.Fprintf(m.Stdout, "%s: %d entries, chain verifies (signatures not checked: --unsigned)\n", file, len(entries))
	}
}

// policyGuard builds the runtime guard of a policy rules file.
func policyGuard(file string) (*policy.Guard, error) {
	r, _, err := policy.RulesNamed(file)
	if err != nil {
		return nil, usageError("%v", err)
	}
	e, err := policy.NewEngine(r)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return policy.NewGuard(policy.GuardConfig{Engine: e, Rules: r, Name: file})
}
