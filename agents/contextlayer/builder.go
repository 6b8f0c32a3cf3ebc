package contextlayer

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/loomwork/loomwork/agents/journal"
)

// Tier is a class of prompt material. Tiers are ordered by how much losing
// them would be regretted: instructions first, history last.
type Tier int

// The five tiers, highest priority first.
const (
	TierInstructions Tier = iota
	TierEvidence
	TierToolOutput
	TierMemory
	TierHistory
	numTiers
)

var tierNames = [numTiers]string{"instructions", "evidence", "tool_output", "memory", "history"}

// Tiers lists the tiers in priority order.
func Tiers() []Tier {
	return []Tier{TierInstructions, TierEvidence, TierToolOutput, TierMemory, TierHistory}
}

func (t Tier) String() string {
	if t < 0 || t >= numTiers {
		return fmt.Sprintf("tier(%d)", int(t))
	}
	return tierNames[t]
}

// ParseTier is the inverse of Tier.String.
func ParseTier(s string) (Tier, error) {
	for i, n := range tierNames {
		if n == s {
			return Tier(i), nil
		}
	}
	return 0, fmt.Errorf("unknown tier %q (want instructions, evidence, tool_output, memory or history)", s)
}

// Decision actions.
const (
	ActionKept      = "kept"
	ActionTruncated = "truncated"
	ActionDropped   = "dropped"
)

// Item is one piece of prompt material offered to the Builder.
type Item struct {
	ID   string
	Tier Tier
	// Tokens is the item's size. Zero means "count Text with the builder's
	// Counter"; a positive value is taken as given (the reference design's
	// example states sizes, not texts).
	Tokens int
	Text   string
	// Relevance orders items inside a tier (higher first); ties keep the
	// offered order.
	Relevance float64
	// Provenance names where the item came from (a URL, a memory key, a
	// tool call id); it travels into the report.
	Provenance []string
	// Pinnable items are kept whole or not at all, never compacted. The
	// instructions tier is always treated as pinnable.
	Pinnable bool
}

// Admitted is one item as the builder decided it: Item.Text is the
// (possibly compacted) text and Tokens its size.
type Admitted struct {
	Item   Item
	Action string
	Tokens int
	Reason string
}

// BuildReport is the builder's report (the journal's format).
type BuildReport = journal.TierReport

// Builder fills a window by tiers. It is a value: configure, then Build.
//
// The rules, in order: the completion reservation is never touched (the
// usable budget is Window - Reserve); each tier's floor is set aside for it
// before any higher tier is served (floors are honoured in tier order); items
// are served in tier order and, inside a tier, by relevance; an item that
// fits whole is kept whole; one that does not is compacted, only if it is
// not pinnable and only down to its compaction floor; one that cannot be
// compacted that far is dropped. A higher tier is never shrunk to make room
// for a lower one: each decision is final when it is made.
type Builder struct {
	Window  int
	Reserve int
	// Floors sets aside tokens for a tier (up to what the tier offers).
	Floors map[Tier]int
	// CompactionFloor is the smallest fraction of its size an item may be
	// compacted to (default 0.35, the reference design's).
	CompactionFloor float64
	// Counter counts items given by text; required only when some item has
	// Tokens == 0, and used to compact texts.
	Counter Counter
}

// DefaultCompactionFloor is the fraction an item may be compacted down to.
const DefaultCompactionFloor = 0.35

// Validate reports configuration errors.
func (b Builder) Validate() error {
	var errs []error
	if b.Window <= 0 {
		errs = append(errs, fmt.Errorf("window must be a positive token count (got %d)", b.Window))
	}
	if b.Reserve < 0 || (b.Window > 0 && b.Reserve >= b.Window) {
		errs = append(errs, fmt.Errorf("reserve must be in [0, window) (got %d of %d)", b.Reserve, b.Window))
	}
	if b.CompactionFloor < 0 || b.CompactionFloor > 1 {
		errs = append(errs, fmt.Errorf("compaction floor must be in [0, 1] (got %v)", b.CompactionFloor))
	}
	for t, f := range b.Floors {
		if t < 0 || t >= numTiers {
			errs = append(errs, fmt.Errorf("floor for unknown tier %d", int(t)))
		}
		if f < 0 {
			errs = append(errs, fmt.Errorf("floor for tier %s must not be negative (got %d)", t, f))
		}
	}
	return errors.Join(errs...)
}

// compactionFloor is the smallest size an item of n tokens may shrink to.
func (b Builder) compactionFloor(n int) int {
	f := b.CompactionFloor
	if f == 0 {
		f = DefaultCompactionFloor
	}
	// Round to the nearest token first so 0.35*640 = 224.00000000000003
	// does not become 225.
	return int(math.Ceil(math.Round(f*float64(n)*1e6) / 1e6))
}

