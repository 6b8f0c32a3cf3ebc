// Package ci is the CI recipe over a baselines folder (docs/baselines.md):
// one verdict from seven steps, each of which catches what the others
// cannot.
//
//  1. Strict replay of every committed journal, the tools re-executed
//     (retrieval and the sandbox) with the recorded model answers: the
//     current code must reproduce each journal. Every divergence — a
//     different step, or a tool whose result differs — is mapped to its
//     case and trial.
//  2. A fresh run of the scripted reference agents over the baseline cases
//     on the current code, with the settings `scripts/baselines.sh record`
//     used (deterministic journal clock, the agents' default context layer,
//     the baseline's trial count). The scripted policies are functions of
//     what they are shown, so a retrieval or sandbox change changes what
//     they read, run and cite — which replay cannot show, since it keeps
//     the recorded answers.
//  3. The fresh run scored and gated against the committed baseline trials
//     with the committed policy, through report.Evaluate (the path of
//     `loom-eval gate`), naming the cases that got worse.
//  4. The fresh run's verdicts compared with the committed trials',
//     trial by trial and grader by grader: both sides are scripted, so any
//     change, up or down, is a divergence (verdicts.go).
//  5. The committed baseline trials regraded (code graders in the sandbox,
//     judge graders with the scripted judge, including the judge graders
//     of judge.go on the research trials) and scored again, compared with
//     their committed verdicts, judge.jsonl and report.json: both sides of
//     the gate are graded and scored by the same code, so a grader or
//     scorer regression moves both alike; only the committed verdicts show
//     it (rescore.go).
//  6. The fresh runs' traces — exported by the OpenTelemetry SDK over OTLP
//     to the collector, in process — and the SDK traces of traces/ rolled
//     up and compared with rollups.jsonl (rollups.go).
//  7. The committed reranker scored on the judged set's gold queries and
//     compared with rerank.json (rerank.go): no reference agent reranks.
//
// The recipe passes only when every step did. It owns the steps, the
// verdict and the report (Write); Record writes the derived baselines
// (rollups.jsonl, rerank.json, judge.jsonl); `loom-eval ci` parses flags
// and wires the retrieval index and the sandbox.
package ci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/graders"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/grade"
	"github.com/loomwork/loomwork/scorer/report"
)

// ErrBadInput is wrapped by Run's errors that the inputs caused: a missing
// or malformed case, trial, journal or policy file. Other errors are
// operational (a sandbox that cannot start, I/O).
var ErrBadInput = errors.New("bad ci input")

// The files of a baselines folder the recipe reads.
const (
	CasesFile    = "cases.jsonl"
	BaselineFile = "baseline.trials.jsonl"
	JournalsDir  = "journals"
	PolicyFile   = "policy.json"
)

// Parts of the recipe, as Result.Failed names them.
const (
	PartReplay   = "replay"
	PartFresh    = "fresh"
	PartGate     = "gate"
	PartRescore  = "rescore"
	PartVerdicts = "verdicts"
	PartRollups  = "rollups"
	PartReranker = "reranker"
)

