package web

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/report"
)

// ReportView is the report page: the report, its cases failing first,
// and each trial's verdict with the checks that made it.
type ReportView struct {
	File    string
	Report  *report.Report
	Cases   []CaseView
	Failing int
}

// CaseView is one case card.
type CaseView struct {
	scorer.CaseResult
	TrialRows []TrialView
}

// TrialView is one trial row.
type TrialView struct {
	scorer.TrialScore
	Verdict TrialVerdict
	// TraceLink and RunLink open the trial's trace and its journaled run
	// ("" when unknown); LabelLink its label form; CompareLink compares a
	// failing trial with a passing one of the same case (CompareWith names
	// it).
	TraceLink, RunLink, RunText string
	LabelLink                   string
	CompareLink, CompareWith    string
}

// TrialVerdict is a trial's verdict and the checks behind it.
type TrialVerdict struct {
	Word  string // "pass", "fail"
	Class string // "pass", "fail", "warn": green only when no check failed
	// But says what failed in a trial that passed anyway (a check its
	// outcome does not count), or in one that failed, what failed first.
	But    string
	Checks []VerdictCheck
}

// VerdictCheck is one check of a trial.
type VerdictCheck struct {
	Name   string
	State  string // "ok", "fail", "unknown", "info"
	Detail string
	// Aside: not part of the trial's outcome (an optional grader; the
	// evidence when the graders decide): shown, never hidden, but it does
	// not decide the verdict.
	Aside bool
}

// trialVerdict lays out what decided a trial: that its run finished, the
// outcome's checks (the graders', or the evidence cited), the checks
// outside the outcome, and the budgets. Its colour agrees with every
// check it shows: a trial that passed while a check it shows failed (the
// graders decide and the required evidence was not cited) is not green.
func trialVerdict(t *scorer.TrialScore) TrialVerdict {
	var cs []VerdictCheck
	add := func(c VerdictCheck) { cs = append(cs, c) }
	state := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "fail"
	}
	switch {
	case t.Divergence != "":
		add(VerdictCheck{Name: "finished", State: "fail", Detail: "replay diverged: " + t.Divergence})
	default:
		add(VerdictCheck{Name: "finished", State: state(t.Finished), Detail: map[bool]string{true: "the run ended with an answer", false: "the run did not finish with an answer"}[t.Finished]})
	}
	evidence := func(aside bool) {
		if t.CitedOK != nil {
			d := fmt.Sprintf("%s of the required evidence cited", fracPtr(t.EvidenceCited))
			if aside && !*t.CitedOK && t.Outcome == scorer.OutcomeGraders {
				d += " (the graders decide this case)"
			}
			add(VerdictCheck{Name: "evidence cited", State: state(*t.CitedOK), Detail: d, Aside: aside})
		}
		if t.RetrievedOK != nil {
			add(VerdictCheck{Name: "evidence retrieved", State: state(*t.RetrievedOK), Detail: fmt.Sprintf("%s of the required evidence retrieved", fracPtr(t.EvidenceRetrieved)), Aside: true})
		}
	}
	switch t.Outcome {
	case scorer.OutcomeGraders:
		for _, g := range t.Grades {
			c := VerdictCheck{Name: "grader " + g.Name, State: state(g.Passed && g.Error == ""), Detail: g.Reason, Aside: !g.Required}
			if g.Error != "" {
				c.Detail = "error: " + g.Error
			}
			add(c)
		}
		evidence(true)
	case scorer.OutcomeEvidenceCited:
		evidence(false)
	default:
		add(VerdictCheck{Name: "outcome", State: "info", Detail: "the run's own account: the case requires no evidence and has no graders"})
		evidence(true)
	}
	for _, b := range t.Budgets {
		c := VerdictCheck{Name: b.Budget + " budget", State: "unknown", Detail: fmt.Sprintf("limit %g", b.Limit)}
		switch b.Verdict {
		case scorer.VerdictPass:
			c.State = "ok"
		case scorer.VerdictFail:
			c.State = "fail"
		}
		if b.Actual != nil {
			c.Detail = fmt.Sprintf("%g of %g", *b.Actual, b.Limit)
		}
		add(c)
	}
	v := TrialVerdict{Word: "fail", Class: "fail", Checks: cs}
	var failedPart, failedAside []string
	for _, c := range cs {
		if c.State != "fail" && c.State != "unknown" {
			continue
		}
		if c.Aside {
			failedAside = append(failedAside, c.Name)
		} else {
			failedPart = append(failedPart, c.Name)
		}
	}
	switch {
	case !t.Passed:
		if len(failedPart) > 0 {
			v.But = strings.Join(failedPart, ", ") + " failed"
		}
	case len(failedPart) > 0:
		// A report whose verdict contradicts its own checks (written by
		// another scorer version): say so rather than show either alone.
		v.Word, v.Class = "pass?", "warn"
		v.But = "the report says pass, yet " + strings.Join(failedPart, ", ") + " failed: score it again"
	case len(failedAside) > 0:
		v.Word, v.Class = "pass", "warn"
		v.But = "but " + strings.Join(failedAside, ", ") + " failed (not part of the outcome)"
	default:
		v.Word, v.Class = "pass", "pass"
	}
	return v
}

