// Package redact owns the collector's redaction step: configured patterns
// (API keys and tokens, e-mail addresses, payment card numbers that pass
// the Luhn check, custom regular expressions) replaced in every string a
// span carries, before anything is written, with a count of what was
// redacted per pattern.
//
// Patterns are RE2 (Go's regexp): matching is linear in the input, so a
// hostile multi-megabyte value costs time proportional to its size, never
// catastrophic backtracking. Each string value is redacted on its own: a
// secret a sender splits across two attributes is two fragments, and each
// fragment is redacted only if it matches by itself (docs/projects.md).
//
// The guarantee, checked by the fuzz test: after Redact, no pattern matches
// any stored string value (a value still matching after MaxPasses
// replacement passes — a custom pattern that matches its own replacement
// marker — is emptied, and a pattern may not match the empty string), and a
// value no pattern matches is unchanged.
package redact

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Built-in pattern names for Config.Builtins.
const (
	// APIKey matches common provider API keys and bearer tokens
	// (sk-…, sk-ant-…, AKIA…, ghp_…, xox?-…, AIza…, Loomwork's lwk_…,
	// "Bearer <token>").
	APIKey = "api_key"
	// Email matches e-mail addresses.
	Email = "email"
	// Card matches runs of 13 to 19 digits (single spaces or dashes
	// between them allowed) that pass the Luhn check.
	Card = "card"
)

// Builtins are every built-in pattern, the default of a Config that
// enables redaction without naming them.
var Builtins = []string{APIKey, Email, Card}

var builtinRE = map[string]string{
	APIKey: `(?:\b(?:sk|pk|rk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}` +
		`|\bAKIA[0-9A-Z]{16}\b` +
		`|\bgh[pousr]_[A-Za-z0-9]{30,}` +
		`|\bxox[abprs]-[A-Za-z0-9-]{10,}` +
		`|\bAIza[0-9A-Za-z_-]{35}` +
		`|\blwk_[A-Za-z0-9_-]{20,}` +
		`|(?i:\bbearer)\s+[A-Za-z0-9._~+/-]{16,}=*)`,
	Email: `[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`,
	// Candidate digit runs; Luhn and the length decide (cardMatch).
	Card: `\d(?:[ -]?\d)*`,
}

// Custom is a named custom pattern.
type Custom struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
}

// Config selects the patterns.
type Config struct {
	// Builtins names built-in patterns (APIKey, Email, Card).
	Builtins []string `json:"builtins,omitempty"`
	// Custom are extra RE2 patterns; a match is replaced whole.
	Custom []Custom `json:"custom,omitempty"`
}

// Enabled reports whether the config redacts anything.
func (c Config) Enabled() bool { return len(c.Builtins) > 0 || len(c.Custom) > 0 }

// Validate names every bad pattern.
func (c Config) Validate() error {
	var errs []error
	for i, b := range c.Builtins {
		if _, ok := builtinRE[b]; !ok {
			errs = append(errs, fmt.Errorf("redact.builtins[%d]: unknown pattern %q (want one of %s)", i, b, strings.Join(Builtins, ", ")))
		}
	}
	names := map[string]bool{}
	for i, cu := range c.Custom {
		if cu.Name == "" || names[cu.Name] || builtinRE[cu.Name] != "" {
			errs = append(errs, fmt.Errorf("redact.custom[%d].name: empty, repeated or a built-in name (%q)", i, cu.Name))
		}
		names[cu.Name] = true
		re, err := regexp.Compile(cu.Pattern)
		if err != nil {
			errs = append(errs, fmt.Errorf("redact.custom[%d] (%s).pattern: %w", i, cu.Name, err))
			continue
		}
		if re.MatchString("") {
			errs = append(errs, fmt.Errorf("redact.custom[%d] (%s).pattern: %q matches the empty string", i, cu.Name, cu.Pattern))
		}
	}
	return errors.Join(errs...)
}

// MaxPasses bounds the replacement passes over one value.
const MaxPasses = 4

type pattern struct {
	name   string
	find   func(s string) [][]int // match locations, leftmost-first, non-overlapping
	accept func(string) bool      // nil: every match; else only matches it accepts
	marker string
	count  atomic.Int64
}

// Redactor applies a Config. Safe for concurrent use.
type Redactor struct {
	pats []*pattern
}

// New compiles cfg's patterns. A nil *Redactor (and a Config that enables
// nothing) redacts nothing.
func New(cfg Config) (*Redactor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return nil, nil
	}
	r := &Redactor{}
	for _, b := range cfg.Builtins {
		if slices.ContainsFunc(r.pats, func(p *pattern) bool { return p.name == b }) {
			continue
		}
		p := &pattern{name: b, find: builtinFind[b], marker: "[REDACTED:" + b + "]"}
		if b == Card {
			p.accept = cardMatch
		}
		r.pats = append(r.pats, p)
	}
	for _, c := range cfg.Custom {
		re := regexp.MustCompile(c.Pattern)
		r.pats = append(r.pats, &pattern{name: c.Name, find: func(s string) [][]int { return re.FindAllStringIndex(s, -1) }, marker: "[REDACTED:" + c.Name + "]"})
	}
	return r, nil
}

