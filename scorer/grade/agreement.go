package grade

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/stats"
)

// Confusion counts a grader's verdicts against people's labels.
type Confusion struct {
	BothPass      int `json:"both_pass"`              // the grader passed it, the labeler too
	GraderOnly    int `json:"grader_pass_human_fail"` // the grader passed what the labeler failed
	HumanOnly     int `json:"grader_fail_human_pass"` // the grader failed what the labeler passed
	BothFail      int `json:"both_fail"`
	GraderPassed  int `json:"grader_passed"` // BothPass + GraderOnly
	HumanPassed   int `json:"human_passed"`  // BothPass + HumanOnly
	Disagreements int `json:"disagreements"` // GraderOnly + HumanOnly
}

func (c *Confusion) add(grader, human bool) {
	switch {
	case grader && human:
		c.BothPass++
	case grader:
		c.GraderOnly++
	case human:
		c.HumanOnly++
	default:
		c.BothFail++
	}
	c.GraderPassed = c.BothPass + c.GraderOnly
	c.HumanPassed = c.BothPass + c.HumanOnly
	c.Disagreements = c.GraderOnly + c.HumanOnly
}

func (c Confusion) table() stats.KappaTable {
	return stats.KappaTable{N11: c.BothPass, N10: c.GraderOnly, N01: c.HumanOnly, N00: c.BothFail}
}

// GraderAgreement is how well one grader's verdicts agree with people's
// labels of the same trials.
type GraderAgreement struct {
	Grader string `json:"grader"`
	// Types are the grade types seen under this name (one, unless cases
	// reuse a name for different graders).
	Types []string `json:"types"`
	// Judge is the judge these verdicts came from: label, provider and
	// response model, e.g. "live openai/gpt-4o-mini-2024-07-18". It is ""
	// for verdicts no judge gave (graders that are not judged, or a model
	// grade failed without a call, as for an empty answer), and on the
	// all-judges row when several judges graded (ByJudge breaks it down).
	Judge string `json:"judge,omitempty"`
	// N is the number of label–verdict pairs: labels whose grade reached
	// a verdict. A trial labelled by two people counts twice.
	N int `json:"n"`
	// Trials is the number of distinct (case, trial) among the pairs.
	Trials int `json:"trials"`
	// Agreement is the share of pairs where grader and labeler agree.
	Agreement float64 `json:"agreement"`
	// Kappa is Cohen's κ of grader versus labels with its interval (nil
	// when N is 0).
	Kappa     *stats.Kappa `json:"kappa"`
	Confusion Confusion    `json:"confusion"`
	// Errored counts labels whose grade has no verdict (the grader could
	// not reach one: Grade.Error). They are left out of N, since an error
	// is neither a pass nor a fail to agree with, and counted here so
	// nothing labelled goes missing.
	Errored int `json:"errored"`
	// ByJudge holds one row per judge model when the grades record more
	// than one (a judge swapped between runs, or graders naming models).
	ByJudge []GraderAgreement `json:"by_judge,omitempty"`
}

