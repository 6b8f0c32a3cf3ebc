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

	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/report"
)

// ReportFile is the committed score report of the baseline trials.
const ReportFile = "report.json"

// RescoreResult is step 4: the committed baseline trials scored again by
// the current scorer, against the committed report of the same trials.
// The fresh run and the baseline are scored by the same code, so a scorer
// that stopped matching evidence moves both sides alike and the gate sees
// no change; only the committed verdict shows it.
type RescoreResult struct {
	Passed bool   `json:"passed"`
	Report string `json:"report"`
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

// rescore scores the baseline trials as `scripts/baselines.sh record`
// does (score --cases, no policy) and compares case by case.
func rescore(ctx context.Context, scoring scorer.Config, in *inputs, dir string, grading grade.Env) (RescoreResult, error) {
	path := filepath.Join(dir, ReportFile)
	res := RescoreResult{Report: path, Changed: []RescoreChange{}}
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
	r, err := report.Evaluate(ctx, scoring, report.Inputs{Cases: in.cases, CasesFile: in.casesPath,
		Candidate: report.Trials{Source: in.baselinePath, Trials: in.baseline}, Grading: grading})
	if err != nil {
		if errors.Is(err, report.ErrBadInput) {
			return res, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		return res, fmt.Errorf("ci: rescore: %w", err)
	}
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
	res.Passed = len(res.Changed) == 0
	return res, nil
}
