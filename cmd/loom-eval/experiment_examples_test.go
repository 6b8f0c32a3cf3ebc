package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store/storeurl"
)

// The example agents of scripts/examples (docs/experiments.md, "Evaluate
// your agent") are what a user writes: a Node agent on the OTel JS SDK and
// a Go agent on the OTel Go SDK in a module of its own, neither with a
// Loomwork key in it. Each calls the fake model over the chat-completions
// wire; AGENT_VERSION=2 breaks the even sums.

func examplesDir(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "scripts", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// nodeAgent installs scripts/examples/nodeagent's packages (cached) and
// returns the command and NODE_PATH. Without node or npm the test fails
// in CI (env CI set: .ci/run installs both) and is skipped, saying so,
// elsewhere.
func nodeAgent(t *testing.T) (cmd, nodePath string) {
	t.Helper()
	unavailable := func(msg string) {
		msg = "the Node example agent cannot run: " + msg
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " — CI must run it (.ci/run installs nodejs and npm)")
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable("node is not installed (apt-get install nodejs npm)")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		unavailable("npm is not installed (apt-get install npm)")
	}
	dir := examplesDir(t, "nodeagent")
	c := exec.Command("bash", filepath.Join(dir, "install.sh"))
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		unavailable("scripts/examples/nodeagent/install.sh: " + err.Error() + "\n" + stderr.String())
	}
	return node + " " + filepath.Join(dir, "agent.js"), strings.TrimSpace(string(out))
}

// goAgent builds scripts/examples/goagent, a module of its own (its
// go.mod pins the main module's OTel versions, so the module cache has
// them).
func goAgent(t *testing.T) string {
	t.Helper()
	return buildShared(t, "goagent", examplesDir(t, "goagent"), ".") // once per test binary
}

