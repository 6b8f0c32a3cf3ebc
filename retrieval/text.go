package retrieval

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/registry"
)

// analyzer wraps bleve's English analyzer (lower-case, stop words,
// possessives, Porter stemming) so the dense model, the reranker's features
// and the BM25 index see the same terms.
type analyzer struct{ a analysis.Analyzer }

var (
	enOnce sync.Once
	enA    analysis.Analyzer
	enErr  error
)

func newAnalyzer() (analyzer, error) {
	// The registry cache is read-only once built; building it once per
	// process is an optimisation, not shared mutable state.
	enOnce.Do(func() {
		enA, enErr = registry.NewCache().AnalyzerNamed(en.AnalyzerName)
	})
	if enErr != nil {
		return analyzer{}, fmt.Errorf("load english analyzer: %w", enErr)
	}
	return analyzer{a: enA}, nil
}

// terms returns the analysed tokens of s in order.
func (a analyzer) terms(s string) []string {
	ts := a.a.Analyze([]byte(s))
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, string(t.Term))
	}
	return out
}

// reIdentifier matches things users paste from configs and code:
// dotted keys (navigation.tabs), snake_case (extra_css), kebab words with a
// digit or several parts (mkdocs-material), file names (mkdocs.yml).
var reIdentifier = regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9]+)+|[a-z][a-z0-9]*(?:-[a-z0-9]+){2,}`)

// identifiers returns the distinct identifiers in s, lower-cased.
func identifiers(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range reIdentifier.FindAllString(s, -1) {
		m = strings.ToLower(strings.Trim(m, "._-"))
		if len(m) < 4 || seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, m)
	}
	return out
}

func sqrt(x float64) float64 { return math.Sqrt(x) }
