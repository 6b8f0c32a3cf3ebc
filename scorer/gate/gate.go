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
)

// Policy is a gate policy. Pointers are optional checks: nil means "not
// checked".
type Policy struct {
	// MinDeltaLower fails the gate when the lower bound of the paired
	// bootstrap interval of the mean score delta is below it (e.g. -0.02:
	// "we are confident the candidate is at most 0.02 worse").
	MinDeltaLower *float64 `json:"min_delta_lower"`
	// MaxNewFailures is the number of cases allowed to go from passing to
	// failing.
	MaxNewFailures *int `json:"max_new_failures"`
	// McNemarAlpha fails the gate when the exact McNemar test finds more
	// regressions than fixes at p < alpha.
	McNemarAlpha *float64 `json:"mcnemar_alpha"`
	// MustPass lists cases that must pass in the candidate, in addition to
	// cases whose case-file entry sets must_pass.
	MustPass []string `json:"must_pass"`
	// MinPassRate is the lowest acceptable share of candidate cases passing
	// (per-case pass rate averaged over cases).
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
	// Confidence and Resamples set the bootstrap (defaults 0.95, 10000).
	Confidence float64 `json:"confidence"`
	Resamples  int     `json:"resamples"`
}

// Validate reports every problem, naming the policy key.
func (p *Policy) Validate() error {
	var errs []error
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
	if p.Resamples != 0 && p.Resamples < 100 {
		errs = append(errs, fmt.Errorf("resamples: %d, need at least 100", p.Resamples))
	}
	for i, c := range p.MustPass {
		if strings.TrimSpace(c) == "" {
			errs = append(errs, fmt.Errorf("must_pass[%d]: empty case id", i))
		}
	}
	return errors.Join(errs...)
}

// Apply sets the policy's bootstrap settings on a scoring config.
func (p *Policy) Apply(cfg *scorer.Config) {
	if p.Confidence != 0 {
		cfg.Level = p.Confidence
	}
	if p.Resamples != 0 {
		cfg.Resamples = p.Resamples
	}
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

	if v := p.MinDeltaLower; v != nil && needBase("min_delta_lower") {
		if cmp.MeanDelta == nil {
			add("min_delta_lower", false, "no case is in both runs, so there is no interval")
		} else {
			iv := cmp.MeanDelta
			add("min_delta_lower", iv.Lower >= *v, "mean score delta %+.4f, %.0f%% interval [%+.4f, %+.4f]; lower bound must be ≥ %+.4f",
				iv.Estimate, 100*iv.Level, iv.Lower, iv.Upper, *v)
		}
	}
	if v := p.MaxNewFailures; v != nil && needBase("max_new_failures") {
		add("max_new_failures", len(cmp.NewFailures) <= *v, "%d new failures %v (allowed %d)", len(cmp.NewFailures), cmp.NewFailures, *v)
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
		detail := fmt.Sprintf("%d must-pass cases", len(must))
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

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
