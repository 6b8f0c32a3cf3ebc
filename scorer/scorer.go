// Package scorer scores trials against cases, aggregates them per case
// (pass@k, pass^k, flakiness) and per suite and agent (rates with
// confidence intervals: pass rate, mean score, evidence retrieved, cited,
// retrieved-but-not-cited and citation precision; the judge's position
// bias and self-consistency with Wilson intervals), and compares a candidate run with a
// baseline case by case (paired intervals of the pass-rate and score
// deltas with their minimum detectable drop, Fisher's exact test per case
// with a multiple-testing correction, the exact McNemar test on flips).
//
// A trial's success is its case's outcome (the required evidence cited),
// never only that the agent finished.
//
// Sub-packages: rollup (per-trace critical path and cost), pricing (model
// price tables), stats (the estimators), gate (CI policies) and report
// (text, JSON, Markdown and JUnit output).
package scorer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/stats"
)

// Weights weigh a trial's score components. Components that do not apply to
// a case (no expected tools, no required evidence, no budgets) are left out
// and the remaining weights renormalised, so every case scores on [0, 1].
type Weights struct {
	Success           float64 `json:"success"`
	EvidenceCited     float64 `json:"evidence_cited"`
	EvidenceRetrieved float64 `json:"evidence_retrieved"`
	ToolRecall        float64 `json:"tool_recall"`
	ToolPrecision     float64 `json:"tool_precision"`
	Budgets           float64 `json:"budgets"`
}

// DefaultWeights: task success dominates; citing the required evidence is
// next (a grounded answer is the point of a research task); retrieval,
// tools and budgets share the rest.
var DefaultWeights = Weights{Success: 0.40, EvidenceCited: 0.25, EvidenceRetrieved: 0.10, ToolRecall: 0.10, ToolPrecision: 0.05, Budgets: 0.10}

// Config controls scoring. Use DefaultConfig and override fields.
type Config struct {
	Prices  *pricing.Table // prices inline-span trials; nil: explicit costs only
	Weights Weights
	// Ks are the k values for pass@k and pass^k; values above a case's
	// trial count are skipped for that case.
	Ks    []int
	Level float64 // confidence level of every interval, e.g. 0.95
	// CaseAlpha and CaseCorrection set the per-case test: a case regressed
	// when its corrected one-sided Fisher p-value is below CaseAlpha.
	CaseAlpha      float64
	CaseCorrection string // stats.Holm or stats.BenjaminiHochberg
	// Power is the power the minimum detectable drop is stated at.
	Power float64
	// ScriptedExact: when both sides of a comparison are entirely
	// scripted, their trials are deterministic, so a case regressed when a
	// trial that passed now fails (no noise allowance).
	ScriptedExact bool
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Prices: pricing.Default(), Weights: DefaultWeights, Ks: []int{1, 3, 5}, Level: 0.95,
		CaseAlpha: 0.05, CaseCorrection: stats.Holm, Power: 0.8, ScriptedExact: true}
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	var errs []error
	w := c.Weights
	for name, v := range map[string]float64{"success": w.Success, "evidence_cited": w.EvidenceCited, "evidence_retrieved": w.EvidenceRetrieved,
		"tool_recall": w.ToolRecall, "tool_precision": w.ToolPrecision, "budgets": w.Budgets} {
		if v < 0 || math.IsNaN(v) {
			errs = append(errs, fmt.Errorf("weights.%s = %v, must be non-negative", name, v))
		}
	}
	if w.Success <= 0 {
		errs = append(errs, errors.New("weights.success must be positive"))
	}
	for _, k := range c.Ks {
		if k < 1 {
			errs = append(errs, fmt.Errorf("ks: %d, must be at least 1", k))
		}
	}
	if !(c.Level > 0 && c.Level < 1) {
		errs = append(errs, fmt.Errorf("level = %v, need 0 < level < 1", c.Level))
	}
	if !(c.CaseAlpha > 0 && c.CaseAlpha < 1) {
		errs = append(errs, fmt.Errorf("case alpha = %v, need 0 < alpha < 1", c.CaseAlpha))
	}
	if c.CaseCorrection != stats.Holm && c.CaseCorrection != stats.BenjaminiHochberg {
		errs = append(errs, fmt.Errorf("case correction = %q, want %q or %q", c.CaseCorrection, stats.Holm, stats.BenjaminiHochberg))
	}
	if !(c.Power > 0 && c.Power < 1) {
		errs = append(errs, fmt.Errorf("power = %v, need 0 < power < 1", c.Power))
	}
	return errors.Join(errs...)
}

