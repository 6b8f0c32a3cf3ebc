// Package schema validates tool arguments against the subset of JSON Schema
// that tool declarations use in practice, so the runtime can refuse a
// malformed call with a message naming the field before the tool runs.
//
// Supported keywords: type (a name or a list of names: object, array,
// string, number, integer, boolean, null), properties, required,
// additionalProperties (boolean only), enum, items (one schema for every
// element), minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers,
// as in draft 6 and later), minLength, maxLength (in Unicode code points),
// minItems, maxItems. Annotations are accepted and ignored: title,
// description, default, examples, format, $schema, $id, $comment.
//
// Any other keyword (oneOf, pattern, $ref, ...) makes Compile fail: a
// schema that silently did not enforce what it says would be worse than
// none.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Schema is a compiled schema.
type Schema struct {
	types      []string
	properties map[string]*Schema
	required   []string
	additional *bool
	enum       []any // canonical JSON strings of the allowed values
	items      *Schema
	min, max   *float64
	exMin      *float64
	exMax      *float64
	minLen     *int
	maxLen     *int
	minItems   *int
	maxItems   *int
}

var annotations = map[string]bool{
	"title": true, "description": true, "default": true, "examples": true,
	"format": true, "$schema": true, "$id": true, "$comment": true,
}

var typeNames = map[string]bool{
	"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true,
}

// Compile parses a schema. An empty input compiles to a schema that
// accepts anything.
func Compile(raw json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &Schema{}, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return compile(v, "")
}

func compile(v any, path string) (*Schema, error) {
	if b, ok := v.(bool); ok { // true accepts anything; false nothing
		if b {
			return &Schema{}, nil
		}
		return &Schema{types: []string{}}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("compile schema: %s: a schema must be an object", at(path))
	}
	s := &Schema{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := m[k]
		bad := func(want string) error {
			return fmt.Errorf("compile schema: %s: %q must be %s", at(path), k, want)
		}
		switch k {
		case "type":
			switch t := val.(type) {
			case string:
				if !typeNames[t] {
					return nil, fmt.Errorf("compile schema: %s: unknown type %q", at(path), t)
				}
				s.types = []string{t}
			case []any:
				s.types = []string{}
				for _, e := range t {
					name, ok := e.(string)
					if !ok || !typeNames[name] {
						return nil, fmt.Errorf("compile schema: %s: unknown type %v", at(path), e)
					}
					s.types = append(s.types, name)
				}
			default:
				return nil, bad("a type name or a list of them")
			}
		case "properties":
			pm, ok := val.(map[string]any)
			if !ok {
				return nil, bad("an object")
			}
			s.properties = map[string]*Schema{}
			for name, ps := range pm {
				c, err := compile(ps, join(path, name))
				if err != nil {
					return nil, err
				}
				s.properties[name] = c
			}
		case "required":
			list, ok := val.([]any)
			if !ok {
				return nil, bad("a list of property names")
			}
			for _, e := range list {
				name, ok := e.(string)
				if !ok {
					return nil, bad("a list of property names")
				}
				s.required = append(s.required, name)
			}
		case "additionalProperties":
			b, ok := val.(bool)
			if !ok {
				return nil, bad("a boolean (schemas for additional properties are not supported)")
			}
			s.additional = &b
		case "enum":
			list, ok := val.([]any)
			if !ok {
				return nil, bad("a list")
			}
			for _, e := range list {
				s.enum = append(s.enum, canonicalValue(e))
			}
		case "items":
			c, err := compile(val, path+"[]")
			if err != nil {
				return nil, err
			}
			s.items = c
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			n, ok := val.(json.Number)
			if !ok {
				return nil, bad("a number")
			}
			f, err := n.Float64()
			if err != nil {
				return nil, bad("a number")
			}
			switch k {
			case "minimum":
				s.min = &f
			case "maximum":
				s.max = &f
			case "exclusiveMinimum":
				s.exMin = &f
			default:
				s.exMax = &f
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			n, ok := val.(json.Number)
			i, err := strconv.Atoi(string(n))
			if !ok || err != nil || i < 0 {
				return nil, bad("a non-negative integer")
			}
			switch k {
			case "minLength":
				s.minLen = &i
			case "maxLength":
				s.maxLen = &i
			case "minItems":
				s.minItems = &i
			default:
				s.maxItems = &i
			}
		default:
			if annotations[k] {
				continue
			}
			return nil, fmt.Errorf("compile schema: %s: keyword %q: %w (supported: type, properties, required, additionalProperties, enum, items, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, minItems, maxItems)", at(path), k, ErrUnsupported)
		}
	}
	return s, nil
}

// ValidationError says which field of the instance broke which rule.
type ValidationError struct {
	Path string // e.g. "items[2].amount"; "" is the whole value
	Msg  string
}

func (e *ValidationError) Error() string { return at(e.Path) + ": " + e.Msg }

// Validate checks a JSON document against s and returns the first
// *ValidationError found (fields in sorted order, so the report is stable).
func (s *Schema) Validate(doc json.RawMessage) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = json.RawMessage("{}") // tool calls without arguments mean no arguments
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return &ValidationError{Msg: "not valid JSON: " + err.Error()}
	}
	if dec.More() {
		return &ValidationError{Msg: "not valid JSON: data after the value"}
	}
	return s.validate(v, "")
}

