package policy

import "regexp"

// Injection patterns: a deterministic detector of instructions planted in
// content. It is a signal (a span attribute, a counter in the security
// eval), never the boundary: the boundary is the engine, which does not
// read content at all.
var injectionPatterns = []struct {
	name string
	re   *regexp.Regexp
}{
	{"instruction_override", regexp.MustCompile(`(?i)\b(ignore|disregard|forget|override)\b[^.]{0,40}\b(previous|prior|above|earlier|all|system|your)\b[^.]{0,20}\b(instructions?|prompts?|rules|directions|guidelines)\b`)},
	{"role_hijack", regexp.MustCompile(`(?i)\byou are now\b|\bact as (an? )?(admin|administrator|root|developer|system)\b|\bpretend (to be|you are)\b|\b(maintenance|developer|admin|debug|god) mode\b|\bnew system prompt\b`)},
	{"tool_directive", regexp.MustCompile(`(?i)\b(call|invoke|execute|run|use)\s+(the\s+)?(tool\s+|function\s+)?` + "`?" + `[a-z][a-z0-9_]*([._][a-z0-9_]+)+` + "`?" + `\b`)},
	{"exfiltration", regexp.MustCompile(`(?i)\b(send|email|e-mail|post|upload|forward|exfiltrate|leak|copy)\b[^.]{0,60}\b(to|at)\b[^.]{0,20}(@|https?://)|\b(send|email|forward|post|upload)\b[^.]{0,40}\b(passwords?|secrets?|tokens?|api keys?|credentials|private keys?)\b`)},
}

// Scan returns the names of the injection patterns text matches, in a
// fixed order (instruction_override, role_hijack, tool_directive,
// exfiltration); none for clean text.
func Scan(text string) []string {
	var out []string
	for _, p := range injectionPatterns {
		if p.re.MatchString(text) {
			out = append(out, p.name)
		}
	}
	return out
}
