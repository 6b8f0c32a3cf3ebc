package research

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/loomwork/loomwork/agents/memory"
	"github.com/loomwork/loomwork/agents/runtime"
)

// RecallConfig says how a research run recalls memory.
type RecallConfig struct {
	// K is the most records recalled (default 2).
	K int
	// MinScore is the smallest retrieval score recalled (default 0.1): an
	// incidental word in common is not a memory of this task.
	MinScore float64
	// Window and Reserve size the tiered context (default 10,000 and
	// 2,000: the 8,000-token budget of DefaultContext).
	Window, Reserve int
}

func (c RecallConfig) withDefaults() RecallConfig {
	if c.K == 0 {
		c.K = 2
	}
	if c.MinScore == 0 {
		c.MinScore = 0.1
	}
	if c.Window == 0 {
		c.Window, c.Reserve = 10000, 2000
	}
	return c
}

// RecallQuery is what a task is recalled by: the words of its first line
// (an issue's title) less function words. Overlap is the share of the
// query's words a record holds, so a whole issue body would drown every
// record, and a shared "with" or "the" is no memory of the task.
func RecallQuery(task string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(task), "\n")
	var keep []string
	for _, w := range strings.FieldsFunc(strings.ToLower(line), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !stopwords[w] && len(w) > 1 {
			keep = append(keep, w)
		}
	}
	return strings.Join(keep, " ")
}

// stopwords are English function words and the words every issue title
// uses ("not working", "how to").
var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the and or but if then else of in on at to for from by with without into onto
		is are was were be been being it its this that these those there here as not no can cant cannot don doesn
		do does did how what when where which who why will would should could may might must i me my we our you your
		he she they them their his her after before about above below up down out over under again further once
		all any both each few more most other some such only own same so than too very just also get got use using
		work working works doesn't isn't`) {
		stopwords[w] = true
	}
}

// Recall retrieves the records of scope that score at least MinScore for
// task at now, as memory-tier documents carrying their provenance (the
// store, the record key, the runs that wrote it, the journal events it was
// distilled from). Retrieval does not mutate the store.
func Recall(ctx context.Context, st *memory.Store, scope memory.Scope, task string, cfg RecallConfig, now time.Time) ([]runtime.TierDoc, []memory.Scored, error) {
	cfg = cfg.withDefaults()
	hits, err := st.Retrieve(ctx, scope, RecallQuery(task), cfg.K, now)
	if err != nil {
		return nil, nil, fmt.Errorf("research recall: %w", err)
	}
	var docs []runtime.TierDoc
	var kept []memory.Scored
	for _, h := range hits {
		if h.Score < cfg.MinScore {
			continue
		}
		prov := []string{"memory:" + scope.String() + "/" + h.Record.Key}
		prov = append(prov, h.Record.SourceRuns...)
		if h.Record.Provenance != "" {
			prov = append(prov, h.Record.Provenance)
		}
		docs = append(docs, runtime.TierDoc{ID: "memory:" + h.Record.Key, Text: h.Record.Text, Provenance: prov, Relevance: h.Score})
		kept = append(kept, h)
	}
	return docs, kept, nil
}

// RecallContext is base with a tiered assembly whose memory tier holds the
// recalled records.
func RecallContext(base runtime.ContextSpec, recalled []runtime.TierDoc, cfg RecallConfig) runtime.ContextSpec {
	cfg = cfg.withDefaults()
	spec := base
	spec.Budget = 0
	spec.Tiers = &runtime.TierSpec{Window: cfg.Window, Reserve: cfg.Reserve, Memory: recalled}
	return spec
}

// recalledIDs are the documentation ids (sections where the memory names
// them) the recalled memory in a system prompt cites, in order, without
// repeats.
func recalledIDs(system string) []string {
	_, block, ok := strings.Cut(system, runtime.MemoryHeader)
	if !ok {
		return nil
	}
	if i := strings.Index(block, "\n\n"+runtime.EvidenceHeader); i >= 0 {
		block = block[:i]
	}
	var ids []string
	for _, m := range citationRE.FindAllStringSubmatch(block, -1) {
		if id := m[1]; !strings.HasPrefix(id, "issue:") && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}
