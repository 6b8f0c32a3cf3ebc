package store

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A search expression (TraceQuery.Search, the q= parameter) is a list of
// clauses separated by spaces; a trace matches when every clause holds, and
// a clause holds when at least one span of the trace satisfies it (two
// clauses may be satisfied by different spans). Clauses:
//
//	KEY               the span attribute KEY is set (any value)
//	KEY=VALUE         KEY equals VALUE (see below)
//	KEY!=VALUE        KEY is set on some span and no span's KEY equals VALUE
//	KEY>N  KEY>=N     KEY is a number (or an array holding one) compared with N
//	KEY<N  KEY<=N
//	name:VALUE        a span is named exactly VALUE (case-sensitive)
//	retrieved:ID      a span retrieved the document ID (Span.RetrievedDocs)
//	cited:ID          a span cited the document ID (Span.CitedDocs)
//	evidence:ID       a span retrieved or cited ID
//
// VALUE and KEY are bare words (no spaces, quotes or = ! < >) or
// double-quoted strings with \" and \\ escapes. Equality: a string attribute
// equals VALUE when its text does; a number attribute when VALUE is a number
// of the same value (numbers compare as 64-bit doubles); a boolean when
// VALUE is true or false; an array when one of its elements does. Attribute
// strings longer than MaxSearchValue bytes only count for KEY and KEY!=…,
// and a VALUE longer than that is refused.

// MaxSearchValue is the longest attribute string value, in bytes, a search
// compares (longer ones are indexed for "KEY is set" only, so message bodies
// do not bloat the index).
const MaxSearchValue = 256

// SearchField says what a search clause looks at.
type SearchField uint8

// Search clause fields.
const (
	FieldAttr      SearchField = iota // a span attribute
	FieldName                         // the span name, exactly
	FieldRetrieved                    // Span.RetrievedDocs
	FieldCited                        // Span.CitedDocs
	FieldEvidence                     // retrieved or cited
)

// SearchOp is a clause's comparison.
type SearchOp uint8

// Search comparisons. Only FieldAttr takes anything but OpEq.
const (
	OpExists SearchOp = iota
	OpEq
	OpNe
	OpGt
	OpGe
	OpLt
	OpLe
)

var opText = [...]string{OpExists: "", OpEq: "=", OpNe: "!=", OpGt: ">", OpGe: ">=", OpLt: "<", OpLe: "<="}

// fieldPrefixes are the clause prefixes other than attributes.
var fieldPrefixes = [...]struct {
	prefix string
	field  SearchField
}{{"name:", FieldName}, {"retrieved:", FieldRetrieved}, {"cited:", FieldCited}, {"evidence:", FieldEvidence}}

// SearchClause is one clause of a search expression.
type SearchClause struct {
	Field SearchField
	Key   string // the attribute key (FieldAttr only)
	Op    SearchOp
	Value string // as given ("" for OpExists)
	// Num and IsNum: Value as a number, when it is one (always, for the
	// order comparisons).
	Num   float64
	IsNum bool
}

// String is the clause in the syntax ParseSearch reads; parsing it gives
// the same clause.
func (c SearchClause) String() string {
	if c.Field != FieldAttr {
		for _, p := range fieldPrefixes {
			if p.field == c.Field {
				return p.prefix + quoteWord(c.Value)
			}
		}
	}
	if c.Op == OpExists {
		return quoteWord(c.Key)
	}
	return quoteWord(c.Key) + opText[c.Op] + quoteWord(c.Value)
}

// FormatSearch writes clauses as one expression, the inverse of ParseSearch.
func FormatSearch(clauses []SearchClause) string {
	parts := make([]string, len(clauses))
	for i, c := range clauses {
		parts[i] = c.String()
	}
	return strings.Join(parts, " ")
}

