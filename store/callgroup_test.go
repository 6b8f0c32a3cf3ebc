package store

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// A trace's call groups do not depend on the order its calls are summed
// in, explicit costs included (an exact sum in picodollars); costs too
// large to sum exactly say so, whatever the order.
func TestGroupCallsIgnoresOrderAndKnowsWhenCostsAreInexact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for iter := 0; iter < 200; iter++ {
		var calls []Call
		for i := 0; i < 1+rng.IntN(40); i++ {
			c := Call{SpanID: string(rune('a' + i)), Start: sumT0.Add(time.Duration(i) * time.Second),
				RequestModel: []string{"m-a", "m-b", ""}[rng.IntN(3)], ResponseModel: []string{"", "m-a-1"}[rng.IntN(2)],
				Failed: rng.IntN(6) == 0, HasUsage: rng.IntN(4) != 0}
			if c.HasUsage {
				c.InputTokens, c.OutputTokens, c.CacheReadTokens = int64(rng.IntN(300_000)), int64(rng.IntN(900)), int64(rng.IntN(50_000))
			}
			switch rng.IntN(5) {
			case 0:
				v := float64(rng.IntN(1e6)) * 1.7e-7
				c.CostUSD = &v
			case 1:
				v := []float64{2e6, -3e5, 999_999.5, 1e-13}[rng.IntN(4)]
				c.CostUSD = &v
			}
			calls = append(calls, c)
		}
		want := GroupCalls(calls)
		rng.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
		if got := GroupCalls(calls); !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: groups depend on the calls' order:\n%+v\n%+v", iter, got, want)
		}
		for _, g := range want {
			exact := true
			sum := 0.0
			for _, c := range calls {
				if !g.Holds(&c) || c.CostUSD == nil {
					continue
				}
				sum += *c.CostUSD
				if *c.CostUSD > 1e6 || *c.CostUSD < -1e6 {
					exact = false
				}
			}
			if exact && sum > -9e6 && sum < 9e6 {
				// Within range: the sum is exact (to a picodollar a call).
				if !g.ExplicitExact() || USDOfPico(g.ExplicitPicoUSD)-sum > 1e-9 || sum-USDOfPico(g.ExplicitPicoUSD) > 1e-9 {
					t.Fatalf("iteration %d: group %s/%s: explicit %v (exact %v), the calls sum to %v", iter, g.RequestModel, g.ResponseModel,
						USDOfPico(g.ExplicitPicoUSD), g.ExplicitExact(), sum)
				}
			}
			if !exact && g.ExplicitExact() {
				t.Fatalf("iteration %d: group %s/%s holds a cost beyond 1e6 USD and claims an exact sum", iter, g.RequestModel, g.ResponseModel)
			}
		}
	}
}

// A group's prompt range is that of its priced calls, and stays exact as a
// builder's calls turn into aggregates (a descendant reporting usage
// arrives): the long-context tier is decided by it.
func TestSummaryBuilderKeepsTheGroupsPromptRange(t *testing.T) {
	root := withUsage(sumSpan("r", "", "invoke_agent", 0, 100), "chat", 10, 1)
	root.RequestModel = "m"
	big := withUsage(sumSpan("b", "r", "chat", 1, 50), "chat", 900_000, 10)
	big.RequestModel = "m"
	small := withUsage(sumSpan("s", "b", "chat", 2, 40), "chat", 1_000, 10)
	small.RequestModel = "m"
	b := NewSummaryBuilder()
	b.Add([]Span{root, big})
	if g := b.Summary().Groups; len(g) != 1 || g[0].MinPrompt != 900_000 || g[0].MaxPrompt != 900_000 || g[0].Priced != 1 {
		t.Fatalf("groups %+v, want one priced call of 900,000", g)
	}
	// The small call below the big one makes the big one an aggregate.
	b.Add([]Span{small})
	got := b.Summary().Groups
	if len(got) != 1 || got[0].MinPrompt != 1_000 || got[0].MaxPrompt != 1_000 || got[0].Priced != 1 || got[0].Calls != 1 {
		t.Fatalf("groups %+v, want the one priced call of 1,000 prompt tokens", got)
	}
	if want := Summarize([]Span{small, big, root}).Groups; !reflect.DeepEqual(got, want) {
		t.Fatalf("builder groups %+v, Summarize %+v", got, want)
	}
}