// Budget verdicts.
const (
	VerdictPass    = "pass"
	VerdictFail    = "fail"
	VerdictUnknown = "unknown" // the measurement is missing (e.g. cost of an unpriced model): not a pass
)

// BudgetVerdict is one budget's outcome.
type BudgetVerdict struct {
	Budget  string   `json:"budget"` // "ms", "usd", "tokens"
	Limit   float64  `json:"limit"`
	Actual  *float64 `json:"actual"`
	Verdict string   `json:"verdict"`
}

// Outcome sources: what decided a trial's success.
const (
	// OutcomeEvidenceCited: the case requires evidence, and success is
	// citing it (per evidence_match) in a run that finished.
	OutcomeEvidenceCited = "evidence_cited"
	// OutcomeTrial: the case defines no outcome, so the trial's own
	// account (its success field, or its trace) is all there is; reports
	// say so.
	OutcomeTrial = "trial"
	// OutcomeGraders: the case's graders decide: the run finished and
	// every required grader passed.
	OutcomeGraders = "graders"
)

// TrialScore is one scored trial.
type TrialScore struct {
	CaseID     string `json:"case_id"`
	Trial      int    `json:"trial"`
	ModelLabel string `json:"model_label"`
	Model      string `json:"model,omitempty"`
	Agent      string `json:"agent,omitempty"`
	TraceID    string `json:"trace_id,omitempty"`
	// Journal is the run the trial was read from, when it came from a
	// journal: reports link a trial to its trace or its run.
	Journal *datasets.JournalRef `json:"journal,omitempty"`

	// Finished is the run's own account (the trial's success field or its
	// trace): it ended with an answer. Success is the outcome: finished,
	// not diverged, and the case's outcome met (Outcome says which rule).
	Finished   bool   `json:"finished"`
	Divergence string `json:"divergence,omitempty"`
	Success    bool   `json:"success"`
	Outcome    string `json:"outcome"`
	// Tool precision/recall over the distinct tools called; nil when the
	// case lists no expected tools.
	ToolPrecision *float64 `json:"tool_precision"`
	ToolRecall    *float64 `json:"tool_recall"`
	// Evidence support: the share of required evidence present among what
	// was retrieved, and among what was cited; nil when none is required.
	EvidenceRetrieved *float64 `json:"evidence_retrieved"`
	EvidenceCited     *float64 `json:"evidence_cited"`
	// RetrievedOK and CitedOK: the requirement (per evidence_match) is met
	// by what was retrieved, and by what was cited; nil when none is
	// required. Retrieved but not cited is the retrieval ceiling.
	RetrievedOK *bool `json:"evidence_retrieved_ok"`
	CitedOK     *bool `json:"evidence_cited_ok"`
	// CitationPrecision is the share of the distinct cited ids that are
	// required evidence (CitationPrecision); nil when none is required or
	// nothing was cited.
	CitationPrecision *float64 `json:"citation_precision,omitempty"`

	Budgets    []BudgetVerdict `json:"budgets"`
	DurationMS *float64        `json:"duration_ms"`
	CostUSD    *float64        `json:"cost_usd"`
	Tokens     *int64          `json:"tokens"`

	// Grades are the case's graders' verdicts on the trial, in the case's
	// order (empty when the case has no graders).
	Grades []datasets.Grade `json:"grades,omitempty"`

	Score   float64  `json:"score"`
	Passed  bool     `json:"passed"`
	Reasons []string `json:"reasons"`
}

