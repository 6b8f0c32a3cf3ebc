package rollup

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/store"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// sp builds a span from millisecond offsets.
func sp(id, parent, name string, startMS, endMS float64, opts ...func(*store.Span)) store.Span {
	s := store.Span{
		TraceID:      "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:       id,
		ParentSpanID: parent,
		Name:         name,
		Kind:         "internal",
		StartTime:    t0.Add(time.Duration(startMS * float64(time.Millisecond))),
		EndTime:      t0.Add(time.Duration(endMS * float64(time.Millisecond))),
		StatusCode:   store.StatusUnset,
		ServiceName:  "agent",
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func chat(model string, in, out int64) func(*store.Span) {
	return func(s *store.Span) {
		s.Operation, s.RequestModel, s.HasUsage, s.InputTokens, s.OutputTokens = "chat", model, true, in, out
	}
}
func op(o string) func(*store.Span)        { return func(s *store.Span) { s.Operation = o } }
func respModel(m string) func(*store.Span) { return func(s *store.Span) { s.ResponseModel = m } }
func failed(s *store.Span)                 { s.StatusCode = store.StatusError }
func service(n string) func(*store.Span)   { return func(s *store.Span) { s.ServiceName = n } }
func cache(read, write int64) func(*store.Span) {
	return func(s *store.Span) { s.CacheReadTokens, s.CacheCreationTokens = read, write }
}
func cost(c float64) func(*store.Span) { return func(s *store.Span) { s.CostUSD = &c } }
func usage(in, out int64) func(*store.Span) {
	return func(s *store.Span) { s.HasUsage, s.InputTokens, s.OutputTokens = true, in, out }
}
func tool(name string) func(*store.Span) {
	return func(s *store.Span) { s.Operation, s.ToolName = "execute_tool", name }
}

type fixture struct {
	name  string
	spans []store.Span
	// hand-computed expectations, checked before the golden file
	wantDurationMS float64
	wantPathMS     float64
	wantSelf       map[string]float64 // span id → critical self ms ("" = idle)
	wantCost       *float64           // nil: expect unknown
	checkCost      bool
}

func f64(v float64) *float64 { return &v }

func fixtures() []fixture {
	return []fixture{
		{
			// root → agent → chat, tool, chat back to back.
			name: "nested",
			spans: []store.Span{
				sp("r", "", "invoke_workflow research", 0, 100),
				sp("a", "r", "invoke_agent researcher", 5, 95, op("invoke_agent")),
				sp("c1", "a", "chat gpt-4o-mini", 10, 40, chat("gpt-4o-mini", 1000, 100)),
				sp("t1", "a", "execute_tool search", 40, 60, tool("search")),
				sp("c2", "a", "chat gpt-4o-mini", 60, 90, chat("gpt-4o-mini", 2000, 200)),
			},
			wantDurationMS: 100, wantPathMS: 100,
			wantSelf:  map[string]float64{"r": 10, "a": 10, "c1": 30, "t1": 20, "c2": 30},
			checkCost: true,
			// 3000 × 0.15/1M + 300 × 0.60/1M
			wantCost: f64(3000*0.15/1e6 + 300*0.60/1e6),
		},
		{
			// Three parallel tool calls: only the last finisher is on the path.
			name: "parallel",
			spans: []store.Span{
				sp("r", "", "invoke_agent", 0, 100),
				sp("a", "r", "execute_tool fetch_a", 10, 50, tool("fetch_a")),
				sp("b", "r", "execute_tool fetch_b", 10, 80, tool("fetch_b")),
				sp("c", "r", "execute_tool fetch_c", 20, 30, tool("fetch_c")),
			},
			wantDurationMS: 100, wantPathMS: 100,
			wantSelf: map[string]float64{"r": 30, "b": 70},
		},
		{
			// Idle gaps between children belong to the parent.
			name: "gaps",
			spans: []store.Span{
				sp("r", "", "invoke_agent", 0, 100),
				sp("a", "r", "chat", 10, 20, op("chat")),
				sp("b", "r", "execute_tool", 50, 60, tool("x")),
			},
			wantDurationMS: 100, wantPathMS: 100,
			wantSelf: map[string]float64{"r": 80, "a": 10, "b": 10},
		},
		{
			// A background child outlives its parent; another starts after
			// the parent ended (fire and forget).
			name: "async_outlives_parent",
			spans: []store.Span{
				sp("r", "", "handle request", 0, 100),
				sp("w", "r", "warm cache", 50, 150),
				sp("f", "r", "send telemetry", 120, 130),
				sp("g", "w", "inside warm cache", 90, 140),
			},
			wantDurationMS: 150, wantPathMS: 100, // the trace lasts until the async child ends; the path covers the root
			// w clipped to [50,100]; its child g clipped to [90,100].
			wantSelf: map[string]float64{"r": 50, "w": 40, "g": 10},
		},
		{
			// The tool service's clock runs 10 ms behind: its span appears
			// to start before its caller. A second span is skewed so far it
			// lies wholly before its parent.
			name: "clock_skew",
			spans: []store.Span{
				sp("r", "", "invoke_agent", 100, 200, service("agent")),
				sp("t", "r", "execute_tool lookup", 90, 150, tool("lookup"), service("tools")),
				sp("u", "r", "execute_tool stale", 40, 80, tool("stale"), service("tools")),
			},
			wantDurationMS: 160, wantPathMS: 100,
			wantSelf: map[string]float64{"r": 50, "t": 50},
		},
		{
			// Two roots and an orphan whose parent never arrived.
			name: "multiple_roots_and_orphan",
			spans: []store.Span{
				sp("r1", "", "first request", 0, 50),
				sp("r2", "", "second request", 60, 100),
				sp("o", "lost", "orphan chat", 20, 30, op("chat")),
			},
			wantDurationMS: 100, wantPathMS: 100,
			wantSelf: map[string]float64{"r1": 50, "": 10, "r2": 40},
		},
		{
			// Each level spans the whole trace. Summing durations along the
			// chain gives 300 ms for a 100 ms trace; the path is 100 ms.
			name: "deep_chain_not_summed",
			spans: []store.Span{
				sp("r", "", "root", 0, 100),
				sp("a", "r", "a", 0, 100),
				sp("b", "a", "b", 0, 100),
			},
			wantDurationMS: 100, wantPathMS: 100,
			wantSelf: map[string]float64{"b": 100},
		},
		{
			// An agent span repeats the summed usage of its two chat
			// children (as popular SDKs do); a workflow span above repeats it
			// again. Only the chats are billed.
			name: "cost_parent_repeats_usage",
			spans: []store.Span{
				sp("w", "", "invoke_workflow", 0, 100, usage(3000, 300)),
				sp("a", "w", "invoke_agent", 0, 100, op("invoke_agent"), usage(3000, 300)),
				sp("c1", "a", "chat gpt-4o", 10, 40, chat("gpt-4o", 1000, 100)),
				sp("c2", "a", "chat gpt-4o", 50, 90, chat("gpt-4o", 2000, 200)),
			},
			wantDurationMS: 100, wantPathMS: 100,
			checkCost: true,
			wantCost:  f64(3000*2.50/1e6 + 300*10.0/1e6),
		},
		{
			// An embeddings call: input tokens only.
			name: "cost_embeddings",
			spans: []store.Span{
				sp("r", "", "retrieval", 0, 20, op("retrieval")),
				sp("e", "r", "embeddings text-embedding-3-small", 1, 9, op("embeddings"), usage(50000, 0), func(s *store.Span) { s.RequestModel = "text-embedding-3-small" }),
			},
			wantDurationMS: 20, wantPathMS: 20,
			checkCost: true,
			wantCost:  f64(50000 * 0.02 / 1e6),
		},
		{
			// OpenAI: 10,000 prompt tokens of which 8,000 cached; the
			// response names a dated snapshot.
			name: "cost_openai_cached",
			spans: []store.Span{
				sp("c", "", "chat gpt-4o", 0, 10, chat("gpt-4o", 10000, 500), cache(8000, 0), respModel("gpt-4o-2024-08-06")),
			},
			wantDurationMS: 10, wantPathMS: 10,
			checkCost: true,
			wantCost:  f64(2000*2.50/1e6 + 8000*1.25/1e6 + 500*10.0/1e6),
		},
		{
			// Anthropic: 2,000 uncached + 8,000 cache read + 2,000 cache write.
			// a: as the GenAI convention says (input includes both caches);
			// b: Anthropic's raw numbers (input excludes them). Same price.
			name: "cost_anthropic_cached",
			spans: []store.Span{
				sp("r", "", "invoke_agent", 0, 30),
				sp("a", "r", "chat claude", 1, 10, chat("claude-sonnet-4-5", 12000, 400), cache(8000, 2000), respModel("claude-sonnet-4-5-20250929")),
				sp("b", "r", "chat claude", 11, 20, chat("claude-sonnet-4-5", 2000, 400), cache(8000, 2000), respModel("claude-sonnet-4-5-20250929")),
			},
			wantDurationMS: 30, wantPathMS: 30,
			checkCost: true,
			wantCost:  f64(2 * (2000*3.0/1e6 + 8000*0.30/1e6 + 2000*3.75/1e6 + 400*15.0/1e6)),
		},
		{
			// A call fails after the provider processed the prompt (billed),
			// a 429 is rejected with no usage (not billed), the retry works.
			name: "cost_failed_then_retried",
			spans: []store.Span{
				sp("r", "", "invoke_agent", 0, 100),
				sp("f1", "r", "chat gpt-4.1", 0, 30, chat("gpt-4.1", 4000, 50), failed),
				sp("f2", "r", "chat gpt-4.1", 30, 35, op("chat"), failed, func(s *store.Span) { s.RequestModel = "gpt-4.1" }),
				sp("ok", "r", "chat gpt-4.1", 40, 90, chat("gpt-4.1", 4000, 300)),
			},
			wantDurationMS: 100, wantPathMS: 100,
			checkCost: true,
			wantCost:  f64(8000*2.0/1e6 + 350*8.0/1e6),
		},
		{
			// The sender set its own cost on a fine-tuned model the table
			// does not know; it is used as given.
			name: "cost_explicit",
			spans: []store.Span{
				sp("r", "", "invoke_agent", 0, 10),
				sp("c", "r", "chat ft:my-model", 1, 9, chat("ft:gpt-4o-mini:acme::abc", 1000, 100), cost(0.0123)),
			},
			wantDurationMS: 10, wantPathMS: 10,
			checkCost: true,
			wantCost:  f64(0.0123),
		},
		{
			// A model nobody priced: cost is unknown, not zero.
			name: "cost_unknown_model",
			spans: []store.Span{
				sp("r", "", "invoke_agent", 0, 10),
				sp("c1", "r", "chat mystery", 1, 4, chat("mystery-model-1", 1000, 100)),
				sp("c2", "r", "chat gpt-4o-mini", 5, 9, chat("gpt-4o-mini", 1000, 100)),
			},
			wantDurationMS: 10, wantPathMS: 10,
			checkCost: true,
			wantCost:  nil,
		},
	}
}

func TestRollupGolden(t *testing.T) {
	prices := pricing.Default()
	for _, fx := range fixtures() {
		t.Run(fx.name, func(t *testing.T) {
			r := Compute(fx.spans, prices)
			if r.DurationMS != fx.wantDurationMS {
				t.Errorf("duration_ms = %v, want %v", r.DurationMS, fx.wantDurationMS)
			}
			if r.CriticalPathMS != fx.wantPathMS {
				t.Errorf("critical_path_ms = %v, want %v", r.CriticalPathMS, fx.wantPathMS)
			}
			if fx.wantSelf != nil {
				got := map[string]float64{}
				for _, e := range r.CriticalPath {
					got[e.SpanID] = e.SelfMS
				}
				if len(got) != len(fx.wantSelf) {
					t.Errorf("critical path spans = %v, want %v", got, fx.wantSelf)
				}
				for id, want := range fx.wantSelf {
					if got[id] != want {
						t.Errorf("self ms of %q = %v, want %v (path %v)", id, got[id], want, got)
					}
				}
			}
			if fx.checkCost {
				switch {
				case fx.wantCost == nil && r.CostUSD != nil:
					t.Errorf("cost_usd = %v, want unknown", *r.CostUSD)
				case fx.wantCost != nil && r.CostUSD == nil:
					t.Errorf("cost_usd unknown (unpriced %v), want %v", r.UnpricedModels, *fx.wantCost)
				case fx.wantCost != nil && math.Abs(*r.CostUSD-*fx.wantCost) > 1e-12:
					t.Errorf("cost_usd = %.10f, want %.10f", *r.CostUSD, *fx.wantCost)
				}
			}
			got, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "golden", fx.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run go test -update): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("rollup differs from %s (run go test -update and review the diff):\n%s", path, got)
			}
		})
	}
}

