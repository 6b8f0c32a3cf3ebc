package datasets

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// LoadCases reads a cases JSONL file, and the file of every code grader
// (relative to the case file's folder; a missing file is an error naming
// the case's line and grader).
func LoadCases(path string) ([]Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open cases: %w", err)
	}
	defer f.Close()
	cases, err := ReadCases(f, path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	for i := range cases {
		c := &cases[i]
		for j := range c.Graders {
			g := &c.Graders[j]
			if g.Type != GraderCode {
				continue
			}
			src, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(g.File)))
			if err != nil {
				return nil, &LineError{File: path, Line: c.Line, Field: fmt.Sprintf("graders[%d].file", j), Err: fmt.Errorf("read code grader: %w", err)}
			}
			g.Source = src
		}
	}
	return cases, nil
}

// LoadTrials reads a trials JSONL file.
func LoadTrials(path string) ([]Trial, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trials: %w", err)
	}
	defer f.Close()
	return ReadTrials(f, path)
}

// ReadCases decodes cases, one JSON object per line; name labels errors.
// Blank lines are allowed. Case ids must be unique.
func ReadCases(r io.Reader, name string) ([]Case, error) {
	var out []Case
	firstLine := map[string]int{}
	err := eachLine(r, name, func(line int, b []byte) error {
		var c Case
		if err := decodeStrict(b, &c, "id", "task"); err != nil {
			return lineErr(name, line, err)
		}
		if c.Group == "" && hasKey(b, "group") {
			return &LineError{File: name, Line: line, Field: "group", Err: errors.New(`empty; leave the key out for a case of its own group, or name one, e.g. "tool:search"`)}
		}
		if err := c.Validate(); err != nil {
			return lineErr(name, line, err)
		}
		if prev, dup := firstLine[c.ID]; dup {
			return &LineError{File: name, Line: line, Field: "id", Err: fmt.Errorf("duplicate case id %q (first on line %d)", c.ID, prev)}
		}
		firstLine[c.ID] = line
		c.Line = line
		out = append(out, c)
		return nil
	})
	return out, err
}

// ReadTrials decodes trials, one JSON object per line; name labels errors.
// (case_id, trial) must be unique.
func ReadTrials(r io.Reader, name string) ([]Trial, error) {
	var out []Trial
	type key struct {
		c string
		t int
	}
	firstLine := map[key]int{}
	err := eachLine(r, name, func(line int, b []byte) error {
		var t Trial
		if err := decodeStrict(b, &t, "case_id", "trial"); err != nil {
			return lineErr(name, line, err)
		}
		if err := t.Validate(); err != nil {
			return lineErr(name, line, err)
		}
		k := key{t.CaseID, t.Trial}
		if prev, dup := firstLine[k]; dup {
			return &LineError{File: name, Line: line, Field: "trial", Err: fmt.Errorf("duplicate trial %d of case %q (first on line %d)", t.Trial, t.CaseID, prev)}
		}
		firstLine[k] = line
		t.Line = line
		out = append(out, t)
		return nil
	})
	return out, err
}

// eachLine calls fn for every non-blank line, stopping at the first error.
func eachLine(r io.Reader, name string, fn func(line int, b []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			if ferr := fn(line, b); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: line %d: %w", name, line, err)
		}
	}
}

func lineErr(name string, line int, err error) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return &LineError{File: name, Line: line, Field: fe.field, Err: fe.err}
	}
	return &LineError{File: name, Line: line, Err: err}
}

// decodeStrict decodes one JSON object into v: unknown fields, duplicate
// top-level keys, trailing data and missing required keys are errors.
func decodeStrict(b []byte, v any, required ...string) error {
	keys, err := topLevelKeys(b)
	if err != nil {
		return err
	}
	for _, k := range required {
		if !keys[k] {
			return fieldErr(k, errors.New("required field is missing"))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describe(err)
	}
	return nil
}

// hasKey: b (already decoded without error) has the top-level key k.
func hasKey(b []byte, k string) bool {
	keys, err := topLevelKeys(b)
	return err == nil && keys[k]
}

// topLevelKeys checks that b holds exactly one JSON object with no repeated
// key and returns its keys. (encoding/json silently keeps the last of two
// equal keys; a file with both is ambiguous, so it is rejected.)
func topLevelKeys(b []byte) (map[string]bool, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, describe(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("line is not a JSON object (starts with %v)", tok)
	}
	keys := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, describe(err)
		}
		k, _ := tok.(string)
		if keys[k] {
			return nil, fieldErr(k, errors.New("key appears twice in the object"))
		}
		keys[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, fieldErr(k, describe(err))
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, describe(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON object (one object per line)")
	}
	return keys, nil
}

// describe turns encoding/json errors into field-named ones.
func describe(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(value)"
		}
		return fieldErr(field, fmt.Errorf("wrong type: got JSON %s, want %s", te.Value, te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, se.Error())
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("truncated line: the JSON object is incomplete")
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		f := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return fieldErr(f, errors.New("unknown field"))
	}
	return err
}
