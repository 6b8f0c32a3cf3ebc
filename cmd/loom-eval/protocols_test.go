package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/mcp"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store/storeurl"
)

// protoClients installs scripts/protoclients (the MCP TypeScript SDK and
// the A2A JS SDK, cached by lock-file hash) and returns a folder holding
// the scripts next to that node_modules (ES modules resolve packages from
// the script's folder, not NODE_PATH). node and npm are required: a
// missing one fails the test — .ci/run installs npm (and with it nodejs).
func protoClients(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: the protocol wire tests need an independent client (apt-get install nodejs npm; .ci/run installs it)")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("npm is not installed: the protocol wire tests need it (apt-get install npm; .ci/run installs it)")
	}
	src, err := filepath.Abs(filepath.Join("..", "..", "scripts", "protoclients"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(src, "install.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/protoclients/install.sh: %v\n%s", err, stderr.String())
	}
	dir = t.TempDir()
	if err := os.Symlink(strings.TrimSpace(string(out)), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"mcp.mjs", "a2a.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return node, dir
}

// jsMCPResult is what scripts/protoclients/mcp.mjs prints.
type jsMCPResult struct {
	Server       struct{ Name string }
	Capabilities struct {
		Tools *struct{ ListChanged bool } `json:"tools"`
	}
	Tools                []string
	SearchSchemaRequired []string
	Search               struct {
		IsError bool
		Text    string
		Meta    map[string][]string
	}
	BadArgs struct {
		IsError bool
		Text    string
	}
	UnknownTool struct {
		Code    *int
		IsError bool
		Message string
	}
	Python *struct {
		IsError bool
		Text    string
	}
}

func runJSMCP(t *testing.T, node, dir string, args ...string) jsMCPResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "mcp.mjs")}, args...)...)
	cmd.Env = append(os.Environ(), "LOOMWORK_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node mcp.mjs %v: %v\n%s\n%s", args, err, out, stderr.String())
	}
	var r jsMCPResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("mcp.mjs output: %v\n%s", err, out)
	}
	return r
}

func checkJSMCP(t *testing.T, how string, r jsMCPResult, wantTools []string) {
	t.Helper()
	if r.Server.Name != "loomwork" || r.Capabilities.Tools == nil || strings.Join(r.Tools, ",") != strings.Join(wantTools, ",") {
		t.Fatalf("%s: server %q tools capability %v tools %v (want %v)", how, r.Server.Name, r.Capabilities.Tools, r.Tools, wantTools)
	}
	if strings.Join(r.SearchSchemaRequired, ",") != "query" {
		t.Errorf("%s: search_docs schema required = %v", how, r.SearchSchemaRequired)
	}
	if r.Search.IsError || !strings.Contains(r.Search.Text, "changing-the-colors") || len(r.Search.Meta["io.loomwork/documents"]) == 0 {
		t.Errorf("%s: search = %+v", how, r.Search)
	}
	if !r.BadArgs.IsError || !strings.Contains(r.BadArgs.Text, `field "/query"`) {
		t.Errorf("%s: bad arguments = %+v (want isError naming the field, SEP-1303)", how, r.BadArgs)
	}
	if r.UnknownTool.Code == nil || *r.UnknownTool.Code != -32602 {
		t.Errorf("%s: unknown tool = %+v (want JSON-RPC -32602)", how, r.UnknownTool)
	}
}

