package ci_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/graders"
	authz "github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/sandbox"
	"github.com/loomwork/loomwork/agents/sandbox/sandboxtest"
	"github.com/loomwork/loomwork/baselines/ci"
	"github.com/loomwork/loomwork/baselines/ci/citest"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/retrieval"
	"github.com/loomwork/loomwork/scorer/gate"
)

// The committed baselines folder, from baselines/ci.
const committed = ".."

var shared struct {
	once sync.Once
	idx  *research.DatasetIndex
	lazy *coding.LazySandbox
	sb   *memoSandbox
}

func TestMain(m *testing.M) {
	sandboxtest.Init() // the coding agent's sandbox re-executes this binary as its helper (without the race detector's exit sleep)
	code := m.Run()
	if shared.idx != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		shared.idx.Close(ctx)
		shared.lazy.Shutdown(ctx)
		cancel()
	}
	os.Exit(code)
}

// deps are the real retrieval index over the shipped judged set (the one
// the baselines were recorded on) and the real sandbox, shared by the tests
// (which run in parallel: each recipe has folders of its own, and a recipe
// mostly waits for its sandboxed programs). The sandbox runs each distinct
// program once for the package (memoSandbox).
func deps(t *testing.T) (research.Index, coding.Sandbox) {
	t.Helper()
	if os.Geteuid() != 0 {
		// The coding agent's sandbox needs root; CI and make test run as root.
		t.Skip("the recipe runs the coding agent's sandbox, which needs root")
	}
	shared.once.Do(func() {
		shared.idx = &research.DatasetIndex{Dir: datasettest.ShippedDir(t)}
		shared.lazy = &coding.LazySandbox{}
		shared.sb = &memoSandbox{Sandbox: shared.lazy}
	})
	return shared.idx, shared.sb
}

// defaultRules is the built-in authorization policy, which the committed
// journals were recorded under.
func defaultRules(t *testing.T) *authz.Rules {
	t.Helper()
	r, err := authz.DefaultRules()
	if err != nil {
		t.Fatal(err)
	}
	return &r
}

