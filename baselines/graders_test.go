package baselines_test

import (
	"context"
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
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/grade"
)

// TestHiddenTestsPassTheReferenceAndFailTheFlawsByDesign runs every coding
// case's hidden tests (graders/ID.py) through the real grading path — the
// code grader's harness in the real sandbox with the coding agent's limits —
// against two kinds of solution.py:
//
//   - the reference solution (graders/reference/ID.py), which every grader
//     must pass with every check: a grader nothing passes is a broken task,
//     not a hard one;
//   - the scripted policy's last attempt on each trial, which passes exactly
//     when the play has no flaw, and otherwise fails with the reason a
//     reader needs (the first failing check, or the sandbox's limit).
func TestHiddenTestsPassTheReferenceAndFailTheFlawsByDesign(t *testing.T) {
	testtier.Slow(t)
	needSandbox(t)
	ctx := context.Background()
	all, err := datasets.LoadCases("cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	sols := map[string]coding.Solution{}
	for _, s := range coding.Solutions() {
		sols[s.ID] = s
	}

	type probe struct {
		caseID, what, flaw string
	}
	var cases []datasets.Case
	var trials []datasets.Trial
	var probes []probe
	add := func(c datasets.Case, what, src, flaw string) {
		trials = append(trials, datasets.Trial{CaseID: c.ID, Trial: len(trials), ModelLabel: datasets.LabelScripted,
			Transcript: &datasets.Transcript{Task: c.Task, Files: map[string]string{coding.SolutionFile: src}}})
		probes = append(probes, probe{c.ID, what, flaw})
	}
	graderFiles := map[string]bool{}
	for _, c := range all {
		if !slices.Contains(c.Tags, "coding") {
			continue
		}
		s, ok := sols[c.ID]
		if !ok {
			t.Errorf("case %s: no scripted play (regenerate cases.jsonl with scripts/baselines.sh record)", c.ID)
			continue
		}
		if len(c.Graders) == 0 || c.Graders[0].Type != datasets.GraderCode || !c.Graders[0].IsRequired() ||
			c.Graders[0].File != "graders/"+c.ID+".py" || len(c.RequiredEvidence) != 0 {
			t.Errorf("case %s: graders %+v: want the required code grader graders/%s.py and no required evidence", c.ID, c.Graders, c.ID)
			continue
		}
		graderFiles[c.Graders[0].File] = true
		// Only the hidden tests: the optional tool_called grader reads
		// tool calls these synthetic transcripts do not have.
		c.Graders = c.Graders[:1]
		cases = append(cases, c)
		ref, err := os.ReadFile(filepath.Join("graders", "reference", c.ID+".py"))
		if err != nil {
			t.Errorf("case %s: no reference solution: %v", c.ID, err)
			continue
		}
		add(c, "the reference solution", string(ref), "")
		seen := map[string]bool{}
		for trial := range 3 {
			attempts, flaw := s.Play(trial)
			if last := attempts[len(attempts)-1]; !seen[last] {
				seen[last] = true
				add(c, "the scripted last attempt", last, flaw)
			}
		}
		delete(sols, c.ID)
	}
	for id := range sols {
		t.Errorf("the scripted play %s has no case in cases.jsonl (regenerate it)", id)
	}
	files, _ := filepath.Glob(filepath.Join("graders", "*.py"))
	for _, f := range files {
		if !graderFiles[filepath.ToSlash(f)] {
			t.Errorf("%s is no case's grader", f)
		}
	}
	if len(cases) < 20 {
		t.Fatalf("%d coding cases, want at least 20", len(cases))
	}

	lazy := &coding.LazySandbox{}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := lazy.Shutdown(sctx); err != nil {
			t.Error(err)
		}
	}()
	env := grade.Env{Code: &graders.Sandbox{Runner: lazy, Limits: coding.Limits()}}
	// Four at a time: the flawed attempts include quadratic solutions that
	// run up to the CPU limit, beside references on 100,000-element inputs.
	gradeConcurrently(t, ctx, env, cases, trials, 4)
	failedByDesign, flawed := 0, 0
	for i, p := range probes {
		if p.flaw != "" {
			flawed++
		}
		if len(trials[i].Grades) != 1 {
			t.Fatalf("%s, %s: grades %+v", p.caseID, p.what, trials[i].Grades)
		}
		g := trials[i].Grades[0]
		if g.Error != "" {
			t.Errorf("%s, %s: the grader is broken: %s\n%s", p.caseID, p.what, g.Error, g.Output)
			continue
		}
		switch {
		case p.flaw == "" && (!g.Passed || g.Score != 1 || !strings.Contains(g.Reason, "hidden tests passed")):
			t.Errorf("%s, %s: %+v, want every hidden test passed", p.caseID, p.what, g)
		case p.flaw != "" && g.Passed:
			t.Errorf("%s, %s (%s): passed the hidden tests: %s", p.caseID, p.what, p.flaw, g.Reason)
		case p.flaw != "" && !strings.Contains(g.Reason, "first failure: ") && !strings.Contains(g.Reason, "sandbox ended the run"):
			t.Errorf("%s, %s: failed without naming the failing check: %q", p.caseID, p.what, g.Reason)
		case p.flaw != "":
			failedByDesign++
			t.Logf("%s (%s): %s", p.caseID, p.flaw, g.Reason)
		}
		if strings.HasPrefix(p.flaw, "too slow") && (g.Sandbox == nil || g.Sandbox.Reason != "timeout" && g.Sandbox.Reason != "cpu") {
			t.Errorf("%s: a too-slow solution must be stopped by the sandbox's time limits, got %+v (%s)", p.caseID, g.Sandbox, g.Reason)
		}
	}
	if failedByDesign != flawed || flawed < 7 {
		t.Errorf("%d of %d flawed last attempts fail as designed; the suite needs at least 7 (edge cases, an off-by-one, a timeout, slips)", failedByDesign, flawed)
	}
}

// gradeConcurrently grades each trial on its own through grade.Trials (the
// real grading path: the code grader's two sandboxes), workers at a time:
// a sandboxed run mostly waits (process start-up; a solution that sleeps
// into the wall-time limit spends no CPU), so several overlap well even on
// two cores. Each trial's grades are its own, as one sequential
// grade.Trials over all of them would give. Solutions that burn CPU up to
// the sandbox's limits call for fewer workers: they compete with the
// others for the cores, and a correct solution must still finish within
// its wall-time limit.
func gradeConcurrently(t *testing.T, ctx context.Context, env grade.Env, cases []datasets.Case, trials []datasets.Trial, workers int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(trials))
	work := make(chan int)
	for range workers {
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
}

// needSandbox skips a test that runs the sandbox when this is not root,
// except in CI, which runs as root: there it is a failure, never a skip.
func needSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("the sandbox needs root, and CI runs as root; got euid %d", os.Geteuid())
		}
		t.Skip("the sandbox needs root")
	}
}
