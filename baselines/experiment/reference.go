package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/grade"
)

// TargetReference is the target kind of an experiment Loomwork's own
// reference agents made (`loom-eval run`, `replay`, `suite run`).
const TargetReference = "reference"

// ReferenceConfig is an experiment record made from the trials a
// reference-agent command produced: the same folder (experiment.json,
// trials.jsonl, report.json is left to show and compare) and the same
// datasets.Experiment fields as `experiment run`, so `experiment
// list|show|compare|push` and the UI read it like any other.
type ReferenceConfig struct {
	// Root is the experiments root (DefaultRoot); Dir, when set, is the
	// folder to write (else Root/ID). A folder that already holds an
	// experiment is refused: one command's trials are one experiment.
	Root, Dir string
	// CasesFile is the case file the trials attempt (digested as
	// `experiment run` does); Cases are its cases as loaded. Every trial
	// must name one of them. "" (a replay of journals, which names no
	// case file): the cases are the trials' own, id and task, written to
	// the folder as CasesFile.
	CasesFile string
	Cases     []datasets.Case
	// Agent is the reference agent's name ("research", "coding"), Command
	// the loom-eval command that ran it ("run", "replay", "suite run") and
	// Model what answered ("scripted", "openai gpt-4o", "recorded
	// answers"): the target description reads "reference agent research
	// (scripted)".
	Agent, Command, Model string
	// Name and Label are the user's (Label defaults to Agent); Params are
	// recorded with the agent and command.
	Name, Label string
	Params      map[string]string
	// Trials are the command's trials; TrialsFile is the file it wrote
	// them to ("" when none): trials that name a JSONL journal but carry
	// no transcript get theirs from it, looked up as `loom-eval score`
	// does (the current folder, then the trials file's).
	Trials     []datasets.Trial
	TrialsFile string
	// Journal, when set, is the runs' journal as JSONL (a journal
	// database's export): it is written into the folder as JournalFile,
	// and trials whose journal reference names JournalFile name that copy.
	Journal []byte
	// Store is the trace store URL the trials' trace ids resolve in (""
	// when their spans went nowhere Loomwork knows).
	Store string
	// Grading runs the cases' graders (their verdicts are recorded on the
	// trials, as `experiment run` records them); Score decides what passed.
	Grading grade.Env
	Score   scorer.Config
	// GitDir is the folder whose git commit is recorded ("" the current
	// folder). Now and Rand name the experiment (defaults time.Now and a
	// random source).
	GitDir string
	Now    func() time.Time
	Rand   func() uint32
}

// Validate reports every problem with the configuration.
func (c *ReferenceConfig) Validate() error {
	var errs []error
	if c.Root == "" && c.Dir == "" {
		errs = append(errs, errors.New("root or dir: one is required"))
	}
	if c.CasesFile != "" && len(c.Cases) == 0 {
		errs = append(errs, fmt.Errorf("cases: %s holds none", c.CasesFile))
	}
	if c.Agent == "" || c.Command == "" || c.Model == "" {
		errs = append(errs, errors.New("agent, command and model: all are required"))
	}
	if len(c.Trials) == 0 {
		errs = append(errs, errors.New("trials: none (the command recorded no trial)"))
	}
	return errors.Join(errs...)
}

// ErrExperimentExists is returned for a folder that already holds one.
var ErrExperimentExists = errors.New("the folder already holds an experiment")

// CasesFile is the case file WriteReference writes into the folder when
// the trials attempt only some of the case file's cases (`run --case-id`,
// `--tag`): those cases, with their code graders' files beside them, so
// the experiment is scored on what it ran (a case without trials would
// fail a gate's must-pass check); or, when the command had no case file
// (a replay of journals), each case's id and task from its trials'
// transcripts. The record's params then name the case file it came from.
const CasesFile = "cases.jsonl"

// JournalFile is the runs' journal WriteReference writes into the folder
// (ReferenceConfig.Journal).
const JournalFile = "journal.jsonl"