func policy(t *testing.T, dir string) *gate.Policy {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ci.PolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	p, err := gate.ParseNamed(b, "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t *testing.T, dir string, idx research.Index, sb coding.Sandbox, work string) *ci.Result {
	t.Helper()
	var progress bytes.Buffer
	res, err := ci.Run(context.Background(), ci.Config{Dir: dir, Policy: policy(t, dir), PolicyName: "policy.json",
		Index: idx, Sandbox: sb, Retrieval: shared.idx, Dataset: shared.idx.Dir, WorkDir: work, Progress: &progress,
		ToolPolicy: defaultRules(t), ToolPolicyName: authz.DefaultName})
	if err != nil {
		t.Fatalf("ci.Run: %v\nprogress:\n%s", err, progress.String())
	}
	for _, want := range []string{"ci: strict replay of", "ci: fresh run:", "ci: gate:"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	return res
}

// On the current code the recipe passes, and each fresh run is the
// committed run of its id event for event: the fresh run uses the settings
// the baseline was recorded with.
func TestRecipePassesAndTheFreshRunReproducesTheRecording(t *testing.T) {
	testtier.NoRace(t, "TestRollupRerankerAndJudgeDifferencesAreNamed")
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	dir := citest.Subset(t, committed, "mkm-1694", "coding-flatten")
	res := run(t, dir, idx, sb, "")
	if !res.Passed || len(res.Failed) != 0 {
		t.Fatalf("recipe failed on unchanged code: %s\n%+v", res.Verdict(), res)
	}
	if res.Replay.Runs != 6 || len(res.Replay.Divergences) != 0 {
		t.Fatalf("replay = %+v", res.Replay)
	}
	if res.Fresh.Runs != 6 || res.Fresh.Unchanged != 6 || len(res.Fresh.Changed) != 0 || len(res.Fresh.Errors) != 0 {
		t.Fatalf("fresh = %+v", res.Fresh)
	}
	if len(res.Fresh.Agents) != 2 || res.Fresh.Agents[0].Agent != "research" || res.Fresh.Agents[0].Trials != 3 {
		t.Fatalf("agents = %+v", res.Fresh.Agents)
	}
	if !res.Gate.Passed || len(res.Gate.Worse) != 0 || len(res.Cases()) != 0 {
		t.Fatalf("gate = %+v", res.Gate)
	}
	if res.Report == nil || res.Report.Comparison == nil || res.Report.Suite.NTrials != 6 {
		t.Fatalf("report = %+v", res.Report)
	}
	if !strings.HasPrefix(res.Verdict(), "PASSED: 6 replayed run(s) reproduced their journals; 6 fresh run(s)") {
		t.Fatalf("verdict = %s", res.Verdict())
	}
}

// The fresh runs are authorized as `loom-eval run` authorizes them: under
// the default policy each decision is journaled (the fresh runs equal the
// committed ones, which were recorded under it) and audited, the log's
// chain verifying; without a policy the fresh runs differ from the
// committed ones at run_started (whose payload records the policy), while
// the replay step — which re-decides under the policy each journal
// records — still passes.
func TestFreshRunsAreAuthorizedAndAudited(t *testing.T) {
	testtier.NoRace(t, "TestRollupRerankerAndJudgeDifferencesAreNamed")
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	dir := citest.Subset(t, committed, "mkm-1694")
	log, err := authz.OpenAudit(filepath.Join(t.TempDir(), "audit.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ci.Config{Dir: dir, Policy: policy(t, dir), Index: idx, Sandbox: sb, Retrieval: shared.idx, Dataset: shared.idx.Dir,
		ToolPolicy: defaultRules(t), ToolPolicyName: authz.DefaultName, Audit: log, WorkDir: t.TempDir()}
	res, err := ci.Run(context.Background(), cfg)
	if err != nil || !res.Passed || res.Fresh.Unchanged != 3 {
		t.Fatalf("under the default policy: %v %s (fresh %+v)", err, res.Verdict(), res.Fresh)
	}
	fresh, err := os.ReadFile(filepath.Join(cfg.WorkDir, "fresh", "research.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	decisions := bytes.Count(fresh, []byte(`"kind":"policy_decision"`))
	if n := len(log.Entries()); decisions == 0 || n != decisions || log.Verify() != nil {
		t.Fatalf("%d audit entries (verify %v) for %d journaled decisions", n, log.Verify(), decisions)
	}
	cfg.ToolPolicy, cfg.Audit, cfg.WorkDir = nil, nil, t.TempDir()
	res, err = ci.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || !res.Replay.Passed || len(res.Fresh.Changed) != 3 || res.Fresh.Changed[0].Seq != 1 || res.Fresh.Changed[0].Field != "payload" ||
		!strings.HasPrefix(res.Fresh.Changed[0].Recorded, "run_started") {
		t.Fatalf("without a policy: passed %v, replay %v, changed %+v", res.Passed, res.Replay.Passed, res.Fresh.Changed)
	}
}

// dropTop is the retrieval service with a deliberate regression: every
// search loses its best hit (the real index answers the rest).
type dropTop struct{ research.Index }

func (d dropTop) Search(ctx context.Context, q retrieval.Query) (*retrieval.Result, error) {
	r, err := d.Index.Search(ctx, q)
	if err != nil || len(r.Hits) == 0 {
		return r, err
	}
	c := *r
	c.Hits = c.Hits[1:]
	return &c, nil
}

// A retrieval change that drops the top hit: replay names every trial of
// the research case (its search results differ), the replay's trial
// records carry the divergence, and the gate names the case, whose fresh
// runs no longer cite the page they cited.
func TestRecipeNamesTheCasesARetrievalRegressionBreaks(t *testing.T) {
	testtier.NoRace(t, "TestRollupRerankerAndJudgeDifferencesAreNamed")
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	const hit = "mkm-1694" // its top hit is the judged page, cited by every trial
	dir := citest.Subset(t, committed, hit, "coding-roman")
	work := t.TempDir()
	res := run(t, dir, dropTop{idx}, sb, work)
	// Replay and the gate see it; so do the fresh verdicts (the judged
	// page no longer cited) and the rollups (what the runs read changed
	// what the model was sent).
	if res.Passed || !slices.Equal(res.Failed, []string{ci.PartReplay, ci.PartGate, ci.PartVerdicts, ci.PartRollups}) {
		t.Fatalf("failed = %v, want replay, gate, verdicts and rollups: %s", res.Failed, res.Verdict())
	}
	for _, v := range res.Verdicts.Changed {
		if v.CaseID != hit || v.Direction != ci.Regressed || !strings.HasPrefix(v.Grader, "judged_page_") {
			t.Errorf("verdict change %+v", v)
		}
	}
	for _, d := range res.Rollups.Diffs {
		if d.CaseID != hit {
			t.Errorf("rollup diff %+v, want only %s", d, hit)
		}
	}
	if len(res.Replay.Divergences) != 3 {
		t.Fatalf("divergences = %+v, want the 3 trials of %s", res.Replay.Divergences, hit)
	}
	for i, d := range res.Replay.Divergences {
		if d.CaseID != hit || d.Trial != i || d.Code != "LWR1200" || d.Line == 0 ||
			!strings.Contains(d.Message, "tool result differs") || !strings.Contains(d.Message, "search_docs") {
			t.Errorf("divergence %d = %+v", i, d)
		}
	}
	// The replay's trial records: the research case's carry the
	// divergence, the coding case's none.
	trials, err := datasets.LoadTrials(filepath.Join(work, "replay.trials.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != 6 {
		t.Fatalf("%d replay trials, want 6 (diverged runs keep theirs)", len(trials))
	}
	for _, tr := range trials {
		if diverged := tr.Divergence != ""; diverged != (tr.CaseID == hit) {
			t.Errorf("trial %s#%d divergence = %q", tr.CaseID, tr.Trial, tr.Divergence)
		}
	}
	if len(res.Gate.Worse) != 1 || res.Gate.Worse[0].CaseID != hit || res.Gate.Worse[0].Delta >= 0 ||
		!res.Gate.Worse[0].BasePass || res.Gate.Worse[0].CandPass {
		t.Fatalf("worse = %+v, want %s gone from passing to failing", res.Gate.Worse, hit)
	}
	if !slices.Contains(res.Gate.FailedRule, "case_regressions") {
		t.Fatalf("failed checks = %v", res.Gate.FailedRule)
	}
	if got := res.Cases(); !slices.Equal(got, []string{hit}) {
		t.Fatalf("cases named = %v, want [%s]", got, hit)
	}
	if len(res.Fresh.Changed) != 3 || res.Fresh.Changed[0].CaseID != hit || res.Fresh.Unchanged != 3 {
		t.Fatalf("fresh = %+v", res.Fresh)
	}
	// --out keeps the fresh journals and trials.
	for _, f := range []string{res.Fresh.TrialsFile, res.Fresh.Agents[0].Journal, res.Replay.TrialsFile} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("kept file: %v", err)
		}
	}

	// The three formats say the same.
	var text, md, js bytes.Buffer
	for _, w := range []struct {
		format string
		buf    *bytes.Buffer
	}{{"text", &text}, {"markdown", &md}, {"json", &js}} {
		if err := ci.Write(w.buf, w.format, res); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{hit + " trial 0 (run research-" + hit + "-t0", "worse " + hit + ": score", "ci: FAILED: replay (3 of 6 runs did not reproduce their journal: LWR1200 ×3); gate (",
		"ci: cases named: " + hit} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{"### Replay divergences", "| `" + hit + "` | 0 | `research-" + hit + "-t0` |", "### Cases that got worse", "### Score report"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	var back ci.Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Passed || len(back.Replay.Divergences) != 3 || back.Gate.Worse[0].CaseID != hit || back.Report == nil {
		t.Fatalf("json = %s", js.String())
	}
	if err := ci.Write(&text, "junit", res); err == nil {
		t.Fatal("Write accepted an unknown format")
	}
}

// refusePython is the sandbox with a deliberate regression: it refuses to
// run Python.
type refusePython struct{ coding.Sandbox }

func (r refusePython) Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error) {
	if strings.Contains(filepath.Base(req.Command[0]), "python") {
		return nil, errors.New("python is not allowed")
	}
	return r.Sandbox.Run(ctx, req)
}

// A sandbox that refuses Python to the agent: replay names every coding
// trial, and the fresh run changes every run. The outcome is graded by the
// hidden tests, which run in the graders' sandbox: the policy wrote every
// attempt of its play without ever running one, so solution.py is what a
// working sandbox leaves and the case still passes — its answer says it
// gave up. When the graders' sandbox refuses Python too (the same broken
// runner, as in a real regression), the hidden tests cannot run and the
// must-pass case fails the gate with the refusal as its reason.
func TestRecipeNamesTheRunsWhenTheSandboxRefusesPython(t *testing.T) {
	testtier.NoRace(t, "TestRollupRerankerAndJudgeDifferencesAreNamed")
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	const c = "coding-roman"
	dir := citest.Subset(t, committed, c)
	work := t.TempDir()
	var progress strings.Builder
	p := policy(t, dir)
	res, err := ci.Run(context.Background(), ci.Config{Dir: dir, Policy: p, PolicyName: "policy.json",
		Index: idx, Sandbox: refusePython{sb}, Graders: &graders.Sandbox{Runner: sb, Limits: coding.Limits()}, Retrieval: shared.idx, Dataset: shared.idx.Dir,
		WorkDir: work, Progress: &progress, ToolPolicy: defaultRules(t), ToolPolicyName: authz.DefaultName})
	if err != nil {
		t.Fatalf("ci.Run: %v\n%s", err, progress.String())
	}
	// The runs' traces change (every run_python call now fails), so the
	// rollups differ; the hidden tests still pass.
	if res.Passed || !slices.Equal(res.Failed, []string{ci.PartReplay, ci.PartRollups}) {
		t.Fatalf("failed = %v: %s", res.Failed, res.Verdict())
	}
	if len(res.Replay.Divergences) != 3 || res.Replay.Divergences[2].CaseID != c || res.Replay.Divergences[2].Trial != 2 ||
		!strings.Contains(res.Replay.Divergences[0].Message, "python is not allowed") {
		t.Fatalf("divergences = %+v", res.Replay.Divergences)
	}
	if len(res.Fresh.Changed) != 3 || res.Fresh.Unchanged != 0 || !res.Gate.Passed {
		t.Fatalf("fresh %+v, gate %+v", res.Fresh, res.Gate)
	}
	fresh, err := datasets.LoadTrials(res.Fresh.TrialsFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh) != 3 || len(fresh[0].EvidenceCited) != 0 {
		t.Fatalf("fresh trials %+v: a run whose program never ran cites nothing", fresh)
	}

	// The same broken runner for the agent and the graders: the hidden
	// tests cannot run, so the must-pass case fails by name, with the
	// refusal as its reason.
	res, err = ci.Run(context.Background(), ci.Config{Dir: dir, Policy: p, Index: idx, Sandbox: refusePython{sb}, Retrieval: shared.idx, Dataset: shared.idx.Dir, WorkDir: work,
		ToolPolicy: defaultRules(t), ToolPolicyName: authz.DefaultName})
	if err != nil {
		t.Fatal(err)
	}
	// The committed trials' hidden tests, regraded in the same sandbox,
	// fail too: the rescore names them.
	if res.Passed || !slices.Equal(res.Failed, []string{ci.PartReplay, ci.PartGate, ci.PartVerdicts, ci.PartRescore, ci.PartRollups}) {
		t.Fatalf("failed = %v: %s", res.Failed, res.Verdict())
	}
	if !slices.Equal(res.Gate.MustPassFailing, []string{c}) || !slices.Contains(res.Gate.FailedRule, "must_pass") {
		t.Fatalf("gate = %+v", res.Gate)
	}
	if len(res.Rescore.Verdicts) != 3 || res.Rescore.Verdicts[0].Grader != "hidden_tests" || res.Rescore.Verdicts[0].Direction != ci.Regressed {
		t.Fatalf("rescore verdicts = %+v", res.Rescore.Verdicts)
	}
	if len(res.Gate.Worse) != 1 || !strings.Contains(strings.Join(res.Gate.Worse[0].Reasons, " "), "python is not allowed") {
		t.Fatalf("worse = %+v, want the refusal as the reason", res.Gate.Worse)
	}

	// The same kept folder with the sandbox fixed: the fresh runs are run
	// again, not resumed from the broken runs' journal.
	res = run(t, dir, idx, sb, work)
	if !res.Passed || res.Fresh.Unchanged != 3 {
		t.Fatalf("second run in the same folder: %s, fresh %+v", res.Verdict(), res.Fresh)
	}
}

// A must-pass case that fails fails the gate by name, whatever the
// comparison says: here the committed baseline of a passing coding case
// is kept, and the fresh run's solution.py is graded by hidden tests that
// no longer accept it (a task whose expectations changed).
func TestRecipeFailsTheMustPassCaseItsHiddenTestsReject(t *testing.T) {
	testtier.NoRace(t, "TestRollupRerankerAndJudgeDifferencesAreNamed")
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	const c = "coding-roman"
	dir := citest.Subset(t, committed, c)
	g := filepath.Join(dir, "graders", c+".py")
	b, err := os.ReadFile(g)
	if err != nil {
		t.Fatal(err)
	}
	stricter := bytes.Replace(b, []byte(`((3999,), "MMMCMXCIX")`), []byte(`((3999,), "MMMIM")`), 1)
	if bytes.Equal(stricter, b) {
		t.Fatal("the grader no longer has the check this test changes")
	}
	if err := os.WriteFile(g, stricter, 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, dir, idx, sb, "")
	if res.Passed || !slices.Contains(res.Failed, ci.PartGate) {
		t.Fatalf("failed = %v: %s", res.Failed, res.Verdict())
	}
	// Regraded by the stricter hidden tests, the committed trials fail
	// too: the rescore names each one.
	if !slices.Contains(res.Failed, ci.PartRescore) || len(res.Rescore.Verdicts) != 3 {
		t.Fatalf("rescore = %+v", res.Rescore)
	}
	if !slices.Equal(res.Gate.MustPassFailing, []string{c}) || !slices.Contains(res.Gate.FailedRule, "must_pass") {
		t.Fatalf("gate = %+v", res.Gate)
	}
	if len(res.Gate.Worse) != 1 || !strings.Contains(strings.Join(res.Gate.Worse[0].Reasons, " "), "to_roman(3999) returned 'MMMCMXCIX', want 'MMMIM'") {
		t.Fatalf("worse = %+v, want the failing hidden test named", res.Gate.Worse)
	}
}

// Bad input is ErrBadInput, naming the file (and the line).
func TestBadInputIsNamed(t *testing.T) {
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	good := citest.Subset(t, committed, "coding-roman")
	p := policy(t, good)
	for _, tc := range []struct {
		name    string
		breakIt func(dir string)
		want    string
	}{
		{"no case file", func(dir string) { os.Remove(filepath.Join(dir, ci.CasesFile)) }, "cases.jsonl"},
		{"no journal", func(dir string) { os.RemoveAll(filepath.Join(dir, ci.JournalsDir)) }, "no journal in"},
		{"empty baseline", func(dir string) { os.WriteFile(filepath.Join(dir, ci.BaselineFile), nil, 0o644) }, "has no trials"},
		{"a tampered journal", func(dir string) {
			f := filepath.Join(dir, ci.JournalsDir, "coding.jsonl")
			b, _ := os.ReadFile(f)
			os.WriteFile(f, bytes.Replace(b, []byte("NUMERALS"), []byte("NUMERALZ"), 1), 0o644)
		}, "coding.jsonl:"},
		{"a baseline relabelled live over scripted journals", func(dir string) {
			f := filepath.Join(dir, ci.BaselineFile)
			b, _ := os.ReadFile(f)
			os.WriteFile(f, bytes.ReplaceAll(b, []byte(`"model_label":"scripted"`), []byte(`"model_label":"live"`)), 0o644)
		}, "provenance"},
		{"a malformed case", func(dir string) {
			os.WriteFile(filepath.Join(dir, ci.CasesFile), []byte(`{"id":"x","task":"t","colour":1}`+"\n"), 0o644)
		}, "cases.jsonl:1: field \"colour\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(good)); err != nil {
				t.Fatal(err)
			}
			tc.breakIt(dir)
			_, err := ci.Run(context.Background(), ci.Config{Dir: dir, Policy: p, Index: idx, Sandbox: sb, Retrieval: shared.idx, Dataset: shared.idx.Dir,
				ToolPolicy: defaultRules(t), ToolPolicyName: authz.DefaultName})
			if !errors.Is(err, ci.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadInput naming %q", err, tc.want)
			}
		})
	}
	err := ci.Config{}.Validate()
	for _, want := range []string{"baselines folder", "policy", "research index", "sandbox", "retrieval service", "judged dataset"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name the %s", err, want)
		}
	}
}

// A scorer regression moves the fresh run and the baseline alike, so the
// gate cannot see it; the committed report can. Here the committed report
// says a case passed fewer trials than the current scorer finds.
func TestRescoreNamesTheCasesTheCurrentScorerJudgesDifferently(t *testing.T) {
	testtier.NoRace(t, "TestRollupRerankerAndJudgeDifferencesAreNamed")
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	dir := citest.Subset(t, committed, "mkm-1694", "coding-flatten")
	path := filepath.Join(dir, ci.ReportFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	c := rep["candidate"].(map[string]any)["cases"].([]any)[0].(map[string]any)
	c["passes"] = c["passes"].(float64) - 1
	b, _ = json.Marshal(rep)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, dir, idx, sb, "")
	if res.Passed || !slices.Equal(res.Failed, []string{ci.PartRescore}) {
		t.Fatalf("tampered report: failed %v, verdict %s", res.Failed, res.Verdict())
	}
	if len(res.Rescore.Changed) != 1 || res.Rescore.Changed[0].CaseID != c["case_id"] || !slices.Contains(res.Cases(), c["case_id"].(string)) {
		t.Errorf("rescore %+v, cases named %v", res.Rescore, res.Cases())
	}
	if !strings.Contains(res.Verdict(), "rescore (1 case(s) judged differently") {
		t.Errorf("verdict %s", res.Verdict())
	}
}

// rewriteLines applies fn to every JSON line of path that has case_id id.
func rewriteLines(t *testing.T, path, id string, fn func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		if v["case_id"] == id {
			fn(v)
			n++
		}
		nb, _ := json.Marshal(v)
		out = append(out, string(nb))
	}
	if n == 0 {
		t.Fatalf("%s has no line of case %s", path, id)
	}
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The comparison of the fresh run with the baseline is deterministic: a
// verdict that changed is a divergence even when it is an improvement,
// which the gate's statistics report as good news. Here the committed
// baseline says a trial's hidden tests failed; the fresh run and the
// regrade both pass them.
func TestAVerdictThatImprovedFailsTheRecipe(t *testing.T) {
	testtier.NoRace(t, "TestRollupRerankerAndJudgeDifferencesAreNamed")
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	const c = "coding-roman"
	dir := citest.Subset(t, committed, c)
	path := filepath.Join(dir, ci.BaselineFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfterN(string(b), "\n", 2)
	worse := strings.Replace(lines[0], `"passed":true,"score":1,"reason":"10/10 hidden tests passed"`, `"passed":false,"score":0.9,"reason":"9/10 hidden tests passed"`, 1)
	if worse == lines[0] {
		t.Fatal("the committed trial no longer has the verdict this test changes")
	}
	if err := os.WriteFile(path, []byte(worse+lines[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, dir, idx, sb, "")
	if res.Passed || !slices.Contains(res.Failed, ci.PartVerdicts) || !slices.Contains(res.Failed, ci.PartRescore) {
		t.Fatalf("failed = %v: %s", res.Failed, res.Verdict())
	}
	want := ci.VerdictChange{CaseID: c, Trial: 0, Grader: "hidden_tests", Type: "code", Direction: ci.Improved,
		CommittedPassed: false, Passed: true, CommittedScore: 0.9, Score: 1, CommittedReason: "9/10 hidden tests passed", Reason: "10/10 hidden tests passed"}
	if !slices.Equal(res.Verdicts.Changed, []ci.VerdictChange{want}) {
		t.Fatalf("verdicts = %+v", res.Verdicts.Changed)
	}
	if len(res.Rescore.Verdicts) != 1 || res.Rescore.Verdicts[0] != want {
		t.Fatalf("rescore verdicts = %+v", res.Rescore.Verdicts)
	}
	if !strings.Contains(res.Verdict(), "verdicts (1 fresh verdict(s) differ from the committed ones: 1 improved: coding-roman)") {
		t.Fatalf("verdict = %s", res.Verdict())
	}
}

// A rollup, a reranker number or a judge verdict that differs from the
// committed one fails its step by case (or query), trial and field.
func TestRollupRerankerAndJudgeDifferencesAreNamed(t *testing.T) {
	testtier.Slow(t)
	t.Parallel()
	idx, sb := deps(t)
	const c = "mkm-1694"
	dir := citest.Subset(t, committed, c)
	rewriteLines(t, filepath.Join(dir, ci.RollupsFile), c, func(v map[string]any) {
		if v["trial"].(float64) == 1 {
			v["tokens_in"] = v["tokens_in"].(float64) * 2
		}
	})
	rewriteLines(t, filepath.Join(dir, ci.JudgeFile), c, func(v map[string]any) {
		if v["trial"].(float64) == 2 && v["type"] == "model" {
			v["passed"], v["score"] = !v["passed"].(bool), 1-v["score"].(float64)
		}
	})
	rp := filepath.Join(dir, ci.RerankFile)
	b, err := os.ReadFile(rp)
	if err != nil {
		t.Fatal(err)
	}
	var rk map[string]any
	if err := json.Unmarshal(b, &rk); err != nil {
		t.Fatal(err)
	}
	q := rk["queries"].([]any)[0].(map[string]any)
	q["rerank_ndcg_at_10"] = q["rerank_ndcg_at_10"].(float64) + 0.01
	b, _ = json.Marshal(rk)
	if err := os.WriteFile(rp, b, 0o644); err != nil {
		t.Fatal(err)
	}

	res := run(t, dir, idx, sb, "")
	if res.Passed || !slices.Equal(res.Failed, []string{ci.PartRescore, ci.PartRollups, ci.PartReranker}) {
		t.Fatalf("failed = %v: %s", res.Failed, res.Verdict())
	}
	if len(res.Rollups.Diffs) != 1 || res.Rollups.Diffs[0].CaseID != c || res.Rollups.Diffs[0].Trial != 1 || res.Rollups.Diffs[0].Field != "tokens_in" {
		t.Fatalf("rollup diffs = %+v", res.Rollups.Diffs)
	}
	if len(res.Rescore.Verdicts) != 1 || res.Rescore.Verdicts[0].CaseID != c || res.Rescore.Verdicts[0].Trial != 2 ||
		res.Rescore.Verdicts[0].Grader != "judge_names_the_page" || len(res.Rescore.Changed) != 0 {
		t.Fatalf("rescore = %+v", res.Rescore)
	}
	if len(res.Reranker.Changed) != 1 || res.Reranker.Changed[0].QueryID != q["id"] || res.Reranker.Queries == 0 {
		t.Fatalf("reranker = %+v", res.Reranker)
	}
	var text bytes.Buffer
	if err := ci.Write(&text, "text", res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{c + " trial 1: tokens_in: committed ", "rescore: " + c + " trial 2, grader judge_names_the_page: ",
		"query " + q["id"].(string) + " (issue ", "rollups (1 field(s) differ from "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}