// KValue is pass@k or pass^k for one k.
type KValue struct {
	K     int     `json:"k"`
	Value float64 `json:"value"`
	Cases int     `json:"cases,omitempty"` // in a suite mean: cases with at least k trials
}

// CaseResult aggregates a case's trials.
type CaseResult struct {
	CaseID   string   `json:"case_id"`
	Task     string   `json:"task,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	MustPass bool     `json:"must_pass,omitempty"`
	Agent    string   `json:"agent,omitempty"`
	// Group is the case file's group (datasets.Case.Group).
	Group string `json:"group,omitempty"`

	Trials    int     `json:"trials"`
	Passes    int     `json:"passes"`
	PassRate  float64 `json:"pass_rate"`
	MeanScore float64 `json:"mean_score"`
	// Passed: every trial passed (the strict per-case outcome used for
	// must-pass checks and the descriptive flips).
	Passed bool `json:"passed"`
	// Flaky: the trials disagree (some passed, some failed).
	Flaky    bool     `json:"flaky"`
	PassAtK  []KValue `json:"pass_at_k"`
	PassHatK []KValue `json:"pass_hat_k"`
	// Per-case evidence rates (shares of trials); nil when the case
	// requires no evidence.
	RetrievedRate         *float64 `json:"evidence_retrieved_rate"`
	CitedRate             *float64 `json:"evidence_cited_rate"`
	RetrievedNotCitedRate *float64 `json:"retrieved_not_cited_rate"`
	// CitationPrecision is the mean citation precision of the trials that
	// cited anything; nil when none did or no evidence is required.
	CitationPrecision *float64 `json:"citation_precision,omitempty"`
	Diverged          int      `json:"diverged,omitempty"` // trials whose replay diverged

	// Means per trial; nil when any trial's value is unknown.
	MeanCostUSD    *float64 `json:"mean_cost_usd"`
	MeanDurationMS *float64 `json:"mean_duration_ms"`

	ModelLabels []string     `json:"model_labels"`
	Results     []TrialScore `json:"results"`
}

// Rates are the outcome rates of a set of cases, each with its interval
// over cases (each case one observation: its share of trials).
type Rates struct {
	Cases  int `json:"cases"`
	Trials int `json:"trials"`
	// TrialsPerCase is the mean number of trials per case.
	TrialsPerCase float64         `json:"trials_per_case"`
	PassRate      *stats.Interval `json:"pass_rate"`
	MeanScore     *stats.Interval `json:"mean_score"`
	// Over the cases that require evidence (EvidenceCases of them); nil
	// when none does.
	EvidenceCases     int             `json:"evidence_cases"`
	EvidenceRetrieved *stats.Interval `json:"evidence_retrieved"`
	EvidenceCited     *stats.Interval `json:"evidence_cited"`
	RetrievedNotCited *stats.Interval `json:"retrieved_not_cited"`
	// CitationPrecision is the mean citation precision over the
	// PrecisionCases cases with a trial that cited anything (each case the
	// mean over those trials); nil when none did.
	PrecisionCases    int             `json:"precision_cases,omitempty"`
	CitationPrecision *stats.Interval `json:"citation_precision,omitempty"`
}

// GraderRates is one grader's record over a suite: its pass rate with an
// interval over cases (each case one observation: the share of its trials
// the grader passed).
type GraderRates struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Required is true when the grader decides success in every case
	// that has it; RequiredIn counts the cases where it does.
	Required   bool            `json:"required"`
	RequiredIn int             `json:"required_in"`
	Cases      int             `json:"cases"`
	Trials     int             `json:"trials"`
	Passed     int             `json:"passed"`
	Errors     int             `json:"errors"` // grades that reached no verdict
	MeanScore  float64         `json:"mean_score"`
	PassRate   *stats.Interval `json:"pass_rate"`
}

// JudgeTotals add up the judge calls of a suite's grades.
type JudgeTotals struct {
	Calls        int   `json:"calls"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CostUSD is nil when any judge call's cost is unknown.
	CostUSD *float64 `json:"cost_usd"`
	// Labels counts grades per judge model label ("scripted", "live").
	Labels map[string]int `json:"model_labels"`
	Models []string       `json:"models"`
	// PositionBias is the share of pairwise grades whose two orders
	// disagreed (undecided, failed); nil when no pairwise grade recorded
	// a decision.
	PositionBias *WilsonRate `json:"position_bias,omitempty"`
	// SelfDisagreement is the share of model grades, asked two or more
	// times, whose samples split (undecided, failed); nil when none was.
	SelfDisagreement *WilsonRate `json:"self_disagreement,omitempty"`
}

