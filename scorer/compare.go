package scorer

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
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
	// one-sided p < case alpha of Fisher's test on the counts deflated by
	// the run-to-run design effect), or, with both sides scripted, a trial
	// that passed now fails.
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
	Group     string  `json:"group,omitempty"`
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
	// PValue is the one-sided p-value that the candidate passes less
	// often (Fisher's test on the counts deflated by the comparison's
	// design effect, stats.OverdispersedFisher); AdjustedP the same after
	// the correction across cases.
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
	// IntervalTrials is what the pseudo-observations weigh: TrialsPerCase
	// divided by the estimated run-to-run design effect (at least 1), since
	// correlated trials of a case in one run are worth fewer independent
	// ones (with every trial of a case agreeing, one).
	IntervalTrials float64 `json:"interval_trials_per_case"`
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
	CaseTest string `json:"case_test"`
	// CaseDispersion is the run-to-run design effect of per-case pass
	// counts, estimated across the paired cases: trials of a case in one
	// run share that run's state of the case, so they count as fewer
	// independent trials (stats.EstimateDispersion). Nil for a
	// deterministic comparison.
	CaseDispersion *stats.Dispersion `json:"case_dispersion,omitempty"`
	// CaseTestCanFire: at these trial counts and this design effect, some
	// outcome (every case all passed → all failed) would be declared
	// regressed. False: the per-case test cannot fire, and CaseTest says so.
	CaseTestCanFire bool     `json:"case_test_can_fire"`
	Regressed       []string `json:"regressed"`
	Improved        []string `json:"improved"`
	WithinNoise     []string `json:"changed_within_noise"`
	BaseFlaky       []string `json:"base_flaky"`
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
// rates and mean scores (the case is the unit that is paired; when cases
// declare groups, the group is the unit of the variance: cluster-robust);
// each case gets an exact test on its own pass counts deflated by the
// run-to-run design effect estimated across cases, corrected across cases;
// the McNemar test runs on the all-trials-passed flips.
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
	var groups []string
	grouped := false
	var bCost, cCost, bDur, cDur []*float64
	var bTrials, cTrials int
	for i := range cand.Cases {
		c := &cand.Cases[i]
		b, ok := bm[c.CaseID]
		if !ok {
			cmp.MissingFromBaseline = append(cmp.MissingFromBaseline, c.CaseID)
			continue
		}
		d := CaseDelta{CaseID: c.CaseID, MustPass: c.MustPass || b.MustPass, Group: c.Group, BaseScore: b.MeanScore, CandScore: c.MeanScore,
			Delta: c.MeanScore - b.MeanScore, BasePass: b.Passed, CandPass: c.Passed,
			BasePasses: b.Passes, BaseTrials: b.Trials, CandPasses: c.Passes, CandTrials: c.Trials,
			BaseFlaky: b.Flaky, CandDiverged: c.Diverged,
			BaseCostUSD: b.MeanCostUSD, CandCostUSD: c.MeanCostUSD, BaseDurationMS: b.MeanDurationMS, CandDurationMS: c.MeanDurationMS}
		d.CostDeltaUSD = diff(d.CandCostUSD, d.BaseCostUSD)
		d.DurationDeltaMS = diff(d.CandDurationMS, d.BaseDurationMS)
		d.TrialsRegressed, d.TrialsFixed = trialFlips(b, c)
		if _, err := stats.FisherOneSided(b.Passes, b.Trials, c.Passes, c.Trials); err != nil {
			return nil, fmt.Errorf("compare: case %q: %w", c.CaseID, err)
		}
		if d.Group == "" {
			d.Group = b.Group
		} else if b.Group != "" && b.Group != c.Group {
			cmp.Warnings = append(cmp.Warnings, fmt.Sprintf("case %q: group %q in the baseline, %q in the candidate; the candidate's is used", c.CaseID, b.Group, c.Group))
		}
		grouped = grouped || d.Group != ""
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
		groups = append(groups, d.Group)
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
		cmp.IntervalTrials = cmp.TrialsPerCase
		if d := cmp.CaseDispersion; d != nil && d.Estimate > 1 {
			cmp.IntervalTrials = math.Max(1, cmp.TrialsPerCase/d.Estimate)
		}
		for _, x := range []struct {
			b, c []float64
			iv   **stats.Interval
			mde  **float64
			name string
		}{{br, cr, &cmp.PassRateDelta, &cmp.PassRateMDE, "pass rate"}, {bs, cs, &cmp.MeanDelta, &cmp.ScoreMDE, "mean score"}} {
			iv, err := pairedInterval(x.b, x.c, groups, grouped, cmp.IntervalTrials, cfg.Level)
			if err != nil {
				return nil, fmt.Errorf("compare: %s: %w", x.name, err)
			}
			*x.iv = &iv
			if m := iv.MinDetectableDrop(0, cfg.Power); !math.IsInf(m, 0) {
				*x.mde = ptr(m)
			}
		}
	}
	if iv := cmp.PassRateDelta; grouped && iv != nil && iv.Clusters == 0 {
		cmp.Warnings = append(cmp.Warnings, "every paired case is in one group: a cluster-robust interval needs at least 2 groups, so the suite intervals treat cases as independent and are too narrow if the group shares a per-run shock")
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

// pairedInterval is the paired delta interval: cluster-robust over the
// cases' groups when any case declares one (and there are at least two),
// else the per-case interval.
func pairedInterval(base, cand []float64, groups []string, grouped bool, trials, level float64) (stats.Interval, error) {
	if grouped {
		return stats.ClusteredPairedDeltaInterval(base, cand, groups, trials, level)
	}
	return stats.PairedDeltaInterval(base, cand, trials, level)
}

// caseVerdicts tests every case, corrects the p-values across cases and
// sets each case's verdict. Both directions are tested at CaseAlpha.
//
// Trials of one case in one run are not independent (they share that
// run's state of the case), so Fisher's test on trial counts would
// false-alarm; the counts are first deflated by the run-to-run design
// effect estimated across cases (stats.EstimateDispersion, its upper
// bound). With both sides scripted the trials are deterministic and a
// single flipped trial is a real change.
func (cmp *Comparison) caseVerdicts(cfg Config) error {
	pairs := make([]stats.Pair, len(cmp.Pairs))
	for i, d := range cmp.Pairs {
		pairs[i] = stats.Pair{BasePass: d.BasePasses, BaseN: d.BaseTrials, CandPass: d.CandPasses, CandN: d.CandTrials}
	}
	worse := make([]float64, len(cmp.Pairs))
	better := make([]float64, len(cmp.Pairs))
	phi := 1.0
	if !cmp.Deterministic {
		disp, err := stats.EstimateDispersion(pairs)
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		cmp.CaseDispersion, phi = &disp, disp.Upper
	}
	for i, p := range pairs {
		w, err := stats.OverdispersedFisher(p, phi)
		if err != nil {
			return fmt.Errorf("compare: case %q: %w", cmp.Pairs[i].CaseID, err)
		}
		b, err := stats.OverdispersedFisher(stats.Pair{BasePass: p.CandPass, BaseN: p.CandN, CandPass: p.BasePass, CandN: p.BaseN}, phi)
		if err != nil {
			return fmt.Errorf("compare: case %q: %w", cmp.Pairs[i].CaseID, err)
		}
		worse[i], better[i] = w, b
		cmp.Pairs[i].PValue = w
	}
	aw, err := stats.Adjust(worse, cfg.CaseCorrection)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	ab, err := stats.Adjust(better, cfg.CaseCorrection)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if err := cmp.describeCaseTest(pairs, phi, cfg); err != nil {
		return err
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

// describeCaseTest sets CaseTest and CaseTestCanFire: what the per-case
// test assumes, the design effect it used, and whether any outcome at
// these trial counts could reach the corrected alpha.
func (cmp *Comparison) describeCaseTest(pairs []stats.Pair, phi float64, cfg Config) error {
	if cmp.Deterministic {
		cmp.CaseTest = "both runs scripted (deterministic): a case regressed when a trial that passed in the baseline fails in the candidate (same trial index)"
		cmp.CaseTestCanFire = len(pairs) > 0
		return nil
	}
	corr := fmt.Sprintf("%s-corrected across %d cases, alpha %g", correctionName(cfg.CaseCorrection), len(pairs), cfg.CaseAlpha)
	lo, hi := trialRange(pairs)
	trials := strconv.Itoa(lo)
	if hi != lo {
		trials = fmt.Sprintf("%d–%d", lo, hi)
	}
	d := cmp.CaseDispersion
	var how string
	if phi <= 1 {
		how = fmt.Sprintf("one-sided Fisher exact test per case (run-to-run design effect %.2f, %.0f%% upper bound %.2f, estimated across %d cases that vary: trials count as independent)",
			d.Estimate, 100*stats.DispersionUpperQuantile, d.Upper, d.Cases)
	} else {
		how = fmt.Sprintf("one-sided Fisher exact test per case on pass counts deflated by the run-to-run design effect %.2f (%.0f%% upper bound; estimate %.2f across %d cases that vary): %s trials per run count as %s",
			phi, 100*stats.DispersionUpperQuantile, d.Estimate, d.Cases, trials, effRange(lo, hi, phi))
	}
	cmp.CaseTest = how + ", " + corr
	if len(pairs) == 0 {
		return nil
	}
	smallest, err := stats.SmallestAdjusted(pairs, phi, cfg.CaseCorrection)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	cmp.CaseTestCanFire = smallest < cfg.CaseAlpha
	if !cmp.CaseTestCanFire {
		cmp.CaseTest = fmt.Sprintf("the per-case test cannot fire at %s trials per case (even every case going from all passed to all failed reaches only p = %.3g after correction, needs < %g; more trials, or fewer cases, would let it); %s",
			trials, smallest, cfg.CaseAlpha, cmp.CaseTest)
	}
	return nil
}

// trialRange is the fewest and most trials a side has in any pair.
func trialRange(pairs []stats.Pair) (lo, hi int) {
	for i, p := range pairs {
		a, b := min(p.BaseN, p.CandN), max(p.BaseN, p.CandN)
		if i == 0 || a < lo {
			lo = a
		}
		if b > hi {
			hi = b
		}
	}
	return lo, hi
}

// effRange is how many effective trials lo–hi trials count as.
func effRange(lo, hi int, phi float64) string {
	e := func(n int) int { return stats.Pair{BaseN: n, CandN: n}.Effective(phi).BaseN }
	if e(lo) == e(hi) {
		return strconv.Itoa(e(lo))
	}
	return fmt.Sprintf("%d–%d", e(lo), e(hi))
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
