package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
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

// TestScheduleRunExecutesScoreTraces: `schedule run` runs the score-traces
// inspection of one delivered occurrence, then executes the task it
// proposed against a real embedded store: the report lands in the folder
// named by the task key with one trial per trace of the window. A second
// run has nothing to inspect and nothing to execute.
func TestScheduleRunExecutesScoreTraces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "traces.db")
	st, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var spans []store.Span
	for i, at := range []time.Duration{10 * time.Hour, 11 * time.Hour, 30 * time.Hour /* after the window */} {
		tid := fmt.Sprintf("%032x", 0x5c0e00+i)
		start := day.Add(at)
		spans = append(spans, store.Span{TraceID: tid, SpanID: fmt.Sprintf("%016x", 0x100+i), Name: "invoke_agent toy", Kind: "internal",
			StartTime: start, EndTime: start.Add(time.Second), StatusCode: store.StatusUnset, ServiceName: "toy",
			Operation: semconv.OpInvokeAgent, AgentName: "toy", ResourceAttributes: store.Attributes{"service.name": "toy"},
			Attributes: store.Attributes{semconv.AttrOperationName: semconv.OpInvokeAgent, semconv.AttrCaseID: "case-a"}})
	}
	if err := st.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	if err := st.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "coord.db")
	reports := filepath.Join(dir, "reports")
	scheds := "../../baselines/routines/schedules.jsonl"
	if out, _, err := runIn(t, "schedule", "deliver", "--coordinator", db, "--schedules", scheds, "--routine", "score-traces", "--nominal", "2026-12-02T06:00:00Z"); err != nil {
		t.Fatalf("deliver: %v\n%s", err, out)
	}
	run := []string{"schedule", "run", "--coordinator", db, "--store", "sqlite:" + dbPath, "--cases", "", "--reports", reports}
	out, errOut, err := runIn(t, run...)
	if err != nil || !strings.Contains(out, "1 inspection(s) run") || !strings.Contains(out, "1 score-traces task(s) executed") {
		t.Fatalf("run: %v\n%s\n%s", err, out, errOut)
	}
	trials, err := os.ReadFile(filepath.Join(reports, "score-traces", "2026-12-01T06:00:00Z", "2026-12-02T06:00:00Z", "trials.jsonl"))
	if err != nil || bytes.Count(trials, []byte("\n")) != 2 {
		t.Fatalf("trials: %v\n%s", err, trials)
	}
	out, errOut, err = runIn(t, run...)
	if err != nil || !strings.Contains(out, "0 inspection(s) run") || !strings.Contains(out, "0 score-traces task(s) executed") {
		t.Fatalf("second run: %v\n%s\n%s", err, out, errOut)
	}
}