// WilsonRate is K of N with its Wilson score interval at Level. Judge
// consistency is counted per grade, each grade one observation: grades of
// one case share a prompt, so the interval is narrower than a per-case
// one would be.
type WilsonRate struct {
	K     int     `json:"k"`
	N     int     `json:"n"`
	Rate  float64 `json:"rate"`
	Lower float64 `json:"lower"`
	Upper float64 `json:"upper"`
	Level float64 `json:"level"`
}

// Wilson returns k of n with its Wilson interval at level; nil for n = 0.
func Wilson(k, n int, level float64) *WilsonRate {
	if n == 0 {
		return nil
	}
	lo, hi := stats.Wilson(k, n, level)
	return &WilsonRate{K: k, N: n, Rate: float64(k) / float64(n), Lower: lo, Upper: hi, Level: level}
}

// JudgeConsistency counts, over grades, the pairwise grades whose orders
// disagreed and the model grades (of two or more samples) whose samples
// split, each with its Wilson interval at level; a grade that records no
// decision (Judge.Disagreed nil) is not counted.
func JudgeConsistency(grades []datasets.Grade, level float64) (positionBias, selfDisagreement *WilsonRate) {
	var pk, pn, mk, mn int
	for _, g := range grades {
		if g.Judge == nil || g.Judge.Disagreed == nil {
			continue
		}
		d := b2i(*g.Judge.Disagreed)
		switch {
		case g.Type == datasets.GraderPairwise:
			pk, pn = pk+d, pn+1
		case g.Type == datasets.GraderModel && len(g.Judge.Replies) >= 2:
			mk, mn = mk+d, mn+1
		}
	}
	return Wilson(pk, pn, level), Wilson(mk, mn, level)
}

// AgentRates are one agent's rates within a suite.
type AgentRates struct {
	Agent string `json:"agent"`
	Rates
}

// Suite is a scored run.
type Suite struct {
	Source      string       `json:"source,omitempty"`
	CasesFile   string       `json:"cases_file,omitempty"`
	Cases       []CaseResult `json:"cases"`
	NCases      int          `json:"n_cases"`
	NTrials     int          `json:"n_trials"`
	CasesPassed int          `json:"cases_passed"`
	Successes   int          `json:"successes"` // trials whose outcome was met
	Finished    int          `json:"finished"`  // trials that finished (with or without the outcome)
	FlakyCases  []string     `json:"flaky_cases"`

	// Suite-wide rates with intervals (each case one observation).
	Rates
	// Agents breaks the rates down by agent when trials name one.
	Agents []AgentRates `json:"agents,omitempty"`
	// Graders are each grader's pass rate across the cases that have it
	// (graders of the same name in several cases pool).
	Graders []GraderRates `json:"graders,omitempty"`
	// Judge is what model graders spent: the judge's tokens and cost,
	// never part of the agent's (TotalCostUSD); nil when no grade used a
	// judge.
	Judge    *JudgeTotals `json:"judge,omitempty"`
	PassAtK  []KValue     `json:"pass_at_k"`
	PassHatK []KValue     `json:"pass_hat_k"`

	// TotalCostUSD is nil when any trial's cost is unknown; KnownCostUSD is
	// then a lower bound. CostPerSuccessUSD = total / successful trials.
	TotalCostUSD      *float64 `json:"total_cost_usd"`
	KnownCostUSD      float64  `json:"known_cost_usd"`
	UnknownCostTrials int      `json:"unknown_cost_trials"`
	CostPerSuccessUSD *float64 `json:"cost_per_success_usd"`

	// ModelLabels counts trials per label; a scripted run says so.
	ModelLabels        map[string]int `json:"model_labels"`
	CasesWithoutTrials []string       `json:"cases_without_trials,omitempty"`
	// MustPass lists every case the case file marks must_pass, with or
	// without trials (a gate fails on one that has none).
	MustPass []string `json:"must_pass_cases,omitempty"`
	Notes    []string `json:"notes,omitempty"`

	Weights Weights `json:"weights"`
	Level   float64 `json:"level"`
}

