// Package suite runs an eval suite — every case of a cases file × N trials
// of a reference agent — as tasks in the coordinator's queue (package
// internal/coord), so many worker processes can share it. Each (case,
// trial) is one task with its own intent key. A worker claims a trial
// under a lease, runs the agent through the durable runtime in an attempt
// folder of its own (its journal, its workspace: no trial reads another's
// files or history), renews the lease while the trial runs and submits the
// trial record with the trial's exported journal, fenced by its grant. A
// killed worker's trial is reclaimed when its lease expires; the new
// attempt imports the previous attempt's journal and resumes the run from
// it (recorded model answers and tool results are reused, not
// re-requested), and the killed worker's late result, should it wake up,
// is refused by the fence.
//
// The suite's driver (Driver, behind `loom-eval suite run`) is the trusted
// validator: it checks each proposal, records a receipt for exactly that
// candidate and accepts it, and finally writes the one accepted record per
// (case, trial) — in cases-file order, trials within — as the trials file
// `loom-eval score` and `gate` read, with each trial's journal beside it.
// For scripted agents that file is byte-identical however many workers ran
// it and wherever they were killed: the journal clock is logical and a
// resumed attempt continues it from the last recorded event.
package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/policy"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/coord"
)

// Kind is the coordinator task kind of a suite trial.
const Kind = "suite-trial"

// metaKey holds the suite's Definition in the coordinator.
const metaKey = "suite"

// Receipt environment and policy of the driver's validation.
const (
	ValidationPolicy = "suite-trial-record/v1: the record decodes and validates, names its task's case and trial and run id, and its journal verifies and holds exactly that run, sealed"
)

// Definition is what every worker of a suite needs, stored once in the
// coordinator so `loom-eval worker --coordinator DB` needs nothing else.
type Definition struct {
	// Agent is research or coding; the model is the agent's scripted
	// policy (labelled "scripted" in every record).
	Agent  string `json:"agent"`
	Trials int    `json:"trials"`
	// Dir is the suite folder as the user named it: records point at
	// journals below it (Dir/journals/...), as `loom-eval run` and `ci`
	// record paths as given.
	Dir string `json:"dir"`
	// AbsDir is Dir made absolute: where workers keep attempts.
	AbsDir string `json:"abs_dir"`
	// Dataset and IndexCache serve the research agent.
	Dataset    string `json:"dataset,omitempty"`
	IndexCache string `json:"index_cache,omitempty"`
	// Lease is the lease each claim takes (renewed at a third of it).
	Lease Duration `json:"lease"`
	// CasesDigest is the SHA-256 of the cases file: a suite folder holds
	// one suite.
	CasesDigest string `json:"cases_digest"`
	// OTLPEndpoint is the collector (host:port, OTLP/gRPC) every worker
	// sends its trials' spans to, unless its own configuration names
	// another (a worker on another host); "" sends none.
	OTLPEndpoint string `json:"otlp_endpoint,omitempty"`
	// CaptureContent records each chat span's messages (the scripted
	// policies' prompts and answers; no secret is in them).
	CaptureContent bool `json:"capture_content,omitempty"`
	// Policy is the policy rules file's content (agents/policy) every
	// worker authorizes the trials' tool calls with; empty: none. The
	// rules travel in the definition, so every worker, started here or
	// joining later, applies the same ones.
	Policy json.RawMessage `json:"policy,omitempty"`
	// PolicyName names Policy in the trials' journals: "default" for the
	// built-in policy (agents/policy.DefaultName), else the rules file.
	PolicyName string `json:"policy_name,omitempty"`
}

// Duration is the coordinator's duration, which reads and writes as "10s".
type Duration = coord.Duration

