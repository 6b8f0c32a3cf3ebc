package genai

import (
	"strings"
	"unicode/utf8"
)

// scanDocumentIDs is jsonDocumentIDs for the shape retrieval spans send
// almost always: a JSON array of objects whose members are strings
// without escapes, numbers, booleans or nulls (e.g.
// [{"id":"doc_1","score":0.93},…]), or of such strings. It returns ok
// false for anything else, and jsonDocumentIDs' answer otherwise:
// encoding/json's reflection took ~5% of serve's CPU at ingest on agent
// traffic. TestScanDocumentIDsMatchesEncodingJSON and
// FuzzScanDocumentIDs hold the two to the same answers.
func scanDocumentIDs(b []byte) (ids []string, ok bool) {
	s := scanner{b: b}
	s.space()
	if !s.take('[') {
		return nil, false
	}
	ids = []string{}
	s.space()
	if s.take(']') {
		return ids, s.end()
	}
	for {
		s.space()
		switch s.peek() {
		case '{':
			id, found, ok := s.object()
			if !ok {
				return nil, false
			}
			if found && id != "" {
				ids = append(ids, id)
			}
		case '"':
			v, ok := s.str()
			if !ok {
				return nil, false
			}
			if id := strings.TrimSpace(v); id != "" {
				ids = append(ids, id)
			}
		default:
			// A number, nested array, literal: left to encoding/json.
			return nil, false
		}
		s.space()
		if s.take(']') {
			return ids, s.end()
		}
		if !s.take(',') {
			return nil, false
		}
	}
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) take(c byte) bool {
	if s.peek() == c && s.i < len(s.b) {
		s.i++
		return true
	}
	return false
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end: nothing but white space follows.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// str reads a string without escapes or control characters, valid UTF-8.
func (s *scanner) str() (string, bool) {
	if !s.take('"') {
		return "", false
	}
	from := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[from:s.i]
			s.i++
			if !utf8.Valid(v) {
				return "", false
			}
			return string(v), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		s.i++
	}
	return "", false
}

// object reads an object of scalar members and returns its last "id"
// member (encoding/json keeps the last of repeated keys) when that is a
// string.
func (s *scanner) object() (id string, found, ok bool) {
	s.take('{')
	s.space()
	if s.take('}') {
		return "", false, true
	}
	for {
		s.space()
		k, ok := s.str()
		if !ok {
			return "", false, false
		}
		s.space()
		if !s.take(':') {
			return "", false, false
		}
		s.space()
		isID := k == "id"
		switch c := s.peek(); {
		case c == '"':
			v, ok := s.str()
			if !ok {
				return "", false, false
			}
			if isID {
				id, found = strings.TrimSpace(v), true
			}
		case c == '-' || '0' <= c && c <= '9':
			if isID || !s.number() {
				// A numeric id: left to encoding/json.
				return "", false, false
			}
		case c == 't':
			if isID || !s.literal("true") {
				return "", false, false
			}
		case c == 'f':
			if isID || !s.literal("false") {
				return "", false, false
			}
		case c == 'n':
			if isID || !s.literal("null") {
				return "", false, false
			}
		default:
			return "", false, false
		}
		s.space()
		if s.take('}') {
			return id, found, true
		}
		if !s.take(',') {
			return "", false, false
		}
	}
}

func (s *scanner) literal(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.take('-')
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case '1' <= c && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.take('.') {
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if !s.take('+') {
			s.take('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *scanner) digits() bool {
	from := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > from
}