// Agreement pairs every label with the grade of the same (case, trial,
// grader) on trials and reports, per grader name (sorted), the grader's
// agreement with the labels: n, raw agreement, Cohen's κ with its interval
// at level, and the confusion counts; and the same per judge model when
// the grades record different ones.
//
// Grades without labels are not in the sample. A label whose trial is not
// among trials, or whose trial has no grade of that name, is an error
// naming the label (its file line when it has one) — a label that pairs
// with nothing means the labels and the trials are not of the same run.
// Every such label is reported, not only the first.
func Agreement(labels []datasets.Label, trials []datasets.Trial, level float64) ([]GraderAgreement, error) {
	if !(level > 0 && level < 1) {
		return nil, fmt.Errorf("agreement: level = %v, need 0 < level < 1", level)
	}
	if len(labels) == 0 {
		return nil, errors.New("agreement: no labels")
	}
	type trialKey struct {
		caseID string
		trial  int
	}
	byTrial := make(map[trialKey]*datasets.Trial, len(trials))
	for i := range trials {
		t := &trials[i]
		k := trialKey{t.CaseID, t.Trial}
		if prev, dup := byTrial[k]; dup {
			return nil, fmt.Errorf("agreement: trial %d of case %q appears twice among the trials%s%s", t.Trial, t.CaseID, lineSuffix(prev.Line), lineSuffix(t.Line))
		}
		byTrial[k] = t
	}

	type pair struct {
		label  *datasets.Label
		grade  *datasets.Grade
		trial  trialKey
		judged string
	}
	byGrader := map[string][]pair{}
	var errs []error
	for i := range labels {
		l := &labels[i]
		where := "label"
		if l.Line > 0 {
			where = fmt.Sprintf("label on line %d", l.Line)
		}
		t := byTrial[trialKey{l.CaseID, l.Trial}]
		if t == nil {
			errs = append(errs, fmt.Errorf("%s (%s): no such trial among the trials", where, l.Key()))
			continue
		}
		var g *datasets.Grade
		for j := range t.Grades {
			if t.Grades[j].Name == l.Grader {
				g = &t.Grades[j]
				break
			}
		}
		if g == nil {
			errs = append(errs, fmt.Errorf("%s (%s): the trial%s has no grade %q (its grades: %s)", where, l.Key(), lineSuffix(t.Line), l.Grader, gradeNames(t)))
			continue
		}
		byGrader[l.Grader] = append(byGrader[l.Grader], pair{label: l, grade: g, trial: trialKey{l.CaseID, l.Trial}, judged: judgeName(g.Judge)})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("agreement: %d of %d labels pair with no grade: %w", len(errs), len(labels), err)
	}

	summarise := func(name, judge string, ps []pair) (GraderAgreement, error) {
		ga := GraderAgreement{Grader: name, Judge: judge, Types: []string{}}
		seen := map[trialKey]bool{}
		for _, p := range ps {
			if !slices.Contains(ga.Types, p.grade.Type) {
				ga.Types = append(ga.Types, p.grade.Type)
			}
			if p.grade.Error != "" {
				ga.Errored++
				continue
			}
			ga.Confusion.add(p.grade.Passed, p.label.Passed)
			seen[p.trial] = true
		}
		sort.Strings(ga.Types)
		ga.N, ga.Trials = ga.Confusion.table().N(), len(seen)
		if ga.N == 0 {
			return ga, nil
		}
		ga.Agreement = float64(ga.Confusion.BothPass+ga.Confusion.BothFail) / float64(ga.N)
		k, err := stats.CohenKappa(ga.Confusion.table(), level)
		if err != nil {
			return ga, fmt.Errorf("agreement of grader %q: %w", name, err)
		}
		ga.Kappa = &k
		return ga, nil
	}

	names := make([]string, 0, len(byGrader))
	for n := range byGrader {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]GraderAgreement, 0, len(names))
	for _, name := range names {
		ps := byGrader[name]
		judges := map[string][]pair{}
		for _, p := range ps {
			judges[p.judged] = append(judges[p.judged], p)
		}
		judge := ""
		if len(judges) == 1 {
			for j := range judges {
				judge = j
			}
		}
		ga, err := summarise(name, judge, ps)
		if err != nil {
			return nil, err
		}
		if len(judges) > 1 {
			keys := make([]string, 0, len(judges))
			for j := range judges {
				keys = append(keys, j)
			}
			sort.Strings(keys)
			for _, j := range keys {
				row, err := summarise(name, j, judges[j])
				if err != nil {
					return nil, err
				}
				ga.ByJudge = append(ga.ByJudge, row)
			}
		}
		out = append(out, ga)
	}
	return out, nil
}

// judgeName identifies the judge of a grade: its label, provider and
// response model ("live openai/gpt-4o-mini-2024-07-18", "scripted
// scripted/scripted-judge"); "" for a grade no judge gave.
func judgeName(u *datasets.JudgeUsage) string {
	if u == nil {
		return ""
	}
	s := u.ModelLabel
	if u.Provider != "" || u.Model != "" {
		s += " " + u.Provider + "/" + u.Model
	}
	return strings.TrimSpace(s)
}

func gradeNames(t *datasets.Trial) string {
	if len(t.Grades) == 0 {
		return "none: the trial carries no grades, so it was not graded"
	}
	names := make([]string, len(t.Grades))
	for i, g := range t.Grades {
		names[i] = fmt.Sprintf("%q", g.Name)
	}
	return strings.Join(names, ", ")
}