// TestMCPServeWire proves `loom-eval mcp serve` on the wire with two
// clients: the official TypeScript SDK (an independent implementation,
// from node) over stdio and over Streamable HTTP with a bearer token, and
// the Go SDK client (package agents/mcp) over HTTP, including the trace
// queries and sandboxed Python.
func TestMCPServeWire(t *testing.T) {
	testtier.Slow(t)
	// Not parallel: its first search loads the index (the LSA fit, about
	// 15 s of CPU under -race) inside the MCP client's 60 s request
	// timeout, which the parallel tests' load could exhaust.
	node, dir := protoClients(t)
	ds := datasettest.ShippedDir(t)
	cache := indexCache(t)
	storePath := filepath.Join(t.TempDir(), "traces.db")
	st, err := storeurl.Open(context.Background(), storePath, false) // an empty store, as serve creates it
	if err != nil {
		t.Fatal(err)
	}
	st.Shutdown(context.Background())

	// stdio: node starts this test binary as `loom-eval mcp serve`.
	argv, _ := json.Marshal([]string{os.Args[0], "mcp", "serve", "--dataset", ds, "--index-cache", cache, "--no-python", "--no-traces"})
	checkJSMCP(t, "TypeScript SDK over stdio", runJSMCP(t, node, dir, "--stdio", string(argv)), []string{"read_doc", "search_docs"})

	// Streamable HTTP with a bearer token.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("t0ken-for-the-test\n"), 0o600)
	url := startMCPHTTP(t, loomEval(ctx, t.TempDir(), "mcp", "serve", "--http", "127.0.0.1:0", "--token-file", tokenFile,
		"--dataset", ds, "--index-cache", cache, "--store", storePath, "--no-python"))
	all := []string{"read_doc", "search_docs", "trace_get", "trace_list", "trace_rollup"}
	checkJSMCP(t, "TypeScript SDK over Streamable HTTP", runJSMCP(t, node, dir, "--url", url, "--token", "t0ken-for-the-test"), all)

	// The Go SDK client: a wrong token is refused; the right one lists the
	// same tools and answers the trace queries.
	bad, _ := mcp.NewClient(mcp.ClientConfig{Name: "loomwork", URL: url, BearerToken: "wrong"})
	if err := bad.Start(ctx); err == nil {
		t.Fatal("a wrong bearer token was accepted")
	}
	c := startMCPClient(ctx, t, url, "t0ken-for-the-test")
	var names []string
	for _, tl := range c.Tools() {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != strings.Join(all, ",") {
		t.Fatalf("Go SDK client tools = %v", names)
	}
	out, err := c.Call(ctx, "trace_list", json.RawMessage(`{"limit":5}`))
	if err != nil || !strings.Contains(out.Content, `"traces":[]`) {
		t.Fatalf("trace_list on an empty store = %q, %v", out.Content, err)
	}
	_, err = c.Call(ctx, "trace_get", json.RawMessage(`{"trace_id":"0123456789abcdef"}`))
	var sf *runtime.StepFailure
	if err == nil || errors.As(err, &sf) {
		t.Fatalf("trace_get of an unknown trace = %v (want a tool error)", err)
	}
}

// startMCPClient connects the Go SDK client to the Streamable HTTP server
// at url with token; it is shut down when the test ends.
func startMCPClient(ctx context.Context, t *testing.T, url, token string) *mcp.Client {
	t.Helper()
	c, err := mcp.NewClient(mcp.ClientConfig{Name: "loomwork", URL: url, BearerToken: token})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown(context.Background()) })
	return c
}

// startMCPHTTP starts `loom-eval mcp serve --http …` and returns its URL
// (which it prints on stderr); the process is stopped when the test ends.
func startMCPHTTP(t *testing.T, srv *exec.Cmd) string {
	t.Helper()
	return startListening(t, srv, "Streamable HTTP on ")
}

// startListening starts srv and returns the first word after marker on
// its stderr (the address it listens on).
func startListening(t *testing.T, srv *exec.Cmd, marker string) string {
	t.Helper()
	errPipe, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Signal(os.Interrupt); srv.Wait() })
	sc := bufio.NewScanner(errPipe)
	var seen []string
	for sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), marker); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return strings.Fields(after)[0]
		}
		seen = append(seen, sc.Text())
	}
	t.Fatalf("%v did not say where it listens:\n%s", srv.Args, strings.Join(seen, "\n"))
	return ""
}

// TestRootMCPServeSandboxedPython: run_python_code runs in the sandbox
// (the real binary, which the sandbox re-executes as its init helper),
// called from the TypeScript SDK over Streamable HTTP.
func TestRootMCPServeSandboxedPython(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // a subprocess server and a node client: its waits overlap other tests' work
	bin := buildLoomEval(t)
	node, dir := protoClients(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("py-token"), 0o600)
	url := startMCPHTTP(t, exec.Command(bin, "mcp", "serve", "--http", "127.0.0.1:0", "--token-file", tokenFile,
		"--dataset", datasettest.ShippedDir(t), "--index-cache", indexCache(t), "--no-traces"))
	r := runJSMCP(t, node, dir, "--url", url, "--token", "py-token", "--python", "1")
	checkJSMCP(t, "TypeScript SDK over Streamable HTTP", r, []string{"read_doc", "run_python_code", "search_docs"})
	if r.Python == nil || r.Python.IsError || !strings.Contains(r.Python.Text, `"stdout":"42\n"`) {
		t.Errorf("run_python_code = %+v", r.Python)
	}
}

