package research_test

import (
	"encoding/json"
	"slices"
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
// decoder. Properties: an accepted value holds only positive issue numbers
// and round-trips through TaskAttributes to the same list; a rejected one
// names the task attributes (so the tool's error says where it came from).
func FuzzTaskAttributes(f *testing.F) {
	for _, s := range []string{`{"exclude_issues":[1]}`, `{"exclude_issues":[-1]}`, `{"exclude_issues":"x"}`, `[]`, `null`, `{`, `{"exclude_issues":[3,0]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := research.DecodeAttributesForTest(json.RawMessage(raw))
		if err != nil {
			if !strings.Contains(err.Error(), "task attributes") {
				t.Fatalf("error %q does not name the task attributes", err)
			}
			return
		}
		for i, n := range a.ExcludeIssues {
			if n <= 0 {
				t.Fatalf("accepted exclude_issues[%d] = %d from %q", i, n, raw)
			}
		}
		back, err := research.DecodeAttributesForTest(research.TaskAttributes(a.ExcludeIssues...))
		if err != nil || !slices.Equal(back.ExcludeIssues, a.ExcludeIssues) && len(a.ExcludeIssues) > 0 {
			t.Fatalf("round trip of %v: %v, %v", a.ExcludeIssues, back.ExcludeIssues, err)
		}
	})
}