// Score scores trials against cases. With no cases (nil), every case id in
// the trials gets an implicit case without expectations, so trials are
// scored on success alone (and the suite says so). With cases, a trial
// naming an unknown case is an error, and a case without trials is listed.
func Score(cases []datasets.Case, trials []datasets.Trial, cfg Config) (*Suite, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	byID := map[string]*datasets.Case{}
	var order []string
	implicit := cases == nil
	for i := range cases {
		c := &cases[i]
		if _, dup := byID[c.ID]; dup {
			return nil, fmt.Errorf("score: duplicate case id %q", c.ID)
		}
		byID[c.ID] = c
		order = append(order, c.ID)
	}
	grouped := map[string][]TrialScore{}
	seen := map[[2]any]bool{}
	for i := range trials {
		t := &trials[i]
		c, ok := byID[t.CaseID]
		if !ok {
			if !implicit {
				return nil, fmt.Errorf("score: trial %d%s names case %q, which is not in the case file", t.Trial, lineSuffix(t.Line), t.CaseID)
			}
			c = &datasets.Case{ID: t.CaseID, Task: "(no case file)"}
			byID[t.CaseID] = c
			order = append(order, t.CaseID)
		}
		k := [2]any{t.CaseID, t.Trial}
		if seen[k] {
			return nil, fmt.Errorf("score: duplicate trial %d of case %q%s", t.Trial, t.CaseID, lineSuffix(t.Line))
		}
		seen[k] = true
		ts, err := ScoreTrial(c, t, cfg)
		if err != nil {
			return nil, err
		}
		grouped[t.CaseID] = append(grouped[t.CaseID], ts)
	}
	sort.Strings(order)

	s := &Suite{ModelLabels: map[string]int{}, Weights: cfg.Weights, Level: cfg.Level, FlakyCases: []string{}}
	if implicit {
		s.Notes = append(s.Notes, "no case file: success is each trial's own account (no outcome, tool, evidence or budget expectations)")
	}
	allCostKnown := true
	noOutcome := 0
	for _, id := range order {
		ts := grouped[id]
		c := byID[id]
		if c.MustPass {
			s.MustPass = append(s.MustPass, id)
		}
		if len(ts) == 0 {
			s.CasesWithoutTrials = append(s.CasesWithoutTrials, id)
			continue
		}
		cr, err := aggregateCase(c, ts, cfg.Ks)
		if err != nil {
			return nil, err
		}
		s.Cases = append(s.Cases, cr)
		s.NTrials += cr.Trials
		if cr.Passed {
			s.CasesPassed++
		}
		if cr.Flaky {
			s.FlakyCases = append(s.FlakyCases, id)
		}
		if len(c.RequiredEvidence) == 0 && len(c.Graders) == 0 {
			noOutcome++
		}
		for _, t := range cr.Results {
			s.ModelLabels[t.ModelLabel]++
			if t.Success {
				s.Successes++
			}
			if t.Finished {
				s.Finished++
			}
			if t.CostUSD != nil {
				s.KnownCostUSD += *t.CostUSD
			} else {
				allCostKnown = false
				s.UnknownCostTrials++
			}
		}
	}
	s.NCases = len(s.Cases)
	if len(s.CasesWithoutTrials) > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d cases have no trials and are not scored: %v", len(s.CasesWithoutTrials), s.CasesWithoutTrials))
	}
	if noOutcome > 0 && !implicit {
		s.Notes = append(s.Notes, fmt.Sprintf("%d of %d cases define no outcome (no graders, no required evidence): their success is the trial's own account", noOutcome, s.NCases))
	}
	if allCostKnown && s.NTrials > 0 {
		s.TotalCostUSD = ptr(s.KnownCostUSD)
		if s.Successes > 0 {
			s.CostPerSuccessUSD = ptr(s.KnownCostUSD / float64(s.Successes))
		}
	}
	if s.UnknownCostTrials > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d trials have unknown cost: suite cost is a lower bound", s.UnknownCostTrials))
	}
	var err error
	if s.Rates, err = RatesOf(s.Cases, cfg.Level); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	agents := map[string][]CaseResult{}
	for _, c := range s.Cases {
		if c.Agent != "" {
			agents[c.Agent] = append(agents[c.Agent], c)
		}
	}
	for _, a := range sortedKeys(agents) {
		r, err := RatesOf(agents[a], cfg.Level)
		if err != nil {
			return nil, fmt.Errorf("score: agent %q: %w", a, err)
		}
		s.Agents = append(s.Agents, AgentRates{Agent: a, Rates: r})
	}
	if s.Graders, err = graderRates(s.Cases, byID, cfg.Level); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	}
	s.Judge = judgeTotals(s.Cases)
	if s.Judge != nil {
		var all []datasets.Grade
		for _, c := range s.Cases {
			for _, t := range c.Results {
				all = append(all, t.Grades...)
			}
		}
		s.Judge.PositionBias, s.Judge.SelfDisagreement = JudgeConsistency(all, cfg.Level)
	}
	s.PassAtK = meanK(s.Cases, cfg.Ks, func(c *CaseResult) []KValue { return c.PassAtK })
	s.PassHatK = meanK(s.Cases, cfg.Ks, func(c *CaseResult) []KValue { return c.PassHatK })
	return s, nil
}