// TestA2AServeWire proves `loom-eval a2a serve` on the wire with the A2A
// JS SDK (an independent client, protocol 0.3 JSON-RPC through its compat
// layer): the Agent Card, message/send → a completed task whose artifact
// is the answer, tasks/get, tasks/cancel of a finished task refused,
// tasks/get of an unknown task refused; and the task is a finished run
// with the same id in the served journal.
func TestA2AServeWire(t *testing.T) {
	testtier.Slow(t)
	// Not parallel: its message/send loads the index (the LSA fit, about
	// 15 s of CPU under -race) within the client's request timeout.
	node, dir := protoClients(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jpath := filepath.Join(t.TempDir(), "a2a.db")
	url := startListening(t, loomEval(ctx, t.TempDir(), "a2a", "serve", "--agent", "research", "--http", "127.0.0.1:0",
		"--journal", jpath, "--dataset", datasettest.ShippedDir(t), "--index-cache", indexCache(t)), "(scripted policy) at ")

	cctx, ccancel := context.WithTimeout(ctx, 3*time.Minute)
	defer ccancel()
	cmd := exec.CommandContext(cctx, node, filepath.Join(dir, "a2a.mjs"), "--url", url, "--text", "How do I change the primary color of the theme?")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node a2a.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	var r struct {
		Card struct {
			Name, URL, ProtocolVersion, PreferredTransport string
			Skills                                         []string
		}
		Sent struct {
			Kind, ID, State string
			Artifacts       []struct{ Name, Text, RunID string }
		}
		Got struct {
			ID, State string
			Artifacts int
		}
		Cancel  struct{ State, Error string }
		Missing struct{ Error *string }
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("a2a.mjs output: %v\n%s", err, out)
	}
	if r.Card.Name != "research" || r.Card.URL != url+"/a2a" || r.Card.PreferredTransport != "JSONRPC" || len(r.Card.Skills) == 0 {
		t.Errorf("agent card = %+v", r.Card)
	}
	if r.Sent.Kind != "task" || r.Sent.State != "completed" || len(r.Sent.Artifacts) != 1 || r.Sent.Artifacts[0].RunID != r.Sent.ID ||
		!strings.Contains(r.Sent.Artifacts[0].Text, "[docs/setup/changing-the-colors.md") {
		t.Fatalf("message/send = %+v", r.Sent)
	}
	if r.Got.ID != r.Sent.ID || r.Got.State != "completed" || r.Got.Artifacts != 1 {
		t.Errorf("tasks/get = %+v", r.Got)
	}
	if r.Cancel.Error == "" {
		t.Errorf("tasks/cancel of a completed task = %+v (want refused)", r.Cancel)
	}
	if r.Missing.Error == nil || !strings.Contains(*r.Missing.Error, "not found") {
		t.Errorf("tasks/get of an unknown task = %v", r.Missing.Error)
	}
	// The task is a journaled run with the task's id.
	j, err := journaldb.Open(ctx, journaldb.Config{Path: jpath})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	evs, err := j.Events(ctx, r.Sent.ID)
	if err != nil || len(evs) < 3 || evs[len(evs)-1].Kind != journal.KindRunFinished {
		t.Fatalf("journal of task %s: %d events, %v", r.Sent.ID, len(evs), err)
	}
}

// TestRunThroughMCPThenReplayWithoutServer is the CLI end to end: `run`
// takes the research agent's search_docs/read_doc from `loom-eval mcp
// serve` over stdio (the pin journaled); `replay` of the exported journal
// needs no server (recorded results); `replay --mcp` re-executes against
// a live server and reports a result that differs (a server that now
// excludes an issue the recorded search returned), and refuses a server
// whose tool list no longer matches the journaled pin.
func TestRunThroughMCPThenReplayWithoutServer(t *testing.T) {
	testtier.Slow(t)
	// Not parallel: its first search loads the index (the LSA fit, about
	// 15 s of CPU under -race) inside the MCP client's 60 s request
	// timeout, which the parallel tests' load could exhaust.
	ctx := context.Background()
	ds := datasettest.ShippedDir(t)
	cache := indexCache(t)
	dir := t.TempDir()
	server := func(extra ...string) string {
		return "docs=" + strings.Join(append([]string{os.Args[0], "mcp", "serve", "--dataset", ds, "--index-cache", cache, "--no-python"}, extra...), " ")
	}
	run := func(args ...string) (string, error) {
		out, err := loomEval(ctx, dir, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("run", "--agent", "research", "--task", "Google Analytics with tracking code", "--run-id", "r-mcp",
		"--mcp", server("--no-traces"), "--mcp-env", "docs=LOOMWORK_TEST_MAIN,LOOMWORK_LSA_CACHE,LOOMWORK_AUDIT_KEY", "--mcp-replace", "docs=search_docs,read_doc", "--dataset", ds, "--index-cache", cache,
		"--journal", "j.db", "--journal-out", "out.jsonl", "--json"); err != nil {
		t.Fatalf("run with --mcp: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if !strings.Contains(string(b), `"mcp_servers"`) || !strings.Contains(string(b), `sha256:`) || !strings.Contains(string(b), `issue:11`) {
		t.Fatalf("the journal does not hold the MCP pin or the search results:\n%.2000s", b)
	}

	type report struct {
		Reports []struct {
			Divergence  *json.RawMessage
			ResultDiffs []struct{ Code, Tool string } `json:"result_diffs"`
			Answer      string
		}
		Errors []string
		OK     bool
	}
	replayJSON := func(args ...string) report {
		t.Helper()
		out, _ := loomEval(ctx, dir, append([]string{"replay", "out.jsonl", "--json"}, args...)...).Output()
		var r report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("replay %v: %v\n%s", args, err, out)
		}
		return r
	}
	// No server: every MCP result comes from the journal.
	if r := replayJSON(); !r.OK || len(r.Reports) != 1 || r.Reports[0].Divergence != nil || len(r.Reports[0].ResultDiffs) != 0 || r.Reports[0].Answer == "" {
		t.Fatalf("replay with no server = %+v", r)
	}
	// A live server that now excludes issue 11: the search result differs.
	r := replayJSON("--mcp", server("--no-traces", "--exclude-issues", "11"), "--mcp-env", "docs=LOOMWORK_TEST_MAIN,LOOMWORK_LSA_CACHE,LOOMWORK_AUDIT_KEY")
	if len(r.Reports) != 1 || len(r.Reports[0].ResultDiffs) == 0 || r.Reports[0].ResultDiffs[0].Code != "LWR1200" || r.Reports[0].ResultDiffs[0].Tool != "search_docs" {
		t.Fatalf("replay against a changed live server = %+v", r)
	}
	if out, err := run("replay", "out.jsonl", "--strict", "--mcp", server("--no-traces", "--exclude-issues", "11"), "--mcp-env", "docs=LOOMWORK_TEST_MAIN,LOOMWORK_LSA_CACHE,LOOMWORK_AUDIT_KEY"); err == nil {
		t.Fatalf("replay --strict with a differing live result exited 0:\n%s", out)
	}
	// A live server with another tool list (the trace queries added): refused.
	st, err := storeurl.Open(ctx, filepath.Join(dir, "t.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	st.Shutdown(ctx)
	r = replayJSON("--mcp", server("--store", filepath.Join(dir, "t.db")), "--mcp-env", "docs=LOOMWORK_TEST_MAIN,LOOMWORK_LSA_CACHE,LOOMWORK_AUDIT_KEY")
	if r.OK || len(r.Errors) == 0 || !strings.Contains(strings.Join(r.Errors, "\n"), "refused until re-approved") {
		t.Fatalf("replay against a server whose tool list changed = %+v", r)
	}
}

// `loom-eval mcp serve` on a fresh clone, before serve has stored anything:
// it creates the default trace store (as serve does) and offers the trace
// queries on it, where it used to exit 3 with "open trace store
// .loomwork/traces.db: no such file" (issue 40).
func TestMCPServeOnAFreshCloneCreatesTheTraceStore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fresh := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("t0ken\n"), 0o600)
	url := startMCPHTTP(t, loomEval(ctx, fresh, "mcp", "serve", "--http", "127.0.0.1:0", "--token-file", tokenFile,
		"--dataset", datasettest.ShippedDir(t), "--index-cache", indexCache(t), "--no-python"))
	c := startMCPClient(ctx, t, url, "t0ken")
	out, err := c.Call(ctx, "trace_list", json.RawMessage(`{"limit":5}`))
	if err != nil || !strings.Contains(out.Content, `"traces":[]`) {
		t.Fatalf("trace_list on the fresh store = %q, %v", out.Content, err)
	}
	if _, err := os.Stat(filepath.Join(fresh, ".loomwork", "traces.db")); err != nil {
		t.Errorf("the default store was not created: %v", err)
	}
}
