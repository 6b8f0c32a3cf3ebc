package scorer

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer/stats"
)

// Case outcome changes between baseline and candidate, descriptive: a case
// "passed" when every trial passed. Under random trials a flip is often
// noise; Verdict says what the evidence supports.
const (
	ChangeRegressed = "regressed" // passed in the baseline, fails now
	ChangeFixed     = "fixed"     // failed in the baseline, passes now
	ChangeStillPass = "still_passing"
	ChangeStillFail = "still_failing"
)

// Per-case verdicts.
const (
	// VerdictRegressed: the case's own trials say it got worse (corrected
	// one-sided Fisher p < case alpha), or, with both sides scripted, a
	// trial that passed now fails.
	VerdictRegressed = "regressed"
	// VerdictImproved: the same, the other way.
	VerdictImproved = "improved"
	// VerdictWithinNoise: the pass counts differ, but not by more than
	// random trials explain.
	VerdictWithinNoise = "changed_within_noise"
	// VerdictUnchanged: the same pass counts.
	VerdictUnchanged = "unchanged"
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

	BasePasses int `json:"base_passes"`
	BaseTrials int `json:"base_trials"`
	CandPasses int `json:"cand_passes"`
	CandTrials int `json:"cand_trials"`
	// PValue is the one-sided Fisher p-value that the candidate passes
	// less often; AdjustedP the same after the correction across cases.
	PValue    float64 `json:"p_value"`
	AdjustedP float64 `json:"adjusted_p"`
	// TrialsRegressed / TrialsFixed count trial indices present on both
	// sides that went pass → fail / fail → pass (meaningful when both sides
	// are scripted, so trial i is the same computation on both).
	TrialsRegressed int    `json:"trials_regressed"`
	TrialsFixed     int    `json:"trials_fixed"`
	Verdict         string `json:"verdict"`
	// BaseFlaky: the baseline's own trials disagree on this case.
	BaseFlaky bool `json:"base_flaky"`
	// CandDiverged counts candidate trials whose replay diverged.
	CandDiverged int `json:"cand_diverged,omitempty"`

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

	// TrialsPerCase is the smaller side's mean trials per paired case: the
	// weight of the intervals' pseudo-observations.
	TrialsPerCase float64 `json:"trials_per_case"`
	// PassRateDelta and MeanDelta are paired intervals of mean(cand − base)
	// of per-case pass rates and mean scores (stats.PairedDeltaInterval);
	// nil when no case is in both runs.
	PassRateDelta *stats.Interval `json:"pass_rate_delta"`
	MeanDelta     *stats.Interval `json:"mean_delta"`
	// PassRateMDE and ScoreMDE are the smallest true drops this comparison
	// detects with probability Power by "upper bound below 0" (margin 0):
	// what the suite can see. Nil when there is no interval or a single
	// paired case (no drop can be shown).
	Power       float64  `json:"power"`
	PassRateMDE *float64 `json:"pass_rate_mde"`
	ScoreMDE    *float64 `json:"score_mde"`

	McNemar stats.McNemar `json:"mcnemar"`

	// Per-case verdicts: Regressed and Improved are what the evidence
	// supports (CaseTest says how), WithinNoise changed pass counts that
	// it does not; BaseFlaky are cases whose baseline trials disagree.
	CaseTest    string   `json:"case_test"`
	Regressed   []string `json:"regressed"`
	Improved    []string `json:"improved"`
	WithinNoise []string `json:"changed_within_noise"`
	BaseFlaky   []string `json:"base_flaky"`
	// Deterministic: both sides are entirely scripted, so a trial's outcome
	// is a function of the code, not a draw; every change is real.
	Deterministic bool `json:"deterministic"`

	// Descriptive all-trials flips (see ChangeRegressed).
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

// Compare pairs cases by id. The paired intervals run on per-case pass
// rates and mean scores (the case is the unit that is paired); each case
// gets an exact test on its own pass counts, corrected across cases; the
// McNemar test runs on the all-trials-passed flips.
func Compare(base, cand *Suite, cfg Config) (*Comparison, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	cmp := &Comparison{Baseline: base, Candidate: cand, Pairs: []CaseDelta{},
		MissingFromBaseline: []string{}, MissingFromCandidate: []string{},
		NewFailures: []string{}, Fixed: []string{}, StillFailing: []string{},
		Regressed: []string{}, Improved: []string{}, WithinNoise: []string{}, BaseFlaky: []string{},
		Power: cfg.Power, Deterministic: cfg.ScriptedExact && allScripted(base) && allScripted(cand)}
	cmp.Warnings = labelWarnings(base, cand)
	bm := map[string]*CaseResult{}
	for i := range base.Cases {
		bm[base.Cases[i].CaseID] = &base.Cases[i]
	}
	cm := map[string]*CaseResult{}
	for i := range cand.Cases {
		cm[cand.Cases[i].CaseID] = &cand.Cases[i]
	}
	var bs, cs, br, cr []float64
	var bCost, cCost, bDur, cDur []*float64
	var bTrials, cTrials int
	for i := range cand.Cases {
		c := &cand.Cases[i]
		b, ok := bm[c.CaseID]
		if !ok {
			cmp.MissingFromBaseline = append(cmp.MissingFromBaseline, c.CaseID)
			continue
		}
		d := CaseDelta{CaseID: c.CaseID, MustPass: c.MustPass || b.MustPass, BaseScore: b.MeanScore, CandScore: c.MeanScore,
			Delta: c.MeanScore - b.MeanScore, BasePass: b.Passed, CandPass: c.Passed,
			BasePasses: b.Passes, BaseTrials: b.Trials, CandPasses: c.Passes, CandTrials: c.Trials,
			BaseFlaky: b.Flaky, CandDiverged: c.Diverged,
			BaseCostUSD: b.MeanCostUSD, CandCostUSD: c.MeanCostUSD, BaseDurationMS: b.MeanDurationMS, CandDurationMS: c.MeanDurationMS}
		d.CostDeltaUSD = diff(d.CandCostUSD, d.BaseCostUSD)
		d.DurationDeltaMS = diff(d.CandDurationMS, d.BaseDurationMS)
		d.TrialsRegressed, d.TrialsFixed = trialFlips(b, c)
		p, err := stats.FisherOneSided(b.Passes, b.Trials, c.Passes, c.Trials)
		if err != nil {
			return nil, fmt.Errorf("compare: case %q: %w", c.CaseID, err)
		}
		d.PValue = p
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
		if b.Flaky {
			cmp.BaseFlaky = append(cmp.BaseFlaky, c.CaseID)
		}
		cmp.Pairs = append(cmp.Pairs, d)
		bs, cs = append(bs, b.MeanScore), append(cs, c.MeanScore)
		br, cr = append(br, b.PassRate), append(cr, c.PassRate)
		bTrials, cTrials = bTrials+b.Trials, cTrials+c.Trials
		bCost, cCost = append(bCost, b.MeanCostUSD), append(cCost, c.MeanCostUSD)
		bDur, cDur = append(bDur, b.MeanDurationMS), append(cDur, c.MeanDurationMS)
	}
	for i := range base.Cases {
		if _, ok := cm[base.Cases[i].CaseID]; !ok {
			cmp.MissingFromCandidate = append(cmp.MissingFromCandidate, base.Cases[i].CaseID)
		}
	}
	sort.Slice(cmp.Pairs, func(i, j int) bool { return cmp.Pairs[i].CaseID < cmp.Pairs[j].CaseID })
	if err := cmp.caseVerdicts(cfg); err != nil {
		return nil, err
	}
	for _, s := range [][]string{cmp.MissingFromBaseline, cmp.MissingFromCandidate, cmp.NewFailures, cmp.Fixed, cmp.StillFailing, cmp.BaseFlaky} {
		sort.Strings(s)
	}
	if n := len(bs); n > 0 {
		cmp.TrialsPerCase = math.Min(float64(bTrials), float64(cTrials)) / float64(n)
		for _, x := range []struct {
			b, c []float64
			iv   **stats.Interval
			mde  **float64
			name string
		}{{br, cr, &cmp.PassRateDelta, &cmp.PassRateMDE, "pass rate"}, {bs, cs, &cmp.MeanDelta, &cmp.ScoreMDE, "mean score"}} {
			iv, err := stats.PairedDeltaInterval(x.b, x.c, cmp.TrialsPerCase, cfg.Level)
			if err != nil {
				return nil, fmt.Errorf("compare: %s: %w", x.name, err)
			}
			*x.iv = &iv
			if m := iv.MinDetectableDrop(0, cfg.Power); !math.IsInf(m, 0) {
				*x.mde = ptr(m)
			}
		}
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

// caseVerdicts corrects the per-case p-values across cases and sets each
// case's verdict. Both directions are tested at CaseAlpha; with both sides
// scripted the trials are deterministic and a single flipped trial is a
// real change.
func (cmp *Comparison) caseVerdicts(cfg Config) error {
	worse := make([]float64, len(cmp.Pairs))
	better := make([]float64, len(cmp.Pairs))
	for i, d := range cmp.Pairs {
		worse[i] = d.PValue
		p, err := stats.FisherOneSided(d.CandPasses, d.CandTrials, d.BasePasses, d.BaseTrials)
		if err != nil {
			return fmt.Errorf("compare: case %q: %w", d.CaseID, err)
		}
		better[i] = p
	}
	aw, err := stats.Adjust(worse, cfg.CaseCorrection)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	ab, err := stats.Adjust(better, cfg.CaseCorrection)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	cmp.CaseTest = fmt.Sprintf("one-sided Fisher exact test per case, %s-corrected across %d cases, alpha %g", correctionName(cfg.CaseCorrection), len(cmp.Pairs), cfg.CaseAlpha)
	if cmp.Deterministic {
		cmp.CaseTest = "both runs scripted (deterministic): a case regressed when a trial that passed in the baseline fails in the candidate (same trial index)"
	}
	for i := range cmp.Pairs {
		d := &cmp.Pairs[i]
		d.AdjustedP = aw[i]
		switch {
		case cmp.Deterministic && d.TrialsRegressed > 0:
			d.Verdict = VerdictRegressed
		case cmp.Deterministic && d.TrialsFixed > 0:
			d.Verdict = VerdictImproved
		case !cmp.Deterministic && aw[i] < cfg.CaseAlpha:
			d.Verdict = VerdictRegressed
		case !cmp.Deterministic && ab[i] < cfg.CaseAlpha:
			d.Verdict = VerdictImproved
		case float64(d.CandPasses)/float64(d.CandTrials) != float64(d.BasePasses)/float64(d.BaseTrials) || d.TrialsRegressed+d.TrialsFixed > 0:
			d.Verdict = VerdictWithinNoise
		default:
			d.Verdict = VerdictUnchanged
		}
		switch d.Verdict {
		case VerdictRegressed:
			cmp.Regressed = append(cmp.Regressed, d.CaseID)
		case VerdictImproved:
			cmp.Improved = append(cmp.Improved, d.CaseID)
		case VerdictWithinNoise:
			cmp.WithinNoise = append(cmp.WithinNoise, d.CaseID)
		}
	}
	return nil
}

func correctionName(c string) string {
	if c == stats.BenjaminiHochberg {
		return "Benjamini–Hochberg"
	}
	return "Holm"
}

// trialFlips counts trial indices on both sides that went pass → fail and
// fail → pass.
func trialFlips(b, c *CaseResult) (regressed, fixed int) {
	bp := map[int]bool{}
	for _, t := range b.Results {
		bp[t.Trial] = t.Passed
	}
	for _, t := range c.Results {
		was, ok := bp[t.Trial]
		switch {
		case !ok:
		case was && !t.Passed:
			regressed++
		case !was && t.Passed:
			fixed++
		}
	}
	return regressed, fixed
}

// allScripted: every trial of the suite is labelled scripted.
func allScripted(s *Suite) bool {
	return s.NTrials > 0 && s.ModelLabels[datasets.LabelScripted] == s.NTrials
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
