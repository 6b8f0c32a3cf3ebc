package tracecases

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/loomwork/loomwork/datasets"
)

// GraderSet is one line of a graders file: the graders of one case, which
// MergeGraders puts on the case Build made from the traces. A graders file
// is how a CI run of `cases from-traces` gets the same checked cases every
// time without hand-editing the generated file.
//
//	{"case_id": "mean-trap", "graders": [{"type": "number", "expected": 96.124991, "abs_tol": 0.005}]}
type GraderSet struct {
	CaseID  string            `json:"case_id"`
	Graders []datasets.Grader `json:"graders"`
	// Line is where ReadGraders read it.
	Line int `json:"-"`
}

// ReadGraders decodes a graders file: one GraderSet per line (blank lines
// allowed), strictly — an unknown field (in a grader too), a missing
// case_id or graders, trailing data or a case given twice is a
// *datasets.LineError naming name, the line and the field. The graders
// themselves are checked by MergeGraders, against their case.
func ReadGraders(r io.Reader, name string) ([]GraderSet, error) {
	var out []GraderSet
	first := map[string]int{}
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, rerr := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			gs, err := decodeGraderSet(b)
			if err != nil {
				return nil, &datasets.LineError{File: name, Line: line, Field: fieldOf(err), Err: errors.Unwrap(err)}
			}
			if prev, dup := first[gs.CaseID]; dup {
				return nil, &datasets.LineError{File: name, Line: line, Field: "case_id", Err: fmt.Errorf("case %q is also on line %d: give each case one line", gs.CaseID, prev)}
			}
			first[gs.CaseID] = line
			gs.Line = line
			out = append(out, gs)
		}
		if errors.Is(rerr, io.EOF) {
			return out, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("read %s: line %d: %w", name, line, rerr)
		}
	}
}

// lineFieldError is a decoding problem with the field it is about ("" for
// the whole line); it unwraps to the problem.
type lineFieldError struct {
	field string
	err   error
}

func (e *lineFieldError) Error() string { return e.err.Error() }
func (e *lineFieldError) Unwrap() error { return e.err }

func fieldOf(err error) string {
	var fe *lineFieldError
	if errors.As(err, &fe) {
		return fe.field
	}
	return ""
}

func decodeGraderSet(b []byte) (GraderSet, error) {
	var gs GraderSet
	// Top-level keys first: a key given twice is an error, not "the last
	// one wins".
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return gs, &lineFieldError{err: errors.New(`want one JSON object, {"case_id": ..., "graders": [...]}`)}
	}
	keys := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return gs, &lineFieldError{err: fmt.Errorf("invalid JSON: %w", err)}
		}
		k, _ := tok.(string)
		if keys[k] {
			return gs, &lineFieldError{field: k, err: errors.New("given twice")}
		}
		keys[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return gs, &lineFieldError{field: k, err: fmt.Errorf("invalid JSON: %w", err)}
		}
	}
	for _, k := range []string{"case_id", "graders"} {
		if !keys[k] {
			return gs, &lineFieldError{field: k, err: errors.New("required field is missing")}
		}
	}
	dec = json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&gs); err != nil {
		return gs, &lineFieldError{err: err}
	}
	if dec.More() {
		return gs, &lineFieldError{err: errors.New("trailing data after the object: one object per line")}
	}
	if strings.TrimSpace(gs.CaseID) == "" {
		return gs, &lineFieldError{field: "case_id", err: errors.New("required, must be non-empty")}
	}
	if len(gs.Graders) == 0 {
		return gs, &lineFieldError{field: "graders", err: errors.New("an empty list: a line gives a case at least one grader")}
	}
	return gs, nil
}

// MergeGraders puts each set's graders on its case (replacing graders the
// case has: Build gives it none) and validates the case with them, as
// loading the cases file will. A set whose case Build did not make — a
// typo, or a case the filters left out — is an error naming the file, line
// and the cases there are: a grader is never dropped silently. name labels
// errors.
func MergeGraders(cases []datasets.Case, sets []GraderSet, name string) error {
	index := map[string]int{}
	ids := make([]string, 0, len(cases))
	for i := range cases {
		index[cases[i].ID] = i
		ids = append(ids, cases[i].ID)
	}
	slices.Sort(ids)
	for _, gs := range sets {
		i, ok := index[gs.CaseID]
		if !ok {
			return &datasets.LineError{File: name, Line: gs.Line, Field: "case_id",
				Err: fmt.Errorf("no case %q came from the traces read (cases: %s)", gs.CaseID, strings.Join(ids, ", "))}
		}
		c := cases[i]
		c.Graders = slices.Clone(gs.Graders)
		if err := c.Validate(); err != nil {
			return &datasets.LineError{File: name, Line: gs.Line, Err: fmt.Errorf("case %q: %w", gs.CaseID, err)}
		}
		cases[i] = c
	}
	return nil
}