// WriteReference grades the trials, writes the experiment folder and
// returns the record and its folder. Grading that needs a backend the
// Env lacks fails with grade.ErrNoBackend, before anything is written.
func WriteReference(ctx context.Context, cfg ReferenceConfig) (*datasets.Experiment, string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, "", fmt.Errorf("experiment record: %w", err)
	}
	now, rnd := cfg.Now, cfg.Rand
	if now == nil {
		now = time.Now
	}
	if rnd == nil {
		rnd = rand.Uint32
	}
	trials, err := withTranscripts(&cfg)
	if err != nil {
		return nil, "", err
	}
	derived := cfg.CasesFile == ""
	if derived {
		cfg.Cases = casesOfTrials(trials)
	}
	perCase, err := gradeReference(ctx, &cfg, trials)
	if err != nil {
		return nil, "", err
	}
	start := now().UTC()
	id := NewID(start, rnd)
	dir := cfg.Dir
	if dir == "" {
		dir = filepath.Join(cfg.Root, id)
	}
	if _, err := os.Stat(filepath.Join(dir, RecordFile)); err == nil {
		return nil, "", fmt.Errorf("experiment folder %s: %w", dir, ErrExperimentExists)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("experiment folder: %w", err)
	}
	if err := folderCases(dir, &cfg, trials, derived); err != nil {
		return nil, "", err
	}
	ds, err := Digest(cfg.CasesFile, cfg.Cases)
	if err != nil {
		return nil, "", err
	}
	if cfg.Journal != nil {
		if err := folderJournal(dir, cfg.Journal, trials); err != nil {
			return nil, "", err
		}
	}
	gitDir := cfg.GitDir
	if gitDir == "" {
		gitDir, _ = os.Getwd()
	}
	commit, dirty := GitInfo(ctx, gitDir)
	rec := &datasets.Experiment{Version: datasets.ExperimentVersion, ID: id, Name: cfg.Name, Created: start,
		Dataset: ds, Agent: datasets.ExperimentAgent{Label: cfg.Label, GitCommit: commit, GitDirty: dirty, Params: referenceParams(&cfg)},
		Target: datasets.ExperimentTarget{Kind: TargetReference, Description: fmt.Sprintf("reference agent %s (%s)", cfg.Agent, cfg.Model)},
		Trials: perCase, Store: cfg.Store}
	if rec.Agent.Label == "" {
		rec.Agent.Label = cfg.Agent
	}
	summarise(rec, cfg.Cases, trials, perCase, cfg.Score)
	rec.Finished = now().UTC()
	sortTrials(trials)
	if err := writeLines(filepath.Join(dir, TrialsFile), trials); err != nil {
		return nil, "", err
	}
	if err := WriteRecord(dir, rec); err != nil {
		return nil, "", err
	}
	return rec, dir, nil
}

// withTranscripts copies the trials, attaching the transcript of each
// that names a JSONL journal but carries none (looked up as `loom-eval
// score` does: the current folder, then the trials file's).
func withTranscripts(cfg *ReferenceConfig) ([]datasets.Trial, error) {
	trials := append([]datasets.Trial(nil), cfg.Trials...)
	need := false
	for i := range trials {
		need = need || trials[i].Transcript == nil && trials[i].Journal != nil
	}
	name := cfg.TrialsFile
	if name == "" {
		name = "trials"
	}
	if need {
		if _, err := journal.CheckProvenance(name, trials, journal.SearchDirs(name)); err != nil {
			return nil, fmt.Errorf("experiment record: %w", err)
		}
	}
	// The folder's copy names journals by absolute path: it is read from
	// elsewhere than the command ran.
	for i := range trials {
		ref := trials[i].Journal
		if ref == nil || filepath.IsAbs(ref.Path) || cfg.Journal != nil && ref.Path == JournalFile {
			continue
		}
		for _, d := range journal.SearchDirs(name) {
			p := filepath.Join(d, ref.Path)
			if _, err := os.Stat(p); err == nil {
				abs, err := filepath.Abs(p)
				if err == nil {
					trials[i].Journal = &datasets.JournalRef{Path: abs, RunID: ref.RunID}
				}
				break
			}
		}
	}
	return trials, nil
}

// folderCases writes the folder's own case file when the trials attempt a
// subset of cfg's cases (or cfg has none) and points cfg at it.
func folderCases(dir string, cfg *ReferenceConfig, trials []datasets.Trial, derived bool) error {
	attempted := map[string]bool{}
	for _, t := range trials {
		attempted[t.CaseID] = true
	}
	if !derived && len(attempted) == len(cfg.Cases) {
		return nil
	}
	params := map[string]string{}
	for k, v := range cfg.Params {
		params[k] = v
	}
	var sel []datasets.Case
	for _, c := range cfg.Cases {
		if attempted[c.ID] {
			sel = append(sel, c)
		}
	}
	if !derived {
		orig, err := Digest(cfg.CasesFile, cfg.Cases)
		if err != nil {
			return err
		}
		params["cases_from"], params["cases_from_sha256"] = orig.Path, orig.SHA256
	}
	for _, c := range sel {
		for _, g := range c.Graders {
			if g.Type != datasets.GraderCode {
				continue
			}
			path := filepath.Join(dir, filepath.FromSlash(g.File))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return fmt.Errorf("grader file %s: %w", g.File, err)
			}
			if err := writeAtomic(path, g.Source); err != nil {
				return err
			}
		}
	}
	cfg.Cases, cfg.CasesFile, cfg.Params = sel, filepath.Join(dir, CasesFile), params
	return writeLines(cfg.CasesFile, sel)
}

