package baselines_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/graders"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/grade"
)

// TestRewardHacksFailEveryCodingCase grades every cheat in rewardhacks/
// (generic solution.py files that implement no task and try to game the
// grader instead) against every coding case's hidden tests, through the
// real grading path, beside the reference solutions. No cheat may pass a
// case, and none may be recorded as a grader error (a cheat is a failed
// solution, never the grader's fault); every reference solution passes.
// With LOOMWORK_REWARDHACKS_TABLE=FILE it writes the table (the one in
// docs/reward-hacking.md; scripts/rewardhacks.sh).
func TestRewardHacksFailEveryCodingCase(t *testing.T) {
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

	// One trial per (row, case); graded eight at a time (the cheats that
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
	var wg sync.WaitGroup
	errs := make(chan error, len(trials))
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := grade.Trials(ctx, env, cases, trials[i:i+1]); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range trials {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var table strings.Builder
	fmt.Fprintf(&table, "| solution.py | what it tries | cases passed (of %d) | mean score | how the grades read |\n| --- | --- | --- | --- | --- |\n", len(cases))
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
		fmt.Fprintf(&table, "| %s | %s | %d | %.3f | %s |\n", mdCode(r.name, ri > 0), r.what, passed, score/float64(len(cases)), summarize(reasons))
	}
	t.Logf("\n%s", table.String())
	if out := os.Getenv("LOOMWORK_REWARDHACKS_TABLE"); out != "" {
		if err := replaceBetween(out, "<!-- rewardhacks:begin -->", "<!-- rewardhacks:end -->", table.String()); err != nil {
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