// RatesOf computes the rates of cases with their intervals at level (see
// stats.MeanInterval: one observation per case, pseudo-trials weighted by
// the mean trials per case).
func RatesOf(cases []CaseResult, level float64) (Rates, error) {
	r := Rates{Cases: len(cases)}
	if len(cases) == 0 {
		return r, nil
	}
	var rates, scores, ret, cit, rnc, prec []float64
	evTrials, precTrials := 0, 0
	for _, c := range cases {
		r.Trials += c.Trials
		rates = append(rates, c.PassRate)
		scores = append(scores, c.MeanScore)
		if c.CitedRate != nil {
			ret, cit, rnc = append(ret, *c.RetrievedRate), append(cit, *c.CitedRate), append(rnc, *c.RetrievedNotCitedRate)
			evTrials += c.Trials
		}
		if c.CitationPrecision != nil {
			prec = append(prec, *c.CitationPrecision)
			precTrials += c.Trials
		}
	}
	r.TrialsPerCase = float64(r.Trials) / float64(r.Cases)
	iv := func(xs []float64, trials float64) (*stats.Interval, error) {
		v, err := stats.MeanInterval(xs, trials, level)
		return &v, err
	}
	var err error
	if r.PassRate, err = iv(rates, r.TrialsPerCase); err != nil {
		return r, fmt.Errorf("pass rate: %w", err)
	}
	if r.MeanScore, err = iv(scores, r.TrialsPerCase); err != nil {
		return r, fmt.Errorf("mean score: %w", err)
	}
	if r.EvidenceCases = len(cit); r.EvidenceCases > 0 {
		per := float64(evTrials) / float64(r.EvidenceCases)
		if r.EvidenceRetrieved, err = iv(ret, per); err != nil {
			return r, fmt.Errorf("evidence retrieved: %w", err)
		}
		if r.EvidenceCited, err = iv(cit, per); err != nil {
			return r, fmt.Errorf("evidence cited: %w", err)
		}
		if r.RetrievedNotCited, err = iv(rnc, per); err != nil {
			return r, fmt.Errorf("retrieved but not cited: %w", err)
		}
	}
	if r.PrecisionCases = len(prec); r.PrecisionCases > 0 {
		if r.CitationPrecision, err = iv(prec, float64(precTrials)/float64(r.PrecisionCases)); err != nil {
			return r, fmt.Errorf("citation precision: %w", err)
		}
	}
	return r, nil
}

