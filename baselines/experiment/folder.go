package experiment

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/datasets"
)

// DefaultRoot is where experiments go without --out.
const DefaultRoot = ".loomwork/experiments"

// NewID names an experiment by its start time and four random hex digits
// (rand is injected: tests pass a fixed one).
func NewID(now time.Time, rand func() uint32) string {
	return fmt.Sprintf("%s-%04x", now.UTC().Format("20060102-150405"), rand()&0xffff)
}

// Digest pins the case file (by its absolute path, so show and compare
// find it from any folder) and the files its graders read.
func Digest(casesFile string, cases []datasets.Case) (datasets.ExperimentDataset, error) {
	abs, err := filepath.Abs(casesFile)
	if err != nil {
		return datasets.ExperimentDataset{}, fmt.Errorf("digest cases: %w", err)
	}
	d := datasets.ExperimentDataset{Path: abs}
	b, err := os.ReadFile(casesFile)
	if err != nil {
		return d, fmt.Errorf("digest cases: %w", err)
	}
	d.SHA256 = sha(b)
	seen := map[string]bool{}
	for _, c := range cases {
		for _, g := range c.Graders {
			if g.Type != datasets.GraderCode || seen[g.File] {
				continue
			}
			seen[g.File] = true
			d.Files = append(d.Files, datasets.FileDigest{Path: g.File, SHA256: sha(g.Source)})
		}
	}
	sort.Slice(d.Files, func(i, j int) bool { return d.Files[i].Path < d.Files[j].Path })
	return d, nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// SameDataset says how two digests differ ("" when they do not).
func SameDataset(a, b datasets.ExperimentDataset) string {
	if a.SHA256 != b.SHA256 {
		return fmt.Sprintf("the case file changed (%s: sha256 %.12s…, was %.12s…)", b.Path, b.SHA256, a.SHA256)
	}
	if len(a.Files) != len(b.Files) {
		return "the grader files changed"
	}
	for i := range a.Files {
		if a.Files[i] != b.Files[i] {
			return fmt.Sprintf("grader file %s changed", b.Files[i].Path)
		}
	}
	return ""
}

// GitInfo returns the commit of the git work tree dir is in and whether it
// has uncommitted changes; "" when dir is not in one (or git is missing).
func GitInfo(ctx context.Context, dir string) (commit string, dirty bool) {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false
	}
	commit = strings.TrimSpace(string(out))
	st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output()
	return commit, err == nil && len(bytes.TrimSpace(st)) > 0
}

// WriteRecord writes dir/experiment.json atomically (a temporary file,
// fsynced, renamed over it).
func WriteRecord(dir string, e *datasets.Experiment) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("encode experiment %s: %w", e.ID, err)
	}
	return writeAtomic(filepath.Join(dir, RecordFile), append(b, '\n'))
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(b)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteReport writes dir/report.json atomically.
func WriteReport(dir string, b []byte) error {
	return writeAtomic(filepath.Join(dir, ReportFile), b)
}

// ReadRecord reads dir/experiment.json.
func ReadRecord(dir string) (*datasets.Experiment, error) {
	path := filepath.Join(dir, RecordFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	return datasets.DecodeExperiment(b, path)
}

// Resolve finds an experiment folder: ref itself when it holds an
// experiment.json, else root/ref (an id).
func Resolve(root, ref string) (string, error) {
	if _, err := os.Stat(filepath.Join(ref, RecordFile)); err == nil {
		return ref, nil
	}
	dir := filepath.Join(root, ref)
	if _, err := os.Stat(filepath.Join(dir, RecordFile)); err == nil {
		return dir, nil
	}
	return "", fmt.Errorf("experiment %q: neither %s nor %s holds an %s", ref, ref, dir, RecordFile)
}

// List reads every experiment under root, newest first; folders that do
// not hold a readable record are returned as errors beside the list.
func List(root string) ([]*datasets.Experiment, []string, []error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil
		}
		return nil, nil, []error{fmt.Errorf("list %s: %w", root, err)}
	}
	type item struct {
		e   *datasets.Experiment
		dir string
	}
	var items []item
	var errs []error
	for _, ent := range ents {
		if !ent.IsDir() {
			continue
		}
		dir := filepath.Join(root, ent.Name())
		e, err := ReadRecord(dir)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		items = append(items, item{e, dir})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].e.Created.After(items[j].e.Created) })
	out := make([]*datasets.Experiment, len(items))
	dirs := make([]string, len(items))
	for i, it := range items {
		out[i], dirs[i] = it.e, it.dir
	}
	return out, dirs, errs
}

// FindCases is the case file the trials of trialsFile attempt, for a
// command that was given none: the one the experiment ran when trialsFile
// is an experiment folder's (its record names it; it must still exist),
// else the CasesFile beside trialsFile (a baselines folder's layout, which
// loom-eval ci reads the same way). It returns "" when there is neither,
// and otherwise how it found the file, in words for the user.
func FindCases(trialsFile string) (path, how string, err error) {
	dir := filepath.Dir(trialsFile)
	if _, err := os.Stat(filepath.Join(dir, RecordFile)); err == nil {
		rec, err := ReadRecord(dir)
		if err != nil {
			return "", "", err
		}
		if p := rec.Dataset.Path; p != "" {
			if _, err := os.Stat(p); err == nil {
				return p, fmt.Sprintf("the case file experiment %s ran, as its %s says", rec.ID, RecordFile), nil
			}
		}
	}
	p := filepath.Join(dir, CasesFile)
	if _, err := os.Stat(p); err == nil {
		return p, "the " + CasesFile + " beside the trials file", nil
	}
	return "", "", nil
}