// Build decides every item and returns the admitted ones (kept or
// truncated) in window order — tier order, relevance inside a tier — and a
// report with one decision per offered item. It returns an error if the
// accounting identity used + dropped = offered or the budget constraint
// used <= window - reserve fails, which would be a bug in the builder.
func (b Builder) Build(items []Item) ([]Admitted, BuildReport, error) {
	if err := b.Validate(); err != nil {
		return nil, BuildReport{}, fmt.Errorf("build context: %w", err)
	}
	type entry struct {
		item  Item
		size  int
		order int
	}
	entries := make([]entry, 0, len(items))
	seen := map[string]bool{}
	var offeredBy [numTiers]int
	for i, it := range items {
		if it.Tier < 0 || it.Tier >= numTiers {
			return nil, BuildReport{}, fmt.Errorf("build context: item %d (%q): unknown tier %d", i, it.ID, int(it.Tier))
		}
		if it.ID == "" {
			return nil, BuildReport{}, fmt.Errorf("build context: item %d has no id", i)
		}
		if seen[it.ID] {
			return nil, BuildReport{}, fmt.Errorf("build context: item %d: duplicate id %q", i, it.ID)
		}
		seen[it.ID] = true
		n := it.Tokens
		if n < 0 {
			return nil, BuildReport{}, fmt.Errorf("build context: item %q: negative token count %d", it.ID, n)
		}
		if n == 0 && it.Text != "" {
			if b.Counter == nil {
				return nil, BuildReport{}, fmt.Errorf("build context: item %q has no token count and the builder has no counter", it.ID)
			}
			n = b.Counter.Count(it.Text)
		}
		entries = append(entries, entry{item: it, size: n, order: i})
		offeredBy[it.Tier] += n
	}
	sort.SliceStable(entries, func(i, j int) bool {
		a, c := entries[i].item, entries[j].item
		if a.Tier != c.Tier {
			return a.Tier < c.Tier
		}
		return a.Relevance > c.Relevance
	})

	// held[t] is what tier t's floor still sets aside; it shrinks as the
	// tier is served, and is released when the tier is done.
	var held [numTiers]int
	for t := range numTiers {
		held[t] = min(b.Floors[t], offeredBy[t])
	}
	heldBelow := func(t Tier) int {
		s := 0
		for u := t + 1; u < numTiers; u++ {
			s += held[u]
		}
		return s
	}

	usable := b.Window - b.Reserve
	rep := BuildReport{Window: b.Window, Reserve: b.Reserve, Usable: usable, Weakest: -1}
	var usedBy [numTiers]int
	var admitted []Admitted
	used := 0
	for _, e := range entries {
		it, t := e.item, e.item.Tier
		room := max(usable-used-heldBelow(t), 0)
		d := journal.TierDecision{ID: it.ID, Tier: t.String(), Offered: e.size, Provenance: it.Provenance}
		floor := b.compactionFloor(e.size)
		pinned := it.Pinnable || t == TierInstructions
		switch {
		case e.size <= room:
			d.Action, d.Tokens = ActionKept, e.size
			d.Reason = fmt.Sprintf("fits whole (%d of %d usable)", e.size, room)
		case !pinned && floor <= room && room > 0:
			text, n, ok := b.compact(it, e.size, room)
			if !ok {
				d.Action = ActionDropped
				d.Reason = fmt.Sprintf("does not fit: needs %d, %d usable, and its text does not compact to %d", e.size, room, room)
				break
			}
			it.Text = text
			d.Action, d.Tokens = ActionTruncated, n
			d.Reason = fmt.Sprintf("compacted from %d to %d tokens (floor %d)", e.size, n, floor)
		case pinned:
			d.Action = ActionDropped
			d.Reason = fmt.Sprintf("does not fit: needs %d, %d usable, kept whole or not at all", e.size, room)
		default:
			d.Action = ActionDropped
			d.Reason = fmt.Sprintf("does not fit: needs %d, %d usable, compaction floor %d", e.size, room, floor)
		}
		used += d.Tokens
		usedBy[t] += d.Tokens
		held[t] = max(held[t]-d.Tokens, 0)
		rep.Items = append(rep.Items, d)
		if d.Action != ActionDropped {
			admitted = append(admitted, Admitted{Item: it, Action: d.Action, Tokens: d.Tokens, Reason: d.Reason})
		}
	}
	for t := range numTiers {
		rep.Offered += offeredBy[t]
		if offeredBy[t] > 0 {
			rep.ByTier = append(rep.ByTier, journal.TierTokens{Tier: Tier(t).String(), Offered: offeredBy[t], Used: usedBy[t]})
		}
	}
	rep.Used = used
	rep.Dropped = rep.Offered - used
	rep.Utilization = float64(used) / float64(b.Window)
	if w := WeakestPosition(len(admitted)); w >= 0 {
		rep.Weakest, rep.WeakestID = w, admitted[w].Item.ID
	}
	if err := CheckReport(rep); err != nil {
		return nil, BuildReport{}, fmt.Errorf("build context: %w", err)
	}
	return admitted, rep, nil
}