func TestUnknownModelIsListedAndLowerBoundKept(t *testing.T) {
	var fx fixture
	for _, f := range fixtures() {
		if f.name == "cost_unknown_model" {
			fx = f
		}
	}
	r := Compute(fx.spans, pricing.Default())
	if len(r.UnpricedModels) != 1 || r.UnpricedModels[0] != "mystery-model-1" {
		t.Fatalf("unpriced_models = %v, want [mystery-model-1]", r.UnpricedModels)
	}
	if want := 1000*0.15/1e6 + 100*0.60/1e6; math.Abs(r.KnownCostUSD-want) > 1e-12 {
		t.Errorf("known_cost_usd = %v, want %v", r.KnownCostUSD, want)
	}
	b, _ := json.Marshal(r)
	if !bytes.Contains(b, []byte(`"cost_usd":null`)) {
		t.Errorf("JSON does not carry cost_usd null: %s", b)
	}
}

func TestAggregateUsageIsNotCountedTwice(t *testing.T) {
	var fx fixture
	for _, f := range fixtures() {
		if f.name == "cost_parent_repeats_usage" {
			fx = f
		}
	}
	r := Compute(fx.spans, pricing.Default())
	if r.TokensIn != 3000 || r.TokensOut != 300 {
		t.Errorf("tokens = %d in / %d out, want 3000 / 300", r.TokensIn, r.TokensOut)
	}
	if r.ModelCalls != 2 {
		t.Errorf("model_calls = %d, want 2", r.ModelCalls)
	}
	if len(r.AggregateSpans) != 2 {
		t.Errorf("aggregate_spans = %v, want the workflow and agent spans", r.AggregateSpans)
	}
}