// quoteWord returns s bare when ParseSearch would read it back as one word,
// else double-quoted.
func quoteWord(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\r\n\"\\=!<>") && !hasFieldPrefix(s) && !isJoiner(s) {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

func hasFieldPrefix(s string) bool {
	for _, p := range fieldPrefixes {
		if strings.HasPrefix(s, p.prefix) {
			return true
		}
	}
	return false
}

func isJoiner(s string) bool {
	switch strings.ToLower(s) {
	case "and", "or", "not", "&&", "||":
		return true
	}
	return false
}

// ParseSearch reads a search expression (see the package's search syntax
// above). Its error names the clause, by position and text, and what is
// wrong with it.
func ParseSearch(expr string) ([]SearchClause, error) {
	var out []SearchClause
	p := searchParser{s: expr}
	for n := 1; ; n++ {
		p.skipSpace()
		if p.i >= len(p.s) {
			return out, nil
		}
		start := p.i
		c, err := p.clause()
		if err != nil {
			// Name the clause as typed: up to the next space (or the end
			// of an unterminated quote).
			end := p.i
			if end <= start {
				end = start
			}
			for end < len(p.s) && !isSpace(p.s[end]) {
				end++
			}
			return nil, fmt.Errorf("clause %d %s: %w", n, quoteInput(p.s[start:end]), err)
		}
		out = append(out, c)
	}
}

type searchParser struct {
	s string
	i int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *searchParser) skipSpace() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

func (p *searchParser) clause() (SearchClause, error) {
	var c SearchClause
	rest := p.s[p.i:]
	for _, f := range fieldPrefixes {
		if strings.HasPrefix(rest, f.prefix) {
			p.i += len(f.prefix)
			v, err := p.word()
			if err != nil {
				return c, err
			}
			if v == "" {
				return c, fmt.Errorf("%s wants a value, e.g. %sdoc-42", strings.TrimSuffix(f.prefix, ":"), f.prefix)
			}
			if !p.atEnd() {
				return c, fmt.Errorf("unexpected %q after the value (quote a value that holds spaces or = ! < >)", p.s[p.i])
			}
			c.Field, c.Op, c.Value = f.field, OpEq, v
			return c, checkValue(v)
		}
	}
	quoted := p.i < len(p.s) && p.s[p.i] == '"'
	key, err := p.word()
	if err != nil {
		return c, err
	}
	if key == "" {
		if p.i < len(p.s) && strings.IndexByte("=!<>", p.s[p.i]) >= 0 {
			return c, errors.New("no attribute key before the operator")
		}
		return c, errors.New("empty attribute key")
	}
	if !utf8.ValidString(key) {
		// OTLP keys are UTF-8; a key that is not could match nothing and
		// would not survive being printed back into a URL.
		return c, errors.New("attribute key is not valid UTF-8")
	}
	if !quoted && isJoiner(key) && p.atEnd() {
		return c, fmt.Errorf("clauses are separated by spaces and must all hold; %s is not supported (to search for an attribute named %s, quote it)", strings.ToUpper(key), key)
	}
	c.Field, c.Key = FieldAttr, key
	if p.atEnd() {
		c.Op = OpExists
		return c, nil
	}
	switch {
	case strings.HasPrefix(p.s[p.i:], "!="):
		c.Op, p.i = OpNe, p.i+2
	case strings.HasPrefix(p.s[p.i:], ">="):
		c.Op, p.i = OpGe, p.i+2
	case strings.HasPrefix(p.s[p.i:], "<="):
		c.Op, p.i = OpLe, p.i+2
	case p.s[p.i] == '=':
		c.Op, p.i = OpEq, p.i+1
		if p.i < len(p.s) && p.s[p.i] == '=' { // tolerate ==
			p.i++
		}
	case p.s[p.i] == '>':
		c.Op, p.i = OpGt, p.i+1
	case p.s[p.i] == '<':
		c.Op, p.i = OpLt, p.i+1
	default:
		return c, fmt.Errorf("unexpected %q after the key (want = != > >= < <= or a space)", p.s[p.i])
	}
	valQuoted := p.i < len(p.s) && p.s[p.i] == '"'
	v, err := p.word()
	if err != nil {
		return c, err
	}
	if v == "" && !valQuoted {
		return c, fmt.Errorf("%s wants a value after it (use \"\" for the empty string)", opText[c.Op])
	}
	if !p.atEnd() {
		return c, fmt.Errorf("unexpected %q after the value (quote a value that holds spaces or = ! < >)", p.s[p.i])
	}
	c.Value = v
	c.setNum()
	if c.Op >= OpGt && !c.IsNum {
		return c, fmt.Errorf("%s compares numbers; %s is not a finite number", opText[c.Op], quoteInput(v))
	}
	return c, checkValue(v)
}

func checkValue(v string) error {
	if len(v) > MaxSearchValue {
		return fmt.Errorf("value is %d bytes; searches compare values of up to %d", len(v), MaxSearchValue)
	}
	if !utf8.ValidString(v) {
		return errors.New("value is not valid UTF-8")
	}
	return nil
}

func (p *searchParser) atEnd() bool { return p.i >= len(p.s) || isSpace(p.s[p.i]) }

// word reads a bare word (up to a space, quote or operator character) or a
// double-quoted string.
func (p *searchParser) word() (string, error) {
	if p.i < len(p.s) && p.s[p.i] == '"' {
		var b strings.Builder
		for j := p.i + 1; j < len(p.s); j++ {
			switch c := p.s[j]; c {
			case '\\':
				if j+1 >= len(p.s) || (p.s[j+1] != '"' && p.s[j+1] != '\\') {
					p.i = j
					return "", errors.New(`a backslash in quotes escapes only " or \`)
				}
				j++
				b.WriteByte(p.s[j])
			case '"':
				p.i = j + 1
				return b.String(), nil
			default:
				b.WriteByte(c)
			}
		}
		p.i = len(p.s)
		return "", errors.New("unterminated quote")
	}
	start := p.i
	for p.i < len(p.s) && !isSpace(p.s[p.i]) && strings.IndexByte("\"=!<>", p.s[p.i]) < 0 {
		p.i++
	}
	return p.s[start:p.i], nil
}

// AttrMatches reports whether an attribute value v (as store.Attributes
// holds it) satisfies c's comparison on its own, for the operators that
// look at one value: OpExists, OpEq and the order comparisons. (OpNe is a
// trace-level rule: some span has the key and no span's value is equal;
// see TraceMatchesSearch.) It is the reference rule every backend's search
// must agree with.
func (c SearchClause) AttrMatches(v any) bool {
	switch c.Op {
	case OpExists:
		return true
	case OpNe:
		return c.eqValue(v)
	}
	if l, ok := v.([]any); ok {
		for _, e := range l {
			if _, nested := e.([]any); !nested && c.scalarMatches(e) {
				return true
			}
		}
		return false
	}
	return c.scalarMatches(v)
}

// eqValue is the OpEq rule, whatever c.Op is.
func (c SearchClause) eqValue(v any) bool {
	eq := c
	eq.Op = OpEq
	return eq.AttrMatches(v)
}

func (c SearchClause) scalarMatches(v any) bool {
	var f float64
	switch t := v.(type) {
	case string:
		return c.Op == OpEq && len(t) <= MaxSearchValue && t == c.Value
	case bool:
		return c.Op == OpEq && strconv.FormatBool(t) == c.Value
	case int64:
		f = float64(t)
	case int:
		f = float64(t)
	case float64:
		f = t
	default:
		return false
	}
	if !c.IsNum {
		return false
	}
	switch c.Op {
	case OpEq:
		return f == c.Num
	case OpGt:
		return f > c.Num
	case OpGe:
		return f >= c.Num
	case OpLt:
		return f < c.Num
	case OpLe:
		return f <= c.Num
	}
	return false
}

// TraceMatchesSearch reports whether spans (one trace) satisfy every clause:
// the reference semantics of TraceQuery.Search.
func TraceMatchesSearch(spans []Span, clauses []SearchClause) bool {
	for _, c := range clauses {
		if !traceMatchesClause(spans, c) {
			return false
		}
	}
	return true
}

func traceMatchesClause(spans []Span, c SearchClause) bool {
	has, eq := false, false
	for i := range spans {
		sp := &spans[i]
		switch c.Field {
		case FieldName:
			if sp.Name == c.Value {
				return true
			}
		case FieldRetrieved, FieldCited, FieldEvidence:
			if c.Field != FieldCited && containsString(sp.RetrievedDocs, c.Value) {
				return true
			}
			if c.Field != FieldRetrieved && containsString(sp.CitedDocs, c.Value) {
				return true
			}
		case FieldAttr:
			v, ok := sp.Attributes[c.Key]
			if !ok {
				continue
			}
			if c.Op != OpNe {
				if c.AttrMatches(v) {
					return true
				}
				continue
			}
			has = true
			eq = eq || c.eqValue(v)
		}
	}
	return c.Field == FieldAttr && c.Op == OpNe && has && !eq
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// setNum sets Num and IsNum from Value.
func (c *SearchClause) setNum() {
	c.Num, c.IsNum = 0, false
	if f, err := strconv.ParseFloat(strings.TrimSpace(c.Value), 64); err == nil && c.Value != "" && !math.IsNaN(f) && !math.IsInf(f, 0) {
		c.Num, c.IsNum = f, true
	}
}

// validate checks a clause built without ParseSearch (a caller may fill
// TraceQuery.Search directly): what ParseSearch would refuse.
func (c SearchClause) validate() error {
	switch c.Field {
	case FieldAttr:
		if c.Key == "" {
			return errors.New("empty attribute key")
		}
		if c.Op > OpLe {
			return fmt.Errorf("unknown operator %d", c.Op)
		}
		if c.Op >= OpGt && !c.IsNum {
			return fmt.Errorf("%s compares numbers; %s is not one", opText[c.Op], quoteInput(c.Value))
		}
	case FieldName, FieldRetrieved, FieldCited, FieldEvidence:
		if c.Op != OpEq {
			return errors.New("name:, retrieved:, cited: and evidence: compare with = only")
		}
		if c.Value == "" {
			return errors.New("empty value")
		}
	default:
		return fmt.Errorf("unknown field %d", c.Field)
	}
	if c.Op == OpExists {
		return nil
	}
	return checkValue(c.Value)
}