// Counts returns how many values each pattern has redacted so far (a value
// with three e-mail addresses counts three).
func (r *Redactor) Counts() map[string]int64 {
	out := map[string]int64{}
	if r == nil {
		return out
	}
	for _, p := range r.pats {
		out[p.name] = p.count.Load()
	}
	return out
}

// String redacts one string value and says whether it changed.
func (r *Redactor) String(s string) (string, bool) {
	if r == nil || s == "" {
		return s, false
	}
	orig := s
	for pass := 0; pass < MaxPasses; pass++ {
		changed := false
		for _, p := range r.pats {
			if out, n := p.replace(s); n > 0 {
				s, changed = out, true
				p.count.Add(int64(n))
			}
		}
		if !changed {
			return s, s != orig
		}
	}
	if r.matches(s) {
		// A pattern matches its own (or another's) marker: give up on
		// the value rather than store a match.
		return "", true
	}
	return s, s != orig
}

func (r *Redactor) matches(s string) bool {
	for _, p := range r.pats {
		for _, m := range p.find(s) {
			if p.accept == nil || p.accept(s[m[0]:m[1]]) {
				return true
			}
		}
	}
	return false
}

// replace replaces p's accepted matches in s, returning how many.
func (p *pattern) replace(s string) (string, int) {
	locs := p.find(s)
	if len(locs) == 0 {
		return s, 0
	}
	var b strings.Builder
	n, last := 0, 0
	for _, m := range locs {
		if p.accept != nil && !p.accept(s[m[0]:m[1]]) {
			continue
		}
		if n == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(p.marker)
		last = m[1]
		n++
	}
	if n == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), n
}

// cardMatch accepts a digit run of 13 to 19 digits that passes Luhn.
func cardMatch(run string) bool {
	digits := make([]byte, 0, 19)
	for i := 0; i < len(run); i++ {
		if c := run[i]; c >= '0' && c <= '9' {
			if len(digits) == 19 {
				return false
			}
			digits = append(digits, c-'0')
		}
	}
	return len(digits) >= 13 && Luhn(digits)
}

// Luhn reports whether digits (values 0-9) pass the Luhn check.
func Luhn(digits []byte) bool {
	sum := 0
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i])
		if (len(digits)-1-i)%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

// Span redacts every string a span carries that a sender controls:
// its name and status message, and the string values (nested in lists and
// maps too) of its attributes, resource and scope attributes, events and
// links. It returns how many values changed.
func (r *Redactor) Span(sp *store.Span) int {
	if r == nil {
		return 0
	}
	n := 0
	str := func(s *string) {
		if out, ok := r.String(*s); ok {
			*s, n = out, n+1
		}
	}
	str(&sp.Name)
	str(&sp.StatusMessage)
	n += r.attrs(sp.Attributes)
	n += r.attrs(sp.ResourceAttributes)
	n += r.attrs(sp.ScopeAttributes)
	for i := range sp.Events {
		str(&sp.Events[i].Name)
		n += r.attrs(sp.Events[i].Attributes)
	}
	for i := range sp.Links {
		n += r.attrs(sp.Links[i].Attributes)
	}
	return n
}

func (r *Redactor) attrs(a store.Attributes) int {
	n := 0
	for k, v := range a {
		if out, changed := r.value(v); changed > 0 {
			a[k] = out
			n += changed
		}
	}
	return n
}

// value redacts strings in v, in place for lists and maps.
func (r *Redactor) value(v any) (any, int) {
	switch t := v.(type) {
	case string:
		if out, ok := r.String(t); ok {
			return out, 1
		}
	case int64:
		// A card number sent as a number is still a card number.
		if out, ok := r.String(strconv.FormatInt(t, 10)); ok {
			return out, 1
		}
	case []any:
		n := 0
		for i := range t {
			var c int
			if t[i], c = r.value(t[i]); c > 0 {
				n += c
			}
		}
		return t, n
	case map[string]any:
		n := 0
		for k := range t {
			var c int
			if t[k], c = r.value(t[k]); c > 0 {
				n += c
			}
		}
		return t, n
	}
	return v, 0
}

// DropContent removes the attributes that carry captured content
// (semconv.IsContentKey) from a span and its events, for a project that
// does not capture content. It returns how many attributes it removed.
func DropContent(sp *store.Span) int {
	n := 0
	drop := func(a store.Attributes) {
		for k := range a {
			if semconv.IsContentKey(k) {
				delete(a, k)
				n++
			}
		}
	}
	drop(sp.Attributes)
	for i := range sp.Events {
		drop(sp.Events[i].Attributes)
	}
	return n
}
