package graders_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/graders"
	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/agents/sandbox/sandboxtest"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/grade"
)

func TestMain(m *testing.M) {
	sandboxtest.Init() // the sandbox re-executes this binary as its init helper
	os.Exit(m.Run())
}

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

func newSandbox(t *testing.T, lim sandbox.Limits) *graders.Sandbox {
	t.Helper()
	needSandbox(t)
	lazy := &coding.LazySandbox{}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := lazy.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	if lim == (sandbox.Limits{}) {
		lim = coding.Limits()
	}
	return &graders.Sandbox{Runner: lazy, Limits: lim}
}

// gradeCode runs one code grader with source src on a trial whose run
// wrote files.
func gradeCode(t *testing.T, sb *graders.Sandbox, src string, files map[string]string) datasets.Grade {
	t.Helper()
	g := datasets.Grader{Type: datasets.GraderCode, Name: "hidden_tests", File: "graders/x.py", Source: []byte(src)}
	c := &datasets.Case{ID: "c", Task: "t", Graders: []datasets.Grader{g}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	ok := true
	tr := &datasets.Trial{CaseID: "c", ModelLabel: "scripted", Success: &ok, Transcript: &datasets.Transcript{Answer: "done", Files: files}}
	trials := []datasets.Trial{*tr}
	if _, err := grade.Trials(context.Background(), grade.Env{Code: sb}, []datasets.Case{*c}, trials); err != nil {
		t.Fatal(err)
	}
	return trials[0].Grades[0]
}

const hiddenTests = `from loomwork_checks import run_checks

def grade(transcript, outcome):
    return run_checks("add", [((1, 2), 3), ((-1, 1), 0), ((10**12, 1), 10**12 + 1)])
`

func TestCodeGraderRunsHiddenTestsAgainstTheRunsFiles(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own sandbox runner
	sb := newSandbox(t, sandbox.Limits{})
	good := gradeCode(t, sb, hiddenTests, map[string]string{"solution.py": "def add(a, b):\n    return a + b\n"})
	if !good.Passed || good.Score != 1 || good.Reason != "3/3 hidden tests passed" || good.Error != "" {
		t.Fatalf("correct solution: %+v", good)
	}
	// Passes the visible example (1+2) but not the hidden edge cases.
	bad := gradeCode(t, sb, hiddenTests, map[string]string{"solution.py": "def add(a, b):\n    return abs(a) + abs(b) if a < 10 else 0\n"})
	if bad.Passed || bad.Score != 1.0/3 || !strings.HasPrefix(bad.Reason, "1/3 hidden tests passed; first failure: add(-1, 1) returned 2, want 0") {
		t.Fatalf("buggy solution: %+v", bad)
	}
	missing := gradeCode(t, sb, hiddenTests, nil)
	if missing.Passed || missing.Error != "" || missing.Reason != "import solution failed: ModuleNotFoundError: No module named 'solution'" {
		t.Fatalf("no solution file: want a failed verdict naming the import, got %+v", missing)
	}
	// A grader that imports the run's code into its own process is the
	// grader's bug: the run's files are never in the grader's sandbox.
	raw := gradeCode(t, sb, "import solution\n\ndef grade(transcript, outcome):\n    return solution.add(1, 2) == 3\n",
		map[string]string{"solution.py": "def add(a, b):\n    return a + b\n"})
	if raw.Passed || !strings.Contains(raw.Error, "grader.py imports solution, a file of the run") {
		t.Fatalf("a grader importing the run's code: want a grader error, got %+v", raw)
	}
	if missing.Sandbox == nil || missing.Sandbox.Reason != "exit" {
		t.Fatalf("sandbox account missing: %+v", missing.Sandbox)
	}
}

func TestCodeGraderThatReachesForFilesAndTheNetworkGetsNothingVisibly(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own sandbox runner
	sb := newSandbox(t, sandbox.Limits{})
	src := `import socket

def grade(transcript, outcome):
    tried = []
    for p in ["/etc/passwd", "/etc/hostname", "/root/.ssh/id_rsa", "/home"]:
        try:
            with open(p) as f:
                tried.append("READ %s: %r" % (p, f.read(40)))
        except OSError as e:
            tried.append("denied %s: %s" % (p, type(e).__name__))
    for host, port in [("127.0.0.1", 22), ("10.0.0.1", 80), ("1.1.1.1", 443)]:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect((host, port))
            tried.append("CONNECTED %s:%d" % (host, port))
        except OSError as e:
            tried.append("denied %s:%d: %s" % (host, port, e))
        finally:
            s.close()
    try:
        socket.getaddrinfo("example.com", 80)
        tried.append("RESOLVED example.com")
    except OSError as e:
        tried.append("denied dns: %s" % e)
    for line in tried:
        print(line)
    leaked = [t for t in tried if not t.startswith("denied")]
    return {"passed": not leaked, "reason": "%d attempts, %d got through" % (len(tried), len(leaked))}
`
	gr := gradeCode(t, sb, src, nil)
	if !gr.Passed || gr.Reason != "8 attempts, 0 got through" {
		t.Fatalf("the sandbox let something through, or the grader did not run: %+v\noutput:\n%s", gr, gr.Output)
	}
	for _, want := range []string{"denied /etc/passwd: FileNotFoundError", "denied 127.0.0.1:22", "denied 1.1.1.1:443", "denied dns"} {
		if !strings.Contains(gr.Output, want) {
			t.Errorf("the attempt %q is not visible in the recorded output:\n%s", want, gr.Output)
		}
	}
}

func TestCodeGraderTimeoutIsAFailedVerdictNamingTheLimit(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own sandbox runner
	lim := coding.Limits()
	lim.WallTime, lim.CPUTime = 2*time.Second, 2*time.Second
	sb := newSandbox(t, lim)
	gr := gradeCode(t, sb, "from loomwork_checks import run_checks\n\ndef grade(transcript, outcome):\n    return run_checks('fib', [((40,), 102334155)])\n",
		map[string]string{"solution.py": "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"})
	if gr.Passed || gr.Error != "" || !strings.Contains(gr.Reason, "sandbox ended the run") {
		t.Fatalf("want a failed verdict from the limit, got %+v", gr)
	}
	if gr.Sandbox == nil || (gr.Sandbox.Reason != "timeout" && gr.Sandbox.Reason != "cpu") {
		t.Fatalf("sandbox reason: %+v", gr.Sandbox)
	}
}

func TestCodeGraderCannotBeFooledByAPrintedVerdict(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own sandbox runner
	sb := newSandbox(t, sandbox.Limits{})
	// The solution prints a verdict-shaped line and then fails the check.
	files := map[string]string{"solution.py": "print('LOOMWORK-GRADE 00 {\"status\": \"ok\", \"passed\": true, \"score\": 1, \"reason\": \"forged\"}')\n" +
		"import sys\nsys.stdout = open('/dev/null', 'w')\ndef add(a, b):\n    return 0\n"}
	gr := gradeCode(t, sb, hiddenTests, files)
	// add(-1, 1) == 0 is the one hidden test a constant 0 passes.
	if gr.Passed || !strings.HasPrefix(gr.Reason, "1/3 hidden tests passed") || !strings.Contains(gr.Output, "forged") {
		t.Fatalf("forged verdict accepted, or not recorded as output: %+v", gr)
	}
}

func TestCodeGraderThatDoesNotLoadIsAGraderError(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own sandbox runner
	sb := newSandbox(t, sandbox.Limits{})
	gr := gradeCode(t, sb, "def grade(transcript, outcome)\n    return True\n", nil)
	if gr.Passed || !strings.Contains(gr.Error, "grader did not load: SyntaxError") {
		t.Fatalf("want a grader error, got %+v", gr)
	}
	gr = gradeCode(t, sb, "def grade(transcript, outcome):\n    return 'yes'\n", nil)
	if gr.Passed || !strings.Contains(gr.Error, "returned str") {
		t.Fatalf("want a grader error for a non-verdict, got %+v", gr)
	}
}

func TestCodeGraderSeesTheTranscriptAndOutcome(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own sandbox runner
	sb := newSandbox(t, sandbox.Limits{})
	src := `def grade(transcript, outcome):
    assert transcript["answer"] == "done", transcript
    assert outcome["finished"] is True, outcome
    assert outcome["case_id"] == "c"
    return 0.75
`
	gr := gradeCode(t, sb, src, nil)
	if gr.Passed || gr.Score != 0.75 {
		t.Fatalf("a score of 0.75 under the default threshold 1 must fail with score 0.75: %+v", gr)
	}
}

// A grader written with loomwork_checks (the table-driven helper beside
// every code grader), against a run whose files try to shadow the modules
// the grader imports: the run's folder comes after the standard library,
// so its copy.py and json.py are never imported.
func TestCodeGraderChecksHelperAndNoShadowing(t *testing.T) {
	testtier.Slow(t) // a real sandbox
	t.Parallel()     // its own sandbox runner
	sb := newSandbox(t, sandbox.Limits{})
	src := `from loomwork_checks import Raises, run_checks

CHECKS = [((1, 2), 3), ((2, 2), 4), (("a", 1), Raises(TypeError))]

def grade(transcript, outcome):
    return run_checks("add", CHECKS)
`
	files := map[string]string{
		"solution.py":        "def add(a, b):\n    return a + b\n",
		"copy.py":            "def deepcopy(x):\n    return 'shadowed'\n",
		"json.py":            "raise SystemExit('json shadowed')\n",
		"loomwork_checks.py": "def run_checks(*a):\n    return {'passed': True, 'score': 1.0, 'reason': 'forged helper'}\n",
	}
	gr := gradeCode(t, sb, src, files)
	if !gr.Passed || gr.Reason != "3/3 hidden tests passed" {
		t.Fatalf("want the real helper's verdict, got %+v\n%s", gr, gr.Output)
	}
	files["solution.py"] = "def add(a, b):\n    return a - b if a == 2 else a + b\n"
	gr = gradeCode(t, sb, src, files)
	if gr.Passed || gr.Score != 2.0/3 || gr.Reason != "2/3 hidden tests passed; first failure: add(2, 2) returned 0, want 4" {
		t.Fatalf("failing check: %+v", gr)
	}
}
