package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Registry is a folder of named, versioned case sets: DIR/NAME/v0001,
// DIR/NAME/v0002, … Each version is a folder of its own holding
// cases.jsonl (the format LoadCases reads, so `--cases
// DIR/NAME/v0002/cases.jsonl` runs it), the files its code graders read at
// their relative paths, and version.json (a Version: who made it from
// which version, why, which cases it added, removed or changed, the traces
// they came from, and the SHA-256 of cases.jsonl — the digest an
// experiment records, so an experiment names the version it ran).
//
// Versions are immutable: a change is a new version made on a parent, and
// it is refused when the parent is no longer the latest (someone else
// committed first: review again on the new version). A version appears
// whole or not at all: it is written into a temporary folder and renamed
// into place, and the rename is what decides between two committers.
// Reading a version checks cases.jsonl against its recorded digest, so a
// file edited after its commit is an error, never a silent change.
type Registry struct {
	Dir string
}

// VersionFormat is the current version.json format.
const VersionFormat = 1

// Version is a dataset version's record (version.json).
type Version struct {
	Format  int    `json:"format"`
	Dataset string `json:"dataset"`
	Number  int    `json:"version"`
	// Parent is the version this one was made on (0: the first).
	Parent  int       `json:"parent"`
	Created time.Time `json:"created"`
	Author  string    `json:"author,omitempty"`
	Note    string    `json:"note,omitempty"`
	// SHA256 is the hex digest of cases.jsonl's bytes (an experiment's
	// dataset.sha256 when it ran this version's cases.jsonl).
	SHA256 string `json:"sha256"`
	Cases  int    `json:"cases"`
	// Added, Removed and Changed are case ids against the parent, sorted.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
	// Sources names, for the cases this version added or changed from
	// traces, the trace ids each was made from.
	Sources map[string][]string `json:"sources,omitempty"`
	// Files are the code graders' files the version holds.
	Files []FileDigest `json:"files,omitempty"`
}

// Change is a new version's content: the whole case set (not a diff), the
// version it was made on, and who made it and why.
type Change struct {
	// Parent is the latest version when the change was prepared (0 for a
	// new dataset). Commit refuses it if a later version exists.
	Parent  int
	Cases   []Case
	Author  string
	Note    string
	Sources map[string][]string
	// Now is the commit time (default time.Now).
	Now time.Time
}

var (
	// ErrDatasetNotFound: the registry has no dataset of that name.
	ErrDatasetNotFound = errors.New("dataset not found")
	// ErrVersionNotFound: the dataset has no such version.
	ErrVersionNotFound = errors.New("dataset version not found")
	// ErrStaleParent: a version was committed after the change's parent.
	ErrStaleParent = errors.New("the dataset changed since this change was prepared")
	// ErrNoChange: the change's cases are the parent's.
	ErrNoChange = errors.New("nothing changed")
	// ErrDigestMismatch: cases.jsonl is not the file that was committed.
	ErrDigestMismatch = errors.New("cases.jsonl does not match its version's digest")
)

// StaleParentError is ErrStaleParent with the version now latest.
type StaleParentError struct {
	Dataset        string
	Parent, Latest int
}

func (e *StaleParentError) Error() string {
	return fmt.Sprintf("dataset %q: the change was made on version %d, but version %d is now the latest: %v", e.Dataset, e.Parent, e.Latest, ErrStaleParent)
}

func (e *StaleParentError) Unwrap() error { return ErrStaleParent }

var datasetName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// ValidateDatasetName checks a dataset name: 1–64 of [a-z0-9._-],
// starting with a letter or digit (it is a folder name).
func ValidateDatasetName(name string) error {
	if !datasetName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("dataset name %q: want 1-64 of a-z 0-9 . _ - starting with a letter or digit", name)
	}
	return nil
}

func versionDir(n int) string { return fmt.Sprintf("v%04d", n) }

func parseVersionDir(s string) (int, bool) {
	if len(s) < 2 || s[0] != 'v' {
		return 0, false
	}
	n, err := strconv.Atoi(s[1:])
	if err != nil || n <= 0 || versionDir(n) != s {
		return 0, false
	}
	return n, true
}

// CasesPath is the cases.jsonl of a version.
func (r Registry) CasesPath(name string, n int) string {
	return filepath.Join(r.Dir, name, versionDir(n), "cases.jsonl")
}

