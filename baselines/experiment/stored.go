package experiment

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
	"github.com/loomwork/loomwork/scorer/report"
	"github.com/loomwork/loomwork/store"
)

// Experiments in a trace store (store.ExperimentWriter): a run puts its
// record, its trials and its case file into the store its traces went to,
// so the UI and `experiment list|show|compare --store` read it there. The
// folder stays the run's journal; the store holds a copy of what it says.

// Save puts the experiment in dir into w: its record, its trials and the
// case file it ran, with the files its code graders read. A case file that
// is gone or changed since the run is not kept (the experiment is still
// saved; the note says so, and readers fall back to the record's path).
func Save(ctx context.Context, w store.ExperimentWriter, dir string) (note string, err error) {
	rec, err := ReadRecord(dir)
	if err != nil {
		return "", err
	}
	trials, err := datasets.LoadTrials(filepath.Join(dir, TrialsFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	cf, note := keptCaseFile(rec)
	se, st, err := rec.ToStore(trials, cf)
	if err != nil {
		return "", err
	}
	if err := w.PutExperiment(ctx, se, st); err != nil {
		return "", fmt.Errorf("save experiment %s to the store: %w", rec.ID, err)
	}
	return note, nil
}

// keptCaseFile reads the record's case file when it still has the digest
// the record pins.
func keptCaseFile(rec *datasets.Experiment) (*datasets.ExperimentCaseFile, string) {
	b, err := os.ReadFile(rec.Dataset.Path)
	if err != nil {
		return nil, fmt.Sprintf("experiment %s: case file not kept in the store (%v)", rec.ID, err)
	}
	cases, err := datasets.LoadCases(rec.Dataset.Path)
	if err != nil {
		return nil, fmt.Sprintf("experiment %s: case file not kept in the store (%v)", rec.ID, err)
	}
	ds, err := Digest(rec.Dataset.Path, cases)
	if err == nil {
		if diff := SameDataset(rec.Dataset, ds); diff != "" {
			err = errors.New(diff)
		}
	}
	if err != nil {
		return nil, fmt.Sprintf("experiment %s: case file not kept in the store: %v since the run", rec.ID, err)
	}
	return datasets.NewExperimentCaseFile(rec.Dataset, b, cases), ""
}

// StoreReader reads experiments and the traces their trials name.
type StoreReader interface {
	store.Reader
	store.ExperimentReader
}

// LoadStored reads an experiment from a store, with the spans of its
// trials' traces from the same store (trace graders and rollups read them;
// a trace the store does not hold leaves the trials as recorded, with a
// note) and the case file kept with it.
func LoadStored(ctx context.Context, r StoreReader, id string) (*Side, error) {
	se, st, err := r.GetExperiment(ctx, id)
	if err != nil {
		return nil, err
	}
	rec, trials, cf, err := datasets.ExperimentFromStore(se, st)
	if err != nil {
		return nil, err
	}
	s := &Side{Source: fmt.Sprintf("experiment %s (store)", id), Record: rec, Trials: trials}
	if cf != nil {
		if s.Cases, err = cf.Load(); err != nil {
			return nil, err
		}
	}
	with := append([]datasets.Trial(nil), trials...)
	if err := scorer.ResolveTraces(ctx, r, with); err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("%s: %v: scored on the recorded fields", rec.ID, err))
	} else {
		s.Trials = with
	}
	return s, nil
}

// CasesOf is the case file a side is scored on: the one kept with it in
// the store, else the file at the record's path.
func CasesOf(s *Side) ([]datasets.Case, error) {
	if s.Cases != nil {
		return s.Cases, nil
	}
	cases, err := datasets.LoadCases(s.Record.Dataset.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: experiment %s: %w", report.ErrBadInput, s.Record.ID, err)
	}
	return cases, nil
}

// Comparison is experiments side by side, case by case: what `experiment
// compare` prints and the UI's compare page shows (both call Compare).
type Comparison struct {
	Experiments []*datasets.Experiment `json:"experiments"`
	// Rows are A (the first, the baseline) and B (the second) as Rows
	// pairs them: `experiment compare --json` prints them as "cases".
	Rows []CaseRow `json:"-"`
	// Cases are every experiment's figures per case, in the order given.
	Cases []CaseColumns `json:"cases"`
	// Report is B scored against A, gated by the policy: its Comparison
	// holds the pass-rate delta and MDE, its Gate the decision.
	Report *report.Report `json:"-"`
	// DatasetWarnings say which experiments ran another case file than A.
	DatasetWarnings []string `json:"dataset_warnings,omitempty"`
}

// CaseColumns is one case across the compared experiments: Sides[i] is
// experiment i's trials, Changes[i] its change against the first
// ("" for the first itself).
type CaseColumns struct {
	CaseID  string     `json:"case_id"`
	Changes []string   `json:"changes"`
	Sides   []CaseSide `json:"sides"`
}

// Compare scores sides[1] against sides[0] under policy (the gate of
// `experiment run --against` and `experiment compare`) and every further
// side against sides[0] without a gate, each on its own case file.
func Compare(ctx context.Context, cfg scorer.Config, sides []*Side, policy *gate.Policy) (*Comparison, error) {
	if len(sides) < 2 {
		return nil, fmt.Errorf("%w: compare: want at least two experiments, got %d", report.ErrBadInput, len(sides))
	}
	c := &Comparison{}
	byCase := map[string]*CaseColumns{}
	var order []string
	for i, s := range sides {
		c.Experiments = append(c.Experiments, s.Record)
		if i == 0 {
			continue
		}
		if d := SameDataset(sides[0].Record.Dataset, s.Record.Dataset); d != "" {
			c.DatasetWarnings = append(c.DatasetWarnings, fmt.Sprintf("%s: %s between %s and %s", s.Record.ID, d, sides[0].Record.ID, s.Record.ID))
		}
		cases, err := CasesOf(s)
		if err != nil {
			return nil, err
		}
		p := policy
		if i > 1 {
			p = nil
		}
		rep, err := Evaluate(ctx, cfg, cases, s.Record.Dataset.Path, s, sides[0], p, report.Inputs{})
		if err != nil {
			return nil, err
		}
		rows := Rows(rep.Comparison, sides[0].Trials, s.Trials)
		if i == 1 {
			c.Rows, c.Report = rows, rep
		}
		for _, r := range rows {
			col := byCase[r.CaseID]
			if col == nil {
				col = &CaseColumns{CaseID: r.CaseID, Changes: make([]string, len(sides)), Sides: make([]CaseSide, len(sides))}
				col.Sides[0] = r.A
				byCase[r.CaseID] = col
				order = append(order, r.CaseID)
			}
			col.Changes[i], col.Sides[i] = r.Change, r.B
		}
	}
	sort.Strings(order)
	for _, id := range order {
		c.Cases = append(c.Cases, *byCase[id])
	}
	return c, nil
}
