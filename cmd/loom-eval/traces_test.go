package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var spans []store.Span
	for i, id := range []string{tracesA, tracesB, tracesOther} {
		spans = append(spans, store.Span{TraceID: id, SpanID: "00000000000000a" + string(rune('1'+i)), Name: "invoke_agent research-" + id[:4],
			Kind: "internal", StartTime: at, EndTime: at.Add(time.Second), StatusCode: store.StatusOK, ServiceName: "research-agent"})
	}
	return storeOf(t, spans)
}

// storeOf writes spans into a new embedded store, closes it and returns
// its path.
func storeOf(t *testing.T, spans []store.Span) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "traces.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
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

// Span and service names come from any sender: the human output of traces
// list and get writes their control characters as visible escapes, so a
// name cannot move the reader's cursor or retitle their terminal; the JSON
// output keeps them exactly (JSON escapes them itself).
func TestTracesTextOutputEscapesTerminalControls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.db")
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	// \x9b alone is not UTF-8 (a terminal may read it as CSI); \u009b is
	// the C1 CSI encoded.
	hostile := "agent\x1b]0;pwned\x07\x1b[2J\r\x9b31m\u009b1m\bdone"
	id := "e5c0000000000000000000000000e5c0"
	if err := st.WriteSpans(context.Background(), []store.Span{{TraceID: id, SpanID: "00000000000000e1", Name: hostile,
		Kind: "internal", StartTime: at, EndTime: at.Add(time.Second), StatusCode: store.StatusError, StatusMessage: hostile,
		ServiceName: "svc\x1b[31m"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"traces", "list", "--store", path}, {"traces", "get", id, "--store", path}} {
		code, out, errOut := runCLI(t, args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		for _, c := range []string{"\x1b", "\x07", "\r", "\b", "\x9b", "\u009b"} {
			if strings.Contains(out, c) {
				t.Errorf("%v prints a raw %q:\n%q", args, c, out)
			}
		}
		if !strings.Contains(out, `agent\x1b]0;pwned\x07\x1b[2J\x0d\x9b31m\u009b1m\x08done`) {
			t.Errorf("%v does not show the name with its controls escaped:\n%s", args, out)
		}
	}
	_, out, _ := runCLI(t, "traces", "get", id, "--store", path, "--json")
	if !strings.Contains(out, `agent\u001b]0;pwned\u0007`) {
		t.Errorf("traces get --json changed the name: %.300s", out)
	}
}

// wideTraceStore holds one trace whose every name is long and whose cost
// is unknown: the row issue 40 measured at 269–620 characters.
func wideTraceStore(t *testing.T) string {
	t.Helper()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	long := strings.Repeat("very-long-name-", 6)
	root := store.Span{TraceID: tracesA, SpanID: "00000000000000a1", Name: "invoke_agent " + long + "agent", Kind: "internal",
		StartTime: at, EndTime: at.Add(4 * time.Second), StatusCode: store.StatusOK, ServiceName: long + "service", AgentName: long + "agent"}
	chat := store.Span{TraceID: tracesA, SpanID: "00000000000000a2", ParentSpanID: root.SpanID, Name: "chat " + long + "model", Kind: "client",
		StartTime: at.Add(time.Second), EndTime: at.Add(2 * time.Second), StatusCode: store.StatusOK, ServiceName: root.ServiceName,
		Operation: "chat", Provider: "acme", RequestModel: long + "model", ResponseModel: long + "model-2026", InputTokens: 1200, OutputTokens: 300}
	return storeOf(t, []store.Span{root, chat})
}

// The human `traces list` fits the terminal (issue 40: rows of 269–620
// characters): values are cut with an ellipsis and the columns that
// matter least left out, the trace id kept whole; piped without a
// terminal width it prints every value whole, and --json is untouched.
func TestTracesListFitsTheTerminalWidth(t *testing.T) {
	path := wideTraceStore(t)
	for _, width := range []int{80, 120, 200} {
		var out, errOut bytes.Buffer
		m := &Main{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
			if k == "COLUMNS" {
				return strconv.Itoa(width)
			}
			return ""
		}}
		if err := m.Run(context.Background(), []string{"traces", "list", "--store", path}); err != nil {
			t.Fatalf("traces list: %v\n%s", err, errOut.String())
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("COLUMNS=%d: a line of %d characters:\n%s", width, n, l)
			}
		}
		if !strings.Contains(out.String(), tracesA) || !strings.Contains(out.String(), "…") || !strings.HasPrefix(lines[0], "TRACE ID") {
			t.Errorf("COLUMNS=%d: want the whole trace id and cut values:\n%s", width, out.String())
		}
	}
	code, out, _ := runCLI(t, "traces", "list", "--store", path)
	if code != ExitOK || !strings.Contains(out, strings.Repeat("very-long-name-", 6)+"model-2026") {
		t.Errorf("without a width: exit %d, want every value whole:\n%s", code, out)
	}
	code, out, _ = runCLI(t, "traces", "list", "--store", path, "--json")
	if code != ExitOK || !strings.Contains(out, `"service_name": "`+strings.Repeat("very-long-name-", 6)+`service"`) {
		t.Errorf("--json: exit %d:\n%s", code, out)
	}
}
