package scorer

import (
	"fmt"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
)

// ScoreTrial scores one trial against its case.
//
// Fields a trial with inline spans leaves out (model label, success, tools,
// evidence, duration, cost, tokens) are derived from the spans
// (DeriveFromTrace); fields it states are used as stated, except a label
// the spans contradict (they say scripted), which is an error.
//
// Success is the outcome, not the agent's account of itself:
//   - Finished is the trial's success field (or its trace): the run ended
//     with an answer. A trial whose replay diverged did not finish.
//   - When the case requires evidence, Success = finished and the required
//     evidence cited (per evidence_match) with a citation precision of at
//     least the case's bar (Outcome "evidence_cited").
//     Otherwise the trial's account is all there is (Outcome "trial") and
//     the suite notes it.
//
// Components, each on [0, 1]:
//   - success: 1 if the outcome was met;
//   - evidence retrieved / cited: the share of required evidence among the
//     retrieved / cited ids; with evidence_match "any", 1 as soon as one is
//     there. The cited credit is scaled by min(1, precision / bar), where
//     precision is CitationPrecision and bar the case's min_precision
//     (CitationBar): citing every id earns next to nothing;
//   - tool precision / recall: over the DISTINCT tool names called against
//     the expected set (calling the right tool twice is not imprecise);
//   - budgets: the share of budgets whose verdict is pass (unknown counts as
//     not passing).
//
// Score = Σ weight·component / Σ weight over the components that apply,
// except that a trial whose outcome failed earns nothing for tools and
// budgets: calling the expected tools and staying in budget while
// achieving nothing is not partial success. Its only partial credit is the
// evidence it found, so empty work scores 0.
//
// Passed = success and every budget verdict pass.
func ScoreTrial(c *datasets.Case, t *datasets.Trial, cfg Config) (TrialScore, error) {
	ts := TrialScore{CaseID: t.CaseID, Trial: t.Trial, ModelLabel: t.ModelLabel, Model: t.Model, Agent: t.Agent, TraceID: t.TraceID,
		Journal: t.Journal, Divergence: t.Divergence, Budgets: []BudgetVerdict{}, Reasons: []string{}}
	f, err := TrialFacts(t, cfg.Prices)
	if err != nil {
		return ts, err
	}
	ts.ModelLabel, ts.Model, ts.TraceID = f.ModelLabel, f.Model, f.TraceID
	ts.Reasons = append(ts.Reasons, f.Notes...)
	success, tools, retrieved, cited := f.Success, f.ToolsCalled, f.EvidenceRetrieved, f.EvidenceCited
	dur, cost, tokens := f.DurationMS, f.CostUSD, f.Tokens
	if ts.ModelLabel == "" {
		// A journal-backed trial gets its label from journal.CheckProvenance
		// (the scorer does no I/O); an unlabelled trial that reaches here
		// was never checked, and a report must not show it unlabelled.
		return ts, fmt.Errorf("score trial %d of case %q%s: field \"model_label\": absent, and neither its spans nor a checked journal gave it",
			t.Trial, t.CaseID, lineSuffix(t.Line))
	}
	if success == nil {
		return ts, fmt.Errorf("score trial %d of case %q%s: field \"success\": not given, and no spans to derive it from (trace %s: pass a store to load it)",
			t.Trial, t.CaseID, lineSuffix(t.Line), t.TraceID)
	}
	ts.Finished = *success && t.Divergence == ""
	ts.DurationMS, ts.CostUSD, ts.Tokens = dur, cost, tokens
	switch {
	case t.Divergence != "":
		ts.Reasons = append(ts.Reasons, "replay diverged: "+t.Divergence)
	case !*success:
		ts.Reasons = append(ts.Reasons, "run did not finish with an answer")
	}

	w := cfg.Weights
	// Evidence first: it decides the outcome when the case requires it.
	var evNum, evDen float64
	ts.Success, ts.Outcome = ts.Finished, OutcomeTrial
	if len(c.RequiredEvidence) > 0 {
		anyMode := c.EvidenceMatch == datasets.EvidenceAny
		rs, rFound := support(c.RequiredEvidence, retrieved)
		cs, cFound := support(c.RequiredEvidence, cited)
		ts.EvidenceRetrieved, ts.EvidenceCited = &rs, &cs
		bar := CitationBar(c)
		prec, hits, nCited := CitationPrecision(c.RequiredEvidence, cited)
		precise := bar == 0 || (nCited > 0 && prec >= bar)
		if nCited > 0 {
			ts.CitationPrecision = &prec
		}
		need := len(uniq(c.RequiredEvidence))
		if anyMode {
			need = 1
		}
		ts.RetrievedOK, ts.CitedOK = ptr(rFound >= need), ptr(cFound >= need)
		credit := func(share float64, found int) float64 {
			if anyMode {
				return b2f(found > 0)
			}
			return share
		}
		scale := 1.0
		if bar > 0 && prec < bar {
			scale = prec / bar
		}
		evNum = w.EvidenceRetrieved*credit(rs, rFound) + w.EvidenceCited*credit(cs, cFound)*scale
		evDen = w.EvidenceRetrieved + w.EvidenceCited
		ts.Success, ts.Outcome = ts.Finished && *ts.CitedOK && precise, OutcomeEvidenceCited
		switch {
		case len(c.Graders) > 0:
			// The graders decide and give their own reasons.
		case cFound == 0 && rFound > 0:
			ts.Reasons = append(ts.Reasons, fmt.Sprintf("required evidence retrieved (%d) but never cited", rFound))
		case cFound == 0:
			ts.Reasons = append(ts.Reasons, "required evidence neither retrieved nor cited")
		case !*ts.CitedOK:
			ts.Reasons = append(ts.Reasons, fmt.Sprintf("cited %d of %d required evidence ids", cFound, need))
		case !precise:
			ts.Reasons = append(ts.Reasons, fmt.Sprintf("citation precision %.3f below %g: %d cited ids, %d of them judged relevant", prec, bar, nCited, hits))
		}
	}
	if len(c.Graders) > 0 {
		if err := applyGrades(c, t, &ts); err != nil {
			return ts, err
		}
	}
	num, den := w.Success*b2f(ts.Success)+evNum, w.Success+evDen

	var procNum, procDen float64
	if len(c.ExpectedTools) > 0 {
		p, r, missing, extra := toolPR(c.ExpectedTools, tools)
		ts.ToolPrecision, ts.ToolRecall = &p, &r
		procNum += w.ToolPrecision*p + w.ToolRecall*r
		procDen += w.ToolPrecision + w.ToolRecall
		if len(missing) > 0 {
			ts.Reasons = append(ts.Reasons, fmt.Sprintf("expected tools not called: %s", strings.Join(missing, ", ")))
		}
		if len(extra) > 0 {
			ts.Reasons = append(ts.Reasons, fmt.Sprintf("tools called that were not expected: %s", strings.Join(extra, ", ")))
		}
	}
	budgetsOK := true
	if n, passed := budgetVerdicts(c, &ts); n > 0 {
		procNum += w.Budgets * float64(passed) / float64(n)
		procDen += w.Budgets
		budgetsOK = passed == n
	}
	den += procDen
	if ts.Success {
		num += procNum // process credit only counts on top of an outcome
	}
	if den > 0 {
		ts.Score = num / den
	}
	ts.Passed = ts.Success && budgetsOK
	return ts, nil
}