// reportView builds the report page: cases that did not pass every trial
// first (in the report's order within each group), each trial linked to
// its trace or its run.
func (s *Server) reportView(file string, rep *report.Report) ReportView {
	v := ReportView{File: file, Report: rep}
	runIndex := s.runIndex(rep)
	for _, cr := range rep.Suite.Cases {
		cv := CaseView{CaseResult: cr}
		var passing *TrialView
		for _, t := range cr.Results {
			tv := TrialView{TrialScore: t, Verdict: trialVerdict(&t),
				LabelLink: fmt.Sprintf("/labels/new?report=%s&case=%s&trial=%d", url.QueryEscape(file), url.QueryEscape(t.CaseID), t.Trial)}
			if t.TraceID != "" {
				tv.TraceLink = "/traces/" + t.TraceID
			}
			tv.RunLink, tv.RunText = runIndex(&t)
			cv.TrialRows = append(cv.TrialRows, tv)
		}
		for i := range cv.TrialRows {
			if cv.TrialRows[i].Passed && passing == nil {
				passing = &cv.TrialRows[i]
			}
		}
		if passing != nil {
			for i := range cv.TrialRows {
				t := &cv.TrialRows[i]
				if t.Passed {
					continue
				}
				switch {
				case t.TraceID != "" && passing.TraceID != "":
					t.CompareLink = compareURL(false, t.TraceID, passing.TraceID)
				case t.RunLink != "" && passing.RunLink != "":
					t.CompareLink = compareURL(true, strings.TrimPrefix(t.RunLink, "/runs/"), strings.TrimPrefix(passing.RunLink, "/runs/"))
				}
				if t.CompareLink != "" {
					t.CompareWith = fmt.Sprintf("trial %d", passing.Trial)
				}
			}
		}
		if !cr.Passed {
			v.Failing++
		}
		v.Cases = append(v.Cases, cv)
	}
	sort.SliceStable(v.Cases, func(i, j int) bool { return !v.Cases[i].Passed && v.Cases[j].Passed })
	return v
}

// runIndex returns how to find a trial's run page: by its journal
// reference when the runs directory holds that journal, else by the one
// run there of the same case and trial (and agent, when the trial says).
func (s *Server) runIndex(rep *report.Report) func(t *scorer.TrialScore) (link, text string) {
	none := func(*scorer.TrialScore) (string, string) { return "", "" }
	if s.deps.Files == nil || s.deps.Files.RunsDir == "" {
		return none
	}
	type key struct {
		caseID string
		trial  int
	}
	var byTrial map[key][]RunRow
	load := func() {
		if byTrial != nil {
			return
		}
		byTrial = map[key][]RunRow{}
		v, _, err := s.runFiles(true)
		if err != nil {
			return
		}
		for _, r := range v.Rows {
			k := key{r.CaseID, r.Trial}
			byTrial[k] = append(byTrial[k], r)
		}
	}
	return func(t *scorer.TrialScore) (string, string) {
		if j := t.Journal; j != nil {
			f := filepath.Base(j.Path)
			if _, err := os.Stat(filepath.Join(s.deps.Files.RunsDir, f)); err == nil {
				return "/runs/" + f + "/" + j.RunID, j.RunID
			}
		}
		if t.TraceID != "" {
			return "", "" // the trace is the trial's record
		}
		load()
		var match []RunRow
		for _, r := range byTrial[key{t.CaseID, t.Trial}] {
			if t.Agent == "" || r.Agent == t.Agent {
				match = append(match, r)
			}
		}
		if len(match) == 1 {
			return "/runs/" + match[0].File + "/" + match[0].RunID, match[0].RunID
		}
		return "", ""
	}
}
