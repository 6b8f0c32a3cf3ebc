package datasets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/loomwork/loomwork/internal/filelock"
)

// Label is a person's verdict on one grader's question about one trial:
// should trial Trial of case CaseID pass grader Grader? Labels are what
// a judge (or any grader) is validated against: scorer/grade.Agreement
// pairs each with the grade of the same (case, trial, grader).
//
// A labels file is JSONL, one label per line (schema/label.schema.json),
// decoded as strictly as cases and trials. (case_id, trial, grader,
// labeler) is unique within a file: two people may label the same grade,
// one person labels it once.
type Label struct {
	CaseID string `json:"case_id"`
	Trial  int    `json:"trial"`
	// Grader is the grader's name on the case (its type when it has no
	// name), as on the trial's grade.
	Grader string `json:"grader"`
	Passed bool   `json:"passed"`
	// Labeler names who labelled; absent: one anonymous labeler.
	Labeler string `json:"labeler,omitempty"`
	// Note is the labeler's reason, free text.
	Note string `json:"note,omitempty"`

	// Line is where the decoder read the label (0 if not from a file).
	Line int `json:"-"`
}

// labelRequired are the fields every label line carries.
var labelRequired = []string{"case_id", "trial", "grader", "passed"}

// labelFields are all of a label's fields.
var labelFields = []string{"case_id", "trial", "grader", "passed", "labeler", "note"}

// Validate checks a label's own fields.
func (l *Label) Validate() error {
	if l.CaseID == "" {
		return fieldErr("case_id", errors.New("required, must be non-empty"))
	}
	if l.Trial < 0 {
		return fieldErr("trial", fmt.Errorf("must be non-negative, got %d", l.Trial))
	}
	if l.Grader == "" {
		return fieldErr("grader", errors.New("required, must be non-empty"))
	}
	if strings.TrimSpace(l.Labeler) != l.Labeler {
		return fieldErr("labeler", fmt.Errorf("%q has leading or trailing space (it is part of the label's key)", l.Labeler))
	}
	return nil
}

// Key names the grade a label is about and who labelled it, for messages.
func (l *Label) Key() string {
	s := fmt.Sprintf("trial %d of case %q, grader %q", l.Trial, l.CaseID, l.Grader)
	if l.Labeler != "" {
		s += fmt.Sprintf(", labeler %q", l.Labeler)
	}
	return s
}

type labelKey struct {
	caseID  string
	trial   int
	grader  string
	labeler string
}

func (l *Label) key() labelKey { return labelKey{l.CaseID, l.Trial, l.Grader, l.Labeler} }

// LoadLabels reads a labels JSONL file.
func LoadLabels(path string) ([]Label, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open labels: %w", err)
	}
	defer f.Close()
	return ReadLabels(f, path)
}

// ReadLabels decodes labels, one JSON object per line; name labels errors.
// Blank lines are allowed. An unknown field, a missing or null required
// field, an explicitly empty labeler or note, and a second label of the
// same (case_id, trial, grader, labeler) are errors naming the line and
// field.
func ReadLabels(r io.Reader, name string) ([]Label, error) {
	var out []Label
	firstLine := map[labelKey]int{}
	err := eachLine(r, name, func(line int, b []byte) error {
		l, err := decodeLabel(b)
		if err != nil {
			return lineErr(name, line, err)
		}
		if prev, dup := firstLine[l.key()]; dup {
			return &LineError{File: name, Line: line, Field: dupField(&l),
				Err: fmt.Errorf("a second label of %s (first on line %d): each labeler labels a grade once", l.Key(), prev)}
		}
		firstLine[l.key()] = line
		l.Line = line
		out = append(out, l)
		return nil
	})
	return out, err
}

// dupField is the field a duplicate is reported on: the last part of the
// key the line sets.
func dupField(l *Label) string {
	if l.Labeler != "" {
		return "labeler"
	}
	return "grader"
}

