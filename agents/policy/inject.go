package policy

import (
	"regexp"
	"strings"
)

// Injection patterns: a deterministic detector of instructions planted in
// content. It is a signal (a span attribute, a counter in the security
// eval), never the boundary: the boundary is the engine, which does not
// read content at all.
//
// Each pattern runs only on the sentences that contain one of its trigger
// words (text lower-cased once), which keeps a scan of a long tool output
// linear and cheap: Go's regexp is linear-time but slow on case-folded
// bounded repetitions over kilobytes.
var injectionPatterns = []struct {
	name     string
	triggers []string
	re       *regexp.Regexp
}{
	{"instruction_override", []string{"ignore", "disregard", "forget", "override"},
		regexp.MustCompile(`\b(ignore|disregard|forget|override)\b[^.]*\b(previous|prior|above|earlier|all|system|your)\b[^.]*\b(instructions?|prompts?|rules|directions|guidelines)\b`)},
	{"role_hijack", []string{"you are now", "act as", "pretend", " mode", "system prompt"},
		regexp.MustCompile(`\byou are now\b|\bact as (an? )?(admin|administrator|root|developer|system)\b|\bpretend (to be|you are)\b|\b(maintenance|developer|admin|debug|god) mode\b|\bnew system prompt\b`)},
	{"tool_directive", []string{"call", "invoke", "execute", "run", "use"},
		regexp.MustCompile("\\b(call|invoke|execute|run|use)\\s+(the\\s+)?(tool\\s+|function\\s+)?`?[a-z][a-z0-9_]*([._][a-z0-9_]+)+`?")},
	{"exfiltration", []string{"send", "email", "e-mail", "post", "upload", "forward", "exfiltrate", "leak", "copy"},
		regexp.MustCompile(`\b(send|email|e-mail|post|upload|forward|exfiltrate|leak|copy)\b[^.]*\b(to|at)\b[^.]*(@|https?://)|\b(send|email|forward|post|upload)\b[^.]*\b(passwords?|secrets?|tokens?|api keys?|credentials|private keys?)\b`)},
}

// Scan returns the names of the injection patterns text matches, in a
// fixed order (instruction_override, role_hijack, tool_directive,
// exfiltration); none for clean text.
func Scan(text string) []string {
	lower := strings.ToLower(text)
	var out []string
	for _, p := range injectionPatterns {
		if matchSentences(lower, p.triggers, p.re) {
			out = append(out, p.name)
		}
	}
	return out
}

// matchSentences runs re on each sentence (split at ". ", "\n") holding a
// trigger; a pattern never spans sentences.
func matchSentences(lower string, triggers []string, re *regexp.Regexp) bool {
	any := false
	for _, t := range triggers {
		if strings.Contains(lower, t) {
			any = true
			break
		}
	}
	if !any {
		return false
	}
	for s := range strings.FieldsFuncSeq(lower, func(r rune) bool { return r == '\n' }) {
		for part := range strings.SplitSeq(s, ". ") {
			for _, t := range triggers {
				if strings.Contains(part, t) {
					if re.MatchString(part) {
						return true
					}
					break
				}
			}
		}
	}
	return false
}
