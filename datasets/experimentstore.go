package datasets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/loomwork/loomwork/store"
)

// An experiment kept in a trace store (store.ExperimentWriter) is three
// opaque documents the store indexes but does not read: the Experiment
// record, each graded Trial, and the ExperimentCaseFile it ran. This file
// converts both ways, so the store needs no import of this package.

// ExperimentCaseFile is the case file an experiment ran, kept with it so
// the experiment can be scored and compared where the file is not (a UI on
// another machine): its path and digest as the record names them, its
// content, and the files its code graders read.
type ExperimentCaseFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Cases is the case file's content (JSONL).
	Cases string `json:"cases"`
	// Files are the code graders' files, Path relative to the case file's
	// folder as the graders name them.
	Files []ExperimentFile `json:"files,omitempty"`
}

// ExperimentFile is one file a code grader reads.
type ExperimentFile struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// NewExperimentCaseFile keeps content (the bytes of the case file at ds.Path)
// and the sources of cases' code graders (LoadCases read them).
func NewExperimentCaseFile(ds ExperimentDataset, content []byte, cases []Case) *ExperimentCaseFile {
	f := &ExperimentCaseFile{Path: ds.Path, SHA256: ds.SHA256, Cases: string(content)}
	seen := map[string]bool{}
	for _, c := range cases {
		for _, g := range c.Graders {
			if g.Type == GraderCode && !seen[g.File] {
				seen[g.File] = true
				f.Files = append(f.Files, ExperimentFile{Path: g.File, Content: string(g.Source)})
			}
		}
	}
	sort.Slice(f.Files, func(i, j int) bool { return f.Files[i].Path < f.Files[j].Path })
	return f
}

// Load parses the kept case file as LoadCases would read it from disk,
// code grader sources included; a grader whose file was not kept is an
// error naming it.
func (f *ExperimentCaseFile) Load() ([]Case, error) {
	name := f.Path + " (as kept in the store)"
	cases, err := ReadCases(bytes.NewReader([]byte(f.Cases)), name)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, x := range f.Files {
		files[filepath.ToSlash(x.Path)] = x.Content
	}
	for i := range cases {
		c := &cases[i]
		for j := range c.Graders {
			g := &c.Graders[j]
			if g.Type != GraderCode {
				continue
			}
			src, ok := files[filepath.ToSlash(g.File)]
			if !ok {
				return nil, &LineError{File: name, Line: c.Line, Field: fmt.Sprintf("graders[%d].file", j), Err: fmt.Errorf("code grader file %s was not kept with the experiment", g.File)}
			}
			g.Source = []byte(src)
		}
	}
	return cases, nil
}

// ToStore is the experiment as a store keeps it: the record, its trials
// and (when not nil) the case file it ran.
func (e *Experiment) ToStore(trials []Trial, cases *ExperimentCaseFile) (store.StoredExperiment, []store.StoredTrial, error) {
	rec, err := json.Marshal(e)
	if err != nil {
		return store.StoredExperiment{}, nil, fmt.Errorf("experiment %s: encode record: %w", e.ID, err)
	}
	se := store.StoredExperiment{ID: e.ID, Name: e.Name, Created: e.Created, Label: e.Agent.Label, DatasetSHA256: e.Dataset.SHA256,
		Status: e.Status, Record: rec}
	if cases != nil {
		if se.Dataset, err = json.Marshal(cases); err != nil {
			return store.StoredExperiment{}, nil, fmt.Errorf("experiment %s: encode case file: %w", e.ID, err)
		}
	}
	st := make([]store.StoredTrial, len(trials))
	for i := range trials {
		t := trials[i]
		t.Spans = nil // the trace stays in the store; the trial names it
		doc, err := json.Marshal(&t)
		if err != nil {
			return store.StoredExperiment{}, nil, fmt.Errorf("experiment %s: encode trial %d of case %q: %w", e.ID, t.Trial, t.CaseID, err)
		}
		st[i] = store.StoredTrial{CaseID: t.CaseID, Trial: t.Trial, TraceID: t.TraceID, Doc: doc}
	}
	return se, st, nil
}

// ExperimentFromStore decodes what a store kept, as strictly as
// DecodeExperiment and ReadTrials read the files of an experiment folder.
// The case file is nil when none was kept. Errors name the experiment.
func ExperimentFromStore(se store.StoredExperiment, st []store.StoredTrial) (*Experiment, []Trial, *ExperimentCaseFile, error) {
	name := fmt.Sprintf("experiment %s in the store", se.ID)
	e, err := DecodeExperiment(se.Record, name+": record")
	if err != nil {
		return nil, nil, nil, err
	}
	if e.ID != se.ID {
		return nil, nil, nil, fmt.Errorf("%s: the record's id is %q", name, e.ID)
	}
	var lines bytes.Buffer
	for _, t := range st {
		lines.Write(bytes.TrimSpace(t.Doc))
		lines.WriteByte('\n')
	}
	trials, err := ReadTrials(&lines, name+": trials")
	if err != nil {
		return nil, nil, nil, err
	}
	var cf *ExperimentCaseFile
	if len(se.Dataset) > 0 {
		cf = &ExperimentCaseFile{}
		if err := decodeExperimentStrict(se.Dataset, cf); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: case file: %w", name, err)
		}
	}
	return e, trials, cf, nil
}
