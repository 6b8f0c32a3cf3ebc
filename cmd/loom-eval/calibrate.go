package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/calibration"
	"github.com/loomwork/loomwork/scorer/report"
)

// runCalibrate simulates random agents through the real gate and reports
// false alarms, detection and interval coverage for a policy. Exit 1 when a
// calibration requirement is violated (see calibration.Result.Check).
func (m *Main) runCalibrate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("calibrate", "calibrate [--policy POLICY.json] [--against OLD.json] [--reps N] [--seed N] [--cases 5,20,100 --trials 1,3 --effects 0,-0.05,-0.15 --icc 0,0.25 --groups 10 --shock-sd 0.5] [--format text|json|markdown]")
	policyPath := fs.String("policy", "baselines/policy.json", "gate policy to calibrate")
	against := fs.String("against", "", "a second policy gated on the same draws, side by side (e.g. the old one)")
	reps := fs.Int("reps", 200, "simulated baseline/candidate pairs per design")
	seed := fs.Uint64("seed", 1, "simulation seed (same seed, same table)")
	casesF := fs.String("cases", "", "comma-separated case counts (default: the documented grid)")
	trialsF := fs.String("trials", "", "comma-separated trials per case (with --cases)")
	effectsF := fs.String("effects", "0,-0.05,-0.15", "comma-separated true effects on pass probability (with --cases)")
	iccF := fs.String("icc", "0", "comma-separated within-case intra-class correlations of trials in one run, 0 to 1 (with --cases)")
	groups := fs.Int("groups", 0, "split the cases into this many declared groups (with --cases; 0: none)")
	shockSD := fs.Float64("shock-sd", 0, "SD of each group's per-run shock on the logit scale (with --groups)")
	lo := fs.Float64("difficulty-lo", 0.2, "lowest case pass probability")
	hi := fs.Float64("difficulty-hi", 0.9, "highest case pass probability")
	bootstrap := fs.Bool("bootstrap", false, "also measure the percentile bootstrap's coverage on the same draws (slow)")
	out := m.addOutputFlags(fs, "text", "json", "markdown")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("calibrate: unexpected argument %q", fs.Arg(0))
	}
	format, err := out.Format()
	if err != nil {
		return err
	}
	cfg := calibration.Config{Reps: *reps, Seed: *seed, DifficultyLo: *lo, DifficultyHi: *hi, Progress: m.Stderr, Designs: append(calibration.DefaultDesigns(), calibration.CorrelatedDesigns()...), Bootstrap: *bootstrap}
	if *casesF != "" || *trialsF != "" {
		ns, err := intList("calibrate: --cases", *casesF)
		if err != nil {
			return err
		}
		ts, err := intList("calibrate: --trials", *trialsF)
		if err != nil {
			return err
		}
		es, err := floatList("calibrate: --effects", *effectsF)
		if err != nil {
			return err
		}
		iccs, err := floatList("calibrate: --icc", *iccF)
		if err != nil {
			return err
		}
		cfg.Designs = calibration.Grid(ns, ts, es, iccs, *groups, *shockSD)
	} else if *iccF != "0" || *groups != 0 || *shockSD != 0 {
		return usageError("calibrate: --icc, --groups and --shock-sd need --cases and --trials (the default grid has its own correlated designs)")
	}
	p, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	cfg.Policies = append(cfg.Policies, calibration.NamedPolicy{Name: policyName(*policyPath), Policy: p})
	if *against != "" {
		q, err := loadPolicy(*against)
		if err != nil {
			return err
		}
		cfg.Policies = append(cfg.Policies, calibration.NamedPolicy{Name: policyName(*against), Policy: q})
	}
	if err := cfg.Validate(); err != nil {
		return usageError("calibrate: %v", err)
	}
	res, err := calibration.Run(ctx, cfg)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	violations := res.Check()
	switch format {
	case "json":
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	case "markdown":
		err = res.WriteMarkdown(m.Stdout)
	default:
		err = res.WriteText(m.Stdout)
	}
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	if len(violations) > 0 {
		var msgs []string
		for _, v := range violations {
			msgs = append(msgs, v.Error())
		}
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("calibrate: %d requirements violated: %s", len(violations), strings.Join(msgs, "; "))}
	}
	return nil
}

// runPlan says how many cases × trials a suite needs to detect a drop.
func (m *Main) runPlan(ctx context.Context, args []string) error {
	fs := m.newFlagSet("plan", "plan --baseline TRIALS.jsonl --effect 0.05 [--cases CASES.jsonl] [--policy POLICY.json] [--power 0.8] [--designs 10,20,50,100,200,500,1000] [--trials 1,3,5] [--reps N] [--seed N] [--json]")
	var f scoreFlags
	f.register(m, fs)
	baseline := fs.String("baseline", "", "scored baseline trials JSONL (required): its cases' pass rates are simulated from")
	effect := fs.Float64("effect", 0, "pass-rate drop to detect, e.g. 0.05 (required)")
	policyPath := fs.String("policy", "baselines/policy.json", "gate policy that decides")
	power := fs.Float64("power", 0.8, "target power")
	designs := fs.String("designs", "10,20,50,100,200,500,1000", "comma-separated case counts to try")
	trialsF := fs.String("trials", "1,3,5", "comma-separated trials per case to try")
	reps := fs.Int("reps", 200, "simulated pairs per design")
	seed := fs.Uint64("seed", 1, "simulation seed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("plan: unexpected argument %q", fs.Arg(0))
	}
	if *baseline == "" || *effect == 0 {
		return usageError("plan: --baseline and --effect are required")
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	if f.format == report.Markdown || f.format == report.JUnit {
		return usageError("plan: --format %s is not available (text or json)", f.format)
	}
	policy, err := loadPolicy(*policyPath)
	if err != nil {
		return err
	}
	ns, err := intList("plan: --designs", *designs)
	if err != nil {
		return err
	}
	ts, err := intList("plan: --trials", *trialsF)
	if err != nil {
		return err
	}
	r, err := m.scoreOnly(ctx, &f, cfg, *baseline)
	if err != nil {
		return err
	}
	pl, err := calibration.RunPlan(ctx, calibration.PlanConfig{Baseline: r.Suite, Drop: *effect, Policy: policy, Cases: ns, Trials: ts, Power: *power, Reps: *reps, Seed: *seed, Progress: m.Stderr})
	if err != nil {
		return usageError("%v", err)
	}
	if f.format == report.JSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(pl)
	} else {
		err = pl.WriteText(m.Stdout)
	}
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return nil
}

// scoreOnly scores one trials file the way `score` does (cases, store,
// provenance) without writing a report.
func (m *Main) scoreOnly(ctx context.Context, f *scoreFlags, cfg scorer.Config, path string) (*report.Report, error) {
	return m.evaluateReport(ctx, f, cfg, path, "", nil)
}

// policyName names a policy in the table by its path, as given.
func policyName(path string) string { return path }

func intList(what, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, usageError("%s: %q is not a positive integer", what, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, usageError("%s: empty list", what)
	}
	return out, nil
}

func floatList(what, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, usageError("%s: %q is not a number", what, f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, usageError("%s: empty list", what)
	}
	return out, nil
}