func TestNoUsageSuccessfulCallMakesCostUnknown(t *testing.T) {
	spans := []store.Span{
		sp("r", "", "invoke_agent", 0, 10),
		sp("c", "r", "chat gpt-4o", 1, 9, op("chat"), func(s *store.Span) { s.RequestModel = "gpt-4o" }),
	}
	r := Compute(spans, pricing.Default())
	if r.CostUSD != nil {
		t.Fatalf("cost_usd = %v, want unknown for a call without usage", *r.CostUSD)
	}
	if r.ModelCalls != 1 {
		t.Errorf("model_calls = %d, want 1", r.ModelCalls)
	}
}

func TestNilPriceTableLeavesCostUnknown(t *testing.T) {
	spans := []store.Span{sp("c", "", "chat", 0, 1, chat("gpt-4o", 10, 1))}
	if r := Compute(spans, nil); r.CostUSD != nil {
		t.Fatalf("cost_usd = %v with no price table, want unknown", *r.CostUSD)
	}
}

func TestParentCycleDoesNotHangOrDropSpans(t *testing.T) {
	spans := []store.Span{
		sp("a", "b", "a", 0, 10, chat("gpt-4o-mini", 10, 1)),
		sp("b", "a", "b", 1, 9),
	}
	r := Compute(spans, pricing.Default())
	if r.SpanCount != 2 {
		t.Errorf("span_count = %d, want 2", r.SpanCount)
	}
	if r.CriticalPathMS != 10 {
		t.Errorf("critical_path_ms = %v, want 10", r.CriticalPathMS)
	}
}

