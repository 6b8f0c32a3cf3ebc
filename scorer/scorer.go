// Package scorer scores trials against cases, aggregates them per case
// (pass@k, pass^k) and per suite (bootstrap confidence intervals), and
// compares a candidate run with a baseline case by case (paired bootstrap of
// the mean score delta, exact McNemar test on pass/fail flips).
//
// Sub-packages: rollup (per-trace critical path and cost), pricing (model
// price tables), stats (the estimators), gate (CI policies) and report
// (text, JSON, Markdown and JUnit output).
package scorer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
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
	Ks        []int
	Resamples int     // bootstrap resamples
	Level     float64 // confidence level, e.g. 0.95
	Seed      uint64  // bootstrap seed; the same seed gives the same report
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{Prices: pricing.Default(), Weights: DefaultWeights, Ks: []int{1, 3, 5}, Resamples: 10000, Level: 0.95, Seed: 1}
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
	if c.Resamples < 100 {
		errs = append(errs, fmt.Errorf("resamples = %d, need at least 100", c.Resamples))
	}
	if !(c.Level > 0 && c.Level < 1) {
		errs = append(errs, fmt.Errorf("level = %v, need 0 < level < 1", c.Level))
	}
	return errors.Join(errs...)
}

func (c Config) bootstrap(stream uint64) stats.BootstrapConfig {
	// One independent stream per statistic, derived from the seed, so
	// adding a statistic does not shift the others' intervals.
	return stats.BootstrapConfig{Resamples: c.Resamples, Level: c.Level, Rand: rand.New(rand.NewPCG(c.Seed, stream))}
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

// TrialScore is one scored trial.
type TrialScore struct {
	CaseID     string `json:"case_id"`
	Trial      int    `json:"trial"`
	ModelLabel string `json:"model_label"`
	Model      string `json:"model,omitempty"`
	TraceID    string `json:"trace_id,omitempty"`

	Success bool `json:"success"`
	// Tool precision/recall over the distinct tools called; nil when the
	// case lists no expected tools.
	ToolPrecision *float64 `json:"tool_precision"`
	ToolRecall    *float64 `json:"tool_recall"`
	// Evidence support: the share of required evidence present among what
	// was retrieved, and among what was cited; nil when none is required.
	EvidenceRetrieved *float64 `json:"evidence_retrieved"`
	EvidenceCited     *float64 `json:"evidence_cited"`

	Budgets    []BudgetVerdict `json:"budgets"`
	DurationMS *float64        `json:"duration_ms"`
	CostUSD    *float64        `json:"cost_usd"`
	Tokens     *int64          `json:"tokens"`

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

	Trials    int     `json:"trials"`
	Passes    int     `json:"passes"`
	PassRate  float64 `json:"pass_rate"`
	MeanScore float64 `json:"mean_score"`
	// Passed: every trial passed (the per-case outcome used for flips and
	// must-pass checks).
	Passed   bool     `json:"passed"`
	PassAtK  []KValue `json:"pass_at_k"`
	PassHatK []KValue `json:"pass_hat_k"`

	// Means per trial; nil when any trial's value is unknown.
	MeanCostUSD    *float64 `json:"mean_cost_usd"`
	MeanDurationMS *float64 `json:"mean_duration_ms"`

	ModelLabels []string     `json:"model_labels"`
	Results     []TrialScore `json:"results"`
}

// Suite is a scored run.
type Suite struct {
	Source      string       `json:"source,omitempty"`
	CasesFile   string       `json:"cases_file,omitempty"`
	Cases       []CaseResult `json:"cases"`
	NCases      int          `json:"n_cases"`
	NTrials     int          `json:"n_trials"`
	CasesPassed int          `json:"cases_passed"`
	Successes   int          `json:"successes"` // trials whose task succeeded

	// Intervals over cases (each case one observation: its mean score, its
	// pass rate), by percentile bootstrap.
	MeanScore *stats.Interval `json:"mean_score"`
	PassRate  *stats.Interval `json:"pass_rate"`
	PassAtK   []KValue        `json:"pass_at_k"`
	PassHatK  []KValue        `json:"pass_hat_k"`

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

	Weights   Weights `json:"weights"`
	Seed      uint64  `json:"seed"`
	Resamples int     `json:"resamples"`
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

	s := &Suite{ModelLabels: map[string]int{}, Weights: cfg.Weights, Seed: cfg.Seed, Resamples: cfg.Resamples}
	if implicit {
		s.Notes = append(s.Notes, "no case file: trials are scored on task success only (no tool, evidence or budget expectations)")
	}
	var caseScores, caseRates []float64
	allCostKnown := true
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
		caseScores = append(caseScores, cr.MeanScore)
		caseRates = append(caseRates, cr.PassRate)
		for _, t := range cr.Results {
			s.ModelLabels[t.ModelLabel]++
			if t.Success {
				s.Successes++
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
	if allCostKnown && s.NTrials > 0 {
		s.TotalCostUSD = ptr(s.KnownCostUSD)
		if s.Successes > 0 {
			s.CostPerSuccessUSD = ptr(s.KnownCostUSD / float64(s.Successes))
		}
	}
	if s.UnknownCostTrials > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d trials have unknown cost: suite cost is a lower bound", s.UnknownCostTrials))
	}
	if len(caseScores) > 0 {
		// Two variables: the suite keeps a pointer to each interval.
		scoreIV, err := stats.BootstrapMean(caseScores, cfg.bootstrap(1))
		if err != nil {
			return nil, fmt.Errorf("score: %w", err)
		}
		s.MeanScore = &scoreIV
		rateIV, err := stats.BootstrapMean(caseRates, cfg.bootstrap(2))
		if err != nil {
			return nil, fmt.Errorf("score: %w", err)
		}
		s.PassRate = &rateIV
	}
	s.PassAtK = meanK(s.Cases, cfg.Ks, func(c *CaseResult) []KValue { return c.PassAtK })
	s.PassHatK = meanK(s.Cases, cfg.Ks, func(c *CaseResult) []KValue { return c.PassHatK })
	return s, nil
}

func lineSuffix(line int) string {
	if line > 0 {
		return fmt.Sprintf(" (line %d)", line)
	}
	return ""
}

func aggregateCase(c *datasets.Case, ts []TrialScore, ks []int) (CaseResult, error) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Trial < ts[j].Trial })
	cr := CaseResult{CaseID: c.ID, Task: c.Task, Tags: c.Tags, MustPass: c.MustPass, Trials: len(ts), Results: ts,
		PassAtK: []KValue{}, PassHatK: []KValue{}}
	labels := map[string]bool{}
	var sum, cost, dur float64
	costOK, durOK := true, true
	for _, t := range ts {
		sum += t.Score
		if t.Passed {
			cr.Passes++
		}
		labels[t.ModelLabel] = true
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
