package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The CLI round trip: crash, resume into a suspended gate, approve, resume
// to completion; a second run is denied and stops at the gate.
func TestWorkflowApproveDenyCLI(t *testing.T) {
	jp := filepath.Join(t.TempDir(), "j.db")
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		m := newTestMain(&out, &errb, nil)
		err := m.Run(context.Background(), append(args, "--journal", jp))
		return out.String(), err
	}
	if _, err := run("workflow", "run", "incident", "--run", "r1", "--crash-after", "open_pr"); err == nil {
		t.Fatal("a simulated crash must exit non-zero")
	}
	out, err := run("workflow", "run", "incident", "--run", "r1")
	if err != nil || !strings.Contains(out, "suspended at approve_deploy") {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if _, err := run("approve", "r1", "approve_deploy"); err == nil {
		t.Fatal("approve without --approver must fail")
	}
	if _, err := run("approve", "r1", "approve_deploy", "--approver", "on-call@example.invalid"); err != nil {
		t.Fatal(err)
	}
	out, err = run("workflow", "run", "incident", "--run", "r1")
	if err != nil || !strings.Contains(out, "run r1 completed") || strings.Count(out, "open_pr           succeeded") != 1 {
		t.Fatalf("after approval: %v\n%s", err, out)
	}
	if _, err := run("workflow", "run", "incident", "--run", "r2"); err != nil {
		t.Fatal(err)
	}
	if _, err := run("deny", "r2", "approve_deploy", "--approver", "sec@example.invalid", "--reason", "freeze"); err != nil {
		t.Fatal(err)
	}
	out, err = run("workflow", "run", "incident", "--run", "r2")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure || !strings.Contains(out, "denied       attempt=0  by sec@example.invalid: freeze") {
		t.Fatalf("denied run: %v\n%s", err, out)
	}
	out, err = run("workflow", "status", "r2")
	if err != nil || !strings.Contains(out, "approve_deploy denied by sec@example.invalid") {
		t.Fatalf("status: %v\n%s", err, out)
	}
}

func TestAuditVerifyCLI(t *testing.T) {
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := openAudit(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"allow", "require_approval", "approval_granted"} {
		if _, err := l.Append("agent:incident", "tool_call", map[string]string{"decision": a}); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	if err := newTestMain(&out, &errb, nil).Run(context.Background(), []string{"audit", "verify", file}); err != nil || !strings.Contains(out.String(), "3 entries, chain verifies") {
		t.Fatalf("%v %s", err, out.String())
	}
	b, _ := os.ReadFile(file)
	os.WriteFile(file, bytes.Replace(b, []byte(`"require_approval"`), []byte(`"allow"`), 1), 0o644)
	err = newTestMain(&out, &errb, nil).Run(context.Background(), []string{"audit", "verify", file})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure || !strings.Contains(err.Error(), "line 2 (entry seq 2): content does not match its hash: edited") {
		t.Fatalf("tampered: %v", err)
	}
}
