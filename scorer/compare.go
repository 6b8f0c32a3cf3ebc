package scorer

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/stats"
)

// Case outcome changes between baseline and candidate.
const (
	ChangeRegressed = "regressed" // passed in the baseline, fails now
	ChangeFixed     = "fixed"     // failed in the baseline, passes now
	ChangeStillPass = "still_passing"
	ChangeStillFail = "still_failing"
)

// CaseDelta pairs one case across two runs.
type CaseDelta struct {
	CaseID    string  `json:"case_id"`
	MustPass  bool    `json:"must_pass,omitempty"`
	BaseScore float64 `json:"base_score"`
	CandScore float64 `json:"cand_score"`
	Delta     float64 `json:"delta"`
	BasePass  bool    `json:"base_passed"`
	CandPass  bool    `json:"cand_passed"`
	Change    string  `json:"change"`

	BaseCostUSD     *float64 `json:"base_mean_cost_usd"`
	CandCostUSD     *float64 `json:"cand_mean_cost_usd"`
	CostDeltaUSD    *float64 `json:"cost_delta_usd"`
	BaseDurationMS  *float64 `json:"base_mean_duration_ms"`
	CandDurationMS  *float64 `json:"cand_mean_duration_ms"`
	DurationDeltaMS *float64 `json:"duration_delta_ms"`
}

// Comparison is a paired comparison of a candidate run with a baseline.
type Comparison struct {
	Baseline  *Suite `json:"-"`
	Candidate *Suite `json:"-"`

	// Warnings say why the comparison may not mean what it seems to (a
	// scripted run compared with a live one; see labelWarnings).
	Warnings []string `json:"warnings,omitempty"`

	Pairs []CaseDelta `json:"pairs"`
	// Cases present on one side only are listed, not counted as regressions.
	MissingFromBaseline  []string `json:"missing_from_baseline"`
	MissingFromCandidate []string `json:"missing_from_candidate"`

	// MeanDelta is the paired bootstrap interval of mean(cand − base) of
	// per-case mean scores; nil when no case is in both runs.
	MeanDelta *stats.Interval `json:"mean_delta"`
	McNemar   stats.McNemar   `json:"mcnemar"`

	NewFailures  []string `json:"new_failures"`
	Fixed        []string `json:"fixed"`
	StillFailing []string `json:"still_failing"`

	// Mean per-trial cost and duration over the paired cases; nil when
	// either side has unknown values.
	BaseMeanCostUSD    *float64 `json:"base_mean_cost_usd"`
	CandMeanCostUSD    *float64 `json:"cand_mean_cost_usd"`
	BaseMeanDurationMS *float64 `json:"base_mean_duration_ms"`
	CandMeanDurationMS *float64 `json:"cand_mean_duration_ms"`
	CostChangePct      *float64 `json:"cost_change_pct"`
	DurationChangePct  *float64 `json:"duration_change_pct"`
}

