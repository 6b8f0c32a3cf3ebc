package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/calibration"
	"github.com/loomwork/loomwork/scorer/report"
)

// calibrateFlags are `loom-eval calibrate`'s flags (the output flags
// aside).
type calibrateFlags struct {
	policyPath, against, casesF, trialsF, effectsF, iccF *string
	reps, groups                                         *int
	seed                                                 *uint64
	shockSD, lo, hi                                      *float64
	bootstrap                                            *bool
}

func (f *calibrateFlags) register(fs *flag.FlagSet) {
	f.policyPath = fs.String("policy", "baselines/policy.json", "gate policy to calibrate")
	f.against = fs.String("against", "", "a second policy gated on the same draws, side by side (e.g. the old one)")
	f.reps = fs.Int("reps", 200, "simulated baseline/candidate pairs per design")
	f.seed = fs.Uint64("seed", 1, "simulation seed (same seed, same table)")
	f.casesF = fs.String("cases", "", "comma-separated case counts (default: the documented grid)")
	f.trialsF = fs.String("trials", "", "comma-separated trials per case (with --cases)")
	f.effectsF = fs.String("effects", "0,-0.05,-0.15", "comma-separated true effects on pass probability (with --cases)")
	f.iccF = fs.String("icc", "0", "comma-separated within-case intra-class correlations of trials in one run, 0 to 1 (with --cases)")
	f.groups = fs.Int("groups", 0, "split the cases into this many declared groups (with --cases; 0: none)")
	f.shockSD = fs.Float64("shock-sd", 0, "SD of each group's per-run shock on the logit scale (with --groups)")
	f.lo = fs.Float64("difficulty-lo", 0.2, "lowest case pass probability")
	f.hi = fs.Float64("difficulty-hi", 0.9, "highest case pass probability")
	f.bootstrap = fs.Bool("bootstrap", false, "also measure the percentile bootstrap's coverage on the same draws (slow)")
}

// designs are the simulated designs: the grid --cases, --trials,
// --effects and --icc span, else the documented grid with its correlated
// designs.
func (f *calibrateFlags) designs() ([]calibration.Design, error) {
	if *f.casesF == "" && *f.trialsF == "" {
		if *f.iccF != "0" || *f.groups != 0 || *f.shockSD != 0 {
			return nil, usageError("calibrate: --icc, --groups and --shock-sd need --cases and --trials (the default grid has its own correlated designs)")
		}
		return append(calibration.DefaultDesigns(), calibration.CorrelatedDesigns()...), nil
	}
	ns, err := intList("calibrate: --cases", *f.casesF)
	if err != nil {
		return nil, err
	}
	ts, err := intList("calibrate: --trials", *f.trialsF)
	if err != nil {
		return nil, err
	}
	es, err := floatList("calibrate: --effects", *f.effectsF)
	if err != nil {
		return nil, err
	}
	iccs, err := floatList("calibrate: --icc", *f.iccF)
	if err != nil {
		return nil, err
	}
	return calibration.Grid(ns, ts, es, iccs, *f.groups, *f.shockSD), nil
}

// policies are --policy and (with --against) the second policy.
func (f *calibrateFlags) policies() ([]calibration.NamedPolicy, error) {
	p, err := loadPolicy(*f.policyPath)
	if err != nil {
		return nil, err
	}
	ps := []calibration.NamedPolicy{{Name: policyName(*f.policyPath), Policy: p}}
	if *f.against != "" {
		q, err := loadPolicy(*f.against)
		if err != nil {
			return nil, err
		}
		ps = append(ps, calibration.NamedPolicy{Name: policyName(*f.against), Policy: q})
	}
	return ps, nil
}

// runCalibrate simulates random agents through the real gate and reports
// false alarms, detection and interval coverage for a policy. Exit 1 when a
// calibration requirement is violated (see calibration.Result.Check).
func (m *Main) runCalibrate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("calibrate", "calibrate [--policy POLICY.json] [--against OLD.json] [--reps N] [--seed N] [--cases 5,20,100 --trials 1,3 --effects 0,-0.05,-0.15 --icc 0,0.25 --groups 10 --shock-sd 0.5] [--format text|json|markdown]")
	var f calibrateFlags
	f.register(fs)
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
	cfg := calibration.Config{Reps: *f.reps, Seed: *f.seed, DifficultyLo: *f.lo, DifficultyHi: *f.hi, Progress: m.Stderr, Bootstrap: *f.bootstrap}
	if cfg.Designs, err = f.designs(); err != nil {
		return err
	}
	if cfg.Policies, err = f.policies(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return usageError("calibrate: %v", err)
	}
	res, err := calibration.Run(ctx, cfg)
	if err != nil {
		return &ExitError{Code: ExitRuntimeErr, Err: err}
	}
	return m.writeCalibration(res, format)
}

// writeCalibration writes the result in format to stdout; a violated
// calibration requirement is a failure (exit 1).
func (m *Main) writeCalibration(res *calibration.Result, format string) error {
	violations := res.Check()
	var err error
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
