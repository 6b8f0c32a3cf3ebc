package ci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/report"
)

// ReportFile is the committed score report of the baseline trials.
const ReportFile = "report.json"

// RescoreResult is step 4: the committed baseline trials graded and
// scored again by the current code, against the committed verdicts and
// report of the same trials. The fresh run and the baseline are scored by
// the same code, so a scorer that stopped matching evidence, or a code
// grader that counts failing hidden tests as passes, moves both sides
// alike and the gate sees no change; only the committed verdicts show it.
type RescoreResult struct {
	Passed bool   `json:"passed"`
	Report string `json:"report"`
	// Regraded counts the code and judge verdicts reached again (the code
	// graders in the recipe's sandbox, the judge graders with the scripted
	// judge) instead of copied from the trials.
	Regraded int `json:"regraded"`
	// Verdicts are the graders whose verdict on a committed trial differs
	// from the one the trial carries, by case, trial and grader.
	Verdicts []VerdictChange `json:"verdicts"`
	// Changed are the cases whose passes, trials or mean score differ from
	// the committed report (or that one side lacks).
	Changed []RescoreChange `json:"changed"`
}

// RescoreChange is one case the current scorer judges differently.
type RescoreChange struct {
	CaseID          string  `json:"case_id"`
	CommittedPasses int     `json:"committed_passes"`
	Passes          int     `json:"passes"`
	Trials          int     `json:"trials"`
	CommittedScore  float64 `json:"committed_score"`
	Score           float64 `json:"score"`
	Note            string  `json:"note,omitempty"`
}

// rescore grades the baseline trials again — every grader, the costly ones
// too (grading.Regrade) — compares each verdict with the one the trial
// carries, then scores them as `scripts/baselines.sh record` does (score
// --cases, no policy) and compares case by case with the committed report.
func rescore(ctx context.Context, scoring scorer.Config, in *inputs, dir string, grading grade.Env) (RescoreResult, error) {
	path := filepath.Join(dir, ReportFile)
	res := RescoreResult{Report: path, Changed: []RescoreChange{}, Verdicts: []VerdictChange{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return res, fmt.Errorf("%w: %w (regenerate it with scripts/baselines.sh record)", ErrBadInput, err)
	}
	var committed struct {
		Candidate *struct {
			Cases []struct {
				CaseID    string  `json:"case_id"`
				Trials    int     `json:"trials"`
				Passes    int     `json:"passes"`
				MeanScore float64 `json:"mean_score"`
			} `json:"cases"`
		} `json:"candidate"`
	}
	if err := json.Unmarshal(b, &committed); err != nil {
		return res, fmt.Errorf("%w: %s: %w", ErrBadInput, path, err)
	}
	if committed.Candidate == nil {
		return res, fmt.Errorf("%w: %s: no \"candidate\" suite (not a loom-eval score --format json report)", ErrBadInput, path)
	}
	trials := cloneTrials(in.baseline)
	grading.Regrade = true
	r, err := report.Evaluate(ctx, scoring, report.Inputs{Cases: in.cases, CasesFile: in.casesPath,
		Candidate: report.Trials{Source: in.baselinePath, Trials: trials}, Grading: grading})
	if err != nil {
		if errors.Is(err, report.ErrBadInput) {
			return res, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		return res, fmt.Errorf("ci: rescore: %w", err)
	}
	for _, t := range trials {
		for _, g := range t.Grades {
			if costly(g.Type) {
				res.Regraded++
			}
		}
	}
	// The committed trials are scripted: every pair is compared.
	_, res.Verdicts = compareGrades(in.baseline, trials)
	// The judge graders the baseline cases lack, on the same trials.
	committedJudge, err := readJudge(filepath.Join(dir, JudgeFile))
	if err != nil {
		return res, err
	}
	judged, err := judgeVerdicts(ctx, in)
	if err != nil {
		return res, err
	}
	res.Regraded += len(judged)
	res.Verdicts = append(res.Verdicts, compareJudge(committedJudge, judged)...)
	now := map[string]*scorer.CaseResult{}
	for i := range r.Suite.Cases {
		now[r.Suite.Cases[i].CaseID] = &r.Suite.Cases[i]
	}
	seen := map[string]bool{}
	for _, c := range committed.Candidate.Cases {
		seen[c.CaseID] = true
		n, ok := now[c.CaseID]
		switch {
		case !ok:
			res.Changed = append(res.Changed, RescoreChange{CaseID: c.CaseID, CommittedPasses: c.Passes, CommittedScore: c.MeanScore, Trials: c.Trials, Note: "no longer scored"})
		case n.Passes != c.Passes || n.Trials != c.Trials || math.Abs(n.MeanScore-c.MeanScore) > 1e-9:
			res.Changed = append(res.Changed, RescoreChange{CaseID: c.CaseID, CommittedPasses: c.Passes, Passes: n.Passes, Trials: n.Trials,
				CommittedScore: c.MeanScore, Score: n.MeanScore})
		}
	}
	for id, n := range now {
		if !seen[id] {
			res.Changed = append(res.Changed, RescoreChange{CaseID: id, Passes: n.Passes, Trials: n.Trials, Score: n.MeanScore, Note: "not in the committed report"})
		}
	}
	sort.Slice(res.Changed, func(i, j int) bool { return res.Changed[i].CaseID < res.Changed[j].CaseID })
	res.Passed = len(res.Changed) == 0 && len(res.Verdicts) == 0
	return res, nil
}

// costly graders run outside the process (the sandbox, a judge), and a
// trial may carry their verdicts.
func costly(typ string) bool {
	return typ == datasets.GraderCode || typ == datasets.GraderModel || typ == datasets.GraderPairwise
}
