package ci

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
)

// Directions of a VerdictChange.
const (
	Improved  = "improved"
	Regressed = "regressed"
)

// VerdictsResult is the fresh run's grades compared, trial by trial and
// grader by grader, with the committed baseline trials' grades. The
// comparison is deterministic (scripted policies, scripted judge,
// deterministic journal clock), so on unchanged code every verdict is
// the same: any change, up or down, is a divergence — the gate's
// statistics would report a certain improvement as noise or as good news.
// An intended change is re-recorded with `scripts/baselines.sh record`.
type VerdictsResult struct {
	Passed bool `json:"passed"`
	// Compared counts the trial pairs compared (both sides scripted).
	Compared int             `json:"compared"`
	Changed  []VerdictChange `json:"changed"`
}

// VerdictChange is one grader whose verdict on one trial differs between
// two gradings (the committed one and the current one).
type VerdictChange struct {
	CaseID string `json:"case_id"`
	Trial  int    `json:"trial"`
	Grader string `json:"grader"`
	Type   string `json:"type,omitempty"`
	// Direction is Improved (failed → passed, or a higher score) or
	// Regressed (passed → failed, a lower score, a grade gone missing).
	Direction       string  `json:"direction"`
	CommittedPassed bool    `json:"committed_passed"`
	Passed          bool    `json:"passed"`
	CommittedScore  float64 `json:"committed_score"`
	Score           float64 `json:"score"`
	CommittedReason string  `json:"committed_reason,omitempty"`
	Reason          string  `json:"reason,omitempty"`
	Note            string  `json:"note,omitempty"`
}

func (v VerdictChange) String() string {
	s := fmt.Sprintf("%s trial %d, grader %s: %s (passed %v → %v, score %.3f → %.3f)",
		v.CaseID, v.Trial, v.Grader, v.Direction, v.CommittedPassed, v.Passed, v.CommittedScore, v.Score)
	if v.Note != "" {
		s += "; " + v.Note
	}
	if v.Reason != "" && v.Reason != v.CommittedReason {
		s += "; now: " + v.Reason
	}
	return s
}

type trialKey struct {
	caseID string
	trial  int
}

// compareGrades compares the grades of got with those of the committed
// trials of the same case and trial, grader by grader (passed and score;
// a reason that differs alone is no change: a sandbox may name its CPU or
// its wall-clock limit for the same too-slow program). Only pairs whose
// both sides are scripted are compared; a trial missing on one side is not
// a verdict change (the fresh run's errors and the rescore's case counts
// report those). It returns the pairs compared and the changes, sorted by
// case, trial and grader.
func compareGrades(committed, got []datasets.Trial) (int, []VerdictChange) {
	byKey := make(map[trialKey]*datasets.Trial, len(committed))
	for i := range committed {
		t := &committed[i]
		byKey[trialKey{t.CaseID, t.Trial}] = t
	}
	compared := 0
	out := []VerdictChange{}
	for i := range got {
		g := &got[i]
		c := byKey[trialKey{g.CaseID, g.Trial}]
		if c == nil || c.ModelLabel != datasets.LabelScripted || g.ModelLabel != datasets.LabelScripted {
			continue
		}
		compared++
		out = append(out, gradeDiff(g.CaseID, g.Trial, c.Grades, g.Grades)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.CaseID != b.CaseID {
			return a.CaseID < b.CaseID
		}
		if a.Trial != b.Trial {
			return a.Trial < b.Trial
		}
		return a.Grader < b.Grader
	})
	return compared, out
}

func gradeDiff(caseID string, trial int, committed, got []datasets.Grade) []VerdictChange {
	var out []VerdictChange
	now := make(map[string]datasets.Grade, len(got))
	for _, g := range got {
		now[g.Name] = g
	}
	seen := map[string]bool{}
	for _, c := range committed {
		seen[c.Name] = true
		g, ok := now[c.Name]
		if !ok {
			out = append(out, VerdictChange{CaseID: caseID, Trial: trial, Grader: c.Name, Type: c.Type, Direction: Regressed,
				CommittedPassed: c.Passed, CommittedScore: c.Score, CommittedReason: c.Reason, Note: "no longer graded"})
			continue
		}
		if g.Passed == c.Passed && math.Abs(g.Score-c.Score) <= 1e-9 {
			continue
		}
		dir := Regressed
		if (!c.Passed && g.Passed) || (c.Passed == g.Passed && g.Score > c.Score) {
			dir = Improved
		}
		out = append(out, VerdictChange{CaseID: caseID, Trial: trial, Grader: c.Name, Type: c.Type, Direction: dir,
			CommittedPassed: c.Passed, Passed: g.Passed, CommittedScore: c.Score, Score: g.Score,
			CommittedReason: c.Reason, Reason: nonEmpty(g.Error, g.Reason)})
	}
	for _, g := range got {
		if !seen[g.Name] {
			out = append(out, VerdictChange{CaseID: caseID, Trial: trial, Grader: g.Name, Type: g.Type, Direction: Improved,
				Passed: g.Passed, Score: g.Score, Reason: nonEmpty(g.Error, g.Reason), Note: "not graded in the committed trials"})
			if !g.Passed {
				out[len(out)-1].Direction = Regressed
			}
		}
	}
	return out
}

// verdictSummary says "3 regressed (a ×2, b), 1 improved (c)".
func verdictSummary(vs []VerdictChange) string {
	var parts []string
	for _, dir := range []string{Regressed, Improved} {
		n := 0
		count := map[string]int{}
		var order []string
		for _, v := range vs {
			if v.Direction != dir {
				continue
			}
			n++
			if count[v.CaseID] == 0 {
				order = append(order, v.CaseID)
			}
			count[v.CaseID]++
		}
		if n == 0 {
			continue
		}
		var cs []string
		for _, c := range order {
			if count[c] > 1 {
				cs = append(cs, fmt.Sprintf("%s ×%d", c, count[c]))
			} else {
				cs = append(cs, c)
			}
		}
		parts = append(parts, fmt.Sprintf("%d %s: %s", n, dir, strings.Join(cs, ", ")))
	}
	return strings.Join(parts, "; ")
}

// cloneTrials copies trials deep enough for grading (grade.Trials rewrites
// each trial's Grades) to leave the originals as they were read.
func cloneTrials(ts []datasets.Trial) []datasets.Trial {
	out := make([]datasets.Trial, len(ts))
	copy(out, ts)
	for i := range out {
		out[i].Grades = append([]datasets.Grade(nil), ts[i].Grades...)
	}
	return out
}
