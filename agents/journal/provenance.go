package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/datasets"
)

// Provenance is what a recorded run says produced its model answers: the
// label its model_response events carry ("scripted" or "live"), and the
// providers and models that answered. It is read from the journal, never
// from what a trials file claims about the run.
type Provenance struct {
	File  string `json:"file"` // the journal as opened (the resolved path)
	RunID string `json:"run_id"`
	// Label is llm.LabelScripted when any answer was scripted (a scripted
	// run is never reported as live), else the answers' label; "" when the
	// run recorded no model answer.
	Label     string   `json:"label,omitempty"`
	Providers []string `json:"providers,omitempty"` // distinct, in first-answer order
	Models    []string `json:"models,omitempty"`    // distinct response models, in first-answer order
	// Requested is the model run_started asked for ("" lets the gateway
	// route); a trial may name it instead of the response model.
	Requested string `json:"requested_model,omitempty"`
}

// ProvenanceOf reads the provenance of one run from its events.
func ProvenanceOf(run *Run) Provenance {
	p := Provenance{File: run.File, RunID: run.ID}
	for _, e := range run.Events {
		switch e.Kind {
		case KindRunStarted:
			var rs RunStarted
			if json.Unmarshal(e.Payload, &rs) == nil {
				p.Requested = rs.Model
			}
		case KindModelResponse:
			var resp llm.Response
			_ = json.Unmarshal(e.Payload, &resp) // the chain verified it; an undecodable payload still has e.Label
			for _, l := range []string{e.Label, resp.Label} {
				if l != "" && (p.Label == "" || l == llm.LabelScripted) {
					p.Label = l
				}
			}
			if resp.Provider != "" && !slices.Contains(p.Providers, resp.Provider) {
				p.Providers = append(p.Providers, resp.Provider)
			}
			if resp.Model != "" && !slices.Contains(p.Models, resp.Model) {
				p.Models = append(p.Models, resp.Model)
			}
		}
	}
	return p
}

// TrialLabel is the label a trial of this run gets when its trials file
// gives none: "scripted" for scripted answers, "live" for live ones, ""
// when the run recorded no answer.
func (p Provenance) TrialLabel() string {
	switch p.Label {
	case llm.LabelScripted:
		return datasets.LabelScripted
	case llm.LabelLive:
		return datasets.LabelLive
	}
	return ""
}

// Admits reports whether a trial of this run may carry label: a scripted
// run only "scripted"; a live run "live" (the run itself) or "replayed"
// (its replay, which re-uses the recorded live answers, as
// replay.TrialRecord labels it). A run without answers contradicts nothing.
func (p Provenance) Admits(label string) bool {
	switch p.Label {
	case llm.LabelScripted:
		return label == datasets.LabelScripted
	case llm.LabelLive:
		return label == datasets.LabelLive || label == datasets.LabelReplayed
	case "":
		return true
	}
	return label == p.Label
}

// AdmitsModel reports whether a trial of this run may name model: one of
// the response models or the requested one. A run without answers
// contradicts nothing.
func (p Provenance) AdmitsModel(model string) bool {
	return len(p.Models) == 0 || slices.Contains(p.Models, model) || model == p.Requested
}

func (p Provenance) String() string {
	s := p.Label
	if s == "" {
		s = "no model answer"
	}
	var by []string
	if len(p.Providers) > 0 {
		by = append(by, "provider "+strings.Join(p.Providers, "+"))
	}
	if len(p.Models) > 0 {
		by = append(by, "model "+strings.Join(p.Models, "+"))
	}
	if len(by) > 0 {
		s += " (" + strings.Join(by, ", ") + ")"
	}
	return s
}

// SearchDirs is where a trials file's relative journal paths are looked
// up: as given (relative to the current directory; "" below), then
// relative to the folder holding the trials file, then to each folder
// above it. Replay writes the paths it was given, relative to the folder
// it ran in: a trials file written next to its journals resolves from
// anywhere, and one recorded at a repository's root (as
// baselines/baseline.trials.jsonl is, naming baselines/journals/…)
// resolves from the root and from inside baselines/ alike.
func SearchDirs(trialsFile string) []string {
	dirs := []string{""}
	d := filepath.Dir(trialsFile)
	if d != "." {
		dirs = append(dirs, d)
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return dirs
	}
	for {
		up := filepath.Dir(abs)
		if up == abs {
			return dirs
		}
		dirs = append(dirs, up)
		abs = up
	}
}