// folderJournal writes the runs' journal into dir and points the trials
// that name JournalFile at it.
func folderJournal(dir string, b []byte, trials []datasets.Trial) error {
	path := filepath.Join(dir, JournalFile)
	if err := writeAtomic(path, b); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	for i := range trials {
		if ref := trials[i].Journal; ref != nil && ref.Path == JournalFile {
			trials[i].Journal = &datasets.JournalRef{Path: abs, RunID: ref.RunID}
		}
	}
	return nil
}

// casesOfTrials are the cases trials attempt, without expectations: the
// id and the task their transcripts give, in id order.
func casesOfTrials(trials []datasets.Trial) []datasets.Case {
	tasks := map[string]string{}
	var ids []string
	for _, t := range trials {
		if _, ok := tasks[t.CaseID]; !ok {
			ids = append(ids, t.CaseID)
			tasks[t.CaseID] = ""
		}
		if t.Transcript != nil && tasks[t.CaseID] == "" {
			tasks[t.CaseID] = t.Transcript.Task
		}
	}
	sort.Strings(ids)
	cases := make([]datasets.Case, len(ids))
	for i, id := range ids {
		task := tasks[id]
		if task == "" {
			task = "(the journal recorded no task)"
		}
		cases[i] = datasets.Case{ID: id, Task: task}
	}
	return cases
}

// gradeReference checks the trials against the cases and grades them; it
// returns the trials per case (the highest trial number + 1).
func gradeReference(ctx context.Context, cfg *ReferenceConfig, trials []datasets.Trial) (int, error) {
	known := make(map[string]bool, len(cfg.Cases))
	for _, c := range cfg.Cases {
		known[c.ID] = true
	}
	perCase := 1
	seen := map[TrialKey]bool{}
	for _, t := range trials {
		if !known[t.CaseID] {
			return 0, fmt.Errorf("experiment record: trial %d names case %q, which is not in %s", t.Trial, t.CaseID, cfg.CasesFile)
		}
		k := TrialKey{t.CaseID, t.Trial}
		if seen[k] {
			return 0, fmt.Errorf("experiment record: trial %d of case %q is there twice (one experiment holds one of each)", t.Trial, t.CaseID)
		}
		seen[k] = true
		perCase = max(perCase, t.Trial+1)
	}
	env := cfg.Grading
	if env.Prices == nil {
		env.Prices = cfg.Score.Prices
	}
	if _, err := grade.Trials(ctx, env, cfg.Cases, trials); err != nil {
		return 0, fmt.Errorf("experiment record: grade: %w", err)
	}
	for i := range trials {
		trials[i].Spans = nil // the trace stays in its store; the record names it
	}
	return perCase, nil
}

// summarise fills the record's counts and status as the runner's finish
// does; the cases counted are those the trials attempt.
func summarise(rec *datasets.Experiment, cases []datasets.Case, trials []datasets.Trial, perCase int, cfg scorer.Config) {
	byID := make(map[string]*datasets.Case, len(cases))
	for i := range cases {
		byID[cases[i].ID] = &cases[i]
	}
	attempted := map[string]bool{}
	for i := range trials {
		t := &trials[i]
		attempted[t.CaseID] = true
		if ts, err := scorer.ScoreTrial(byID[t.CaseID], t, cfg); err == nil && ts.Passed {
			rec.Summary.Passed++
		}
		if t.Success != nil && !*t.Success {
			rec.Summary.AgentFailures++
		}
		if rec.ModelLabel == "" {
			rec.ModelLabel = t.ModelLabel
		}
	}
	rec.Cases = len(attempted)
	rec.Summary.Expected, rec.Summary.Recorded = rec.Cases*perCase, len(trials)
	rec.Status = datasets.ExperimentIncomplete
	if rec.Summary.Recorded == rec.Summary.Expected {
		rec.Status = datasets.ExperimentComplete
	}
}

func referenceParams(cfg *ReferenceConfig) map[string]string {
	p := map[string]string{"agent": cfg.Agent, "command": cfg.Command, "model": cfg.Model}
	for k, v := range cfg.Params {
		p[k] = v
	}
	return p
}

func sortTrials(trials []datasets.Trial) {
	sort.SliceStable(trials, func(i, j int) bool {
		if trials[i].CaseID != trials[j].CaseID {
			return trials[i].CaseID < trials[j].CaseID
		}
		return trials[i].Trial < trials[j].Trial
	})
}

// writeLines writes one JSON value per line, atomically.
func writeLines[T any](path string, vs []T) error {
	var b strings.Builder
	for i := range vs {
		line, err := json.Marshal(&vs[i])
		if err != nil {
			return fmt.Errorf("encode %s line %d: %w", path, i+1, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return writeAtomic(path, []byte(b.String()))
}