// Validate reports every problem with the definition.
func (d Definition) Validate() error {
	var errs []error
	if d.Agent != research.Name && d.Agent != coding.Name {
		errs = append(errs, fmt.Errorf("agent must be research or coding (got %q)", d.Agent))
	}
	if d.Trials < 1 {
		errs = append(errs, fmt.Errorf("trials must be at least 1 (got %d)", d.Trials))
	}
	if d.Dir == "" || d.AbsDir == "" {
		errs = append(errs, errors.New("dir must be set"))
	}
	if d.Lease <= 0 {
		errs = append(errs, fmt.Errorf("lease must be positive (got %s)", time.Duration(d.Lease)))
	}
	if len(d.Policy) > 0 {
		if _, err := policy.ParseRules(bytes.NewReader(d.Policy), "policy"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CoordinatorPath is the coordinator database of a suite folder.
func CoordinatorPath(dir string) string { return filepath.Join(dir, "coord.db") }

// TrialSpec is a trial task's payload.
type TrialSpec struct {
	CaseID     string          `json:"case_id"`
	Trial      int             `json:"trial"`
	Input      string          `json:"input"`
	Attributes json.RawMessage `json:"attributes,omitempty"`
	RunID      string          `json:"run_id"`
}

// TaskKey is the intent key of one (case, trial).
func TaskKey(agent, caseID string, trial int) string {
	return fmt.Sprintf("suite/%s/%s/t%d", agent, caseID, trial)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// trialName is a file-system name for one (case, trial), unique per suite
// (case ids are unique in a cases file; the digest keeps ids that differ
// only in unsafe characters apart).
func trialName(caseID string, trial int) string {
	safe := unsafeName.ReplaceAllString(caseID, "_")
	if safe != caseID {
		safe += "-" + coord.Digest([]byte(caseID))[:8]
	}
	return fmt.Sprintf("%s-t%d", safe, trial)
}

// JournalPath is where the accepted journal of a trial is published, as a
// record names it.
func (d Definition) JournalPath(caseID string, trial int) string {
	return filepath.Join(d.Dir, "journals", trialName(caseID, trial)+".jsonl")
}

// TrialsPath is the suite's trials file.
func (d Definition) TrialsPath() string { return filepath.Join(d.Dir, "trials.jsonl") }

// Plan is the suite's trials in output order: cases in file order, trials
// within.
func Plan(agent string, cases []datasets.Case, trials int, casesFile string) ([]TrialSpec, error) {
	var out []TrialSpec
	for _, c := range cases {
		var attrs json.RawMessage
		if agent == research.Name {
			excl, err := research.ExcludedIssues(c.Tags)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: field \"tags\": %w", casesFile, c.Line, err)
			}
			attrs = research.TaskAttributes(excl...)
		}
		for t := range trials {
			// The case id names the run; the clock is not consulted.
			id := fmt.Sprintf("%s-%s-t%d", agent, c.ID, t)
			out = append(out, TrialSpec{CaseID: c.ID, Trial: t, Input: c.Task, Attributes: attrs, RunID: id})
		}
	}
	return out, nil
}

// Enqueue stores the definition (once: a suite folder keeps its suite) and
// enqueues every trial (idempotent: running the same suite again resumes
// it).
func Enqueue(ctx context.Context, c *coord.Coordinator, def Definition, plan []TrialSpec) error {
	b, err := json.Marshal(def)
	if err != nil {
		return err
	}
	if err := c.SetMeta(ctx, metaKey, b); err != nil {
		return fmt.Errorf("suite %s holds another suite (remove it or choose another --out): %w", def.Dir, err)
	}
	for _, s := range plan {
		p, err := json.Marshal(s)
		if err != nil {
			return err
		}
		if _, err := c.Enqueue(ctx, coord.TaskSpec{Key: TaskKey(def.Agent, s.CaseID, s.Trial), Kind: Kind, Payload: p}); err != nil {
			return err
		}
	}
	return nil
}

// LoadDefinition reads the suite definition a coordinator holds.
func LoadDefinition(ctx context.Context, c *coord.Coordinator) (Definition, error) {
	b, err := c.Meta(ctx, metaKey)
	if err != nil {
		return Definition{}, err
	}
	if b == nil {
		return Definition{}, errors.New("the coordinator holds no suite (start one with loom-eval suite run)")
	}
	var d Definition
	if err := json.Unmarshal(b, &d); err != nil {
		return Definition{}, fmt.Errorf("suite definition: %w", err)
	}
	return d, d.Validate()
}

// Result is what a worker submits for a trial: its record and its
// journal. The candidate is the SHA-256 of the encoded Result.
type Result struct {
	Trial   json.RawMessage `json:"trial"`
	Journal string          `json:"journal"`
}

// validate is the driver's check policy (ValidationPolicy) on one
// proposal; it returns the decoded record.
func validate(def Definition, spec TrialSpec, raw []byte) (datasets.Trial, error) {
	var r Result
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return datasets.Trial{}, fmt.Errorf("result: %w", err)
	}
	trials, err := datasets.ReadTrials(bytes.NewReader(r.Trial), "record")
	if err != nil {
		return datasets.Trial{}, err
	}
	if len(trials) != 1 {
		return datasets.Trial{}, fmt.Errorf("want one trial record, got %d", len(trials))
	}
	t := trials[0]
	if t.CaseID != spec.CaseID || t.Trial != spec.Trial {
		return t, fmt.Errorf("record names case %s trial %d, the task is case %s trial %d", t.CaseID, t.Trial, spec.CaseID, spec.Trial)
	}
	jp := def.JournalPath(spec.CaseID, spec.Trial)
	if t.Journal == nil || t.Journal.RunID != spec.RunID || t.Journal.Path != jp {
		return t, fmt.Errorf("record's journal is %+v, want run %s in %s", t.Journal, spec.RunID, jp)
	}
	if r.Journal == "" {
		return t, nil // the run journaled nothing (failed before run_started): a failed trial
	}
	runs, err := readJournal(r.Journal, jp)
	if err != nil {
		return t, err
	}
	if len(runs) != 1 || runs[0] != spec.RunID {
		return t, fmt.Errorf("journal holds runs %v, want exactly %s", runs, spec.RunID)
	}
	return t, nil
}

func readJournal(s, name string) ([]string, error) {
	runs, err := readJSONL(s, name)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids, nil
}

// writeFileAtomic writes via a temporary file and a rename, so a reader
// never sees half a file.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func encodeTrial(t datasets.Trial) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("trial %d of case %s: %w", t.Trial, t.CaseID, err)
	}
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}
