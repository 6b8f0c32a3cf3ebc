package ci

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
)

// JudgeFile holds the judge graders' committed verdicts on the baseline
// trials (see judgeGraders).
const JudgeFile = "judge.jsonl"

// JudgeVerdict is one line of judge.jsonl.
type JudgeVerdict struct {
	CaseID string  `json:"case_id"`
	Trial  int     `json:"trial"`
	Grader string  `json:"grader"`
	Type   string  `json:"type"`
	Passed bool    `json:"passed"`
	Score  float64 `json:"score"`
	Reason string  `json:"reason"`
}

// judgeGraders are the judge graders the recipe runs on a research case's
// committed trials with the scripted judge: the baseline cases have none
// of their own (a judge model is not reproducible), so without these no
// step would run the model and pairwise graders. The rubric asks for the
// case's judged pages by name; the pairwise reference is an answer that
// names none.
func judgeGraders(c *datasets.Case) []datasets.Grader {
	if !slices.Contains(c.Tags, research.Name) || len(c.RequiredEvidence) == 0 {
		return nil
	}
	rubric := "A good answer points the reader to the documentation page that covers the question:"
	for _, e := range c.RequiredEvidence {
		rubric += fmt.Sprintf(" %q", e)
	}
	rubric += ", and cites it."
	return []datasets.Grader{
		{Type: datasets.GraderModel, Name: "judge_names_the_page", Rubric: rubric},
		{Type: datasets.GraderPairwise, Name: "judge_prefers_it_to_no_answer", Rubric: rubric,
			Reference: "I could not find where the documentation covers this."},
	}
}

// judgeVerdicts runs judgeGraders on the committed trials with the
// scripted judge.
func judgeVerdicts(ctx context.Context, in *inputs) ([]JudgeVerdict, error) {
	byID := map[string]*datasets.Case{}
	for i := range in.cases {
		byID[in.cases[i].ID] = &in.cases[i]
	}
	env := grade.Env{Judge: grade.ScriptedJudge{}}
	out := []JudgeVerdict{}
	for i := range in.baseline {
		t := &in.baseline[i]
		c := byID[t.CaseID]
		if c == nil {
			continue
		}
		gs := judgeGraders(c)
		if len(gs) == 0 {
			continue
		}
		f, err := scorer.TrialFacts(t, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: trial %d of case %s: %w", ErrBadInput, in.baselinePath, t.Trial, t.CaseID, err)
		}
		for j := range gs {
			g, err := grade.One(ctx, env, &gs[j], grade.Input{Case: c, Trial: t, Transcript: t.Transcript, Facts: f})
			if err != nil {
				return nil, fmt.Errorf("ci: judge graders: trial %d of case %s: %w", t.Trial, t.CaseID, err)
			}
			out = append(out, JudgeVerdict{CaseID: t.CaseID, Trial: t.Trial, Grader: g.Name, Type: g.Type, Passed: g.Passed,
				Score: g.Score, Reason: nonEmpty(g.Error, g.Reason)})
		}
	}
	return out, nil
}

// compareJudge compares the judge verdicts with the committed ones, as
// compareGrades compares grades.
func compareJudge(committed, now []JudgeVerdict) []VerdictChange {
	toTrials := func(vs []JudgeVerdict) []datasets.Trial {
		idx := map[trialKey]int{}
		var ts []datasets.Trial
		for _, v := range vs {
			k := trialKey{v.CaseID, v.Trial}
			i, ok := idx[k]
			if !ok {
				i = len(ts)
				idx[k] = i
				ts = append(ts, datasets.Trial{CaseID: v.CaseID, Trial: v.Trial, ModelLabel: datasets.LabelScripted})
			}
			ts[i].Grades = append(ts[i].Grades, datasets.Grade{Name: v.Grader, Type: v.Type, Passed: v.Passed, Score: v.Score, Reason: v.Reason})
		}
		return ts
	}
	c, n := toTrials(committed), toTrials(now)
	_, out := compareGrades(c, n)
	// A trial judged on one side only.
	onlyIn := func(a, b []datasets.Trial, note string) {
		have := map[trialKey]bool{}
		for _, t := range b {
			have[trialKey{t.CaseID, t.Trial}] = true
		}
		for _, t := range a {
			if have[trialKey{t.CaseID, t.Trial}] {
				continue
			}
			for _, g := range t.Grades {
				out = append(out, VerdictChange{CaseID: t.CaseID, Trial: t.Trial, Grader: g.Name, Type: g.Type, Direction: Regressed,
					CommittedPassed: g.Passed, CommittedScore: g.Score, Note: note})
			}
		}
	}
	onlyIn(c, n, "no longer judged")
	onlyIn(n, c, "not in the committed verdicts")
	return out
}

func readJudge(path string) ([]JudgeVerdict, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: %w (regenerate it with scripts/baselines.sh record)", ErrBadInput, err)
	}
	return readJSONLines[JudgeVerdict](path)
}
