package contextlayer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func referenceItems() []Item { return ReferenceItems() }

func byTier(rep BuildReport) string {
	var parts []string
	for _, t := range rep.ByTier {
		if t.Used > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", t.Tier, t.Used))
		}
	}
	return strings.Join(parts, " ")
}

func TestBuilderReproducesReferenceTightBudget(t *testing.T) {
	b := Builder{Window: 1200, Reserve: 300, Floors: map[Tier]int{TierInstructions: 380}}
	adm, rep, err := b.Build(referenceItems())
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, d := range rep.Items {
		lines = append(lines, fmt.Sprintf("%-8s %-10s %5d tok   %s", d.ID, d.Action, d.Tokens, d.Reason))
	}
	want := []string{
		"sys      kept         380 tok   fits whole (380 of 900 usable)",
		"ev-1     kept         420 tok   fits whole (420 of 520 usable)",
		"ev-2     dropped        0 tok   does not fit: needs 640, 100 usable, compaction floor 224",
		"tool-1   dropped        0 tok   does not fit: needs 900, 100 usable, compaction floor 315",
		"mem-1    truncated    100 tok   compacted from 160 to 100 tokens (floor 56)",
		"hist-1   dropped        0 tok   does not fit: needs 300, 0 usable, compaction floor 105",
	}
	if got := strings.Join(lines, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("report:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if rep.Usable != 900 || rep.Used != 900 || rep.Dropped != 1900 || rep.Offered != 2800 {
		t.Fatalf("usable %d used %d dropped %d offered %d, want 900 900 1900 2800", rep.Usable, rep.Used, rep.Dropped, rep.Offered)
	}
	if got := fmt.Sprintf("%.0f%%", rep.Utilization*100); got != "75%" {
		t.Fatalf("utilization %s, want 75%%", got)
	}
	if got := byTier(rep); got != "instructions:380 evidence:420 memory:100" {
		t.Fatalf("by tier %s", got)
	}
	var ids []string
	for _, a := range adm {
		ids = append(ids, a.Item.ID)
	}
	if fmt.Sprint(ids) != "[sys ev-1 mem-1]" || rep.Weakest != 1 || rep.WeakestID != "ev-1" {
		t.Fatalf("admitted %v, weakest %d %s; want [sys ev-1 mem-1], 1 ev-1", ids, rep.Weakest, rep.WeakestID)
	}
	if rep.Items[1].Provenance[0] != "runbook://checkout-timeout" {
		t.Fatalf("provenance lost: %+v", rep.Items[1])
	}
}

func TestBuilderReproducesReferenceGenerousBudget(t *testing.T) {
	_, rep, err := Builder{Window: 4000, Reserve: 300}.Build(referenceItems())
	if err != nil {
		t.Fatal(err)
	}
	if got := byTier(rep); got != "instructions:380 evidence:1060 tool_output:900 memory:160 history:300" {
		t.Fatalf("by tier %s", got)
	}
	if got := fmt.Sprintf("%.0f%%", rep.Utilization*100); got != "70%" || rep.Dropped != 0 {
		t.Fatalf("utilization %s dropped %d, want 70%% and 0", got, rep.Dropped)
	}
}

func TestBuilderFloorsAreSetAsideInTierOrder(t *testing.T) {
	items := []Item{
		{ID: "ev", Tier: TierEvidence, Tokens: 850},
		{ID: "mem", Tier: TierMemory, Tokens: 150},
		{ID: "hist", Tier: TierHistory, Tokens: 100},
	}
	// Without a floor evidence takes everything and memory is dropped.
	_, rep, err := Builder{Window: 1000, Reserve: 100}.Build(items)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Items[0].Action != ActionKept || rep.Items[1].Action != ActionDropped {
		t.Fatalf("no floor: %+v", rep.Items)
	}
	// A memory floor of 150 makes evidence compact to 750 and memory fit.
	_, rep, err = Builder{Window: 1000, Reserve: 100, Floors: map[Tier]int{TierMemory: 150}}.Build(items)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Items[0].Action != ActionTruncated || rep.Items[0].Tokens != 750 || rep.Items[1].Action != ActionKept {
		t.Fatalf("memory floor: %+v", rep.Items)
	}
}

func TestBuilderNeverShrinksAHigherTierThatFits(t *testing.T) {
	items := []Item{
		{ID: "ev", Tier: TierEvidence, Tokens: 500},
		{ID: "tool", Tier: TierToolOutput, Tokens: 600},
	}
	_, rep, err := Builder{Window: 1000, Reserve: 0}.Build(items)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Items[0].Action != ActionKept || rep.Items[0].Tokens != 500 {
		t.Fatalf("evidence touched: %+v", rep.Items[0])
	}
	if rep.Items[1].Action != ActionTruncated || rep.Items[1].Tokens != 500 {
		t.Fatalf("tool output: %+v", rep.Items[1])
	}
}

func TestBuilderCompactsRealTextAndCountsWhatIsSent(t *testing.T) {
	tok := tokenizer(t)
	big := `{"rows":[` + strings.Repeat(`{"a":"some value"},`, 300) + `{"a":"end"}]}`
	items := []Item{
		{ID: "sys", Tier: TierInstructions, Text: words(50)},
		{ID: "tool", Tier: TierToolOutput, Text: big},
	}
	adm, rep, err := Builder{Window: 1000, Reserve: 200, Counter: tok}.Build(items)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Items[1].Action != ActionTruncated {
		t.Fatalf("tool: %+v", rep.Items[1])
	}
	if n := tok.Count(adm[1].Item.Text); n != rep.Items[1].Tokens || n > 750 {
		t.Fatalf("compacted text counts %d, report says %d", n, rep.Items[1].Tokens)
	}
}

func TestBuilderAccountingIdentityHoldsOnRandomInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 500; trial++ {
		var items []Item
		for k := 0; k < rng.IntN(12); k++ {
			it := Item{ID: fmt.Sprint("i", k), Tier: Tier(rng.IntN(int(numTiers))), Relevance: rng.Float64(), Pinnable: rng.IntN(4) == 0}
			if rng.IntN(2) == 0 {
				it.Tokens = 1 + rng.IntN(600)
			} else {
				it.Text = words(1 + rng.IntN(300))
			}
			items = append(items, it)
		}
		floors := map[Tier]int{}
		for _, tr := range Tiers() {
			if rng.IntN(3) == 0 {
				floors[tr] = rng.IntN(300)
			}
		}
		w := 100 + rng.IntN(2000)
		b := Builder{Window: w, Reserve: rng.IntN(w), Floors: floors, Counter: Estimate{}}
		_, rep, err := b.Build(items)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := CheckReport(rep); err != nil {
			t.Fatal(err)
		}
		// The identity check must be able to fail.
		bad := rep
		bad.Dropped++
		if CheckReport(bad) == nil {
			t.Fatal("CheckReport accepted a broken identity")
		}
	}
}

