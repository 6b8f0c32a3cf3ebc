// Package gate applies a CI policy to a scored candidate run and its
// comparison with a baseline, and says pass or fail with one line per check.
//
// The policy file is JSON (see docs/scoring.md). Every check is optional;
// an empty policy passes everything except must-pass cases flagged in the
// case file, which always count.
package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/stats"
)

// Metrics a delta rule can decide on.
const (
	MetricPassRate  = "pass_rate"  // per-case share of trials that passed (the outcome)
	MetricMeanScore = "mean_score" // per-case mean score (outcome plus partial credit)
)

// DeltaRule decides on the paired interval of one metric's delta.
type DeltaRule struct {
	// Metric is MetricPassRate (default) or MetricMeanScore.
	Metric string `json:"metric"`
	// Margin (≥ 0) is the drop that counts: Regression fails when the
	// whole interval lies below −Margin; NonInferiority fails unless the
	// whole interval lies above −Margin.
	Margin float64 `json:"margin"`
}

// CaseRule fails the gate when more than Max cases regressed by their own
// trials (scorer.Comparison.Regressed).
type CaseRule struct {
	// Alpha is the per-case test's level after correction (default 0.05).
	Alpha float64 `json:"alpha"`
	// Correction is "holm" (default: family-wise) or "bh" (false
	// discovery rate).
	Correction string `json:"correction"`
	Max        int    `json:"max"`
}

// Policy is a gate policy. Pointers are optional checks: nil means "not
// checked".
type Policy struct {
	// Regression fails when the paired interval of the metric's delta lies
	// wholly below −margin: the evidence says the candidate is worse. Its
	// false-alarm rate when nothing changed is at most (1 − confidence)/2.
	Regression *DeltaRule `json:"regression"`
	// NonInferiority fails unless the interval lies wholly above −margin:
	// the candidate must show it is at most margin worse. An explicit
	// choice: a suite too small to resolve the margin fails it even when
	// nothing changed, and the gate says so.
	NonInferiority *DeltaRule `json:"non_inferiority"`
	// CaseRegressions counts cases whose own trials say they regressed.
	CaseRegressions *CaseRule `json:"case_regressions"`
	// ScriptedExact (default true): when both runs are scripted
	// (deterministic), a case regresses when any trial that passed now
	// fails, and CaseRegressions counts those. false: scripted runs are
	// tested as if random.
	ScriptedExact *bool `json:"scripted_exact"`
	// MaxDetectableDrop fails when the comparison cannot detect a drop of
	// this size in the regression metric with 80% power: the suite is too
	// small for the promise the policy makes.
	MaxDetectableDrop *float64 `json:"max_detectable_drop"`

	// Legacy checks, not calibrated for random trials (docs/scoring.md):
	// MinDeltaLower is non-inferiority on the mean score with margin
	// −value; MaxNewFailures counts every all-trials flip, noise included.
	MinDeltaLower  *float64 `json:"min_delta_lower"`
	MaxNewFailures *int     `json:"max_new_failures"`
	// McNemarAlpha fails the gate when the exact McNemar test finds more
	// regressions than fixes at p < alpha (one-sided error ≤ alpha/2).
	McNemarAlpha *float64 `json:"mcnemar_alpha"`
	// MustPass lists cases that must pass in the candidate (every trial),
	// in addition to cases whose case-file entry sets must_pass.
	MustPass []string `json:"must_pass"`
	// MinPassRate is the lowest acceptable share of candidate cases passing
	// (per-case pass rate averaged over cases): an absolute requirement,
	// not a test of change.
	MinPassRate *float64 `json:"min_pass_rate"`
	// MaxMeanCostUSD caps the candidate's mean cost per trial. Unknown cost
	// fails this check (it cannot be shown to hold).
	MaxMeanCostUSD *float64 `json:"max_mean_cost_usd"`
	// MaxCostIncreasePct and MaxDurationIncreasePct cap the change of mean
	// per-trial cost and duration over the paired cases.
	MaxCostIncreasePct     *float64 `json:"max_cost_increase_pct"`
	MaxDurationIncreasePct *float64 `json:"max_duration_increase_pct"`
	// FailOnMissing fails when a baseline case has no candidate trials.
	FailOnMissing bool `json:"fail_on_missing"`
	// Confidence is the level of every interval (default 0.95).
	Confidence float64 `json:"confidence"`
	// Resamples is refused: intervals are analytic since the bootstrap
	// was replaced; the key is kept only to say so.
	Resamples int `json:"resamples"`
}

