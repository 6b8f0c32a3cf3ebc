package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// Trace ids of tracesStore: two share a 12-digit prefix.
const (
	tracesA     = "5eed5eedcafe0000000000000000000a"
	tracesB     = "5eed5eedcafe0000000000000000000b"
	tracesOther = "c0ffee00c0ffee00c0ffee00c0ffee01"
)

// tracesStore writes a one-span trace for each id above into a new embedded
// store and returns its path.
func tracesStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "traces.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var spans []store.Span
	for i, id := range []string{tracesA, tracesB, tracesOther} {
		spans = append(spans, store.Span{TraceID: id, SpanID: "00000000000000a" + string(rune('1'+i)), Name: "invoke_agent research-" + id[:4],
			Kind: "internal", StartTime: at, EndTime: at.Add(time.Second), StatusCode: store.StatusOK, ServiceName: "research-agent"})
	}
	if err := st.WriteSpans(context.Background(), spans); err != nil {
		t.Fatal(err)
	}
	if err := st.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCLI runs loom-eval with args as the binary would: the exit code and
// what it printed on stdout and stderr.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	code = exitCode(m.Run(context.Background(), args), &errOut)
	return code, out.String(), errOut.String()
}

func TestTracesGetAcceptsAUniquePrefixAndPrintsTheFullID(t *testing.T) {
	path := tracesStore(t)
	for _, id := range []string{tracesOther[:8], strings.ToUpper(tracesOther[:10]), tracesOther, strings.ToUpper(tracesOther)} {
		code, out, errOut := runCLI(t, "traces", "get", id, "--store", path)
		if code != ExitOK || !strings.Contains(out, "Trace "+tracesOther) {
			t.Errorf("traces get %s: exit %d, want 0 and the trace %s printed\nstdout: %s\nstderr: %s", id, code, tracesOther, out, errOut)
		}
	}
	code, out, errOut := runCLI(t, "traces", "get", "--json", "--store", path, tracesB[:31]+"b")
	if code != ExitOK || !strings.Contains(out, `"trace_id": "`+tracesB+`"`) {
		t.Errorf("traces get --json by full id: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

func TestTracesGetMalformedIDIsAUsageErrorNamingIt(t *testing.T) {
	path := tracesStore(t)
	for _, id := range []string{"xyz", "5eed5ee", tracesA + "0", "5eed5eedcafg"} {
		code, out, errOut := runCLI(t, "traces", "get", id, "--store", path)
		if code != ExitUsage || !strings.Contains(errOut, "invalid trace id") || !strings.Contains(errOut, `"`+id+`"`) {
			t.Errorf("traces get %s: exit %d, want %d with a message naming the id\nstdout: %s\nstderr: %s", id, code, ExitUsage, out, errOut)
		}
	}
	// Checked before the store is opened: no store is needed to be told.
	code, _, errOut := runCLI(t, "traces", "get", "xyz", "--store", filepath.Join(t.TempDir(), "missing.db"))
	if code != ExitUsage || !strings.Contains(errOut, "invalid trace id") {
		t.Errorf("traces get xyz with no store: exit %d, want %d\nstderr: %s", code, ExitUsage, errOut)
	}
	code, _, errOut = runCLI(t, "traces", "get", "--store", path)
	if code != ExitUsage || !strings.Contains(errOut, "want a TRACE_ID") {
		t.Errorf("traces get without an id: exit %d, want %d\nstderr: %s", code, ExitUsage, errOut)
	}
}

func TestTracesGetAmbiguousPrefixIsAUsageErrorListingTheCandidates(t *testing.T) {
	path := tracesStore(t)
	code, out, errOut := runCLI(t, "traces", "get", "5eed5eed", "--store", path)
	if code != ExitUsage || !strings.Contains(errOut, "ambiguous") || !strings.Contains(errOut, tracesA) || !strings.Contains(errOut, tracesB) {
		t.Errorf("traces get 5eed5eed: exit %d, want %d listing %s and %s\nstdout: %s\nstderr: %s", code, ExitUsage, tracesA, tracesB, out, errOut)
	}
}

func TestTracesGetUnknownPrefixIsNotFound(t *testing.T) {
	path := tracesStore(t)
	for _, id := range []string{"deadbeef", "deadbeefdeadbeefdeadbeefdeadbeef"} {
		code, _, errOut := runCLI(t, "traces", "get", id, "--store", path)
		if code != ExitFailure || !strings.Contains(errOut, "not found") || !strings.Contains(errOut, id) {
			t.Errorf("traces get %s: exit %d, want %d saying it is not found\nstderr: %s", id, code, ExitFailure, errOut)
		}
	}
}
