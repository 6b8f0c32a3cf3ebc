package redact

import (
	"regexp"
	"strings"
)

// Fast finders for the built-in patterns. Go's regexp is linear but slow
// on an unanchored search whose pattern has no literal prefix (the e-mail
// and card patterns start with a character class; the API-key alternation
// with \b): about 1 MB/s. The finders below return exactly the matches
// FindAllStringIndex of builtinRE would (the fuzz test checks it, with the
// regexps as the oracle): e-mail and card by hand, API keys by searching
// for their literal starts and running the pattern anchored there.
var builtinFind = map[string]func(string) [][]int{
	Email:  findEmails,
	Card:   findDigitRuns,
	APIKey: findAPIKeys,
}

func isLocal(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

func isLabel(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// findEmails is FindAllStringIndex of builtinRE[Email]:
// [A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}
func findEmails(s string) [][]int {
	var out [][]int
	pos := 0
	for pos < len(s) {
		at := strings.IndexByte(s[pos:], '@')
		if at < 0 {
			break
		}
		at += pos
		start := at
		for start > pos && isLocal(s[start-1]) {
			start--
		}
		if start == at {
			pos = at + 1
			continue
		}
		end := emailDomainEnd(s, at+1)
		if end < 0 {
			pos = at + 1
			continue
		}
		out = append(out, []int{start, end})
		pos = end
	}
	return out
}

// emailDomainEnd matches [A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}
// at i with leftmost-first (greedy, backtracking) semantics: the most
// labels before the last dot for which the rest matches, then the longest
// alphabetic run. -1 when nothing matches.
func emailDomainEnd(s string, i int) int {
	// Label boundaries: labels[k] is the start of label k; each label is
	// a non-empty run of label characters, separated by single dots.
	var starts, ends []int
	j := i
	for {
		k := j
		for k < len(s) && isLabel(s[k]) {
			k++
		}
		if k == j {
			break
		}
		starts, ends = append(starts, j), append(ends, k)
		if k < len(s) && s[k] == '.' {
			j = k + 1
			continue
		}
		break
	}
	// The first part takes labels [0, n) (n >= 1); then "." and at least
	// two letters at the start of label n.
	for n := len(starts) - 1; n >= 1; n-- {
		a := starts[n]
		e := a
		for e < ends[n] && isAlpha(s[e]) {
			e++
		}
		if e-a >= 2 {
			return e
		}
	}
	return -1
}

// findDigitRuns is FindAllStringIndex of builtinRE[Card]: \d(?:[ -]?\d)*
func findDigitRuns(s string) [][]int {
	var out [][]int
	i := 0
	for i < len(s) {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j := i + 1
		for j < len(s) {
			if s[j] >= '0' && s[j] <= '9' {
				j++
			} else if (s[j] == ' ' || s[j] == '-') && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9' {
				j += 2
			} else {
				break
			}
		}
		out = append(out, []int{i, j})
		i = j
	}
	return out
}

// apiKeyAnchored is builtinRE[APIKey] without its leading \b, anchored:
// findAPIKeys runs it only where a key can start.
var apiKeyAnchored = regexp.MustCompile(`^(?:(?:sk|pk|rk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}` +
	`|AKIA[0-9A-Z]{16}\b` +
	`|gh[pousr]_[A-Za-z0-9]{30,}` +
	`|xox[abprs]-[A-Za-z0-9-]{10,}` +
	`|AIza[0-9A-Za-z_-]{35}` +
	`|lwk_[A-Za-z0-9_-]{20,}` +
	`|(?i:bearer)\s+[A-Za-z0-9._~+/-]{16,}=*)`)

// findAPIKeys is FindAllStringIndex of builtinRE[APIKey]. Every
// alternative starts with \b and one of a few literal starts; a match can
// only begin where one of them is, so only those positions are tried.
func findAPIKeys(s string) [][]int {
	var out [][]int
	pos := 0
	for i := 0; i+2 <= len(s); i++ {
		if i < pos || !keyStart(s, i) || (i > 0 && isWord(s[i-1])) {
			continue
		}
		if loc := apiKeyAnchored.FindStringIndex(s[i:]); loc != nil {
			out = append(out, []int{i, i + loc[1]})
			pos = i + loc[1]
			if loc[1] == 0 {
				pos++
			}
		}
	}
	return out
}

// keyStart reports whether an API-key alternative's literal start is at i.
func keyStart(s string, i int) bool {
	switch s[i] {
	case 's', 'p', 'r':
		return s[i+1] == 'k'
	case 'A':
		return s[i+1] == 'K' || s[i+1] == 'I'
	case 'g':
		return s[i+1] == 'h'
	case 'x':
		return s[i+1] == 'o'
	case 'l':
		return s[i+1] == 'w'
	case 'b', 'B':
		return s[i+1] == 'e' || s[i+1] == 'E'
	}
	return false
}
