package web

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/clickhouse"
	"github.com/loomwork/loomwork/store/storetest"
)

// costTraces are generated agent traces whose billed calls cover what
// pricing tells apart: long-context models with prompts below, above and
// on both sides of the threshold (in one trace), explicit costs (large
// ones too), failed calls without usage, successful calls without usage,
// a model the table does not know, calls naming no model, and usage in
// Anthropic's raw convention. Usage is repeated on some parents, so the
// stores' groups lose calls as children arrive.
func costTraces(rng *rand.Rand) []store.Span {
	spans := storetest.GenerateTraces(60, 12, 2026)
	long := []string{"claude-sonnet-4-5", "gemini-2.5-pro"}
	trace, last := -1, ""
	for i := range spans {
		sp := &spans[i]
		if sp.TraceID != last {
			trace++
			last = sp.TraceID
		}
		if !semconv.IsModelCallOperation(sp.Operation) || sp.ParentSpanID == "" {
			continue
		}
		switch trace % 6 {
		case 0: // long context, prompts on both sides of the threshold
			sp.RequestModel, sp.ResponseModel = long[trace%2], ""
			sp.InputTokens = []int64{150_000, 250_000, 200_000, 200_001}[rng.IntN(4)]
			sp.CostUSD = nil
		case 1: // long context, every prompt above it
			sp.RequestModel, sp.ResponseModel = long[trace%2], long[trace%2]+"-latest"
			sp.InputTokens, sp.CacheReadTokens = 300_000+int64(rng.IntN(9000)), 40_000
			sp.CostUSD = nil
		case 2: // explicit costs, one of them huge; a failed call without usage
			c := float64(rng.IntN(1000)) * 1e-5
			if rng.IntN(7) == 0 {
				c = 2.5e6
			}
			sp.CostUSD = &c
			if rng.IntN(4) == 0 {
				sp.HasUsage, sp.InputTokens, sp.OutputTokens, sp.CostUSD = false, 0, 0, nil
				sp.StatusCode = store.StatusError
			}
		case 3: // no usage and no cost; an unknown model
			if rng.IntN(2) == 0 {
				sp.HasUsage, sp.InputTokens, sp.OutputTokens, sp.CostUSD = false, 0, 0, nil
			} else {
				sp.RequestModel, sp.ResponseModel, sp.CostUSD = "in-house-7b", "", nil
			}
		case 4: // no model name; raw Anthropic usage (input below the cache)
			if rng.IntN(2) == 0 {
				sp.RequestModel, sp.ResponseModel, sp.CostUSD = "", "", nil
			} else {
				sp.RequestModel, sp.ResponseModel, sp.CostUSD = "claude-sonnet-4-5", "", nil
				sp.InputTokens, sp.CacheReadTokens, sp.CacheCreationTokens = 12, 90_000, 2_000
			}
		}
	}
	return spans
}

// callReads counts a store's TraceCalls.
type callReads struct {
	store.Store
	n atomic.Int64
}

func (c *callReads) TraceCalls(ctx context.Context, id string) ([]store.Call, error) {
	c.n.Add(1)
	return c.Store.(store.CallReader).TraceCalls(ctx, id)
}

