package coding_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/loomwork/loomwork/agents/sandbox/sandboxtest"
	"github.com/loomwork/loomwork/internal/testtier"
)

func TestMain(m *testing.M) {
	sandboxtest.Init() // the sandbox re-executes this binary as its init helper
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
	return newAgentWith(t, sandbox.Limits{})
}

// newAgentWith is newAgent with run_python's limits (zero fields: the
// agent's defaults).
func newAgentWith(t *testing.T, lim sandbox.Limits) (runtime.Agent, *coding.LazySandbox, string) {
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
	a, err := coding.New(coding.Config{Sandbox: sb, WorkRoot: root, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	return a, sb, root
}

// TestScriptedPlaysRunAsScriptedInTheRealSandbox runs every task of the
// coding suite through the runtime and the real sandbox — trial 0, and the
// slip trial of each flaky task — and checks what a reader of the journal
// would see: one sandbox run per attempt, every attempt but the last ending
// in a traceback, the last attempt left in solution.py, and an answer that
// cites what the example printed, or says the policy gave up.
func TestScriptedPlaysRunAsScriptedInTheRealSandbox(t *testing.T) {
	testtier.Slow(t)
	needSandbox(t)
	t.Parallel()
	ctx := context.Background()
	agent, _, root := newAgent(t)
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	spec := coding.DefaultContext()
	played := map[string]bool{}
	for _, sol := range coding.Solutions() {
		trials := []int{0}
		if sol.Slip != nil && sol.Slip.Trial != 0 {
			trials = append(trials, sol.Slip.Trial)
		}
		for _, trial := range trials {
			attempts, _ := sol.Play(trial)
			id := fmt.Sprintf("%s-t%d", sol.ID, trial)
			rt, err := runtime.New(runtime.Config{Model: coding.Policy(coding.PolicyConfig{Trial: trial}), Journal: j, Context: &spec})
			if err != nil {
				t.Fatal(err)
			}
			res, err := rt.Run(ctx, agent, runtime.Task{RunID: id, Input: sol.Task, CaseID: sol.ID, Trial: trial})
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if res.Label != llm.LabelScripted {
				t.Errorf("%s: label %q", id, res.Label)
			}
			evs, _ := j.Events(ctx, id)
			var runs []coding.RunResult
			for _, e := range evs {
				if e.Kind == journal.KindToolResult && e.Tool == "run_python" {
					var tr journal.ToolResult
					json.Unmarshal(e.Payload, &tr)
					var rr coding.RunResult
					if err := json.Unmarshal([]byte(tr.Content), &rr); err != nil {
						t.Fatalf("%s: run_python result is not JSON: %s", id, tr.Content)
					}
					runs = append(runs, rr)
				}
			}
			if len(runs) != len(attempts) {
				t.Fatalf("%s: %d sandbox runs, want one per attempt (%d)", id, len(runs), len(attempts))
			}
			ranOK := func(r coding.RunResult) bool { return r.Exited && r.ExitCode == 0 }
			for i, rr := range runs[:len(runs)-1] {
				if ranOK(rr) || !strings.Contains(rr.Stderr, "Traceback") && !strings.Contains(rr.Stderr, "SyntaxError") {
					t.Errorf("%s: attempt %d should end in a traceback: %+v", id, i+1, rr)
				}
			}
			last := runs[len(runs)-1]
			want := "output:" + sol.Expected
			if ranOK(last) {
				if len(res.Citations) != 1 || res.Citations[0] != want || !strings.Contains(res.Answer, sol.Expected) {
					t.Errorf("%s: answer %q citations %v, want %s", id, res.Answer, res.Citations, want)
				}
				if len(res.Documents) != 1 || res.Documents[0] != want {
					t.Errorf("%s: evidence produced %v, want %s", id, res.Documents, want)
				}
			} else if len(res.Citations) != 0 || !strings.Contains(res.Answer, "give up") {
				t.Errorf("%s: no attempt ran, yet the answer is %q citing %v", id, res.Answer, res.Citations)
			}
			if len(attempts) == 4 && !res.StepLimitReached {
				t.Errorf("%s: four attempts are 8 tool calls, the step limit; the answer should come from the tools-withheld call", id)
			}
			files, _ := filepath.Glob(filepath.Join(root, id+"-????????", coding.SolutionFile))
			if len(files) != 1 {
				t.Fatalf("%s: solution.py in the workspace: %v", id, files)
			}
			if b, _ := os.ReadFile(files[0]); string(b) != attempts[len(attempts)-1] {
				t.Errorf("%s: the workspace's solution.py is not the last attempt", id)
			}
			played[fmt.Sprintf("%d-%v", len(attempts), ranOK(last))] = true
		}
	}
	// The suite exercises each shape of play: first-time runs, one fix, three
	// fixes (the step limit), and giving up.
	for _, shape := range []string{"1-true", "2-true", "4-true", "2-false"} {
		if !played[shape] {
			t.Errorf("no play of shape %s (attempts-ran); played %v", shape, played)
		}
	}
}

// TestSolutionsAreWellFormed checks the suite's tasks and plays without a
// sandbox: the task text says the file, the signature and one example; every
// attempt prints the example when run as a program; a flaky task's slip is on
// a trial of the three and says why it fails; and every embedded program is
// played (nothing shipped is dropped).
func TestSolutionsAreWellFormed(t *testing.T) {
	sols := coding.Solutions()
	if len(sols) < 20 {
		t.Errorf("the coding suite has %d tasks, want at least 20", len(sols))
	}
	ids, tasks := map[string]bool{}, map[string]bool{}
	used := map[string]bool{}
	flawed, flaky := 0, 0
	for _, s := range sols {
		if ids[s.ID] || tasks[s.Task] {
			t.Errorf("%s: duplicate id or task text", s.ID)
		}
		ids[s.ID], tasks[s.Task] = true, true
		if !strings.HasPrefix(s.ID, "coding-") || !strings.Contains(s.Task, "Write solution.py defining ") ||
			strings.Count(s.Task, "Example: ") != 1 || !strings.HasSuffix(s.Task, "Run your code to check the example.") {
			t.Errorf("%s: task text %q does not follow the suite's form", s.ID, s.Task)
		}
		if s.Expected == "" || coding.OutputEvidence(s.Expected+"\n") != "output:"+s.Expected {
			t.Errorf("%s: expected %q is not citable output", s.ID, s.Expected)
		}
		plays := [][]string{s.Attempts}
		if s.Flaw != "" {
			flawed++
		}
		if s.Slip != nil {
			flaky++
			plays = append(plays, s.Slip.Attempts)
			if s.Slip.Trial < 0 || s.Slip.Trial > 2 || s.Slip.Flaw == "" || s.Flaw != "" {
				t.Errorf("%s: slip %+v (a slip is on trial 0, 1 or 2, says its flaw, and the other play passes)", s.ID, s.Slip)
			}
		}
		for _, p := range plays {
			if len(p) == 0 {
				t.Fatalf("%s: a play with no attempts", s.ID)
			}
			for i, src := range p {
				if !strings.Contains(src, "if __name__ == \"__main__\":") {
					t.Errorf("%s: attempt %d has no __main__ block printing the example", s.ID, i+1)
				}
				used[src] = true
			}
		}
	}
	if flawed < 5 || flaky < 2 {
		t.Errorf("%d flawed and %d flaky tasks: the suite must not pass by construction", flawed, flaky)
	}
	n := 0
	err := filepath.WalkDir("solutions", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !used[string(b)] {
			t.Errorf("%s is embedded but no play uses it", p)
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("walk solutions: %d files, %v", n, err)
	}
}

// TestPolicyPlaysTheSlipOnItsTrialOnly drives the policy by hand: a flaky
// task's first write is the slip on its trial and the normal play on the
// others, so a suite's pass@k and pass^k differ.
func TestPolicyPlaysTheSlipOnItsTrialOnly(t *testing.T) {
	ctx := context.Background()
	tools := []llm.ToolSpec{{Name: "write_file"}, {Name: "run_python"}}
	checked := 0
	for _, s := range coding.Solutions() {
		if s.Slip == nil {
			continue
		}
		for trial := range 6 {
			resp, err := coding.Policy(coding.PolicyConfig{Trial: trial}).Complete(ctx, llm.Request{Tools: tools,
				Messages: []llm.Message{{Role: llm.RoleUser, Content: s.Task}}})
			if err != nil {
				t.Fatal(err)
			}
			var args struct{ Path, Content string }
			if len(resp.Message.ToolCalls) != 1 || json.Unmarshal(resp.Message.ToolCalls[0].Arguments, &args) != nil || args.Path != coding.SolutionFile {
				t.Fatalf("%s trial %d: first turn %+v, want a write_file of solution.py", s.ID, trial, resp)
			}
			want, slip := s.Attempts[0], trial%3 == s.Slip.Trial
			if slip {
				want = s.Slip.Attempts[0]
			}
			if args.Content != want {
				t.Errorf("%s trial %d: wrote the wrong play (slip: %v)", s.ID, trial, slip)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no flaky task")
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
	testtier.Slow(t)
	needSandbox(t)
	t.Parallel()
	ctx := context.Background()
	// The busy loop runs into the CPU limit: 1 s of it rather than the
	// default 5 s (the limit is a setting; what is checked is that the run
	// is stopped and says why).
	agent, _, _ := newAgentWith(t, sandbox.Limits{CPUTime: time.Second, WallTime: 3 * time.Second})
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
	for answer, want := range map[string]string{
		"The program printed 9. [output:9] again [output:9] and [output: 10]": "output:9|output: 10",
		"it printed [output:[[4, 1], [5, 2]]] and [output:[1, 2]]":            "output:[[4, 1], [5, 2]]|output:[1, 2]",
		"unclosed [output:[1, 2] then [output:x]":                             "output:x",
		"across lines [output:[1,\n2]] and empty [output:]":                   "",
	} {
		if got := strings.Join(coding.Citations(answer), "|"); got != want {
			t.Errorf("Citations(%q) = %q, want %q", answer, got, want)
		}
	}
	for stdout, want := range map[string]string{
		"a\nb\n\n":                   "output:b",
		"  \n":                       "",
		"[('the', 3), ('and', 2)]\n": "output:[('the', 3), ('and', 2)]",
		"['a]']\n":                   "", // brackets that do not balance cannot be cited
		"x]\n":                       "",
	} {
		ev := coding.OutputEvidence(stdout)
		if ev != want {
			t.Errorf("OutputEvidence(%q) = %q, want %q", stdout, ev, want)
		}
		// Whatever is evidence reads back as exactly one citation.
		if got := coding.Citations("printed [" + ev + "]."); ev != "" && (len(got) != 1 || got[0] != ev) {
			t.Errorf("evidence %q cited reads back as %v", ev, got)
		}
	}
	if _, err := coding.Policy(coding.PolicyConfig{}).Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Write a compiler."}}}); err == nil {
		t.Fatal("the scripted policy must refuse a task it has no scripted solution for")
	}
}
