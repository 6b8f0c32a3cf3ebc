package coding_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Init() // the sandbox re-executes this binary as its init helper
	os.Exit(m.Run())
}

// needSandbox fails in CI (root, where the sandbox must work) and skips
// elsewhere when the process cannot create namespaces and cgroups.
func needSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s needs root for the sandbox, and CI runs as root; got euid %d", t.Name(), os.Geteuid())
	}
	t.Skip("the sandbox needs root")
}

func newAgent(t *testing.T) (runtime.Agent, *coding.LazySandbox, string) {
	t.Helper()
	sb := &coding.LazySandbox{}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := sb.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	root := t.TempDir()
	a, err := coding.New(coding.Config{Sandbox: sb, WorkRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	return a, sb, root
}

func TestCodingAgentSolvesEveryBaselineTaskInTheRealSandbox(t *testing.T) {
	needSandbox(t)
	ctx := context.Background()
	agent, _, _ := newAgent(t)
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	spec := coding.DefaultContext()
	rt, err := runtime.New(runtime.Config{Model: coding.Policy(coding.PolicyConfig{}), Journal: j, Context: &spec})
	if err != nil {
		t.Fatal(err)
	}
	for _, sol := range coding.Solutions() {
		res, err := rt.Run(ctx, agent, runtime.Task{RunID: sol.ID, Input: sol.Task, CaseID: sol.ID})
		if err != nil {
			t.Fatalf("%s: %v", sol.ID, err)
		}
		want := "output:" + sol.Expected
		if len(res.Citations) != 1 || res.Citations[0] != want || !strings.Contains(res.Answer, sol.Expected) {
			t.Errorf("%s: answer %q citations %v, want %s", sol.ID, res.Answer, res.Citations, want)
		}
		if len(res.Documents) != 1 || res.Documents[0] != want {
			t.Errorf("%s: evidence produced %v, want %s", sol.ID, res.Documents, want)
		}
		if res.Label != llm.LabelScripted {
			t.Errorf("%s: label %q", sol.ID, res.Label)
		}
		evs, _ := j.Events(ctx, sol.ID)
		runs := 0
		for _, e := range evs {
			if e.Kind == journal.KindToolResult && e.Tool == "run_python" {
				runs++
				var tr journal.ToolResult
				json.Unmarshal(e.Payload, &tr)
				var rr coding.RunResult
				if err := json.Unmarshal([]byte(tr.Content), &rr); err != nil {
					t.Fatalf("%s: run_python result is not JSON: %s", sol.ID, tr.Content)
				}
				if runs < len(sol.Attempts) && (rr.ExitCode == 0 || !strings.Contains(rr.Stderr, "NameError")) {
					t.Errorf("%s: attempt %d should fail with a NameError: %+v", sol.ID, runs, rr)
				}
			}
		}
		if runs != len(sol.Attempts) {
			t.Errorf("%s: %d sandbox runs, want %d", sol.ID, runs, len(sol.Attempts))
		}
	}
}

func tool(a runtime.Agent, name string) runtime.Tool {
	for _, tl := range a.Tools {
		if tl.Name == name {
			return tl
		}
	}
	panic(name)
}

func TestRunPythonIsConfinedAndReportsWhyItEnded(t *testing.T) {
	needSandbox(t)
	ctx := context.Background()
	agent, _, _ := newAgent(t)
	write, run := tool(agent, "write_file"), tool(agent, "run_python")
	in := func(args string) runtime.ToolInput {
		return runtime.ToolInput{RunID: "confined", Arguments: json.RawMessage(args)}
	}
	for _, tc := range []struct {
		name, code, reason string
		exit               int
	}{
		{"host files are absent", "print(open('/etc/hostname').read())", "exit", 1},
		{"no network", "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)", "exit", 1},
		{"wall clock", "while True:\n    pass", "", -1},
	} {
		b, _ := json.Marshal(map[string]string{"path": "p.py", "content": tc.code})
		if _, err := write.Run(ctx, in(string(b))); err != nil {
			t.Fatal(err)
		}
		out, err := run.Run(ctx, in(`{"path":"p.py"}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var rr coding.RunResult
		json.Unmarshal([]byte(out.Content), &rr)
		switch {
		case tc.exit >= 0 && (rr.ExitCode != tc.exit || rr.Reason != tc.reason):
			t.Errorf("%s: %+v", tc.name, rr)
		case tc.exit < 0 && (rr.Reason != "cpu" && rr.Reason != "timeout"):
			t.Errorf("%s: a busy loop ended with reason %q", tc.name, rr.Reason)
		}
		if len(out.Documents) != 0 {
			t.Errorf("%s: a failed run produced evidence %v", tc.name, out.Documents)
		}
	}
}

func TestWriteFileRejectsPathsOutsideTheWorkspace(t *testing.T) {
	agent, _, root := newAgent(t)
	write := tool(agent, "write_file")
	for _, p := range []string{"../x.py", "/etc/x.py", "a/../../x", ".hidden", "a/b/c/d.py", "a b.py", ""} {
		b, _ := json.Marshal(map[string]string{"path": p, "content": "x"})
		if _, err := write.Run(context.Background(), runtime.ToolInput{RunID: "r", Arguments: b}); err == nil {
			t.Errorf("path %q was accepted", p)
		}
	}
	b, _ := json.Marshal(map[string]string{"path": "pkg/main.py", "content": "print(1)\n"})
	if _, err := write.Run(context.Background(), runtime.ToolInput{RunID: "r", Arguments: b}); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(root, "*", "pkg", "main.py"))
	if len(matches) != 1 {
		t.Fatalf("file not in the run's workspace: %v", matches)
	}
}

func TestCitationsAndEvidence(t *testing.T) {
	if got := coding.Citations("The program printed 9. [output:9] again [output:9] and [output: 10]"); strings.Join(got, "|") != "output:9|output: 10" {
		t.Fatalf("citations = %v", got)
	}
	if coding.OutputEvidence("a\nb\n\n") != "output:b" || coding.OutputEvidence("  \n") != "" {
		t.Fatal("output evidence")
	}
	if _, err := coding.Policy(coding.PolicyConfig{}).Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Write a compiler."}}}); err == nil {
		t.Fatal("the scripted policy must refuse a task it has no scripted solution for")
	}
}
