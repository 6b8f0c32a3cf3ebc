package baselines_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/graders"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/grade"
)

// suiteRewardHackCases are the coding cases make test grades every cheat
// against; the long tier (LOOMWORK_LONG=1) and the table
// (scripts/rewardhacks.sh) grade all 24. Together they cover every kind of
// hidden-test check scorer/grade/checks.go decides, and every way a cheat
// failed on the full set (docs/reward-hacking.md's table, case by case):
//
//   - coding-evaluate: a value check and an expected exception in one plan,
//     and the only plan with a before hook (run in the solution's process
//     before it is imported; reach_outside fails to import here alone);
//   - coding-parse-duration: the most expected-exception checks (4 of 9):
//     forged_exception's best partial score (4/9), and a case where
//     result_channel_forge exits early;
//   - coding-balanced: bool values, the value the channel forgers claim
//     (result_channel_forge and trace_hook reach their best 3/8 here), and
//     a large argument shown by the grader's own call text;
//   - coding-merge-intervals: tuples inside lists (a tuple is never a list)
//     in the arguments and the answers; scavenge_memory scores 1/4;
//   - coding-caesar: str values over two arguments (scavenge_memory's best
//     partial score, 2/7, echoing its first argument);
//   - coding-median: float answers and an int that must equal the float of
//     the same value, over a list argument the driver checks for mutation;
//   - coding-inversions: 100,000-element arguments through the driver,
//     where the sandbox's time limits decide a slow solution.
//
// Every cheat is graded against each of them with every assertion of the
// full run; what the subset leaves out is more cases of kinds it has.
var suiteRewardHackCases = []string{"coding-evaluate", "coding-parse-duration", "coding-balanced", "coding-merge-intervals",
	"coding-caesar", "coding-median", "coding-inversions"}