func budgetVerdicts(c *datasets.Case, ts *TrialScore) (n, passed int) {
	add := func(name string, limit float64, actual *float64, unit string, unknownWhy string) {
		n++
		v := BudgetVerdict{Budget: name, Limit: limit, Actual: actual}
		switch {
		case actual == nil:
			v.Verdict = VerdictUnknown
			ts.Reasons = append(ts.Reasons, fmt.Sprintf("%s budget %g%s: %s, verdict unknown", name, limit, unit, unknownWhy))
		case *actual <= limit:
			v.Verdict = VerdictPass
			passed++
		default:
			v.Verdict = VerdictFail
			ts.Reasons = append(ts.Reasons, fmt.Sprintf("over %s budget: %g%s > %g%s", name, *actual, unit, limit, unit))
		}
		ts.Budgets = append(ts.Budgets, v)
	}
	if b := c.Budgets.MS; b != nil {
		add("ms", *b, ts.DurationMS, " ms", "duration not recorded")
	}
	if b := c.Budgets.USD; b != nil {
		add("usd", *b, ts.CostUSD, " USD", "cost unknown")
	}
	if b := c.Budgets.Tokens; b != nil {
		var actual *float64
		if ts.Tokens != nil {
			actual = ptr(float64(*ts.Tokens))
		}
		add("tokens", float64(*b), actual, " tokens", "token count not recorded")
	}
	return n, passed
}