func TestWeakestPosition(t *testing.T) {
	for _, c := range []struct{ n, want int }{{0, -1}, {1, 0}, {2, 0}, {3, 1}, {4, 1}, {5, 2}} {
		if got := WeakestPosition(c.n); got != c.want {
			t.Errorf("WeakestPosition(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	if PositionWeight(0, 5) != 1 || PositionWeight(4, 5) != 1 || PositionWeight(2, 5) != 0.5 {
		t.Fatal("curve is not 1 at the ends and 1/2 in the middle")
	}
}

func TestBuilderRejectsBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		b     Builder
		items []Item
		want  string
	}{
		"zero window":     {Builder{}, nil, "window"},
		"reserve":         {Builder{Window: 10, Reserve: 10}, nil, "reserve"},
		"negative floor":  {Builder{Window: 10, Floors: map[Tier]int{TierMemory: -1}}, nil, "memory"},
		"duplicate id":    {Builder{Window: 10}, []Item{{ID: "a", Tokens: 1}, {ID: "a", Tokens: 1}}, `"a"`},
		"no counter":      {Builder{Window: 10}, []Item{{ID: "a", Text: "x"}}, "counter"},
		"unknown tier":    {Builder{Window: 10}, []Item{{ID: "a", Tier: 9, Tokens: 1}}, "tier"},
		"negative tokens": {Builder{Window: 10}, []Item{{ID: "a", Tokens: -2}}, "negative"},
	} {
		if _, _, err := c.b.Build(c.items); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want mention of %s", name, err, c.want)
		}
	}
}
func words(n int) string { return strings.TrimSpace(strings.Repeat("alpha ", n)) }