// Names lists the registry's datasets, sorted. A registry folder that does
// not exist yet holds none.
func (r Registry) Names() ([]string, error) {
	ents, err := os.ReadDir(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("datasets %s: %w", r.Dir, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && ValidateDatasetName(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Versions lists a dataset's versions, oldest first.
func (r Registry) Versions(name string) ([]Version, error) {
	if err := ValidateDatasetName(name); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(r.Dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("dataset %q in %s: %w", name, r.Dir, ErrDatasetNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", name, err)
	}
	var out []Version
	for _, e := range ents {
		n, ok := parseVersionDir(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		v, err := r.readVersion(name, n)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dataset %q in %s has no version: %w", name, r.Dir, ErrDatasetNotFound)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out, nil
}

// Latest is a dataset's latest version number, 0 when it has none.
func (r Registry) Latest(name string) (int, error) {
	vs, err := r.Versions(name)
	if errors.Is(err, ErrDatasetNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return vs[len(vs)-1].Number, nil
}

func (r Registry) readVersion(name string, n int) (Version, error) {
	p := filepath.Join(r.Dir, name, versionDir(n), "version.json")
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Version{}, fmt.Errorf("dataset %q version %d: %w", name, n, ErrVersionNotFound)
	}
	if err != nil {
		return Version{}, fmt.Errorf("dataset %q version %d: %w", name, n, err)
	}
	var v Version
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return Version{}, fmt.Errorf("%s: %w", p, describe(err))
	}
	switch {
	case v.Format != VersionFormat:
		return Version{}, fmt.Errorf("%s: format %d, this build reads %d", p, v.Format, VersionFormat)
	case v.Dataset != name || v.Number != n:
		return Version{}, fmt.Errorf("%s: says it is %q version %d", p, v.Dataset, v.Number)
	}
	return v, nil
}

// Open reads version n of a dataset (0: the latest) and its cases, with
// their code graders' sources. A cases.jsonl whose digest is not the
// recorded one is an error wrapping ErrDigestMismatch.
func (r Registry) Open(name string, n int) (Version, []Case, error) {
	if n == 0 {
		latest, err := r.Latest(name)
		if err != nil {
			return Version{}, nil, err
		}
		if latest == 0 {
			return Version{}, nil, fmt.Errorf("dataset %q in %s: %w", name, r.Dir, ErrDatasetNotFound)
		}
		n = latest
	}
	if err := ValidateDatasetName(name); err != nil {
		return Version{}, nil, err
	}
	v, err := r.readVersion(name, n)
	if err != nil {
		return Version{}, nil, err
	}
	p := r.CasesPath(name, n)
	b, err := os.ReadFile(p)
	if err != nil {
		return Version{}, nil, fmt.Errorf("dataset %q version %d: %w", name, n, err)
	}
	if got := sha256Hex(b); got != v.SHA256 {
		return Version{}, nil, fmt.Errorf("%s: sha256 %s, committed %s: %w", p, got[:12], v.SHA256[:min(12, len(v.SHA256))], ErrDigestMismatch)
	}
	cases, err := LoadCases(p)
	if err != nil {
		return Version{}, nil, err
	}
	return v, cases, nil
}

// EncodeCases is cases as cases.jsonl bytes: one compact JSON object per
// line, HTML characters unescaped (a task with "<" reads as written).
func EncodeCases(cases []Case) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range cases {
		if err := enc.Encode(&cases[i]); err != nil {
			return nil, fmt.Errorf("case %q: %w", cases[i].ID, err)
		}
	}
	return buf.Bytes(), nil
}

// Commit writes a new version of dataset name (creating the dataset when
// ch.Parent is 0 and it has none) and returns its record. The cases are
// validated as LoadCases would (and decoded back, so what is committed is
// what a reader gets); a code grader's source is written at its file path
// inside the version.
func (r Registry) Commit(name string, ch Change) (Version, error) {
	if err := ValidateDatasetName(name); err != nil {
		return Version{}, err
	}
	if ch.Parent < 0 {
		return Version{}, fmt.Errorf("dataset %q: parent %d is negative", name, ch.Parent)
	}
	data, files, err := encodeVersion(ch.Cases)
	if err != nil {
		return Version{}, fmt.Errorf("dataset %q: %w", name, err)
	}
	latest, err := r.Latest(name)
	if err != nil {
		return Version{}, err
	}
	if latest != ch.Parent {
		return Version{}, &StaleParentError{Dataset: name, Parent: ch.Parent, Latest: latest}
	}
	var parent []Case
	if ch.Parent > 0 {
		if _, parent, err = r.Open(name, ch.Parent); err != nil {
			return Version{}, err
		}
	}
	v := Version{Format: VersionFormat, Dataset: name, Number: ch.Parent + 1, Parent: ch.Parent,
		Created: ch.Now, Author: strings.TrimSpace(ch.Author), Note: strings.TrimSpace(ch.Note),
		SHA256: sha256Hex(data), Cases: len(ch.Cases)}
	if v.Created.IsZero() {
		v.Created = time.Now()
	}
	v.Created = v.Created.UTC()
	v.Added, v.Removed, v.Changed = diffCases(parent, ch.Cases)
	if len(v.Added)+len(v.Removed)+len(v.Changed) == 0 && ch.Parent > 0 {
		return Version{}, fmt.Errorf("dataset %q: version %d has these cases already: %w", name, ch.Parent, ErrNoChange)
	}
	for id, traces := range ch.Sources {
		if !slices.Contains(v.Added, id) && !slices.Contains(v.Changed, id) {
			return Version{}, fmt.Errorf("dataset %q: sources name case %q, which this change neither adds nor changes", name, id)
		}
		if v.Sources == nil {
			v.Sources = map[string][]string{}
		}
		v.Sources[id] = slices.Sorted(slices.Values(traces))
	}
	for p, src := range files {
		v.Files = append(v.Files, FileDigest{Path: p, SHA256: sha256Hex(src)})
	}
	sort.Slice(v.Files, func(i, j int) bool { return v.Files[i].Path < v.Files[j].Path })
	return v, r.write(v, data, files)
}

// encodeVersion validates cases and returns cases.jsonl's bytes and the
// code graders' files by their slash path.
func encodeVersion(cases []Case) ([]byte, map[string][]byte, error) {
	if len(cases) == 0 {
		return nil, nil, errors.New("a version needs at least one case")
	}
	data, err := EncodeCases(cases)
	if err != nil {
		return nil, nil, err
	}
	// Decoding back runs every check a reader will (strict fields, unique
	// ids, graders), so a version that commits is one that loads.
	if _, err := ReadCases(bytes.NewReader(data), "cases.jsonl"); err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{}
	for _, c := range cases {
		for j, g := range c.Graders {
			if g.Type != GraderCode {
				continue
			}
			p := path.Clean(g.File)
			if g.File == "" || path.IsAbs(p) || p == "." || strings.HasPrefix(p, "../") || p == ".." || p == "cases.jsonl" || p == "version.json" {
				return nil, nil, fmt.Errorf("case %q graders[%d].file %q: want a relative path inside the version", c.ID, j, g.File)
			}
			if g.Source == nil {
				return nil, nil, fmt.Errorf("case %q graders[%d].file %q: the grader's source was not loaded", c.ID, j, g.File)
			}
			if prev, ok := files[p]; ok && !bytes.Equal(prev, g.Source) {
				return nil, nil, fmt.Errorf("case %q graders[%d].file %q: two different sources for one file", c.ID, j, g.File)
			}
			files[p] = g.Source
		}
	}
	return data, files, nil
}

// write puts a version in place: a temporary folder, renamed to vNNNN.
// rename(2) of a folder onto an existing one fails, so of two committers
// on one parent exactly one wins.
func (r Registry) write(v Version, data []byte, files map[string][]byte) error {
	dsDir := filepath.Join(r.Dir, v.Dataset)
	if err := os.MkdirAll(dsDir, 0o755); err != nil {
		return fmt.Errorf("dataset %q: %w", v.Dataset, err)
	}
	tmp, err := os.MkdirTemp(dsDir, ".commit-")
	if err != nil {
		return fmt.Errorf("dataset %q: %w", v.Dataset, err)
	}
	defer os.RemoveAll(tmp) // after a successful rename, nothing is left to remove
	meta, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("dataset %q: %w", v.Dataset, err)
	}
	put := func(rel string, b []byte) error {
		p := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return writeSynced(p, b)
	}
	for rel, src := range files {
		if err := put(rel, src); err != nil {
			return fmt.Errorf("dataset %q: grader file %s: %w", v.Dataset, rel, err)
		}
	}
	if err := put("cases.jsonl", data); err != nil {
		return fmt.Errorf("dataset %q: %w", v.Dataset, err)
	}
	if err := put("version.json", append(meta, '\n')); err != nil {
		return fmt.Errorf("dataset %q: %w", v.Dataset, err)
	}
	if err := os.Rename(tmp, filepath.Join(dsDir, versionDir(v.Number))); err != nil {
		if _, statErr := os.Stat(filepath.Join(dsDir, versionDir(v.Number))); statErr == nil {
			latest, _ := r.Latest(v.Dataset)
			return &StaleParentError{Dataset: v.Dataset, Parent: v.Parent, Latest: latest}
		}
		return fmt.Errorf("dataset %q: commit version %d: %w", v.Dataset, v.Number, err)
	}
	if d, err := os.Open(dsDir); err == nil {
		_ = d.Sync() // the rename survives a crash
		d.Close()
	}
	return nil
}

func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// diffCases compares two case sets by id: a case is changed when its JSON
// differs.
func diffCases(old, cur []Case) (added, removed, changed []string) {
	was := map[string][]byte{}
	for i := range old {
		b, _ := json.Marshal(&old[i])
		was[old[i].ID] = b
	}
	is := map[string]bool{}
	for i := range cur {
		id := cur[i].ID
		is[id] = true
		prev, ok := was[id]
		if !ok {
			added = append(added, id)
			continue
		}
		if b, _ := json.Marshal(&cur[i]); !bytes.Equal(b, prev) {
			changed = append(changed, id)
		}
	}
	for id := range was {
		if !is[id] {
			removed = append(removed, id)
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	sort.Strings(changed)
	return nonNilStrings(added), nonNilStrings(removed), nonNilStrings(changed)
}

func nonNilStrings(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