func lineSuffix(line int) string {
	if line > 0 {
		return fmt.Sprintf(" (line %d)", line)
	}
	return ""
}

func aggregateCase(c *datasets.Case, ts []TrialScore, ks []int) (CaseResult, error) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Trial < ts[j].Trial })
	cr := CaseResult{CaseID: c.ID, Task: c.Task, Tags: c.Tags, MustPass: c.MustPass, Group: c.Group, Trials: len(ts), Results: ts,
		PassAtK: []KValue{}, PassHatK: []KValue{}}
	labels := map[string]bool{}
	agents := map[string]bool{}
	var sum, cost, dur float64
	var ret, cit, rnc, nPrec int
	var sumPrec float64
	costOK, durOK := true, true
	for _, t := range ts {
		sum += t.Score
		if t.Passed {
			cr.Passes++
		}
		if t.Divergence != "" {
			cr.Diverged++
		}
		labels[t.ModelLabel] = true
		if t.Agent != "" {
			agents[t.Agent] = true
		}
		if t.CitedOK != nil {
			r, ci := *t.RetrievedOK, *t.CitedOK
			ret += b2i(r)
			cit += b2i(ci)
			rnc += b2i(r && !ci)
		}
		if t.CitationPrecision != nil {
			sumPrec += *t.CitationPrecision
			nPrec++
		}
		if t.CostUSD != nil {
			cost += *t.CostUSD
		} else {
			costOK = false
		}
		if t.DurationMS != nil {
			dur += *t.DurationMS
		} else {
			durOK = false
		}
	}
	n := float64(len(ts))
	cr.MeanScore = sum / n
	cr.PassRate = float64(cr.Passes) / n
	cr.Passed = cr.Passes == len(ts)
	cr.Flaky = cr.Passes > 0 && cr.Passes < len(ts)
	if len(c.RequiredEvidence) > 0 {
		cr.RetrievedRate, cr.CitedRate, cr.RetrievedNotCitedRate = ptr(float64(ret)/n), ptr(float64(cit)/n), ptr(float64(rnc)/n)
		if nPrec > 0 {
			cr.CitationPrecision = ptr(sumPrec / float64(nPrec))
		}
	}
	if costOK {
		cr.MeanCostUSD = ptr(cost / n)
	}
	if durOK {
		cr.MeanDurationMS = ptr(dur / n)
	}
	for l := range labels {
		cr.ModelLabels = append(cr.ModelLabels, l)
	}
	sort.Strings(cr.ModelLabels)
	switch as := sortedKeys(agents); len(as) {
	case 0:
	case 1:
		cr.Agent = as[0]
	default:
		return cr, fmt.Errorf("case %q: trials name several agents %v (score one agent's trials per case)", c.ID, as)
	}
	for _, k := range uniqueSorted(ks) {
		if k > len(ts) {
			continue
		}
		at, err := stats.PassAtK(len(ts), cr.Passes, k)
		if err != nil {
			return cr, fmt.Errorf("case %q: %w", c.ID, err)
		}
		hat, err := stats.PassHatK(len(ts), cr.Passes, k)
		if err != nil {
			return cr, fmt.Errorf("case %q: %w", c.ID, err)
		}
		cr.PassAtK = append(cr.PassAtK, KValue{K: k, Value: at})
		cr.PassHatK = append(cr.PassHatK, KValue{K: k, Value: hat})
	}
	return cr, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// meanK averages a per-case k-metric over the cases that have at least k
