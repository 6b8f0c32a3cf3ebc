package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// demoCLI runs loom-eval demo in-process with env; it returns stdout and
// the trace id it printed.
func demoCLI(t *testing.T, env map[string]string, args ...string) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	if err := m.Run(context.Background(), append([]string{"demo", "--timeout", "20s"}, args...)); err != nil {
		t.Fatalf("demo %v: %v\n%s%s", args, err, out.String(), errb.String())
	}
	id := regexp.MustCompile(`Trace ID: ([0-9a-f]{32})`).FindStringSubmatch(out.String())
	if id == nil {
		t.Fatalf("demo printed no trace id:\n%s", out.String())
	}
	return out.String(), id[1]
}

// demo links the trace page (and its JSON), and prints traces commands
// that find the trace as written: with --store when the store the CLI
// reads by default is not the one serve writes (issue 40: on ClickHouse
// the hint said "trace not found").
func TestDemoLinksTheTracePageAndPrintsCommandsThatFindTheTrace(t *testing.T) {
	r, _, _ := startServe(t, nil, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--ui-addr", "127.0.0.1:0")
	t.Chdir(t.TempDir()) // its .loomwork/traces.db does not exist
	out, id := demoCLI(t, nil, "--endpoint", r.GRPCAddr, "--ui", r.UIURL)
	for _, want := range []string{r.UIURL + "/traces/" + id + "   (the trace page)", r.UIURL + "/api/v1/traces/" + id,
		"loom-eval traces get " + id + " --store URL", "without --store they read .loomwork/traces.db, which does not hold this trace"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo from another folder: output lacks %q:\n%s", want, out)
		}
	}
	// With serve's store as the CLI's default, the plain command, which
	// finds the trace as printed.
	env := map[string]string{"LOOMWORK_STORE": strings.TrimPrefix(r.Store, "sqlite ")}
	out, id = demoCLI(t, env, "--endpoint", r.GRPCAddr, "--ui", r.UIURL)
	if !strings.Contains(out, "  loom-eval traces get "+id+"\n") {
		t.Fatalf("demo with serve's store as the default: output lacks the plain command:\n%s", out)
	}
	var stdout, errb bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
	if err := m.Run(context.Background(), []string{"traces", "get", id}); err != nil || !strings.Contains(stdout.String(), "Trace "+id) {
		t.Errorf("the printed command: %v\n%s%s", err, stdout.String(), errb.String())
	}
}

// demo waits until serve's UI shows the trace before it points there: a
// ClickHouse store gets the spans from serve's spool a moment after the
// acknowledgement, and a link followed at once said "trace not found".
func TestDemoWaitsUntilServeShowsTheTrace(t *testing.T) {
	r, _, _ := startServe(t, nil, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--ui-addr", "off")
	var asked atomic.Int32
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/api/v1/traces/") || asked.Add(1) < 3 {
			http.NotFound(w, req)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer ui.Close()
	out, _ := demoCLI(t, nil, "--endpoint", r.GRPCAddr, "--ui", ui.URL)
	if asked.Load() < 3 || strings.Contains(out, "did not show it") {
		t.Errorf("the UI was asked %d times (want 3: until it shows the trace):\n%s", asked.Load(), out)
	}
}

// The commands demo prints run as written: make demo runs it as
// bin/loom-eval, before make install has put loom-eval on the PATH.
func TestProgNameIsHowToRunTheBinaryAgain(t *testing.T) {
	for arg0, want := range map[string]string{"loom-eval": "loom-eval", "bin/loom-eval": "bin/loom-eval", "./bin/loom-eval": "./bin/loom-eval", "/usr/local/bin/loom-eval": "/usr/local/bin/loom-eval"} {
		if got := progName(arg0); got != want {
			t.Errorf("progName(%q) = %q, want %q", arg0, got, want)
		}
	}
}