func TestDuplicateSpanIsCountedOnce(t *testing.T) {
	c := sp("c", "", "chat", 0, 10, chat("gpt-4o-mini", 1000, 100))
	r := Compute([]store.Span{c, c}, pricing.Default())
	if r.SpanCount != 1 || r.TokensIn != 1000 {
		t.Errorf("span_count=%d tokens_in=%d, want 1 and 1000", r.SpanCount, r.TokensIn)
	}
}

func TestComputeAllGroupsByTrace(t *testing.T) {
	a := sp("a", "", "a", 0, 10)
	b := sp("b", "", "b", 5, 7)
	b.TraceID = "00000000000000000000000000000002"
	rs := ComputeAll([]store.Span{b, a}, nil)
	if len(rs) != 2 || rs[0].TraceID != a.TraceID || rs[1].DurationMS != 2 {
		t.Fatalf("ComputeAll = %+v", rs)
	}
}

// A trace that continues another process's span (the sender flagged the
// parent remote) is not called incomplete, and its top says why it has no
// parent here; an orphan without the flag still is.
func TestRemoteParentIsNotAMissingParent(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mk := func(flags uint32) []store.Span {
		return []store.Span{
			{TraceID: "t", SpanID: "a", ParentSpanID: "upstream", Name: "handle", StartTime: t0, EndTime: t0.Add(time.Second), Flags: flags},
			{TraceID: "t", SpanID: "b", ParentSpanID: "a", Name: "chat", StartTime: t0.Add(time.Millisecond), EndTime: t0.Add(900 * time.Millisecond)},
		}
	}
	remote := Compute(mk(store.FlagHasIsRemote|store.FlagIsRemote), nil)
	if len(remote.Tops) != 1 || !remote.Tops[0].RemoteParent || strings.Contains(strings.Join(remote.Notes, "; "), "incomplete") ||
		!strings.Contains(strings.Join(remote.Notes, "; "), "continues a remote parent") {
		t.Errorf("remote parent: tops %+v notes %q", remote.Tops, remote.Notes)
	}
	missing := Compute(mk(store.FlagHasIsRemote), nil) // known local: the parent should be here
	if missing.Tops[0].RemoteParent || !strings.Contains(strings.Join(missing.Notes, "; "), "incomplete") {
		t.Errorf("missing local parent: tops %+v notes %q", missing.Tops, missing.Notes)
	}
}