// The trace list prices call groups (what a list row carries); the cost
// and "unknown cost" text it shows equal what pricing every call of the
// trace gives, on both stores, with the spans written in batches out of
// order. Only traces whose calls straddle a long-context threshold read
// their calls.
func TestListCostEqualsPricingEveryCall(t *testing.T) {
	run := func(t *testing.T, st store.Store) {
		ctx := store.WithDefaultProject(context.Background())
		rng := rand.New(rand.NewPCG(7, 11))
		spans := costTraces(rng)
		rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
		for lo := 0; lo < len(spans); lo += 97 {
			if err := st.WriteSpans(ctx, spans[lo:min(lo+97, len(spans))]); err != nil {
				t.Fatal(err)
			}
		}
		prices := pricing.Default()
		reads := &callReads{Store: st}
		page, err := st.ListTraces(ctx, store.TraceQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Traces) != 60 {
			t.Fatalf("listed %d traces, want 60", len(page.Traces))
		}
		straddling, unknown, explicitInexact := 0, 0, 0
		for _, sum := range page.Traces {
			if sum.Calls != nil {
				t.Fatalf("trace %s: the list row carries %d calls", sum.TraceID, len(sum.Calls))
			}
			before := reads.n.Load()
			row, err := ListRowOf(ctx, reads, sum, prices)
			if err != nil {
				t.Fatal(err)
			}
			read := reads.n.Load() > before
			got, err := st.GetTrace(ctx, sum.TraceID)
			if err != nil {
				t.Fatal(err)
			}
			calls := store.Summarize(got).Calls
			p := rollup.Price(calls, prices)
			// What every call gives (rollup.Price: the trace page's
			// pricing): its total and the text of its unknown calls,
			// exactly.
			if !reflect.DeepEqual(row.CostUSD, p.CostUSD) || row.KnownCostUSD != p.KnownCostUSD {
				t.Errorf("trace %s: list cost %v (known %v), pricing every call %v (known %v)", sum.TraceID, show(row.CostUSD), row.KnownCostUSD, show(p.CostUSD), p.KnownCostUSD)
			}
			if want := rollup.UnknownCallsText(rollup.UnknownOf(p.Calls)); row.CostUnknown != want {
				t.Errorf("trace %s: list says %q, the calls say %q", sum.TraceID, row.CostUnknown, want)
			}
			if !slices.Equal(row.UnpricedModels, nonEmpty(p.UnpricedModels)) {
				t.Errorf("trace %s: unpriced models %v, want %v", sum.TraceID, row.UnpricedModels, p.UnpricedModels)
			}
			perCall := 0.0
			for _, c := range p.Calls {
				if c.CostUSD != nil {
					perCall += *c.CostUSD
				}
			}
			// The calls' own costs, summed one by one, differ from the
			// total by float rounding only (the trace page and the list
			// both show the total, so they agree to the bit).
			if math.Abs(perCall-row.KnownCostUSD) > 1e-12*max(1, math.Abs(perCall)) {
				t.Errorf("trace %s: list shows %s, the calls' own costs sum to %s", sum.TraceID, fmtCost(&row.KnownCostUSD), fmtCost(&perCall))
			}
			wantRead := false
			for _, g := range sum.Groups {
				if m, _, ok := lookupAny(prices, g.ResponseModel, g.RequestModel); ok && g.Priced > 0 && m.LongContextApplies(g.MaxPrompt) && !m.LongContextApplies(g.MinPrompt) {
					wantRead = true
					straddling++
				}
				if g.ExplicitCalls > 0 && !g.ExplicitExact() {
					wantRead = true
					explicitInexact++
				}
			}
			if read != wantRead {
				t.Errorf("trace %s: read its calls %v, want %v (groups %+v)", sum.TraceID, read, wantRead, sum.Groups)
			}
			if row.CostUSD == nil {
				unknown++
			}
		}
		if straddling == 0 || unknown == 0 || explicitInexact == 0 {
			t.Fatalf("fixture problem: %d straddling groups, %d unknown costs, %d groups of huge explicit costs", straddling, unknown, explicitInexact)
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, openStore(t)) })
	t.Run("clickhouse", func(t *testing.T) {
		testtier.Slow(t)
		srv := chtest.Start(t)
		ctx, cancel := context.WithTimeout(store.WithDefaultProject(context.Background()), 2*time.Minute)
		defer cancel()
		st, err := clickhouse.Open(ctx, clickhouse.Config{DSN: srv.DSN(srv.NewDatabase(t))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Shutdown(context.Background()) })
		run(t, st)
	})
}

func lookupAny(prices *pricing.Table, names ...string) (*pricing.Model, string, bool) {
	for _, n := range names {
		if n == "" {
			continue
		}
		if m, k, ok := prices.Lookup(n); ok {
			return m, k, true
		}
	}
	return nil, "", false
}

func nonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func show(f *float64) string {
	if f == nil {
		return "unknown"
	}
	return fmt.Sprint(*f)
}