// toolPR compares distinct called tool names with the expected set.
func toolPR(expected, called []string) (precision, recall float64, missing, extra []string) {
	exp := uniq(expected)
	got := uniq(called)
	expSet := map[string]bool{}
	for _, e := range exp {
		expSet[e] = true
	}
	gotSet := map[string]bool{}
	hit := 0
	for _, g := range got {
		gotSet[g] = true
		if expSet[g] {
			hit++
		} else {
			extra = append(extra, g)
		}
	}
	for _, e := range exp {
		if !gotSet[e] {
			missing = append(missing, e)
		}
	}
	recall = float64(hit) / float64(len(exp))
	if len(got) == 0 {
		precision = 0 // nothing called while tools were expected
	} else {
		precision = float64(hit) / float64(len(got))
	}
	return precision, recall, missing, extra
}

// CitationPrecision is the share of the distinct cited ids that are among
// relevant (the ids the case's judgements mark relevant: its required
// evidence). A cited id relevant does not hold — another corpus page, an
// issue, an id outside the corpus such as "output:…" — counts as not
// relevant: unjudged is not relevant, so an answer cannot raise its
// precision by citing what nobody judged. n is the number of distinct
// cited ids; with n = 0 precision is 0 and undefined (callers report it
// as absent).
func CitationPrecision(relevant, cited []string) (precision float64, hits, n int) {
	rel := map[string]bool{}
	for _, r := range relevant {
		rel[r] = true
	}
	for _, c := range uniq(cited) {
		n++
		if rel[c] {
			hits++
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return float64(hits) / float64(n), hits, n
}

// CitationBar is the citation precision a case holds its citations to:
// the min_precision of its first evidence_cited grader, else
// datasets.DefaultMinPrecision (the implicit evidence rule's).
func CitationBar(c *datasets.Case) float64 {
	for i := range c.Graders {
		if c.Graders[i].Type == datasets.GraderEvidenceCited {
			return c.Graders[i].MinCitationPrecision()
		}
	}
	return datasets.DefaultMinPrecision
}

// support is the share of required ids present in have.
func support(required, have []string) (float64, int) {
	req := uniq(required)
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	found := 0
	for _, r := range req {
		if set[r] {
			found++
		}
	}
	return float64(found) / float64(len(req)), found
}

func uniq(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Facts are what a trial says about its run, merged with what its spans
// say for the fields it leaves out: the one reading ScoreTrial and the
// graders share.
type Facts struct {
	ModelLabel, Model, TraceID string
	// Success is the run's own account (nil: not given and no spans).
	Success                                       *bool
	ToolsCalled, EvidenceRetrieved, EvidenceCited []string
	DurationMS                                    *float64
	CostUSD                                       *float64
	Tokens                                        *int64
	// Rollup is the trace's rollup; nil without spans.
	Rollup *rollup.Rollup
	// Notes explain unknowns (an unpriced model).
	Notes []string
}

// TrialFacts merges a trial's stated fields with those its inline spans
// give (DeriveFromTrace): fields the trial states are used as stated,
// except a label the spans contradict (they say scripted), which is an
// error.
func TrialFacts(t *datasets.Trial, prices *pricing.Table) (Facts, error) {
	f := Facts{ModelLabel: t.ModelLabel, Model: t.Model, TraceID: t.TraceID, Success: t.Success,
		ToolsCalled: t.ToolsCalled, EvidenceRetrieved: t.EvidenceRetrieved, EvidenceCited: t.EvidenceCited,
		DurationMS: t.DurationMS, CostUSD: t.CostUSD, Tokens: t.Tokens}
	if len(t.Spans) == 0 {
		return f, nil
	}
	d, err := DeriveFromTrace(t.Spans, prices)
	if err != nil {
		return f, fmt.Errorf("score trial %d of case %q%s: %w", t.Trial, t.CaseID, lineSuffix(t.Line), err)
	}
	if d.ModelLabel == datasets.LabelScripted && t.ModelLabel != datasets.LabelScripted && t.ModelLabel != "" {
		return f, fmt.Errorf("score trial %d of case %q%s: field \"model_label\": %q, but its spans are labelled scripted",
			t.Trial, t.CaseID, lineSuffix(t.Line), t.ModelLabel)
	}
	if f.ModelLabel == "" && d.ModelLabel != "unknown" {
		f.ModelLabel = d.ModelLabel // the trials file left it to the spans
	}
	if f.Success == nil {
		f.Success = &d.Success
	}
	if f.ToolsCalled == nil {
		f.ToolsCalled = d.ToolsCalled
	}
	if f.EvidenceRetrieved == nil {
		f.EvidenceRetrieved = d.EvidenceRetrieved
	}
	if f.EvidenceCited == nil {
		f.EvidenceCited = d.EvidenceCited
	}
	if f.DurationMS == nil {
		f.DurationMS = ptr(d.Rollup.DurationMS)
	}
	if f.CostUSD == nil {
		f.CostUSD = d.Rollup.CostUSD
		if f.CostUSD == nil {
			f.Notes = append(f.Notes, fmt.Sprintf("cost unknown: unpriced models %v", d.Rollup.UnpricedModels))
		}
	}
	if f.Tokens == nil {
		f.Tokens = ptr(d.Rollup.TokensIn + d.Rollup.TokensOut)
	}
	if f.TraceID == "" {
		f.TraceID = t.Spans[0].TraceID
	}
	if f.Model == "" {
		f.Model = d.Model
	}
	f.Rollup = &d.Rollup
	return f, nil
}

// applyGrades decides the outcome from the case's graders: success is the
// run finished (and did not diverge) and every required grader passed. A
// grader without a verdict on the trial is an error: scoring never
// guesses one (grade the trials first: grade.Trials, which loom-eval score
// runs).
func applyGrades(c *datasets.Case, t *datasets.Trial, ts *TrialScore) error {
	byName := make(map[string]*datasets.Grade, len(t.Grades))
	for i := range t.Grades {
		byName[t.Grades[i].Name] = &t.Grades[i]
	}
	ok := true
	ts.Grades = make([]datasets.Grade, 0, len(c.Graders))
	for i := range c.Graders {
		g := &c.Graders[i]
		name := g.DisplayName()
		gr, found := byName[name]
		if !found {
			return fmt.Errorf("score trial %d of case %q%s: grader %q has no verdict on the trial (grade it first: loom-eval score grades every trial, or loom-eval grade)",
				t.Trial, t.CaseID, lineSuffix(t.Line), name)
		}
		if gr.Type != g.Type {
			return fmt.Errorf("score trial %d of case %q%s: grade %q is of type %q, but the case's grader of that name is %q (regrade)",
				t.Trial, t.CaseID, lineSuffix(t.Line), name, gr.Type, g.Type)
		}
		v := *gr
		v.Required = g.IsRequired() // the case decides what is required, not the recorded grade
		ts.Grades = append(ts.Grades, v)
		if v.Required && !v.Passed {
			ok = false
			why := v.Reason
			if v.Error != "" {
				why = "grader error: " + v.Error
			}
			ts.Reasons = append(ts.Reasons, fmt.Sprintf("grader %s failed: %s", name, why))
		}
	}
	ts.Success, ts.Outcome = ts.Finished && ok, OutcomeGraders
	return nil
}