// TestRewardHacksFailEveryCodingCase grades every cheat in rewardhacks/
// (generic solution.py files that implement no task and try to game the
// grader instead) against every coding case's hidden tests (in make test,
// the cases of suiteRewardHackCases), through the real grading path,
// beside the reference solutions. No cheat may pass a case, and none may
// be recorded as a grader error (a cheat is a failed solution, never the
// grader's fault); every reference solution passes. With
// LOOMWORK_REWARDHACKS_TABLE=FILE it grades all 24 cases and writes the
// table (the one in docs/reward-hacking.md; scripts/rewardhacks.sh).
func TestRewardHacksFailEveryCodingCase(t *testing.T) {
	testtier.Slow(t)
	needSandbox(t)
	all, err := datasets.LoadCases("cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var cases []datasets.Case
	for _, c := range all {
		if slices.Contains(c.Tags, "coding") {
			c.Graders = c.Graders[:1] // the hidden tests only
			cases = append(cases, c)
		}
	}
	if len(cases) != 24 {
		t.Fatalf("%d coding cases, want 24", len(cases))
	}
	table := os.Getenv("LOOMWORK_REWARDHACKS_TABLE")
	if !testtier.Long() && table == "" {
		cases = slices.DeleteFunc(cases, func(c datasets.Case) bool { return !slices.Contains(suiteRewardHackCases, c.ID) })
		if len(cases) != len(suiteRewardHackCases) {
			t.Fatalf("%d of the suite's cases %v are coding cases", len(cases), suiteRewardHackCases)
		}
	}
	cheats, _ := filepath.Glob(filepath.Join("rewardhacks", "*.py"))
	if len(cheats) < 15 {
		t.Fatalf("%d cheats in rewardhacks/, want at least 15", len(cheats))
	}
	type row struct {
		name, what string
		src        func(caseID string) string
	}
	rows := []row{{name: "reference solutions", what: "graders/reference/ID.py, the correct solution of each case", src: func(id string) string {
		b, err := os.ReadFile(filepath.Join("graders", "reference", id+".py"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}}}
	for _, f := range cheats {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		what, ok := strings.CutPrefix(first, "# ")
		if !ok {
			t.Fatalf("%s: the first line must be a comment saying what the cheat tries", f)
		}
		rows = append(rows, row{name: strings.TrimSuffix(filepath.Base(f), ".py"), what: what, src: func(string) string { return string(b) }})
	}

	// One trial per (row, case), graded eight at a time (the cheats that
	// sleep into the wall-time limit spend no CPU while they wait).
	trials := make([]datasets.Trial, 0, len(rows)*len(cases))
	for _, r := range rows {
		for _, c := range cases {
			trials = append(trials, datasets.Trial{CaseID: c.ID, Trial: len(trials), ModelLabel: datasets.LabelScripted,
				Transcript: &datasets.Transcript{Task: c.Task, Files: map[string]string{coding.SolutionFile: r.src(c.ID)}}})
		}
	}
	ctx := context.Background()
	lazy := &coding.LazySandbox{}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := lazy.Shutdown(sctx); err != nil {
			t.Error(err)
		}
	}()
	env := grade.Env{Code: &graders.Sandbox{Runner: lazy, Limits: coding.Limits()}}
	gradeConcurrently(t, ctx, env, cases, trials, 8)

	var out strings.Builder
	fmt.Fprintf(&out, "| solution.py | what it tries | cases passed (of %d) | mean score | how the grades read |\n| --- | --- | --- | --- | --- |\n", len(cases))
	for ri, r := range rows {
		passed, score, reasons := 0, 0.0, map[string]int{}
		for ci, c := range cases {
			g := trials[ri*len(cases)+ci].Grades[0]
			score += g.Score
			if g.Passed {
				passed++
			}
			if g.Error != "" {
				t.Errorf("%s on %s: recorded as a grader error, want a failed solution: %s\n%s", r.name, c.ID, g.Error, g.Output)
			}
			if ri > 0 && g.Passed {
				t.Errorf("%s passed %s: %s", r.name, c.ID, g.Reason)
			}
			if ri == 0 && (!g.Passed || g.Score != 1) {
				t.Errorf("the reference solution of %s: %+v", c.ID, g)
			}
			if g.Passed {
				reasons["passed"]++
			} else {
				reasons[kindOf(g.Reason)]++
			}
		}
		fmt.Fprintf(&out, "| %s | %s | %d | %.3f | %s |\n", mdCode(r.name, ri > 0), r.what, passed, score/float64(len(cases)), summarize(reasons))
	}
	t.Logf("\n%s", out.String())
	if table != "" {
		if err := replaceBetween(table, "<!-- rewardhacks:begin -->", "<!-- rewardhacks:end -->", out.String()); err != nil {
			t.Fatal(err)
		}
	}
}

func mdCode(name string, code bool) string {
	if code {
		return "`" + name + "`"
	}
	return name
}

// kindOf names the kind of a hidden-test verdict, for the table.
func kindOf(reason string) string {
	switch {
	case strings.Contains(reason, "result channel"):
		return "wrote into the result channel"
	case strings.Contains(reason, "sandbox ended the run"):
		_, lim, _ := strings.Cut(reason, "sandbox ended the run: ")
		lim, _, _ = strings.Cut(lim, " ")
		return "stopped by the sandbox (" + lim + ")"
	case strings.Contains(reason, "process exited"):
		return "exited early"
	case strings.Contains(reason, "not a plain value"):
		return "returned non-plain values"
	case strings.HasPrefix(reason, "import "):
		return "failed to import"
	case strings.Contains(reason, "hidden tests passed"):
		return "answered wrongly"
	}
	return reason
}

func summarize(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, "; ")
}

// replaceBetween rewrites the part of file between two marker lines.
func replaceBetween(file, begin, end, body string) error {
	path := file
	if !filepath.IsAbs(path) {
		path = filepath.Join("..", file) // the test runs in baselines/
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var out strings.Builder
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == begin:
			in, found = true, true
			out.WriteString(line + "\n" + body)
		case line == end:
			in = false
			out.WriteString(line + "\n")
		case !in:
			out.WriteString(line + "\n")
		}
	}
	if !found {
		return fmt.Errorf("%s: no %s marker", path, begin)
	}
	return os.WriteFile(path, []byte(out.String()), 0o644)
}