// compact shrinks an item to at most room tokens. An item given only by
// size (no text) compacts to exactly room; a text is shrunk by ShrinkText
// and recounted, so the reported size is the size of what is sent.
func (b Builder) compact(it Item, size, room int) (string, int, bool) {
	if it.Text == "" || b.Counter == nil || it.Tokens > 0 && b.Counter.Count(it.Text) != size {
		// Sizes were stated, not counted: the text is a label.
		return it.Text, room, true
	}
	for target := room; target > 0; target = target * 9 / 10 {
		text, _ := ShrinkText(b.Counter, it.Text, target, ShrinkLimits{})
		if n := b.Counter.Count(text); n <= room {
			return text, n, n > 0
		}
	}
	return "", 0, false
}

// CheckReport asserts the report's accounting: per item, used + dropped =
// offered in total and per tier, and the reservation untouched.
func CheckReport(rep BuildReport) error {
	var used, offered int
	byTier := map[string][2]int{}
	for _, d := range rep.Items {
		switch d.Action {
		case ActionKept:
			if d.Tokens != d.Offered {
				return fmt.Errorf("item %q kept with %d of %d tokens", d.ID, d.Tokens, d.Offered)
			}
		case ActionTruncated:
			if d.Tokens <= 0 || d.Tokens >= d.Offered {
				return fmt.Errorf("item %q truncated to %d of %d tokens", d.ID, d.Tokens, d.Offered)
			}
		case ActionDropped:
			if d.Tokens != 0 {
				return fmt.Errorf("item %q dropped but counts %d tokens", d.ID, d.Tokens)
			}
		default:
			return fmt.Errorf("item %q: unknown action %q", d.ID, d.Action)
		}
		used += d.Tokens
		offered += d.Offered
		v := byTier[d.Tier]
		byTier[d.Tier] = [2]int{v[0] + d.Offered, v[1] + d.Tokens}
	}
	if used != rep.Used || offered != rep.Offered {
		return fmt.Errorf("items sum to used %d, offered %d; report says %d, %d", used, offered, rep.Used, rep.Offered)
	}
	if rep.Used+rep.Dropped != rep.Offered {
		return fmt.Errorf("accounting identity fails: used %d + dropped %d != offered %d", rep.Used, rep.Dropped, rep.Offered)
	}
	if rep.Used > rep.Window-rep.Reserve {
		return fmt.Errorf("used %d exceeds window %d - reserve %d", rep.Used, rep.Window, rep.Reserve)
	}
	for _, tt := range rep.ByTier {
		if v := byTier[tt.Tier]; v[0] != tt.Offered || v[1] != tt.Used {
			return fmt.Errorf("tier %s: report says offered %d used %d, items say %d, %d", tt.Tier, tt.Offered, tt.Used, v[0], v[1])
		}
	}
	return nil
}

// PositionWeight is the U-shaped weight of slot p of n: 1 at both ends,
// 1/2 in the middle (a model of "lost in the middle", not a measurement).
func PositionWeight(p, n int) float64 {
	if n <= 1 {
		return 1
	}
	return 0.5 * (1 + math.Abs(2*float64(p)/float64(n-1)-1))
}

// WeakestPosition is the slot of n the curve weighs least (the first of
// equals), or -1 when n is 0.
func WeakestPosition(n int) int {
	best, bestW := -1, math.Inf(1)
	for p := range n {
		if w := PositionWeight(p, n); w < bestW-1e-12 {
			best, bestW = p, w
		}
	}
	return best
}

// ReferenceItems are the reference design's example (its context section):
// an incident agent's instructions, two pieces of evidence, a tool output,
// a recalled memory and history, sized in tokens. Tests and the docs build
// them at a 1,200-token window (300 reserved, an instructions floor of
// 380) and at 4,000.
func ReferenceItems() []Item {
	return []Item{
		{ID: "sys", Tier: TierInstructions, Tokens: 380, Text: "You are the incident agent. Propose changes; never deploy.", Pinnable: true},
		{ID: "ev-1", Tier: TierEvidence, Tokens: 420, Text: "Checkout timeouts began at 14:02Z, 6 min after deploy 812.", Relevance: 0.95, Provenance: []string{"runbook://checkout-timeout"}},
		{ID: "ev-2", Tier: TierEvidence, Tokens: 640, Text: "AuthService p99 rose 40 ms in the same window.", Relevance: 0.70, Provenance: []string{"trace://auth-9f2"}},
		{ID: "tool-1", Tier: TierToolOutput, Tokens: 900, Text: "kubectl describe: 412 lines of pod events ...", Relevance: 0.40},
		{ID: "mem-1", Tier: TierMemory, Tokens: 160, Text: "When checkout times out, check the AuthService deploy first.", Relevance: 0.80},
		{ID: "hist-1", Tier: TierHistory, Tokens: 300, Text: "User: checkout is failing. Agent: investigating ...", Relevance: 0.20},
	}
}