// Config configures Run.
type Config struct {
	// Dir is the baselines folder (cases.jsonl, baseline.trials.jsonl,
	// journals/*.jsonl). Required.
	Dir string
	// Policy gates the fresh run against the baseline. Required.
	Policy *gate.Policy
	// PolicyName names the policy in the report (its file).
	PolicyName string
	// Index answers the research agent's searches and reads, in the replay
	// and in the fresh run (e.g. a research.DatasetIndex over the judged
	// set the baseline was recorded on). Required.
	Index research.Index
	// Sandbox runs the coding agent's programs. Required.
	Sandbox coding.Sandbox
	// Retrieval is the retrieval service the reranker check searches in
	// rerank mode (research.DatasetIndex over Dataset). Required.
	Retrieval RetrievalService
	// Dataset is the judged set's folder (its gold queries and judgements
	// score the reranker check). Required.
	Dataset string
	// Graders runs the cases' code graders (the coding cases' hidden
	// tests); nil runs them in Sandbox under the coding agent's limits, as
	// `loom-eval score` does.
	Graders grade.CodeRunner
	// Scoring configures the scorer (seed, intervals); nil is
	// scorer.DefaultConfig. The policy's confidence and resamples apply on
	// top, as for `loom-eval gate`.
	Scoring *scorer.Config
	// WorkDir receives what the recipe writes: the replay's trial records
	// (replay.trials.jsonl), the fresh run's journals (fresh/*.jsonl) and
	// trial records (fresh.trials.jsonl). "" uses a temporary folder that
	// Run removes.
	WorkDir string
	// ToolPolicy authorizes the fresh runs' tool calls (package
	// agents/policy's Guard, recorded in each run as ToolPolicyName), as
	// `loom-eval run` does: the committed journals are recorded with the
	// built-in default policy, which `loom-eval ci` passes unless told
	// otherwise. nil: the fresh runs are not authorized (and differ from
	// journals recorded under a policy). The replay step needs none: it
	// re-decides with the policy each journal records.
	ToolPolicy     *policy.Rules
	ToolPolicyName string
	// Audit receives every fresh decision (nil: none).
	Audit *policy.AuditLog
	// Progress receives one line per step started and finished (nil: none).
	Progress io.Writer
	// Now times the steps for Progress and the report. Default time.Now.
	Now func() time.Time
	// Logger receives the runtime's and the replay engine's operational
	// messages. Default slog.Default().
	Logger *slog.Logger
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error { return c.validate(true) }

func (c Config) validate(needPolicy bool) error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("ci: the baselines folder must be set"))
	}
	if c.Policy == nil && needPolicy {
		errs = append(errs, errors.New("ci: a gate policy must be set"))
	}
	if c.Index == nil {
		errs = append(errs, errors.New("ci: a research index must be set"))
	}
	if c.Sandbox == nil {
		errs = append(errs, errors.New("ci: a sandbox must be set"))
	}
	if c.Retrieval == nil {
		errs = append(errs, errNoRetrieval)
	}
	if c.Dataset == "" {
		errs = append(errs, errors.New("ci: the judged dataset folder must be set (the reranker check scores its gold queries)"))
	}
	if c.Scoring != nil {
		if err := c.Scoring.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("ci: scoring: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Result is the recipe's verdict and what each step found.
type Result struct {
	Passed bool `json:"passed"`
	// Failed names the parts that failed, in order: "replay" (a run did not
	// reproduce its journal), "fresh" (a fresh run could not complete),
	// "gate" (the gate failed), "verdicts" (a fresh verdict changed),
	// "rescore" (a committed verdict or case regraded differently),
	// "rollups" (a rollup field differs), "reranker" (a query's numbers
	// differ).
	Failed []string     `json:"failed"`
	Dir    string       `json:"baselines"`
	Replay ReplayResult `json:"replay"`
	Fresh  FreshResult  `json:"fresh"`
	Gate   GateResult   `json:"gate"`
	// Verdicts compares the fresh run's grades with the committed ones,
	// trial by trial.
	Verdicts VerdictsResult `json:"verdicts"`
	// Rescore is step 4.
	Rescore RescoreResult `json:"rescore"`
	// Rollups is step 5, Reranker step 6.
	Rollups  RollupResult `json:"rollups"`
	Reranker RerankResult `json:"reranker"`
	// Report is the scored fresh run, its comparison with the baseline and
	// the gate verdict, as `loom-eval gate --format json` writes it.
	Report *report.Report `json:"report"`
}

// GateResult is step 3.
type GateResult struct {
	Passed     bool         `json:"passed"`
	Policy     string       `json:"policy"`
	Baseline   string       `json:"baseline"`
	Checks     []gate.Check `json:"checks"`
	FailedRule []string     `json:"failed_checks"`
	// Worse are the cases whose mean score dropped, that went from passing
	// to failing, or that the comparison found regressed, worst first.
	Worse []CaseChange `json:"worse"`
	// MustPassFailing are must-pass cases that do not pass in the fresh run.
	MustPassFailing []string `json:"must_pass_failing"`
	DurationMS      float64  `json:"duration_ms"`
}

// CaseChange is one case that got worse.
type CaseChange struct {
	CaseID    string  `json:"case_id"`
	BaseScore float64 `json:"base_score"`
	CandScore float64 `json:"cand_score"`
	Delta     float64 `json:"delta"`
	BasePass  bool    `json:"base_passed"`
	CandPass  bool    `json:"cand_passed"`
	// Passes out of trials on each side, and the comparison's per-case
	// verdict (scorer.VerdictRegressed, VerdictWithinNoise, …).
	BasePasses int    `json:"base_passes"`
	BaseTrials int    `json:"base_trials"`
	CandPasses int    `json:"cand_passes"`
	CandTrials int    `json:"cand_trials"`
	Verdict    string `json:"verdict"`
	// Reasons are the fresh trials' reasons for not scoring 1, deduplicated.
	Reasons []string `json:"reasons,omitempty"`
}

// Cases lists every case the recipe names: the replay's diverged cases, the
// fresh run's failed cases, the cases that got worse and the failing
// must-pass cases, sorted, without repeats.
func (r *Result) Cases() []string {
	set := map[string]bool{}
	for _, d := range r.Replay.Divergences {
		set[d.CaseID] = true
	}
	for _, e := range r.Fresh.Errors {
		set[e.CaseID] = true
	}
	for _, c := range r.Gate.Worse {
		set[c.CaseID] = true
	}
	for _, id := range r.Gate.MustPassFailing {
		set[id] = true
	}
	for _, c := range r.Rescore.Changed {
		set[c.CaseID] = true
	}
	for _, v := range r.Rescore.Verdicts {
		set[v.CaseID] = true
	}
	for _, v := range r.Verdicts.Changed {
		set[v.CaseID] = true
	}
	for _, d := range r.Rollups.Diffs {
		if d.CaseID != "" {
			set[d.CaseID] = true
		}
	}
	// The reranker's gold queries are the research cases of the same id.
	for _, c := range r.Reranker.Changed {
		set[c.QueryID] = true
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Run runs the recipe. A failed recipe is not an error: it is
// Result.Passed == false. The error is for what kept a step from running
// (wrapping ErrBadInput when the inputs caused it).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	scoring := scorer.DefaultConfig()
	if cfg.Scoring != nil {
		scoring = *cfg.Scoring
	}
	in, err := readInputs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	work, cleanup, err := workFolder(cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res := &Result{Dir: cfg.Dir, Failed: []string{},
		Fresh: FreshResult{Agents: []AgentRun{}, Changed: []RunChange{}, Errors: []RunError{}}}
	p := progress{w: cfg.Progress, now: cfg.Now}

	// 1. Strict replay.
	done1 := p.start("strict replay of %d run(s) in %s (tools re-executed: retrieval and the sandbox; recorded model answers)",
		in.runCount(), strings.Join(in.journalFiles, ", "))
	if res.Replay, err = replayAll(ctx, cfg, in, work); err != nil {
		return nil, err
	}
	res.Replay.DurationMS = done1("%d run(s), %d divergence(s)", res.Replay.Runs, len(res.Replay.Divergences))

	// 2. Fresh run, its traces sent to an in-process collector.
	tc, err := freshAll(ctx, cfg, in, work, p, res)
	if err != nil {
		return nil, err
	}
	defer tc.close(ctx) // a step that errors before the rollups leaves it running
	trialsPath := filepath.Join(work, "fresh.trials.jsonl")
	if err := writeTrials(trialsPath, res.Fresh.trials); err != nil {
		return nil, err
	}
	if cfg.WorkDir != "" {
		res.Fresh.TrialsFile = trialsPath
	}

	// 3. Gate, and the fresh verdicts against the committed ones.
	done := p.start("gate: policy %s, fresh run against %s", nonEmpty(cfg.PolicyName, "(given)"), in.baselinePath)
	source := "fresh scripted run of the current code"
	if cfg.WorkDir != "" {
		source = trialsPath
	}
	graded, err := gateFresh(ctx, cfg, scoring, in, trialsPath, source, res)
	if err != nil {
		return nil, err
	}
	verdict := "passed"
	if !res.Gate.Passed {
		verdict = "failed"
	}
	res.Gate.DurationMS = done("%s", verdict)
	res.Verdicts.Compared, res.Verdicts.Changed = compareGrades(in.baseline, graded)
	res.Verdicts.Passed = len(res.Verdicts.Changed) == 0
	p.line("verdicts: %d fresh trial(s) compared with the committed ones, grader by grader: %d verdict(s) changed%s",
		res.Verdicts.Compared, len(res.Verdicts.Changed), prefixed(": ", verdictSummary(res.Verdicts.Changed)))

	// 4. Rescore the committed baseline.
	done = p.start("rescore: %s regraded (code graders in the sandbox, judge graders with the scripted judge) and scored by the current code against its verdicts, %s and %s",
		in.baselinePath, filepath.Join(cfg.Dir, ReportFile), filepath.Join(cfg.Dir, JudgeFile))
	if res.Rescore, err = rescore(ctx, scoring, in, cfg.Dir, gradingEnv(cfg)); err != nil {
		return nil, err
	}
	done("%d verdict(s) regraded, %d differ; %d case(s) judged differently", res.Rescore.Regraded, len(res.Rescore.Verdicts), len(res.Rescore.Changed))

	// 5. Rollups.
	done = p.start("rollups: the fresh runs' traces (OTLP/HTTP to an in-process collector) and %s/*.otlp.jsonl rolled up against %s",
		filepath.Join(cfg.Dir, TracesDir), filepath.Join(cfg.Dir, RollupsFile))
	if res.Rollups, err = checkRollups(ctx, cfg.Dir, tc, res.Fresh); err != nil {
		return nil, err
	}
	res.Rollups.DurationMS = done("%d run(s) and %d SDK trace(s) rolled up, %d field(s) differ", res.Rollups.Runs, res.Rollups.Traces, len(res.Rollups.Diffs))

	// 6. Reranker.
	done = p.start("reranker: %s scored on the judged set's gold queries against %s", filepath.Join(cfg.Dir, RerankerModel), filepath.Join(cfg.Dir, RerankFile))
	if res.Reranker, err = checkRerank(ctx, cfg); err != nil {
		return nil, err
	}
	res.Reranker.DurationMS = done("%d quer(ies), %d differ", res.Reranker.Queries, len(res.Reranker.Changed))

	res.tally()
	return res, nil
}

// tally sets Failed and Passed from the steps' results.
func (res *Result) tally() {
	for _, part := range []struct {
		name string
		ok   bool
	}{{PartReplay, res.Replay.Passed}, {PartFresh, len(res.Fresh.Errors) == 0}, {PartGate, res.Gate.Passed},
		{PartVerdicts, res.Verdicts.Passed}, {PartRescore, res.Rescore.Passed}, {PartRollups, res.Rollups.Passed},
		{PartReranker, res.Reranker.Passed}} {
		if !part.ok {
			res.Failed = append(res.Failed, part.name)
		}
	}
	res.Passed = len(res.Failed) == 0
}

// workFolder prepares the folder the recipe writes to: dir, emptied of an
// earlier run's files, or a temporary folder that cleanup removes.
func workFolder(dir string) (work string, cleanup func(), err error) {
	cleanup = func() {}
	work = dir
	if work == "" {
		if work, err = os.MkdirTemp("", "loomwork-ci-"); err != nil {
			return "", cleanup, fmt.Errorf("ci: %w", err)
		}
		tmp := work
		cleanup = func() { os.RemoveAll(tmp) }
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return "", cleanup, fmt.Errorf("ci: work folder: %w", err)
	}
	// The sandbox's helper starts in "/": workspaces must be absolute.
	if work, err = filepath.Abs(work); err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("ci: work folder: %w", err)
	}
	// A kept folder from an earlier run must not leak into this one: a
	// journal database that already holds a run id would resume that run
	// instead of running it fresh.
	for _, old := range []string{"fresh", "fresh-workspaces", "replay-db", "replay-workspaces", "fresh.trials.jsonl", "replay.trials.jsonl"} {
		if err := os.RemoveAll(filepath.Join(work, old)); err != nil {
			cleanup()
			return "", func() {}, fmt.Errorf("ci: work folder: %w", err)
		}
	}
	return work, cleanup, nil
}

// inputs are the decoded files of the baselines folder.
type inputs struct {
	cases        []datasets.Case
	casesPath    string
	baseline     []datasets.Trial
	baselinePath string
	journalFiles []string
	runs         [][]journal.Run // per journal file
	recorded     map[string]journal.Run
	trials       int // trials per case: the baseline's
}

func readInputs(dir string) (*inputs, error) {
	in := &inputs{casesPath: filepath.Join(dir, CasesFile), baselinePath: filepath.Join(dir, BaselineFile), recorded: map[string]journal.Run{}}
	var err error
	if in.cases, err = datasets.LoadCases(in.casesPath); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	if len(in.cases) == 0 {
		return nil, fmt.Errorf("%w: %s has no cases", ErrBadInput, in.casesPath)
	}
	if in.baseline, err = datasets.LoadTrials(in.baselinePath); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	for _, t := range in.baseline {
		in.trials = max(in.trials, t.Trial+1)
	}
	if in.trials == 0 {
		return nil, fmt.Errorf("%w: %s has no trials", ErrBadInput, in.baselinePath)
	}
	if in.journalFiles, err = filepath.Glob(filepath.Join(dir, JournalsDir, "*.jsonl")); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	if len(in.journalFiles) == 0 {
		return nil, fmt.Errorf("%w: no journal in %s", ErrBadInput, filepath.Join(dir, JournalsDir, "*.jsonl"))
	}
	sort.Strings(in.journalFiles)
	for _, f := range in.journalFiles {
		runs, err := journal.ReadJSONLFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		for _, r := range runs {
			if prev, dup := in.recorded[r.ID]; dup {
				return nil, fmt.Errorf("%w: run %s is in both %s and %s", ErrBadInput, r.ID, prev.File, r.File)
			}
			in.recorded[r.ID] = r
		}
		in.runs = append(in.runs, runs)
	}
	// As `loom-eval gate` does: each baseline trial's label and model must
	// be those of the journal run it names.
	if _, err := journal.CheckProvenance(in.baselinePath, in.baseline, journal.SearchDirs(in.baselinePath)); err != nil {
		return nil, fmt.Errorf("%w: provenance: %w", ErrBadInput, err)
	}
	return in, nil
}

func (in *inputs) runCount() int { return len(in.recorded) }

// agentPlan is which cases one reference agent runs in the fresh run: the
// cases tagged with its name, as `run --tag AGENT` selects them.
type agentPlan struct {
	agent string
	cases []datasets.Case
}

func (in *inputs) plan() []agentPlan {
	var out []agentPlan
	for _, agent := range []string{research.Name, coding.Name} {
		a := agentPlan{agent: agent}
		for _, c := range in.cases {
			if slices.Contains(c.Tags, agent) {
				a.cases = append(a.cases, c)
			}
		}
		if len(a.cases) > 0 {
			out = append(out, a)
		}
	}
	return out
}

// unplanned are the cases no reference agent runs (tagged neither research
// nor coding).
func (in *inputs) unplanned() []string {
	out := []string{}
	for _, c := range in.cases {
		if !slices.Contains(c.Tags, research.Name) && !slices.Contains(c.Tags, coding.Name) {
			out = append(out, c.ID)
		}
	}
	return out
}

// gateFresh scores the fresh trials against the baseline with the policy
// and names the cases that got worse.
func gateFresh(ctx context.Context, cfg Config, scoring scorer.Config, in *inputs, trialsPath, source string, res *Result) ([]datasets.Trial, error) {
	// Read back what was written: the gate decodes the same file a user
	// would hand to `loom-eval gate`, and checks its provenance the same
	// way (the baseline's was checked when it was read).
	cand, err := datasets.LoadTrials(trialsPath)
	if err != nil {
		return nil, fmt.Errorf("ci: fresh trials: %w", err)
	}
	if _, err := journal.CheckProvenance(trialsPath, cand, journal.SearchDirs(trialsPath)); err != nil {
		return nil, fmt.Errorf("ci: fresh trials: provenance: %w", err)
	}
	// Evaluate applies the policy to the config it is given; the caller's
	// policy is not changed.
	pol := *cfg.Policy
	r, err := report.Evaluate(ctx, scoring, report.Inputs{
		Cases: in.cases, CasesFile: in.casesPath,
		Candidate: report.Trials{Source: source, Trials: cand},
		Baseline:  report.Trials{Source: in.baselinePath, Trials: cloneTrials(in.baseline)},
		Policy:    &pol,
		Grading:   gradingEnv(cfg),
	})
	if err != nil {
		if errors.Is(err, report.ErrBadInput) {
			return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		return nil, fmt.Errorf("ci: gate: %w", err)
	}
	res.Report = r
	g := GateResult{Passed: r.Gate.Passed, Policy: cfg.PolicyName, Baseline: in.baselinePath, Checks: r.Gate.Checks,
		FailedRule: []string{}, Worse: []CaseChange{}, MustPassFailing: []string{}}
	for _, c := range r.Gate.Failed() {
		g.FailedRule = append(g.FailedRule, c.Name)
	}
	reasons := map[string][]string{}
	for i := range r.Suite.Cases {
		c := &r.Suite.Cases[i]
		for _, t := range c.Results {
			for _, why := range t.Reasons {
				if !slices.Contains(reasons[c.CaseID], why) {
					reasons[c.CaseID] = append(reasons[c.CaseID], why)
				}
			}
		}
		if c.MustPass && !c.Passed {
			g.MustPassFailing = append(g.MustPassFailing, c.CaseID)
		}
	}
	if r.Comparison != nil {
		for _, d := range r.Comparison.Pairs {
			if d.Delta < 0 || d.Change == scorer.ChangeRegressed || d.Verdict == scorer.VerdictRegressed {
				g.Worse = append(g.Worse, CaseChange{CaseID: d.CaseID, BaseScore: d.BaseScore, CandScore: d.CandScore, Delta: d.Delta,
					BasePass: d.BasePass, CandPass: d.CandPass, BasePasses: d.BasePasses, BaseTrials: d.BaseTrials,
					CandPasses: d.CandPasses, CandTrials: d.CandTrials, Verdict: d.Verdict, Reasons: reasons[d.CaseID]})
			}
		}
	}
	sort.SliceStable(g.Worse, func(i, j int) bool { return g.Worse[i].Delta < g.Worse[j].Delta })
	res.Gate = g
	return cand, nil
}

// progress writes "ci: STEP…" when a step starts and "ci: STEP: SUMMARY
// (N.N s)" when it ends.
type progress struct {
	w   io.Writer
	now func() time.Time
}

func (p progress) start(format string, args ...any) func(format string, args ...any) float64 {
	what := fmt.Sprintf(format, args...)
	if p.w != nil {
		fmt.Fprintf(p.w, "ci: %s…\n", what)
	}
	t0 := p.now()
	return func(format string, args ...any) float64 {
		d := p.now().Sub(t0)
		if p.w != nil {
			fmt.Fprintf(p.w, "ci:   %s (%.1f s)\n", fmt.Sprintf(format, args...), d.Seconds())
		}
		return float64(d.Microseconds()) / 1000
	}
}

// line writes one finished line ("ci: …").
func (p progress) line(format string, args ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, "ci: %s\n", fmt.Sprintf(format, args...))
	}
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// gradingEnv is how the recipe grades: code graders through cfg.Graders,
// by default in the recipe's sandbox. Trials that carry a code verdict
// (the committed baseline's, recorded by scripts/baselines.sh record) keep
// it; the fresh run's trials are graded here.
func gradingEnv(cfg Config) grade.Env {
	var run grade.CodeRunner = &graders.Sandbox{Runner: cfg.Sandbox, Limits: coding.Limits()}
	if cfg.Graders != nil {
		run = cfg.Graders
	}
	// The baseline is recorded without a judge (scripts/baselines.sh
	// record), so any judge verdict in it is the scripted judge's; the
	// recipe re-reaches judge verdicts with the same deterministic judge.
	return grade.Env{Code: refusalFails{run}, Judge: grade.ScriptedJudge{}}
}

// refusalFails turns a sandbox that refuses to run a code grader into a
// failed grade naming the refusal, instead of stopping the recipe: the
// sandbox is part of what the recipe checks, so a broken one must show as
// the cases it fails (with the replay's divergences beside them), not as
// an operational error with no verdict. A cancelled context still stops.
type refusalFails struct{ grade.CodeRunner }

func (r refusalFails) RunCode(ctx context.Context, req grade.CodeRequest) (grade.CodeResult, error) {
	res, err := r.CodeRunner.RunCode(ctx, req)
	if err != nil && ctx.Err() == nil {
		return grade.CodeResult{Reason: "refused", Evidence: []string{err.Error()}}, nil
	}
	return res, err
}