func decodeLabel(b []byte) (Label, error) {
	// An unknown key is reported before a missing one: "pased" is a typo
	// of "passed", and saying so beats saying "passed" is missing.
	keys, err := topLevelKeys(b)
	if err != nil {
		return Label{}, err
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !slices.Contains(labelFields, k) {
			return Label{}, fieldErr(k, fmt.Errorf("unknown field (a label has %s)", strings.Join(labelFields, ", ")))
		}
	}
	var l Label
	if err := decodeStrict(b, &l, labelRequired...); err != nil {
		return Label{}, err
	}
	// encoding/json leaves a field untouched for null, so "passed": null
	// would read as a fail and "trial": null as trial 0; an explicitly
	// empty labeler or note would vanish on the next write. Refuse them.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Label{}, describe(err)
	}
	for _, k := range labelFields {
		v, ok := raw[k]
		if !ok {
			continue
		}
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return Label{}, fieldErr(k, errors.New("must not be null"))
		}
		if (k == "labeler" || k == "note") && bytes.Equal(bytes.TrimSpace(v), []byte(`""`)) {
			return Label{}, fieldErr(k, errors.New("must be non-empty (leave the field out instead)"))
		}
	}
	if err := l.Validate(); err != nil {
		return Label{}, err
	}
	return l, nil
}

// DuplicateLabelError is AppendLabel's refusal of a label the file
// already holds.
type DuplicateLabelError struct {
	File  string
	Line  int // the existing label's line
	Label Label
}

func (e *DuplicateLabelError) Error() string {
	return fmt.Sprintf("%s:%d already holds a label of %s (passed: %v): each labeler labels a grade once",
		e.File, e.Line, e.Label.Key(), e.Label.Passed)
}

// appendMu serialises appends within the process (the lock file below
// serialises them across processes where the OS supports it).
var appendMu sync.Mutex

// AppendLabel validates l and appends it to the labels file at path as one
// line, creating the file if needed, and returns the line it was written
// on. It refuses (with a *DuplicateLabelError) a label whose (case_id,
// trial, grader, labeler) the file already holds, and refuses to append to
// a file that does not decode, so a bad line is found before more are
// added after it. The read, the check and the write happen under an
// exclusive lock on the file.
func AppendLabel(path string, l Label) (int, error) {
	if err := l.Validate(); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return 0, fmt.Errorf("label: field %q: %w", fe.field, fe.err)
		}
		return 0, fmt.Errorf("label: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return 0, fmt.Errorf("label: encode: %w", err)
	}

	appendMu.Lock()
	defer appendMu.Unlock()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("open labels: %w", err)
	}
	defer f.Close()
	// Two processes adding labels to one file (two `loom-eval labels add`,
	// or the CLI and a server) must not both pass the duplicate check and
	// write the same label; where there is no flock(2), appendMu
	// serialises appends within this process only.
	unlock, err := filelock.Lock(f)
	if err != nil {
		return 0, fmt.Errorf("lock labels %s: %w", path, err)
	}
	defer unlock()
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, fmt.Errorf("read labels %s: %w", path, err)
	}
	existing, err := ReadLabels(bytes.NewReader(data), path)
	if err != nil {
		return 0, fmt.Errorf("not appending to a labels file that does not decode: %w", err)
	}
	for _, e := range existing {
		if e.key() == l.key() {
			return 0, &DuplicateLabelError{File: path, Line: e.Line, Label: e}
		}
	}
	line := bytes.Count(data, []byte("\n")) + 1
	out := buf.Bytes()
	if len(data) > 0 && data[len(data)-1] != '\n' {
		// The last line lacks its newline: end it first, or the new
		// label would be glued onto it.
		out = append([]byte("\n"), out...)
		line++
	}
	if _, err := f.Write(out); err != nil {
		return 0, fmt.Errorf("append label to %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("append label to %s: %w", path, err)
	}
	return line, nil
}
