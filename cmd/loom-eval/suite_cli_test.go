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

func runIn(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), args)
	return out.String(), errOut.String(), err
}

func wantUsage(t *testing.T, err error, substr string) {
	t.Helper()
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUsage || !strings.Contains(err.Error(), substr) {
		t.Fatalf("err = %v, want a usage error containing %q", err, substr)
	}
}

func TestSuiteAndWorkerUsageErrors(t *testing.T) {
	dir := t.TempDir()
	_, _, err := runIn(t, "suite", "run", "--trials", "2")
	wantUsage(t, err, "--cases is required")
	_, _, err = runIn(t, "suite", "run", "--cases", "x.jsonl", "--workers", "-1")
	wantUsage(t, err, "--workers >= 0")
	_, _, err = runIn(t, "suite", "run", "--cases", "x.jsonl", "--agent", "poet")
	wantUsage(t, err, `--agent must be research or coding (got "poet")`)
	_, _, err = runIn(t, "suite", "frobnicate")
	wantUsage(t, err, `unknown subcommand "frobnicate"`)
	_, _, err = runIn(t, "worker", "--coordinator", filepath.Join(dir, "nope.db"))
	wantUsage(t, err, "nope.db")
	_, _, err = runIn(t, "suite", "status", "--out", filepath.Join(dir, "nothing"))
	wantUsage(t, err, "coord.db")
}

func TestScheduleCommands(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "coord.db")
	bad := filepath.Join(dir, "bad.jsonl")
	_ = os.WriteFile(bad, []byte(`{"routine":"nightly-gate","schedule_version":1,"calendar":"17 2 * * *","timezone":"UTC","overlap":"skip","catch_up":"coalesce-latest"}`+"\n"+
		`{"routine":"r2","schedule_version":1,"calendar":"17 2 * *","timezone":"UTC","overlap":"sometimes","catch_up":"all"}`+"\n"), 0o644)
	_, _, err := runIn(t, "schedule", "tick", "--coordinator", db, "--schedules", bad)
	wantUsage(t, err, "bad.jsonl line 2")
	if !strings.Contains(err.Error(), "calendar:") || !strings.Contains(err.Error(), "overlap:") {
		t.Fatalf("err = %v, want the fields named", err)
	}
	_ = os.WriteFile(bad, []byte(`{"routine":"r","schedule_version":1,"calender":"17 2 * * *"}`+"\n"), 0o644)
	_, _, err = runIn(t, "schedule", "tick", "--coordinator", db, "--schedules", bad)
	wantUsage(t, err, `unknown field "calender"`)

	scheds := "../../baselines/routines/schedules.jsonl"
	for i := 0; i < 2; i++ {
		out, _, err := runIn(t, "schedule", "deliver", "--coordinator", db, "--schedules", scheds, "--routine", "nightly-gate", "--nominal", "2026-12-02T02:17:00Z")
		if err != nil || !strings.Contains(out, "dispatched") {
			t.Fatalf("deliver %d: %v\n%s", i, err, out)
		}
	}
	out, _, err := runIn(t, "schedule", "list", "--coordinator", db, "--json")
	if err != nil || !strings.Contains(out, `"deliveries": 2`) || strings.Count(out, `"key"`) != 1 {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if _, _, err := runIn(t, "schedule", "pause", "--coordinator", db, "--routine", "score-traces", "--reason", "store migration"); err != nil {
		t.Fatal(err)
	}
	out, _, err = runIn(t, "schedule", "deliver", "--coordinator", db, "--schedules", scheds, "--routine", "score-traces", "--nominal", "2026-12-02T06:00:00Z")
	if err != nil || !strings.Contains(out, "paused by the operator: store migration") {
		t.Fatalf("paused deliver: %v\n%s", err, out)
	}
	_, _, err = runIn(t, "schedule", "deliver", "--coordinator", db, "--schedules", scheds, "--routine", "nightly-gate", "--nominal", "2026-12-02T02:18:00Z")
	wantUsage(t, err, "is not on the calendar")
}
