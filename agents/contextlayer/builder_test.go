package contextlayer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func checkIdentity(t *testing.T, rep BuildReport) {
	t.Helper()
	if rep.Used+rep.Dropped != rep.Offered {
		t.Fatalf("used %d + dropped %d != offered %d", rep.Used, rep.Dropped, rep.Offered)
	}
	for _, tr := range rep.Tiers {
		if tr.Used+tr.Dropped() != tr.Offered {
			t.Fatalf("tier %s: used %d + dropped %d != offered %d", tr.Name, tr.Used, tr.Dropped(), tr.Offered)
		}
	}
}

func words(n int) string { return strings.TrimSpace(strings.Repeat("alpha ", n)) }

func TestBuilderCompactsBeforeItEvicts(t *testing.T) {
	tok := tokenizer(t)
	tiers := []Tier{
		{Name: "instructions", Items: []Item{{ID: "sys", Text: words(50)}}},
		{Name: "tool output", Items: []Item{{ID: "big", Text: `{"rows":[` + strings.Repeat(`{"a":"some value"},`, 300) + `{"a":"end"}]}`, Compactable: true}}},
		{Name: "history", Items: []Item{{ID: "h1", Text: words(100)}}},
	}
	_, rep, err := Builder{Counter: tok, Budget: 500, CompactTo: 150}.Build(tiers)
	if err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, rep)
	if rep.Tiers[1].Compacted == 0 || len(rep.Tiers[1].CompactedIDs) != 1 {
		t.Fatalf("tool output not compacted: %+v", rep.Tiers[1])
	}
	if rep.Tiers[2].Evicted != 0 {
		t.Fatalf("history evicted although compaction made room: %+v", rep.Tiers[2])
	}
	if rep.Used > 500 {
		t.Fatalf("used %d > budget", rep.Used)
	}
}

func TestBuilderEvictsLowestPriorityFirstButKeepsTierFloors(t *testing.T) {
	tok := tokenizer(t)
	tiers := []Tier{
		{Name: "instructions", Floor: 100, Items: []Item{{ID: "sys", Text: words(100)}}},
		{Name: "evidence", Floor: 120, Items: []Item{
			{ID: "e-low", Text: words(60), Priority: 0},
			{ID: "e-high", Text: words(60), Priority: 9},
			{ID: "e-mid", Text: words(60), Priority: 5},
		}},
		{Name: "history", Floor: 0, Items: []Item{{ID: "h1", Text: words(200)}, {ID: "h2", Text: words(200)}}},
	}
	out, rep, err := Builder{Counter: tok, Budget: 250}.Build(tiers)
	if err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, rep)
	if got := rep.Tiers[2].Used; got != 0 {
		t.Fatalf("history should be evicted first, used %d", got)
	}
	if got := rep.Tiers[1].Used; got < 120 {
		t.Fatalf("evidence below its floor: %d", got)
	}
	if fmt.Sprint(rep.Tiers[1].EvictedIDs) != "[e-low]" {
		t.Fatalf("evicted %v, want [e-low]", rep.Tiers[1].EvictedIDs)
	}
	if len(out.Tiers[1].Items) != 2 || out.Tiers[1].Items[0].ID != "e-high" {
		t.Fatalf("kept evidence %+v, want e-high, e-mid in original order", out.Tiers[1].Items)
	}
}

func TestBuilderDropsDuplicateIDsAndAccountsForThem(t *testing.T) {
	tok := tokenizer(t)
	tiers := []Tier{
		{Name: "evidence", Items: []Item{{ID: "doc-1", Text: words(30)}}},
		{Name: "memory", Items: []Item{{ID: "doc-1", Text: words(30)}, {ID: "m", Text: words(5)}}},
	}
	_, rep, err := Builder{Counter: tok, Budget: 1000}.Build(tiers)
	if err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, rep)
	if rep.Tiers[1].Duplicates != 30 || fmt.Sprint(rep.Tiers[1].DuplicateIDs) != "[doc-1]" {
		t.Fatalf("duplicate accounting: %+v", rep.Tiers[1])
	}
}

func TestBuilderReportsOverBudgetWhenFloorsExceedIt(t *testing.T) {
	tok := tokenizer(t)
	tiers := []Tier{{Name: "instructions", Floor: 500, Items: []Item{{ID: "sys", Text: words(400)}}}}
	_, rep, err := Builder{Counter: tok, Budget: 100}.Build(tiers)
	if err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, rep)
	if !rep.OverBudget {
		t.Fatal("expected OverBudget")
	}
}

func TestBuilderAccountingIdentityHoldsOnRandomInputs(t *testing.T) {
	tok := Estimate{}
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 300; trial++ {
		var tiers []Tier
		for ti := 0; ti < 1+rng.IntN(5); ti++ {
			tier := Tier{Name: fmt.Sprint("t", ti), Floor: rng.IntN(200)}
			for k := 0; k < rng.IntN(6); k++ {
				text := words(1 + rng.IntN(150))
				if rng.IntN(3) == 0 {
					text = `{"l":[` + strings.Repeat(`"xxxxxxxx",`, rng.IntN(200)) + `"y"]}`
				}
				tier.Items = append(tier.Items, Item{ID: fmt.Sprint("id", rng.IntN(12)), Text: text, Priority: rng.IntN(4), Compactable: rng.IntN(2) == 0})
			}
			tiers = append(tiers, tier)
		}
		_, rep, err := Builder{Counter: tok, Budget: 50 + rng.IntN(800), CompactTo: 20 + rng.IntN(100)}.Build(tiers)
		if err != nil {
			t.Fatal(err)
		}
		checkIdentity(t, rep)
	}
}

func TestBuilderRejectsBadInput(t *testing.T) {
	if _, _, err := (Builder{Counter: Estimate{}, Budget: 0}).Build(nil); err == nil {
		t.Fatal("zero budget accepted")
	}
	if _, _, err := (Builder{Counter: Estimate{}, Budget: 10}).Build([]Tier{{Name: "x", Floor: -1}}); err == nil || !strings.Contains(err.Error(), `tier "x"`) {
		t.Fatalf("negative floor: %v", err)
	}
}