// trials (τ-bench averages pass^k over tasks).
func meanK(cases []CaseResult, ks []int, get func(*CaseResult) []KValue) []KValue {
	out := []KValue{}
	for _, k := range uniqueSorted(ks) {
		var sum float64
		var n int
		for i := range cases {
			for _, kv := range get(&cases[i]) {
				if kv.K == k {
					sum += kv.Value
					n++
				}
			}
		}
		if n > 0 {
			out = append(out, KValue{K: k, Value: sum / float64(n), Cases: n})
		}
	}
	return out
}

func uniqueSorted(ks []int) []int {
	m := map[int]bool{}
	var out []int
	for _, k := range ks {
		if !m[k] {
			m[k] = true
			out = append(out, k)
		}
	}
	sort.Ints(out)
	return out
}

func ptr[T any](v T) *T { return &v }

// graderRates pools each grader name's verdicts over the cases that have
// it.
func graderRates(cases []CaseResult, byID map[string]*datasets.Case, level float64) ([]GraderRates, error) {
	type acc struct {
		GraderRates
		shares []float64
		scores float64
	}
	m := map[string]*acc{}
	var order []string
	for _, cr := range cases {
		c := byID[cr.CaseID]
		if c == nil {
			continue
		}
		for _, g := range c.Graders {
			name := g.DisplayName()
			a := m[name]
			if a == nil {
				a = &acc{GraderRates: GraderRates{Name: name, Type: g.Type}}
				m[name] = a
				order = append(order, name)
			}
			if a.Type != g.Type {
				return nil, fmt.Errorf("grader %q is of type %s in case %q but %s elsewhere: give graders of different types different names", name, g.Type, c.ID, a.Type)
			}
			a.Cases++
			if g.IsRequired() {
				a.RequiredIn++
			}
			passed := 0
			for _, t := range cr.Results {
				for _, gr := range t.Grades {
					if gr.Name != name {
						continue
					}
					a.Trials++
					a.scores += gr.Score
					if gr.Passed {
						passed++
					}
					if gr.Error != "" {
						a.Errors++
					}
				}
			}
			a.Passed += passed
			a.shares = append(a.shares, float64(passed)/float64(cr.Trials))
		}
	}
	sort.Strings(order)
	out := make([]GraderRates, 0, len(order))
	for _, name := range order {
		a := m[name]
		a.Required = a.RequiredIn == a.Cases
		if a.Trials > 0 {
			a.MeanScore = a.scores / float64(a.Trials)
			iv, err := stats.MeanInterval(a.shares, float64(a.Trials)/float64(a.Cases), level)
			if err != nil {
				return nil, fmt.Errorf("grader %q pass rate: %w", name, err)
			}
			a.PassRate = &iv
		}
		out = append(out, a.GraderRates)
	}
	return out, nil
}

func judgeTotals(cases []CaseResult) *JudgeTotals {
	var j *JudgeTotals
	known := true
	for _, cr := range cases {
		for _, t := range cr.Results {
			for _, g := range t.Grades {
				if g.Judge == nil {
					continue
				}
				if j == nil {
					j = &JudgeTotals{Labels: map[string]int{}, Models: []string{}, CostUSD: new(float64)}
				}
				u := g.Judge
				j.Calls += u.Calls
				j.InputTokens += u.InputTokens
				j.OutputTokens += u.OutputTokens
				j.Labels[u.ModelLabel]++
				if u.Model != "" && !slices.Contains(j.Models, u.Model) {
					j.Models = append(j.Models, u.Model)
				}
				if u.CostUSD == nil {
					known = false
				} else {
					*j.CostUSD += *u.CostUSD
				}
			}
		}
	}
	if j != nil {
		sort.Strings(j.Models)
		if !known {
			j.CostUSD = nil
		}
	}
	return j
}