// gateExampleAgent runs v1 and v2 of an example command agent: v1 passes
// with its spans under each trial's root, v2 against v1 fails the gate
// naming the two cases it broke.
func gateExampleAgent(t *testing.T, cmd, agentSpan string) {
	t.Helper()
	model := newFakeCalcModel(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	t.Setenv("AGENT_MODEL_URL", model.URL+"/v1")
	v1, v2 := filepath.Join(dir, "v1"), filepath.Join(dir, "v2")
	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--cmd", cmd, "--trials", "2",
		"--model-label", "scripted", "--out", v1, "--label", "v1")
	if err != nil {
		t.Fatalf("v1: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	trials := readTrials(t, v1)
	if len(trials) != 12 || !strings.Contains(errOut, "[12/12] passed 12") {
		t.Fatalf("v1: %d trials (want 12, all passed)\n%s", len(trials), errOut)
	}
	checkAgentUnderRoot(t, filepath.Join(v1, "traces.db"), trials, agentSpan)

	t.Setenv("AGENT_VERSION", "2")
	out, errOut, err = runLoom(t, "experiment", "run", "--cases", cases, "--cmd", cmd, "--trials", "2",
		"--model-label", "scripted", "--out", v2, "--label", "v2", "--against", v1)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure || !strings.Contains(err.Error(), "regressed cases: even-4, even-6") {
		t.Errorf("v2 against v1: %v, want exit 1 naming even-4, even-6\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if !strings.Contains(out, "Gate: FAIL") {
		t.Errorf("v2's report has no failed gate:\n%s", out)
	}
}

// checkAgentUnderRoot opens the store: each trial's trace holds the
// agent's span (service agent-under-test, the resource naming the trial's
// case) as a child of the runner's root, and a chat span; the trial has
// the model's 15 tokens from the agent's GenAI attributes.
func checkAgentUnderRoot(t *testing.T, storePath string, trials []datasets.Trial, agentSpan string) {
	t.Helper()
	st, err := storeurl.Open(context.Background(), storePath, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	for _, tr := range trials {
		spans, err := st.GetTrace(context.Background(), tr.TraceID)
		if err != nil {
			t.Fatalf("trial %d of %s: trace %s: %v", tr.Trial, tr.CaseID, tr.TraceID, err)
		}
		root := ""
		for _, s := range spans {
			if s.ParentSpanID == "" {
				root = s.SpanID
			}
		}
		agent, chat := false, false
		for _, s := range spans {
			agent = agent || (s.Name == agentSpan && s.ParentSpanID == root && s.ServiceName == "agent-under-test" &&
				s.ResourceAttributes["loomwork.case.id"] == tr.CaseID)
			chat = chat || s.Operation == "chat"
		}
		if !agent || !chat {
			t.Errorf("trial %d of %s: trace %s (%d spans) lacks %q under the runner's root or a chat span", tr.Trial, tr.CaseID, tr.TraceID, len(spans), agentSpan)
		}
		if tr.Tokens == nil || *tr.Tokens != 15 {
			t.Errorf("trial %d of %s: tokens %v, want 15 (from the agent's spans)", tr.Trial, tr.CaseID, tr.Tokens)
		}
	}
}

// A Node agent on the OTel JS SDK, evaluated in one command.
func TestExperimentNodeExampleAgent(t *testing.T) {
	testtier.Slow(t)
	cmd, nodePath := nodeAgent(t)
	t.Setenv("NODE_PATH", nodePath)
	gateExampleAgent(t, cmd, "invoke_agent nodeagent")
}

// A Go agent on the OTel Go SDK, in a module of its own, evaluated in one
// command.
func TestExperimentGoExampleAgent(t *testing.T) {
	testtier.Slow(t)
	gateExampleAgent(t, goAgent(t), "invoke_agent goagent")
}

// The Go example served over HTTP (--serve) and evaluated with --http: it
// exports to a collector the test runs (as a user's `loom-eval serve`), the
// experiment reads the same store (--otlp-endpoint, --store), and the
// agent's spans, joined from the traceparent header, are under each
// trial's root.
func TestExperimentHTTPExampleAgent(t *testing.T) {
	testtier.Slow(t)
	model := newFakeCalcModel(t)
	bin := goAgent(t)
	dir := t.TempDir()
	cases := experimentCases(t, dir)
	storePath := filepath.Join(dir, "traces.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	backend, err := startTraceBackend(ctx, storePath, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Shutdown(ctx)

	srv := exec.CommandContext(ctx, bin, "--serve", "127.0.0.1:0")
	srv.Env = append(os.Environ(), "AGENT_MODEL_URL="+model.URL+"/v1", "OTEL_EXPORTER_OTLP_ENDPOINT="+backend.OTLPEndpoint(),
		"OTEL_SERVICE_NAME=agent-under-test", "OTEL_BSP_SCHEDULE_DELAY=100")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	if err != nil || !strings.HasPrefix(url, "http://") {
		t.Fatalf("the agent did not say where it listens: %q %v", line, err)
	}

	out, errOut, err := runLoom(t, "experiment", "run", "--cases", cases, "--http", url+"/ask",
		"--body", `{"question": {{json .Task}}}`, "--answer-path", "answer", "--trials", "1", "--model-label", "scripted",
		"--otlp-endpoint", backend.OTLPEndpoint(), "--store", storePath, "--out", filepath.Join(dir, "e"), "--trace-wait", "3s")
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	trials := readTrials(t, filepath.Join(dir, "e"))
	if len(trials) != 6 || !strings.Contains(errOut, "[6/6] passed 6") {
		t.Fatalf("%d trials (want 6, all passed)\n%s", len(trials), errOut)
	}
	st, err := storeurl.Open(ctx, storePath, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(ctx)
	for _, tr := range trials {
		spans, err := st.GetTrace(ctx, tr.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		root, ok := "", false
		for _, s := range spans {
			if s.ParentSpanID == "" {
				root = s.SpanID
			}
		}
		for _, s := range spans {
			ok = ok || (s.Name == "invoke_agent goagent" && s.ParentSpanID == root)
		}
		if !ok || tr.Tokens == nil || *tr.Tokens != 15 {
			t.Errorf("trial of %s: trace %s (%d spans) lacks the served agent's span under the root; tokens %v", tr.CaseID, tr.TraceID, len(spans), tr.Tokens)
		}
	}
}

// snippetRe finds docs/experiments.md's included snippets: a marker
// naming a file and a region, then the fenced block.
var snippetRe = regexp.MustCompile("(?s)<!-- snippet: ([^#\\s]+)#([\\w-]+) -->\\s*```\\w*\\n(.*?)```")

// The Go and Node snippets docs/experiments.md shows are the example
// agents' code, region for region (docs:begin NAME … docs:end NAME), so
// the tests above run what the guide says.
func TestExperimentDocsSnippetsAreTheExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "experiments.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range snippetRe.FindAllStringSubmatch(string(doc), -1) {
		path, region, shown := m[1], m[2], m[3]
		seen[path+"#"+region] = true
		src, err := os.ReadFile(filepath.Join("..", "..", path))
		if err != nil {
			t.Errorf("docs/experiments.md includes %s: %v", path, err)
			continue
		}
		want, err := docRegion(string(src), region)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if strings.TrimSpace(shown) != strings.TrimSpace(want) {
			t.Errorf("docs/experiments.md's snippet %s#%s differs from the file; paste the region again:\n%s", path, region, want)
		}
	}
	for _, want := range []string{"scripts/examples/goagent/main.go#go-setup", "scripts/examples/goagent/main.go#go-http", "scripts/examples/nodeagent/agent.js#node-setup"} {
		if !seen[want] {
			t.Errorf("docs/experiments.md does not include the snippet %s", want)
		}
	}
}

// docRegion is the text between "docs:begin NAME" and "docs:end NAME"
// comment lines, with the common indentation removed.
func docRegion(src, name string) (string, error) {
	lines := strings.Split(src, "\n")
	start, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case "// docs:begin " + name:
			start = i + 1
		case "// docs:end " + name:
			end = i
		}
	}
	if start < 0 || end < start {
		return "", errors.New("no region " + name)
	}
	region := lines[start:end]
	indent := -1
	for _, l := range region {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " \t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range region {
		if len(l) >= indent && indent > 0 {
			region[i] = l[indent:]
		}
	}
	return strings.Join(region, "\n"), nil
}
