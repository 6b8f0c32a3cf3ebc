package contextlayer

import (
	"errors"
	"fmt"
	"sort"
)

// Item is one piece of prompt material.
type Item struct {
	ID   string
	Text string
	// Priority orders eviction inside a tier: lower goes first.
	Priority int
	// Compactable items may be shrunk (ShrinkText) before anything is evicted.
	Compactable bool
}

// Tier is a class of material. Tiers are given most important first
// (instructions, evidence, tool output, memory, history): compaction and
// eviction start from the last tier.
type Tier struct {
	Name string
	// Floor is the number of tokens this tier keeps (if it offered that many)
	// before any of it is evicted to make room for other tiers.
	Floor int
	Items []Item
}

// BuildReport accounts for every offered token: Used + Dropped == Offered,
// overall and per tier, where Dropped = Evicted + Compacted + Duplicates.
type BuildReport struct {
	Budget     int          `json:"budget"`
	Offered    int          `json:"offered"`
	Used       int          `json:"used"`
	Dropped    int          `json:"dropped"`
	Tiers      []TierReport `json:"tiers"`
	OverBudget bool         `json:"over_budget,omitempty"`
}

// TierReport accounts for one tier.
type TierReport struct {
	Name         string   `json:"name"`
	Offered      int      `json:"offered"`
	Used         int      `json:"used"`
	Evicted      int      `json:"evicted"`    // tokens of items removed whole
	Compacted    int      `json:"compacted"`  // tokens removed by shrinking items
	Duplicates   int      `json:"duplicates"` // tokens of items whose id appeared earlier
	EvictedIDs   []string `json:"evicted_ids,omitempty"`
	CompactedIDs []string `json:"compacted_ids,omitempty"`
	DuplicateIDs []string `json:"duplicate_ids,omitempty"`
}

// Dropped is Evicted + Compacted + Duplicates.
func (t TierReport) Dropped() int { return t.Evicted + t.Compacted + t.Duplicates }

// Builder assembles prompts from tiers within a budget.
type Builder struct {
	Counter Counter
	Budget  int
	// CompactTo is the size compactable items are shrunk to (default 200).
	CompactTo int
}

// Assembled is the built prompt material, tier by tier.
type Assembled struct {
	Tiers []AssembledTier
}

// AssembledTier holds the kept items of one tier, in their original order.
type AssembledTier struct {
	Name  string
	Items []Item
}

type slot struct {
	item    Item
	orig    int // tokens as offered
	cur     int // tokens now
	evicted bool
	tier    int
	order   int
}

// Build fits the tiers into the budget: duplicates (same id as an earlier
// item) are dropped, then compactable items are shrunk starting from the
// least important tier, then items are evicted starting from the least
// important tier and the lowest priority, never taking a tier below its
// floor. If the floors alone exceed the budget the result is over budget and
// the report says so.
func (b Builder) Build(tiers []Tier) (Assembled, BuildReport, error) {
	if b.Counter == nil {
		return Assembled{}, BuildReport{}, errors.New("build context: a token counter is required")
	}
	if b.Budget <= 0 {
		return Assembled{}, BuildReport{}, fmt.Errorf("build context: budget must be positive (got %d)", b.Budget)
	}
	compactTo := b.CompactTo
	if compactTo <= 0 {
		compactTo = 200
	}
	rep := BuildReport{Budget: b.Budget, Tiers: make([]TierReport, len(tiers))}
	seen := map[string]bool{}
	var slots []*slot
	for ti, t := range tiers {
		if t.Floor < 0 {
			return Assembled{}, BuildReport{}, fmt.Errorf("build context: tier %q: floor must not be negative", t.Name)
		}
		tr := &rep.Tiers[ti]
		tr.Name = t.Name
		for oi, it := range t.Items {
			n := b.Counter.Count(it.Text)
			tr.Offered += n
			if it.ID != "" && seen[it.ID] {
				tr.Duplicates += n
				tr.DuplicateIDs = append(tr.DuplicateIDs, it.ID)
				continue
			}
			seen[it.ID] = it.ID != ""
			slots = append(slots, &slot{item: it, orig: n, cur: n, tier: ti, order: oi})
		}
	}
	total := func() int {
		s := 0
		for _, sl := range slots {
			if !sl.evicted {
				s += sl.cur
			}
		}
		return s
	}
	tierUsed := func(ti int) int {
		s := 0
		for _, sl := range slots {
			if sl.tier == ti && !sl.evicted {
				s += sl.cur
			}
		}
		return s
	}

	// Compaction, least important tier first, largest item first.
	for ti := len(tiers) - 1; ti >= 0 && total() > b.Budget; ti-- {
		var cands []*slot
		for _, sl := range slots {
			if sl.tier == ti && sl.item.Compactable && sl.cur > compactTo {
				cands = append(cands, sl)
			}
		}
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].cur > cands[j].cur })
		for _, sl := range cands {
			if total() <= b.Budget {
				break
			}
			text, cut := ShrinkText(b.Counter, sl.item.Text, compactTo, ShrinkLimits{})
			if !cut {
				continue
			}
			n := b.Counter.Count(text)
			if n >= sl.cur {
				continue
			}
			sl.item.Text = text
			sl.cur = n
			rep.Tiers[ti].CompactedIDs = append(rep.Tiers[ti].CompactedIDs, sl.item.ID)
		}
	}

	// Eviction, least important tier first, lowest priority first, above floors.
	for ti := len(tiers) - 1; ti >= 0 && total() > b.Budget; ti-- {
		var cands []*slot
		for _, sl := range slots {
			if sl.tier == ti {
				cands = append(cands, sl)
			}
		}
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].item.Priority < cands[j].item.Priority })
		floor := min(tiers[ti].Floor, rep.Tiers[ti].Offered)
		for _, sl := range cands {
			if total() <= b.Budget {
				break
			}
			if tierUsed(ti)-sl.cur < floor {
				continue
			}
			sl.evicted = true
			rep.Tiers[ti].EvictedIDs = append(rep.Tiers[ti].EvictedIDs, sl.item.ID)
		}
	}

	out := Assembled{Tiers: make([]AssembledTier, len(tiers))}
	for ti := range tiers {
		out.Tiers[ti].Name = tiers[ti].Name
	}
	for _, sl := range slots {
		tr := &rep.Tiers[sl.tier]
		if sl.evicted {
			tr.Evicted += sl.orig
			continue
		}
		tr.Compacted += sl.orig - sl.cur
		tr.Used += sl.cur
		out.Tiers[sl.tier].Items = append(out.Tiers[sl.tier].Items, sl.item)
	}
	for _, tr := range rep.Tiers {
		rep.Offered += tr.Offered
		rep.Used += tr.Used
		rep.Dropped += tr.Dropped()
	}
	rep.OverBudget = rep.Used > b.Budget
	return out, rep, nil
}
