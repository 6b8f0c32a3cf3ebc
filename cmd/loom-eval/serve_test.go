package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
)

// TestServeDemoTracesCommands runs the commands a user runs: serve (on free
// loopback ports), demo over gRPC and HTTP, traces list and traces get,
// and a clean shutdown.
func TestServeDemoTracesCommands(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "traces.db")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()

	outR, outW := io.Pipe()
	var serveErr bytes.Buffer
	serve := &Main{Stdout: outW, Stderr: &serveErr, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		done <- serve.Run(ctx, []string{"serve", "--store", dbPath, "--grpc-addr", "127.0.0.1:0",
			"--http-addr", "127.0.0.1:0", "--ui-addr", "127.0.0.1:0", "--log-level", "warn"})
		outW.Close()
	}()
	addrs := map[string]string{}
	re := regexp.MustCompile(`^\s+(OTLP gRPC|OTLP HTTP|UI / API)\s+(\S+)`)
	sc := bufio.NewScanner(outR)
	for len(addrs) < 3 && sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			addrs[m[1]] = m[2]
		}
	}
	if len(addrs) < 3 {
		t.Fatalf("serve did not print its addresses (got %v); stderr: %s", addrs, serveErr.String())
	}
	go io.Copy(io.Discard, outR)

	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
		err := m.Run(context.Background(), args)
		return out.String() + errOut.String(), err
	}
	idRe := regexp.MustCompile(`Trace ID: ([0-9a-f]{32})`)
	var ids []string
	for _, args := range [][]string{
		{"demo", "--endpoint", addrs["OTLP gRPC"], "--ui", addrs["UI / API"]},
		{"demo", "--http", "--endpoint", addrs["OTLP HTTP"], "--ui", addrs["UI / API"]},
	} {
		out, err := run(args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		m := idRe.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%v printed no trace id:\n%s", args, out)
		}
		ids = append(ids, m[1])
	}

	out, err := run("traces", "list", "--store", dbPath, "--service", "loomwork-demo")
	if err != nil {
		t.Fatalf("traces list: %v\n%s", err, out)
	}
	for _, id := range ids {
		if !strings.Contains(out, id) {
			t.Errorf("traces list lacks %s:\n%s", id, out)
		}
	}
	out, err = run("traces", "list", "--store", dbPath, "--json", "--limit", "1")
	var page store.TracePage
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Traces) != 1 || page.NextPageToken == "" {
		t.Fatalf("traces list --json --limit 1: %v\n%s", err, out)
	}

	out, err = run("traces", "get", ids[0], "--store", dbPath)
	if err != nil {
		t.Fatalf("traces get: %v\n%s", err, out)
	}
	for _, want := range []string{"invoke_agent researcher", "    retrieval docs-index", "error: provider overloaded", "tokens in/out=2600/310", "label=scripted", "critical path"} {
		if !strings.Contains(out, want) {
			t.Errorf("traces get output lacks %q:\n%s", want, out)
		}
	}
	out, err = run("traces", "get", "--json", "--store", dbPath, ids[1])
	var tr struct {
		TraceID string       `json:"trace_id"`
		Spans   []store.Span `json:"spans"`
		Rollup  struct {
			CriticalPathMS float64 `json:"critical_path_ms"`
			DurationMS     float64 `json:"duration_ms"`
			ModelCalls     int     `json:"model_calls"`
		} `json:"rollup"`
	}
	if err != nil || json.Unmarshal([]byte(out), &tr) != nil || len(tr.Spans) != 6 {
		t.Fatalf("traces get --json: %v\n%s", err, out)
	}
	if tr.Rollup.ModelCalls == 0 || tr.Rollup.CriticalPathMS <= 0 || tr.Rollup.CriticalPathMS > tr.Rollup.DurationMS+1e-6 {
		t.Errorf("traces get --json rollup = %+v", tr.Rollup)
	}

	// The UI on the same serve shows the traces.
	resp, err := http.Get(addrs["UI / API"] + "/traces?service=loomwork-demo")
	if err != nil {
		t.Fatal(err)
	}
	page2, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page2), ids[0]) {
		t.Errorf("UI trace list: status %d, lacks %s", resp.StatusCode, ids[0])
	}

	// Bad input is a usage error; a missing trace is a failure, not a crash.
	var ee *ExitError
	if _, err := run("traces", "list", "--store", dbPath, "--sort", "colour"); !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Errorf("bad --sort: %v, want a usage error", err)
	}
	if _, err := run("traces", "get", strings.Repeat("0", 31)+"1", "--store", dbPath); !errors.As(err, &ee) || ee.Code != ExitFailure {
		t.Errorf("unknown trace: %v, want exit %d", err, ExitFailure)
	}
	if _, err := run("serve", "--store", "postgres://x"); !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Errorf("unknown store scheme: %v, want a usage error", err)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v; stderr: %s", err, serveErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
}