func (s *Schema) validate(v any, path string) error {
	fail := func(format string, args ...any) error {
		return &ValidationError{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
	if s.types != nil {
		ok := false
		for _, t := range s.types {
			if hasType(v, t) {
				ok = true
				break
			}
		}
		if !ok {
			if len(s.types) == 0 {
				return fail("no value is allowed here")
			}
			return fail("must be %s, got %s", strings.Join(s.types, " or "), typeOf(v))
		}
	}
	if s.enum != nil {
		cv := canonicalValue(v)
		found := false
		for _, e := range s.enum {
			if e == cv {
				found = true
				break
			}
		}
		if !found {
			allowed := make([]string, len(s.enum))
			for i, e := range s.enum {
				allowed[i] = e.(string)
			}
			return fail("must be one of %s, got %s", strings.Join(allowed, ", "), cv)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range s.required {
			if _, ok := x[name]; !ok {
				return &ValidationError{Path: join(path, name), Msg: "is required"}
			}
		}
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			ps, ok := s.properties[name]
			if !ok {
				if s.additional != nil && !*s.additional {
					return &ValidationError{Path: join(path, name), Msg: "is not an allowed property"}
				}
				continue
			}
			if err := ps.validate(x[name], join(path, name)); err != nil {
				return err
			}
		}
	case []any:
		if s.minItems != nil && len(x) < *s.minItems {
			return fail("must have at least %d items, got %d", *s.minItems, len(x))
		}
		if s.maxItems != nil && len(x) > *s.maxItems {
			return fail("must have at most %d items, got %d", *s.maxItems, len(x))
		}
		if s.items != nil {
			for i, e := range x {
				if err := s.items.validate(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case string:
		n := utf8.RuneCountInString(x)
		if s.minLen != nil && n < *s.minLen {
			return fail("must be at least %d characters long, got %d", *s.minLen, n)
		}
		if s.maxLen != nil && n > *s.maxLen {
			return fail("must be at most %d characters long, got %d", *s.maxLen, n)
		}
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return fail("number %s is out of range", x)
		}
		switch {
		case s.min != nil && f < *s.min:
			return fail("must be >= %v, got %s", *s.min, x)
		case s.max != nil && f > *s.max:
			return fail("must be <= %v, got %s", *s.max, x)
		case s.exMin != nil && f <= *s.exMin:
			return fail("must be > %v, got %s", *s.exMin, x)
		case s.exMax != nil && f >= *s.exMax:
			return fail("must be < %v, got %s", *s.exMax, x)
		}
	}
	return nil
}

func hasType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && !math.IsInf(f, 0) && f == math.Trunc(f)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func typeOf(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		if hasType(x, "integer") {
			return "integer"
		}
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// canonicalValue renders a decoded value as compact JSON with sorted keys;
// numbers compare by value (1 and 1.0 are the same enum member).
func canonicalValue(v any) any {
	var b strings.Builder
	writeCanon(&b, v)
	return b.String()
}

func writeCanon(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			writeCanon(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanon(b, e)
		}
		b.WriteByte(']')
	case json.Number:
		if f, err := x.Float64(); err == nil {
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		} else {
			b.WriteString(x.String())
		}
	default:
		vb, _ := json.Marshal(x)
		b.Write(vb)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func at(path string) string {
	if path == "" {
		return "arguments"
	}
	return "field " + strconv.Quote(path)
}

// ErrUnsupported is returned (wrapped) for a keyword Compile does not enforce.
var ErrUnsupported = errors.New("unsupported schema keyword")
