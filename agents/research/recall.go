package research

import (
	"context"
	"fmt"
	"strings"
	"time"

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

// RecallQuery is what a task is recalled by: its first line (an issue's
// title). Overlap is the share of the query's words a record holds, so a
// whole issue body as the query would drown every record.
func RecallQuery(task string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(task), "\n")
	return strings.TrimSpace(line)
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

// recalledPages are the documentation pages the recalled memory in a
// system prompt cites, in order, without repeats.
func recalledPages(system string) []string {
	_, block, ok := strings.Cut(system, runtime.MemoryHeader)
	if !ok {
		return nil
	}
	if i := strings.Index(block, "\n\n"+runtime.EvidenceHeader); i >= 0 {
		block = block[:i]
	}
	var pages []string
	for _, c := range Citations(block) {
		if !strings.HasPrefix(c, "issue:") {
			pages = append(pages, c)
		}
	}
	return pages
}
