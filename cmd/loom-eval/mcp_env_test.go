package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
)

// everythingServer installs the reference MCP server-everything
// (scripts/mcpeverything, cached by lock-file hash) and returns the
// --mcp command line that starts it over stdio. node and npm are required,
// as for the other protocol tests (.ci/run installs them).
func everythingServer(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: this test runs the reference MCP server-everything (apt-get install nodejs npm; .ci/run installs it)")
	}
	src, err := filepath.Abs(filepath.Join("..", "..", "scripts", "mcpeverything", "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", src)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/mcpeverything/install.sh: %v\n%s", err, stderr.String())
	}
	return node + " " + filepath.Join(strings.TrimSpace(string(out)), "@modelcontextprotocol", "server-everything", "dist", "index.js") + " stdio"
}

// TestRunMCPServerEverythingSeesNoSecrets: `loom-eval run --mcp` against
// the reference server-everything, whose get-env tool returns the
// server's environment, with the model (a fake OpenAI endpoint) calling
// get-env. OPENAI_API_KEY and LOOMWORK_MCP_TOKEN are in loom-eval's
// environment; neither may reach the server, so neither is in what the
// model is sent nor in the journal. A variable named with --mcp-env does
// reach it.
func TestRunMCPServerEverythingSeesNoSecrets(t *testing.T) {
	testtier.Slow(t)
	server := everythingServer(t)
	ds := shippedDatasetAbs(t)
	const key = "lw-test-key-openai-mcp-env-5e1d"
	const token = "lw-test-mcp-token-77c2a9"
	t.Setenv("OPENAI_API_KEY", key)
	t.Setenv("LOOMWORK_MCP_TOKEN", token)
	t.Setenv("LOOMWORK_TEST_NAMED", "named-value-31f")
	t.Chdir(t.TempDir())
	ctx := context.Background()
	// The default policy denies an MCP server's tools: this rules file
	// names get-env, so the call runs and its output is what is checked.
	os.WriteFile("policy.json", []byte(`{"version": 1, "rules": [{"tool": "get-env", "decision": "allow", "note": "the test reads what the server sees"}]}`), 0o644)

	for _, tc := range []struct {
		name  string
		extra []string
		named bool
	}{{"default", nil, false}, {"named", []string{"--mcp-env", "everything=LOOMWORK_TEST_NAMED"}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLiveFake(t, "openai", key)
			f.srv.Enqueue(
				f.answer("", []llm.ToolCall{{ID: f.callID(1), Name: "get-env", Arguments: json.RawMessage(`{}`)}}, llm.Usage{InputTokens: 10, OutputTokens: 5}),
				f.answer("done", nil, llm.Usage{InputTokens: 20, OutputTokens: 5}),
			)
			db := tc.name + ".db"
			args := append([]string{"--agent", "research", "--task", "print the environment", "--run-id", "r-" + tc.name,
				"--dataset", ds, "--provider", "openai", "--model", f.model, "--base-url", f.baseURL,
				"--journal", db, "--journal-out", tc.name + ".jsonl", "--json", "--mcp", "everything=" + server, "--policy", "policy.json"}, tc.extra...)
			var out, errb bytes.Buffer
			m := newTestMain(&out, &errb, map[string]string{"OPENAI_API_KEY": key, "LOOMWORK_MCP_TOKEN": token})
			if err := m.runRun(ctx, args); err != nil {
				t.Fatalf("run: exit %d: %v\n%s", exitCode(err, &errb), err, errb.String())
			}
			reqs := f.srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("the fake got %d requests, want 2", len(reqs))
			}
			// The second request carries get-env's result to the model.
			seen := string(reqs[1].Body)
			if !strings.Contains(seen, "PATH") {
				t.Fatalf("the model was not sent get-env's output:\n%s", seen)
			}
			if got := strings.Contains(seen, "named-value-31f"); got != tc.named {
				t.Errorf("LOOMWORK_TEST_NAMED reached the server: %v, want %v:\n%s", got, tc.named, seen)
			}
			where := journalFiles(t, db)
			jl, _ := os.ReadFile(tc.name + ".jsonl")
			where["journal export"], where["model request"], where["stdout"] = jl, []byte(seen), out.Bytes()
			for _, secret := range []string{key, token} {
				for name, b := range where {
					if bytes.Contains(b, []byte(secret)) {
						t.Errorf("%s reached the MCP server: it is in %s", secret, name)
					}
				}
			}
		})
	}
}

// TestMCPToolsCannotShadowTheAgents: a server's tool list is untrusted. A
// server tool named like one of the agent's own is refused unless
// --mcp-replace lets that server replace it; two servers offering one
// name are refused; --mcp-replace naming a tool the server lacks is
// refused. Each is a usage error (exit 2) before any run starts.
func TestMCPToolsCannotShadowTheAgents(t *testing.T) {
	testtier.Slow(t)
	ctx := context.Background()
	ds := datasettest.ShippedDir(t)
	cache := indexCache(t)
	dir := t.TempDir()
	server := func(name string) string {
		return name + "=" + strings.Join([]string{os.Args[0], "mcp", "serve", "--dataset", ds, "--index-cache", cache, "--no-python", "--no-traces"}, " ")
	}
	run := func(extra ...string) (int, string) {
		args := append([]string{"run", "--agent", "research", "--task", "x", "--dataset", ds, "--index-cache", cache,
			"--journal", "j.db", "--mcp-env", "docs=LOOMWORK_TEST_MAIN,LOOMWORK_AUDIT_KEY"}, extra...)
		out, err := loomEval(ctx, dir, args...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--mcp", server("docs")}, `a tool of the research agent's own: refused (an untrusted server must not shadow it); --mcp-replace docs=`},
		{[]string{"--mcp", server("docs"), "--mcp-replace", "docs=search_docs,read_doc,fetch"}, `--mcp-replace docs=fetch: server docs offers no tool "fetch"`},
		{[]string{"--mcp", server("docs"), "--mcp", server("docs2"), "--mcp-env", "docs2=LOOMWORK_TEST_MAIN,LOOMWORK_AUDIT_KEY", "--mcp-replace", "docs=search_docs,read_doc"}, `MCP servers docs and docs2 both offer a tool "`},
	} {
		code, out := run(c.extra...)
		if code != ExitUsage || !strings.Contains(out, c.want) {
			t.Errorf("run %v: exit %d, want %d with %q:\n%s", c.extra[len(c.extra)-1], code, ExitUsage, c.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "j.db")); err == nil {
		t.Error("a refused run opened its journal")
	}
}