// Validate reports every problem, naming the policy key.
func (p *Policy) Validate() error {
	var errs []error
	for key, r := range map[string]*DeltaRule{"regression": p.Regression, "non_inferiority": p.NonInferiority} {
		if r == nil {
			continue
		}
		if r.Metric != "" && r.Metric != MetricPassRate && r.Metric != MetricMeanScore {
			errs = append(errs, fmt.Errorf("%s.metric: %q, want %q or %q", key, r.Metric, MetricPassRate, MetricMeanScore))
		}
		if math.IsNaN(r.Margin) || r.Margin < 0 || r.Margin >= 1 {
			errs = append(errs, fmt.Errorf("%s.margin: %v, must be in [0, 1) (a drop on a [0, 1] metric)", key, r.Margin))
		}
	}
	if r := p.CaseRegressions; r != nil {
		if r.Alpha != 0 && !(r.Alpha > 0 && r.Alpha < 1) {
			errs = append(errs, fmt.Errorf("case_regressions.alpha: %v, must be in (0, 1)", r.Alpha))
		}
		if r.Correction != "" && r.Correction != stats.Holm && r.Correction != stats.BenjaminiHochberg {
			errs = append(errs, fmt.Errorf("case_regressions.correction: %q, want %q or %q", r.Correction, stats.Holm, stats.BenjaminiHochberg))
		}
		if r.Max < 0 {
			errs = append(errs, fmt.Errorf("case_regressions.max: %d, must be non-negative", r.Max))
		}
	}
	if v := p.MaxDetectableDrop; v != nil && !(*v > 0 && *v <= 1) {
		errs = append(errs, fmt.Errorf("max_detectable_drop: %v, must be in (0, 1]", *v))
	}
	if v := p.MaxDetectableDrop; v != nil && p.Regression == nil {
		errs = append(errs, errors.New("max_detectable_drop: needs a regression rule (it is stated for its metric and margin)"))
	}
	if v := p.MinDeltaLower; v != nil && (math.IsNaN(*v) || *v < -1 || *v > 1) {
		errs = append(errs, fmt.Errorf("min_delta_lower: %v, must be in [-1, 1] (scores are on [0, 1])", *v))
	}
	if v := p.MaxNewFailures; v != nil && *v < 0 {
		errs = append(errs, fmt.Errorf("max_new_failures: %d, must be non-negative", *v))
	}
	if v := p.McNemarAlpha; v != nil && !(*v > 0 && *v < 1) {
		errs = append(errs, fmt.Errorf("mcnemar_alpha: %v, must be in (0, 1)", *v))
	}
	if v := p.MinPassRate; v != nil && !(*v >= 0 && *v <= 1) {
		errs = append(errs, fmt.Errorf("min_pass_rate: %v, must be in [0, 1]", *v))
	}
	for k, v := range map[string]*float64{"max_mean_cost_usd": p.MaxMeanCostUSD, "max_cost_increase_pct": p.MaxCostIncreasePct, "max_duration_increase_pct": p.MaxDurationIncreasePct} {
		if v != nil && (math.IsNaN(*v) || (k == "max_mean_cost_usd" && *v < 0)) {
			errs = append(errs, fmt.Errorf("%s: %v is not a valid limit", k, *v))
		}
	}
	if p.Confidence != 0 && !(p.Confidence > 0 && p.Confidence < 1) {
		errs = append(errs, fmt.Errorf("confidence: %v, must be in (0, 1)", p.Confidence))
	}
	if p.Resamples != 0 {
		errs = append(errs, fmt.Errorf("resamples: %d: intervals are analytic now (adjusted t / paired adjusted Wald, see docs/scoring.md), nothing is resampled; remove the key", p.Resamples))
	}
	for i, c := range p.MustPass {
		if strings.TrimSpace(c) == "" {
			errs = append(errs, fmt.Errorf("must_pass[%d]: empty case id", i))
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// ErrConflict is wrapped by Apply's errors: the policy and the caller's
// explicit settings disagree.
var ErrConflict = errors.New("policy conflicts with a flag")

// Explicit says which scoring settings the caller set on purpose (flags),
// so Apply refuses a policy that says otherwise instead of silently
// overriding either.
type Explicit struct {
	Level, CaseAlpha, CaseCorrection bool
}

// Apply sets the policy's statistical settings on a scoring config:
// confidence → Level, case_regressions' alpha and correction. A setting
// the caller gave explicitly (ex) that the policy contradicts is an error
// wrapping ErrConflict.
func (p *Policy) Apply(cfg *scorer.Config, ex Explicit) error {
	if p.Confidence != 0 {
		if ex.Level && cfg.Level != p.Confidence {
			return fmt.Errorf("%w: the policy says confidence %g, --level says %g (drop one)", ErrConflict, p.Confidence, cfg.Level)
		}
		cfg.Level = p.Confidence
	}
	if p.ScriptedExact != nil {
		cfg.ScriptedExact = *p.ScriptedExact
	}
	if r := p.CaseRegressions; r != nil {
		if r.Alpha != 0 {
			if ex.CaseAlpha && cfg.CaseAlpha != r.Alpha {
				return fmt.Errorf("%w: the policy says case_regressions.alpha %g, --case-alpha says %g (drop one)", ErrConflict, r.Alpha, cfg.CaseAlpha)
			}
			cfg.CaseAlpha = r.Alpha
		}
		if r.Correction != "" {
			if ex.CaseCorrection && cfg.CaseCorrection != r.Correction {
				return fmt.Errorf("%w: the policy says case_regressions.correction %q, --case-correction says %q (drop one)", ErrConflict, r.Correction, cfg.CaseCorrection)
			}
			cfg.CaseCorrection = r.Correction
		}
	}
	return nil
}

// FalseAlarmBound is the policy's chance of failing a candidate that
// changed nothing, by the union bound over its calibrated change tests
// (regression: (1 − level)/2; case regressions with max 0: alpha;
// McNemar: alpha/2), and the checks it cannot bound (legacy checks that
// count noise). Absolute requirements (must-pass, min pass rate, costs)
// are not change tests and are not counted.
func (p *Policy) FalseAlarmBound(level float64) (bound float64, parts []string, unbounded []string) {
	if p.Confidence != 0 {
		level = p.Confidence
	}
	if p.Regression != nil {
		a := (1 - level) / 2
		bound += a
		parts = append(parts, fmt.Sprintf("regression %.1f%%", 100*a))
	}
	if r := p.CaseRegressions; r != nil {
		a := r.Alpha
		if a == 0 {
			a = 0.05
		}
		bound += a
		parts = append(parts, fmt.Sprintf("case regressions %.1f%%", 100*a))
	}
	if v := p.McNemarAlpha; v != nil {
		bound += *v / 2
		parts = append(parts, fmt.Sprintf("McNemar %.1f%%", 100**v/2))
	}
	if p.NonInferiority != nil {
		unbounded = append(unbounded, "non_inferiority (fails an unchanged candidate whenever the suite cannot resolve its margin)")
	}
	if p.MinDeltaLower != nil {
		unbounded = append(unbounded, "min_delta_lower (non-inferiority: fails an unchanged candidate whenever the suite cannot resolve its margin)")
	}
	if p.MaxNewFailures != nil {
		unbounded = append(unbounded, "max_new_failures (counts every flip, including noise)")
	}
	return math.Min(1, bound), parts, unbounded
}

// CheckBounds is each calibrated change check's own false-alarm bound, by
// check name (the terms FalseAlarmBound adds up): what calibration holds
// each check to.
func (p *Policy) CheckBounds(level float64) map[string]float64 {
	if p.Confidence != 0 {
		level = p.Confidence
	}
	m := map[string]float64{}
	if p.Regression != nil {
		m["regression"] = (1 - level) / 2
	}
	if r := p.CaseRegressions; r != nil {
		m["case_regressions"] = r.Alpha
		if r.Alpha == 0 {
			m["case_regressions"] = 0.05
		}
	}
	if v := p.McNemarAlpha; v != nil {
		m["mcnemar_alpha"] = *v / 2
	}
	return m
}

// ParseNamed decodes and validates the policy file called name (its path,
// as the user gave it), whose bytes the caller read: errors start
// "policy NAME: ". Like Parse it is strict: unknown keys are errors.
func ParseNamed(data []byte, name string) (*Policy, error) {
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return p, nil
}

// Parse decodes and validates a policy; unknown keys are errors. Its errors
// name the key, not the file (ParseNamed adds the file).
func Parse(b []byte) (*Policy, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" { // the document itself: [], "x", 1
				return nil, fmt.Errorf("wrong type: got JSON %s, want an object", te.Value)
			}
			return nil, fmt.Errorf("%s: wrong type: got JSON %s, want %s", te.Field, te.Value, te.Type)
		}
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty policy (write {} for no checks)")
		}
		return nil, fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the policy object")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Check is one evaluated rule.
type Check struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
}

