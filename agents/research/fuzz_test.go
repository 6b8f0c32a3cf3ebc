package research_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/research"
)

// FuzzCitations checks the citation extractor on arbitrary answers: no
// panic, every id a page (no anchor) or an issue, no repeats.
func FuzzCitations(f *testing.F) {
	for _, s := range []string{"", "[docs/a.md#x] [docs/a.md]", "[issue:12]", "[docs/.md#]", "[[docs/x/y.md#a]]", "[docs/a b.md]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		seen := map[string]bool{}
		for _, id := range research.Citations(answer) {
			if seen[id] || strings.Contains(id, "#") || !(strings.HasPrefix(id, "docs/") || strings.HasPrefix(id, "issue:")) {
				t.Fatalf("bad citation %q from %q", id, answer)
			}
			seen[id] = true
		}
	})
}

// FuzzTaskAttributes feeds arbitrary task attributes to search_docs's
// decoder through the tool: it must fail cleanly, never panic.
func FuzzTaskAttributes(f *testing.F) {
	for _, s := range []string{`{"exclude_issues":[1]}`, `{"exclude_issues":[-1]}`, `{"exclude_issues":"x"}`, `[]`, `null`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return
		}
		research.DecodeAttributesForTest(json.RawMessage(raw))
	})
}
