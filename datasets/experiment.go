package datasets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Experiment is the record of one `loom-eval experiment run`: a user's
// agent run over a case file, cases × trials. It is the experiment.json of
// an experiment folder, next to trials.jsonl (the graded Trial records, one
// per (case, trial)) and report.json (the score report). It is a format
// only: the runner (experiment) writes it, and anything that lists
// or shows experiments (the CLI, a store, the UI) reads it from here.
type Experiment struct {
	// Version is the record format's version, ExperimentVersion.
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Name is the user's name for it (--name); "" when none was given.
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	// Finished is when the last run over it ended (zero while running).
	Finished time.Time `json:"finished,omitzero"`
	// Status is ExperimentRunning, ExperimentComplete or
	// ExperimentIncomplete (trials are missing; resume runs them).
	Status  string            `json:"status"`
	Dataset ExperimentDataset `json:"dataset"`
	Agent   ExperimentAgent   `json:"agent"`
	Target  ExperimentTarget  `json:"target"`
	// Trials is the number of trials per case; Cases the number of cases.
	Trials int `json:"trials"`
	Cases  int `json:"cases"`
	// ModelLabel is the label every trial carries ("" before the first
	// trial: derived from the agent's spans, else live).
	ModelLabel string `json:"model_label,omitempty"`
	// Store is the trace store URL the trials' trace ids resolve in.
	Store string `json:"store"`
	// Against is the experiment the run was gated against (its id and
	// folder), and Gate whether that gate passed; nil without --against.
	Against *ExperimentRef `json:"against,omitempty"`
	// Summary is the outcome of the trials recorded so far.
	Summary ExperimentSummary `json:"summary"`
}

// ExperimentVersion is the current Experiment record version.
const ExperimentVersion = 1

// Experiment statuses.
const (
	ExperimentRunning    = "running"
	ExperimentComplete   = "complete"
	ExperimentIncomplete = "incomplete"
)

// ExperimentDataset names the case file and pins its content: SHA256 is
// the digest of the case file's bytes, Files those of the files its
// graders read (code graders), so a resumed or compared experiment can
// tell that the cases changed under it.
type ExperimentDataset struct {
	Path   string       `json:"path"`
	SHA256 string       `json:"sha256"`
	Files  []FileDigest `json:"files,omitempty"`
}

// FileDigest is one file's SHA-256 (hex), its path relative to the case
// file's folder.
type FileDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// ExperimentAgent says which agent ran: the user's label (--label), the
// git commit of the folder it ran from (when it is a git work tree; Dirty
// when it had uncommitted changes) and free parameters (--param k=v).
type ExperimentAgent struct {
	Label     string            `json:"label,omitempty"`
	GitCommit string            `json:"git_commit,omitempty"`
	GitDirty  bool              `json:"git_dirty,omitempty"`
	Params    map[string]string `json:"params,omitempty"`
}

// ExperimentTarget is how the agent was reached, secrets redacted: Kind is
// the target kind ("command", "openai", "http"; later "a2a", "mcp") and
// Description a one-line, human-readable rendering of its configuration.
type ExperimentTarget struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
}

// ExperimentRef points at another experiment.
type ExperimentRef struct {
	ID  string `json:"id"`
	Dir string `json:"dir"`
	// GatePassed is the gate's verdict against it (nil: not gated yet).
	GatePassed *bool `json:"gate_passed,omitempty"`
}

// ExperimentSummary counts the recorded trials.
type ExperimentSummary struct {
	// Expected is cases × trials; Recorded how many trials are recorded;
	// Passed how many of those passed (finished and every required grader
	// passed, within budgets).
	Expected int `json:"expected"`
	Recorded int `json:"recorded"`
	Passed   int `json:"passed"`
	// AgentFailures counts trials where the agent itself failed (a
	// non-zero exit, an HTTP 4xx or 500, a timeout); they are recorded as
	// unfinished trials.
	AgentFailures int `json:"agent_failures"`
	// InfraFailures counts trials that could not be run after every retry
	// (the command could not start, the endpoint refused or answered 502,
	// 503, 504 or 429): they are not recorded, and resuming runs them.
	InfraFailures int `json:"infra_failures"`
}

// Validate checks what a reader relies on.
func (e *Experiment) Validate() error {
	var errs []error
	if e.Version != ExperimentVersion {
		errs = append(errs, fmt.Errorf("version: %d is not %d", e.Version, ExperimentVersion))
	}
	if e.ID == "" {
		errs = append(errs, errors.New("id: missing"))
	}
	switch e.Status {
	case ExperimentRunning, ExperimentComplete, ExperimentIncomplete:
	default:
		errs = append(errs, fmt.Errorf("status: %q is not running, complete or incomplete", e.Status))
	}
	if e.Dataset.Path == "" || e.Dataset.SHA256 == "" {
		errs = append(errs, errors.New("dataset: path and sha256 are required"))
	}
	if e.Trials < 1 {
		errs = append(errs, fmt.Errorf("trials: %d is not positive", e.Trials))
	}
	return errors.Join(errs...)
}

// DecodeExperiment decodes an experiment.json strictly (unknown fields are
// errors) and validates it; name labels errors.
func DecodeExperiment(b []byte, name string) (*Experiment, error) {
	var e Experiment
	if err := decodeExperimentStrict(b, &e); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &e, nil
}

func decodeExperimentStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