// Compare pairs cases by id. A case passes in a run when all its trials
// passed; the McNemar test runs on those per-case outcomes, and the paired
// bootstrap on per-case mean scores (the case is the unit that is paired).
func Compare(base, cand *Suite, cfg Config) (*Comparison, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	cmp := &Comparison{Baseline: base, Candidate: cand, Pairs: []CaseDelta{},
		MissingFromBaseline: []string{}, MissingFromCandidate: []string{},
		NewFailures: []string{}, Fixed: []string{}, StillFailing: []string{}}
	cmp.Warnings = labelWarnings(base, cand)
	bm := map[string]*CaseResult{}
	for i := range base.Cases {
		bm[base.Cases[i].CaseID] = &base.Cases[i]
	}
	cm := map[string]*CaseResult{}
	for i := range cand.Cases {
		cm[cand.Cases[i].CaseID] = &cand.Cases[i]
	}
	var bs, cs []float64
	var bCost, cCost, bDur, cDur []*float64
	for i := range cand.Cases {
		c := &cand.Cases[i]
		b, ok := bm[c.CaseID]
		if !ok {
			cmp.MissingFromBaseline = append(cmp.MissingFromBaseline, c.CaseID)
			continue
		}
		d := CaseDelta{CaseID: c.CaseID, MustPass: c.MustPass || b.MustPass, BaseScore: b.MeanScore, CandScore: c.MeanScore,
			Delta: c.MeanScore - b.MeanScore, BasePass: b.Passed, CandPass: c.Passed,
			BaseCostUSD: b.MeanCostUSD, CandCostUSD: c.MeanCostUSD, BaseDurationMS: b.MeanDurationMS, CandDurationMS: c.MeanDurationMS}
		d.CostDeltaUSD = diff(d.CandCostUSD, d.BaseCostUSD)
		d.DurationDeltaMS = diff(d.CandDurationMS, d.BaseDurationMS)
		switch {
		case b.Passed && !c.Passed:
			d.Change = ChangeRegressed
			cmp.NewFailures = append(cmp.NewFailures, c.CaseID)
		case !b.Passed && c.Passed:
			d.Change = ChangeFixed
			cmp.Fixed = append(cmp.Fixed, c.CaseID)
		case c.Passed:
			d.Change = ChangeStillPass
		default:
			d.Change = ChangeStillFail
			cmp.StillFailing = append(cmp.StillFailing, c.CaseID)
		}
		cmp.Pairs = append(cmp.Pairs, d)
		bs, cs = append(bs, b.MeanScore), append(cs, c.MeanScore)
		bCost, cCost = append(bCost, b.MeanCostUSD), append(cCost, c.MeanCostUSD)
		bDur, cDur = append(bDur, b.MeanDurationMS), append(cDur, c.MeanDurationMS)
	}
	for i := range base.Cases {
		if _, ok := cm[base.Cases[i].CaseID]; !ok {
			cmp.MissingFromCandidate = append(cmp.MissingFromCandidate, base.Cases[i].CaseID)
		}
	}
	sort.Slice(cmp.Pairs, func(i, j int) bool { return cmp.Pairs[i].CaseID < cmp.Pairs[j].CaseID })
	for _, s := range [][]string{cmp.MissingFromBaseline, cmp.MissingFromCandidate, cmp.NewFailures, cmp.Fixed, cmp.StillFailing} {
		sort.Strings(s)
	}
	if len(bs) > 0 {
		iv, err := stats.PairedBootstrapMeanDelta(bs, cs, cfg.bootstrap(3))
		if err != nil {
			return nil, fmt.Errorf("compare: %w", err)
		}
		cmp.MeanDelta = &iv
	}
	m, err := stats.McNemarExact(len(cmp.NewFailures), len(cmp.Fixed))
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	cmp.McNemar = m
	cmp.BaseMeanCostUSD, cmp.CandMeanCostUSD = meanKnown(bCost), meanKnown(cCost)
	cmp.BaseMeanDurationMS, cmp.CandMeanDurationMS = meanKnown(bDur), meanKnown(cDur)
	cmp.CostChangePct = pctChange(cmp.BaseMeanCostUSD, cmp.CandMeanCostUSD)
	cmp.DurationChangePct = pctChange(cmp.BaseMeanDurationMS, cmp.CandMeanDurationMS)
	return cmp, nil
}

func diff(a, b *float64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	return ptr(*a - *b)
}

// meanKnown is the mean, or nil if any value is unknown or there are none.
func meanKnown(xs []*float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	var s float64
	for _, x := range xs {
		if x == nil {
			return nil
		}
		s += *x
	}
	return ptr(s / float64(len(xs)))
}

func pctChange(base, cand *float64) *float64 {
	if base == nil || cand == nil || *base == 0 {
		return nil
	}
	return ptr(100 * (*cand - *base) / *base)
}

// labelWarnings warns when the two runs were produced differently: a
// scripted model's answers are fixed by its script, and a replay re-uses
// recorded answers, so comparing either with a live run measures the kind
// of run, not a change of the agent. Both sides' label counts are named.
func labelWarnings(base, cand *Suite) []string {
	kinds := func(s *Suite) map[string]bool {
		m := map[string]bool{}
		for l, n := range s.ModelLabels {
			if n > 0 {
				m[l] = true
			}
		}
		return m
	}
	b, c := kinds(base), kinds(cand)
	if maps.Equal(b, c) {
		return nil
	}
	across := func(x, y string) bool { return b[x] && c[y] || b[y] && c[x] }
	why := "the runs were produced differently"
	switch {
	case across(datasets.LabelScripted, datasets.LabelLive), across(datasets.LabelScripted, datasets.LabelReplayed):
		why = "a scripted run is compared with a live one; a script's answers are fixed, so the delta measures the script against a model, not a change of the agent"
	case across(datasets.LabelReplayed, datasets.LabelLive):
		why = "a replayed run is compared with a live one; the replay re-uses recorded model answers, the live run asked the model again"
	}
	return []string{fmt.Sprintf("model labels differ (baseline: %s; candidate: %s): %s", LabelCounts(base.ModelLabels), LabelCounts(cand.ModelLabels), why)}
}

// LabelCounts writes trials per model label as "live ×3, scripted ×6"
// (sorted by label), the form every report prints.
func LabelCounts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, l := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", l, m[l]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