// Result is the gate's verdict.
type Result struct {
	Passed bool    `json:"passed"`
	Checks []Check `json:"checks"`
	// FalseAlarmBound is the chance this policy fails a candidate that
	// changed nothing (Policy.FalseAlarmBound), from FalseAlarmParts;
	// Unbounded lists checks whose false alarms it cannot bound.
	FalseAlarmBound float64  `json:"false_alarm_bound"`
	FalseAlarmParts []string `json:"false_alarm_parts"`
	Unbounded       []string `json:"unbounded_checks"`
}

// Failed lists the checks that failed.
func (r *Result) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.Passed {
			out = append(out, c)
		}
	}
	return out
}

// Evaluate applies the policy. cmp may be nil when there is no baseline;
// checks that need one then fail with a clear detail rather than passing.
func Evaluate(p *Policy, cand *scorer.Suite, cmp *scorer.Comparison) *Result {
	r := &Result{Passed: true, Checks: []Check{}}
	r.FalseAlarmBound, r.FalseAlarmParts, r.Unbounded = p.FalseAlarmBound(cand.Level)
	if r.FalseAlarmParts == nil {
		r.FalseAlarmParts = []string{}
	}
	if r.Unbounded == nil {
		r.Unbounded = []string{}
	}
	add := func(name string, ok bool, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, Passed: ok, Detail: fmt.Sprintf(format, args...)})
		if !ok {
			r.Passed = false
		}
	}
	needBase := func(name string) bool {
		if cmp == nil {
			add(name, false, "needs a baseline (--baseline / --against)")
			return false
		}
		return true
	}

	deltaOf := func(r *DeltaRule) (*stats.Interval, *float64, string) {
		if r.Metric == MetricMeanScore {
			return cmp.MeanDelta, cmp.ScoreMDE, "mean score"
		}
		return cmp.PassRateDelta, cmp.PassRateMDE, "pass rate"
	}
	if r := p.Regression; r != nil && needBase("regression") {
		iv, _, name := deltaOf(r)
		if iv == nil {
			add("regression", false, "no case is in both runs, so there is no interval")
		} else {
			mde := iv.MinDetectableDrop(r.Margin, cmp.Power) // +Inf with one case: printed as such
			add("regression", !(iv.Upper < -r.Margin), "%s delta %+.3f, %.0f%% interval [%+.3f, %+.3f] over %d cases%s; fails when the whole interval is below %s (false alarms ≤ %.1f%% when nothing changed); this comparison detects a drop of %.3f with %.0f%% power",
				name, iv.Estimate, 100*iv.Level, iv.Lower, iv.Upper, iv.SampleSize, clustered(iv), negMargin(r.Margin), 100*(1-iv.Level)/2, mde, 100*cmp.Power)
			if v := p.MaxDetectableDrop; v != nil {
				add("max_detectable_drop", mde <= *v, "smallest %s drop detected with %.0f%% power: %.3f; the policy requires %.3f%s",
					name, 100*cmp.Power, mde, *v, map[bool]string{true: "", false: fmt.Sprintf(" (needs about %d cases at this spread)", casesFor(iv, r.Margin, *v, cmp.Power))}[mde <= *v])
			}
		}
	}
	if r := p.NonInferiority; r != nil && needBase("non_inferiority") {
		iv, _, name := deltaOf(r)
		if iv == nil {
			add("non_inferiority", false, "no case is in both runs, so there is no interval")
		} else {
			ok := iv.Lower >= -r.Margin
			detail := fmt.Sprintf("%s delta %+.3f, %.0f%% interval [%+.3f, %+.3f]; passes only when the whole interval is above %s",
				name, iv.Estimate, 100*iv.Level, iv.Lower, iv.Upper, negMargin(r.Margin))
			if res := resolvable(iv, r.Margin, cmp.Power); res != "" {
				detail += "; " + res
			}
			add("non_inferiority", ok, "%s", detail)
		}
	}
	if r := p.CaseRegressions; r != nil && needBase("case_regressions") {
		detail := fmt.Sprintf("%d cases regressed by their own trials %v (allowed %d; %s)", len(cmp.Regressed), cmp.Regressed, r.Max, cmp.CaseTest)
		if n := len(cmp.WithinNoise); n > 0 {
			detail += fmt.Sprintf("; %d changed within noise %v", n, cmp.WithinNoise)
		}
		if n := len(cmp.BaseFlaky); n > 0 {
			detail += fmt.Sprintf("; %d flaky in the baseline %v", n, cmp.BaseFlaky)
		}
		add("case_regressions", len(cmp.Regressed) <= r.Max, "%s", detail)
	}
	if v := p.MinDeltaLower; v != nil && needBase("min_delta_lower") {
		if cmp.MeanDelta == nil {
			add("min_delta_lower", false, "no case is in both runs, so there is no interval")
		} else {
			iv := cmp.MeanDelta
			detail := fmt.Sprintf("mean score delta %+.4f, %.0f%% interval [%+.4f, %+.4f]; lower bound must be ≥ %+.4f (non-inferiority, legacy)",
				iv.Estimate, 100*iv.Level, iv.Lower, iv.Upper, *v)
			if res := resolvable(iv, -*v, cmp.Power); res != "" && *v < 0 {
				detail += "; " + res
			}
			add("min_delta_lower", iv.Lower >= *v, "%s", detail)
		}
	}
	if v := p.MaxNewFailures; v != nil && needBase("max_new_failures") {
		add("max_new_failures", len(cmp.NewFailures) <= *v, "%d new failures %v (allowed %d; legacy: counts every all-trials flip, noise included)", len(cmp.NewFailures), cmp.NewFailures, *v)
	}
	if v := p.McNemarAlpha; v != nil && needBase("mcnemar_alpha") {
		m := cmp.McNemar
		bad := m.Regressed > m.Fixed && m.PValue < *v
		add("mcnemar_alpha", !bad, "exact McNemar: %d regressed, %d fixed, p = %.4g (fails when more regressed than fixed and p < %g)", m.Regressed, m.Fixed, m.PValue, *v)
	}

	// Must-pass: the policy's list plus the case file's flags.
	must := map[string]bool{}
	for _, c := range p.MustPass {
		must[c] = true
	}
	for _, id := range cand.MustPass {
		must[id] = true
	}
	if len(must) > 0 {
		byID := map[string]*scorer.CaseResult{}
		for i := range cand.Cases {
			byID[cand.Cases[i].CaseID] = &cand.Cases[i]
		}
		var failing, absent []string
		for _, id := range sortedKeys(must) {
			c, ok := byID[id]
			switch {
			case !ok:
				absent = append(absent, id)
			case !c.Passed:
				failing = append(failing, fmt.Sprintf("%s (%d/%d trials passed)", id, c.Passes, c.Trials))
			}
		}
		ok := len(failing) == 0 && len(absent) == 0
		detail := fmt.Sprintf("%d must-pass cases (strict: every trial must pass, no noise allowance)", len(must))
		if len(failing) > 0 {
			detail += "; failing: " + strings.Join(failing, ", ")
		}
		if len(absent) > 0 {
			detail += "; no trials: " + strings.Join(absent, ", ")
		}
		add("must_pass", ok, "%s", detail)
	}
	if v := p.MinPassRate; v != nil {
		if cand.PassRate == nil {
			add("min_pass_rate", false, "the candidate has no scored cases")
		} else {
			add("min_pass_rate", cand.PassRate.Estimate >= *v, "pass rate %.4f (%.0f%% interval [%.4f, %.4f]); must be ≥ %.4f",
				cand.PassRate.Estimate, 100*cand.PassRate.Level, cand.PassRate.Lower, cand.PassRate.Upper, *v)
		}
	}
	if v := p.MaxMeanCostUSD; v != nil {
		if cand.TotalCostUSD == nil || cand.NTrials == 0 {
			add("max_mean_cost_usd", false, "candidate cost unknown for %d trials (known part $%.6f): cannot show it is under $%g", cand.UnknownCostTrials, cand.KnownCostUSD, *v)
		} else {
			mean := *cand.TotalCostUSD / float64(cand.NTrials)
			add("max_mean_cost_usd", mean <= *v, "mean cost per trial $%.6f; ceiling $%g", mean, *v)
		}
	}
	if v := p.MaxCostIncreasePct; v != nil && needBase("max_cost_increase_pct") {
		if cmp.CostChangePct == nil {
			add("max_cost_increase_pct", false, "cost change unknown (a side has unknown or zero cost)")
		} else {
			add("max_cost_increase_pct", *cmp.CostChangePct <= *v, "mean cost per trial %+.1f%% (allowed %+.1f%%)", *cmp.CostChangePct, *v)
		}
	}
	if v := p.MaxDurationIncreasePct; v != nil && needBase("max_duration_increase_pct") {
		if cmp.DurationChangePct == nil {
			add("max_duration_increase_pct", false, "duration change unknown (a side has unrecorded durations)")
		} else {
			add("max_duration_increase_pct", *cmp.DurationChangePct <= *v, "mean duration per trial %+.1f%% (allowed %+.1f%%)", *cmp.DurationChangePct, *v)
		}
	}
	if cmp != nil && len(cmp.MissingFromCandidate) > 0 {
		add("missing_from_candidate", !p.FailOnMissing, "%d baseline cases have no candidate trials: %v%s", len(cmp.MissingFromCandidate), cmp.MissingFromCandidate,
			map[bool]string{true: " (fail_on_missing)", false: " (reported, not a regression)"}[p.FailOnMissing])
	}
	return r
}