// CheckProvenance derives every journal-backed trial's provenance from the
// journal it references and checks the trials file against it. trialsFile
// names the file in errors; a relative journal path is tried in each of
// dirs in turn ("" is the path as given; see SearchDirs). Each journal file
// is read and verified once.
//
// A trial whose label its run does not admit (a scripted run labelled
// "live" or "replayed", a live run labelled "scripted"), or whose model is
// none of the run's, is an error naming the trials file, line, field and
// journal; so is a journal that does not exist or does not verify, and a
// run_id the journal does not hold. A trial without a label gets the
// derived one (and, without a model, the run's first response model), in
// place, and a trial without a transcript gets the run's (TranscriptOf),
// for graders. Every bad trial is reported (errors.Join of *datasets.LineError),
// each missing or corrupt journal once.
//
// The result has one entry per trial; trials without a journal reference
// get the zero Provenance (their spans are checked by the scorer).
func CheckProvenance(trialsFile string, trials []datasets.Trial, dirs []string) ([]Provenance, error) {
	type file struct {
		runs map[string]*Run
		err  error
	}
	files := map[string]*file{} // by the path as the trials file gives it
	out := make([]Provenance, len(trials))
	var errs []error
	bad := func(t *datasets.Trial, field string, err error) {
		errs = append(errs, &datasets.LineError{File: trialsFile, Line: t.Line, Field: field, Err: err})
	}
	for i := range trials {
		t := &trials[i]
		if t.Journal == nil {
			continue
		}
		ref := t.Journal
		f, seen := files[ref.Path]
		if !seen {
			f = &file{}
			files[ref.Path] = f
			runs, err := readReferenced(ref.Path, dirs)
			if err != nil {
				f.err = err
				bad(t, "journal.path", err) // once per file: later trials naming it add nothing
			} else {
				f.runs = make(map[string]*Run, len(runs))
				for j := range runs {
					f.runs[runs[j].ID] = &runs[j]
				}
			}
		}
		if f.err != nil {
			continue
		}
		run, ok := f.runs[ref.RunID]
		if !ok {
			bad(t, "journal.run_id", fmt.Errorf("run %q is not in journal %s (it holds %d runs)", ref.RunID, ref.Path, len(f.runs)))
			continue
		}
		p := ProvenanceOf(run)
		out[i] = p
		if t.Transcript == nil {
			// Graders read what the run did from the journal, the
			// authority on it.
			tr := TranscriptOf(run)
			t.Transcript = &tr
		}
		switch {
		case t.ModelLabel == "":
			if t.ModelLabel = p.TrialLabel(); t.ModelLabel == "" {
				bad(t, "model_label", fmt.Errorf("absent, and journal %s run %s recorded no model answer to derive it from (label it)", p.File, p.RunID))
				continue
			}
		case !p.Admits(t.ModelLabel):
			bad(t, "model_label", fmt.Errorf("%q contradicts journal %s run %s, whose model answers are %s: %s",
				t.ModelLabel, p.File, p.RunID, p, labelAdvice(p)))
			continue
		}
		switch {
		case t.Model == "":
			if len(p.Models) > 0 {
				t.Model = p.Models[0]
			}
		case !p.AdmitsModel(t.Model):
			bad(t, "model", fmt.Errorf("%q contradicts journal %s run %s, whose model answers are %s", t.Model, p.File, p.RunID, p))
		}
	}
	return out, errors.Join(errs...)
}

func labelAdvice(p Provenance) string {
	switch p.Label {
	case llm.LabelScripted:
		return `a scripted run is labelled "scripted"`
	case llm.LabelLive:
		return `a live run is labelled "live" (or "replayed" for its replay)`
	}
	return fmt.Sprintf("label it %q", p.Label)
}

// readReferenced opens the journal a trials file names, trying each dir.
func readReferenced(path string, dirs []string) ([]Run, error) {
	var tried []string
	for _, d := range dirs {
		p := path
		if d != "" {
			if filepath.IsAbs(path) {
				continue
			}
			p = filepath.Join(d, path)
		}
		if slices.Contains(tried, p) {
			continue
		}
		tried = append(tried, p)
		runs, err := ReadJSONLFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("journal %s: %w", path, err)
		}
		return runs, nil
	}
	wd, _ := os.Getwd()
	return nil, fmt.Errorf("journal %s: %w (tried %s; a relative path is looked up from the current directory, %s, then from the trials file's folder and each folder above it)",
		path, fs.ErrNotExist, strings.Join(tried, ", "), wd)
}