// clustered says when an interval's variance is cluster-robust over the
// cases' declared groups.
func clustered(iv *stats.Interval) string {
	if iv.Clusters == 0 {
		return ""
	}
	return fmt.Sprintf(" (cluster-robust over %d groups)", iv.Clusters)
}

// negMargin prints −margin ("0" for no margin, not "-0.000").
func negMargin(m float64) string {
	if m == 0 {
		return "0"
	}
	return fmt.Sprintf("%+.3f", -m)
}

// resolvable says whether a non-inferiority margin can be shown at this
// spread: an unchanged candidate passes "lower bound ≥ −margin" with the
// comparison's power only if the half-width fits inside the margin.
func resolvable(iv *stats.Interval, margin, power float64) string {
	need := iv.MinDetectableDrop(0, power) // half-width plus the power term
	if margin >= need {
		return fmt.Sprintf("the suite resolves this margin (an unchanged candidate passes with ≥ %.0f%% power)", 100*power)
	}
	return fmt.Sprintf("the suite cannot resolve this margin: an unchanged candidate passes with < %.0f%% power; it needs a margin of %.3f, or about %d cases at this spread",
		100*power, need, casesFor(iv, 0, margin, power))
}

// casesFor is the number of cases at which the minimum detectable drop
// (at margin) would be target, scaling the standard error as 1/√n.
func casesFor(iv *stats.Interval, margin, target, power float64) int {
	mde := iv.MinDetectableDrop(margin, power)
	if target <= margin || math.IsInf(mde, 0) {
		return 0
	}
	k := (mde - margin) / (target - margin)
	return int(math.Ceil(float64(iv.SampleSize) * k * k))
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
