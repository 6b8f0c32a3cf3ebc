package main

import (
	"fmt"
	"sort"
	"time"
)

// The traces of the all-views agreement test (agreement_test.go): the shapes
// views used to disagree on (issue 16), each with the figures every view
// must show for it, computed by hand from the spans below and the price
// table agreementPrices. Every sender sends every shape; only the ids and
// the service differ.

// agreementPrices is the price table serve, traces and rollup are given
// (--prices): one model at round rates, so the costs below are figures a
// person can check. Dollars per million tokens.
const agreementPrices = `{
  "as_of": "2026-12-01",
  "models": [
    {"provider": "test", "model": "agree-chat", "input": 2.5, "cache_read": 0.25, "cache_write": 3.75, "output": 10}
  ]
}`

// shapeSpan is one span of a shape. Times are milliseconds from the
// trace's start.
type shapeSpan struct {
	n, parent int // span number (1..) and its parent's (0: root; missingParent: never sent)
	name      string
	kind      string
	from, to  int
	attrs     map[string]any
	err       string
	batch     int // export batch: batches go out in increasing order
}

// missingParent is the number of a parent span no sender ever sends.
const missingParent = 99

// shapeWant is what every view shows of a shape's trace.
type shapeWant struct {
	root                                   string
	spans, calls, tools, errors, fragments int64
	in, out, cacheRead, cacheWrite         int64
	dur, afterRoot                         time.Duration
	// cost is nil when unknown; known is then the priced part.
	cost  *float64
	known float64
	// callSpans are the billed calls' span numbers in start order;
	// aggregates the spans whose usage repeats a descendant's; unknown the
	// call whose cost is unknown (0: none).
	callSpans, aggregates []int
	unknown               int

	// How the views print it. uiDur and uiCost: the list page and the
	// trace page (web's fmtDur, fmtCost); cliDur and cliCost: traces list
	// and traces get; rollupDur: the rollup text's duration line.
	uiDur, uiAsync, uiFragments string
	uiCost                      string
	cliDur, cliCost             string
	rollupDur                   string
}

type shape struct {
	key, what string
	spans     []shapeSpan
	want      shapeWant
}

func usd(f float64) *float64 { return &f }

// Attribute helpers, named after the convention each shape follows.
func genaiChat(model string, in, out int64) map[string]any {
	return map[string]any{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": model, "gen_ai.response.model": model,
		"gen_ai.usage.input_tokens": in, "gen_ai.usage.output_tokens": out}
}

func agreementShapes() []shape {
	return []shape{
		{
			key: "a", what: "an OpenInference LLM span in an LLM span (LangChain + OpenAI instrumentors), both 1000/100",
			spans: []shapeSpan{
				{n: 1, name: "RunnableSequence", from: 0, to: 1000, attrs: map[string]any{"openinference.span.kind": "CHAIN"}},
				{n: 2, parent: 1, name: "ChatOpenAI", from: 10, to: 900, attrs: map[string]any{"openinference.span.kind": "LLM",
					"llm.model_name": "agree-chat", "llm.token_count.prompt": 1000, "llm.token_count.completion": 100, "llm.token_count.total": 1100}},
				{n: 3, parent: 2, name: "ChatCompletion", kind: "client", from: 20, to: 880, attrs: map[string]any{"openinference.span.kind": "LLM",
					"llm.system": "openai", "llm.model_name": "agree-chat", "llm.token_count.prompt": 1000, "llm.token_count.completion": 100, "llm.token_count.total": 1100}},
			},
			// One call (the innermost LLM span): 1000×2.5 + 100×10 = 3500 µ$.
			want: shapeWant{root: "RunnableSequence", spans: 3, calls: 1, fragments: 1, in: 1000, out: 100,
				dur: time.Second, cost: usd(0.0035), callSpans: []int{3}, aggregates: []int{2},
				uiDur: "1.00 s", uiCost: "$0.00350", cliDur: "1s", cliCost: "$0.003500", rollupDur: "1000.000 ms"},
		},
		{
			key: "b", what: "usage without a model-call operation (OpenLLMetry gen_ai.usage.prompt/completion_tokens, no gen_ai.operation.name), 100/20",
			spans: []shapeSpan{
				{n: 1, name: "joke_workflow.workflow", from: 0, to: 100, attrs: map[string]any{"traceloop.span.kind": "workflow", "traceloop.entity.name": "joke_workflow"}},
				{n: 2, parent: 1, name: "anthropic.chat", kind: "client", from: 10, to: 90, attrs: map[string]any{"gen_ai.system": "Anthropic",
					"gen_ai.request.model": "agree-chat", "gen_ai.usage.prompt_tokens": 100, "gen_ai.usage.completion_tokens": 20, "llm.usage.total_tokens": 120}},
			},
			// 100×2.5 + 20×10 = 450 µ$.
			want: shapeWant{root: "joke_workflow.workflow", spans: 2, calls: 1, fragments: 1, in: 100, out: 20,
				dur: 100 * time.Millisecond, cost: usd(0.00045), callSpans: []int{2},
				uiDur: "100 ms", uiCost: "$0.00045", cliDur: "100ms", cliCost: "$0.000450", rollupDur: "100.000 ms"},
		},
		{
			key: "c", what: "a child outliving its root: root 500 ms, child ends at 700 ms",
			spans: []shapeSpan{
				{n: 1, name: "handle request", kind: "server", from: 0, to: 500, attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "responder"}},
				{n: 2, parent: 1, name: "execute_tool notify", from: 100, to: 700, attrs: map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "notify"}},
			},
			want: shapeWant{root: "handle request", spans: 2, tools: 1, fragments: 1,
				dur: 700 * time.Millisecond, afterRoot: 200 * time.Millisecond, cost: usd(0),
				uiDur: "700 ms", uiAsync: "+200 ms async", uiCost: "$0.00000", cliDur: "700ms (200ms after the root ended)", cliCost: "$0.000000",
				rollupDur: "700.000 ms (200.000 ms after the root ended: async work)"},
		},
		{
			key: "d", what: "a GenAI agent: invoke_agent → chat with cache tokens → execute_tool → two more chats",
			spans: []shapeSpan{
				{n: 1, name: "invoke_agent planner", from: 0, to: 2000, attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}},
				{n: 2, parent: 1, name: "chat agree-chat", kind: "client", from: 50, to: 700, attrs: withAttrs(genaiChat("agree-chat", 3000, 250),
					"gen_ai.usage.cache_read.input_tokens", 1200, "gen_ai.usage.cache_creation.input_tokens", 300)},
				{n: 3, parent: 1, name: "execute_tool search", from: 700, to: 1200, attrs: map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}},
				{n: 4, parent: 1, name: "chat agree-chat", kind: "client", from: 1200, to: 1600, attrs: withAttrs(genaiChat("agree-chat", 1800, 93),
					"gen_ai.usage.cache_read.input_tokens", 1500)},
				{n: 5, parent: 1, name: "chat agree-chat", kind: "client", from: 1600, to: 1950, attrs: genaiChat("agree-chat", 402, 31)},
			},
			// Span 2: uncached 3000−1200−300 = 1500×2.5 = 3750, cache read
			// 1200×0.25 = 300, cache write 300×3.75 = 1125, out 250×10 = 2500:
			// 7675 µ$. Span 4: 300×2.5 + 1500×0.25 + 93×10 = 750+375+930 =
			// 2055. Span 5: 402×2.5 + 31×10 = 1315. Sum 11045 µ$ — and in
			// float64 dollars 0.007675+0.002055+0.001315 and the reverse sum differ in the
			// last bit, so a view summing in arrival order shows.
			want: shapeWant{root: "invoke_agent planner", spans: 5, calls: 3, tools: 1, fragments: 1,
				in: 5202, out: 374, cacheRead: 2700, cacheWrite: 300, dur: 2 * time.Second, cost: usd(0.011045), callSpans: []int{2, 4, 5},
				uiDur: "2.00 s", uiCost: "$0.0110", cliDur: "2s", cliCost: "$0.011045", rollupDur: "2000.000 ms"},
		},
		{
			key: "e", what: "a model call with no usage: cost unknown, named with its reason",
			spans: []shapeSpan{
				{n: 1, name: "invoke_agent helper", from: 0, to: 600, attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}},
				{n: 2, parent: 1, name: "chat agree-chat", kind: "client", from: 10, to: 300, attrs: genaiChat("agree-chat", 200, 50)},
				{n: 3, parent: 1, name: "chat agree-chat stream", kind: "client", from: 310, to: 590, attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.request.model": "agree-chat"}},
			},
			// Priced part: 200×2.5 + 50×10 = 1000 µ$.
			want: shapeWant{root: "invoke_agent helper", spans: 3, calls: 2, fragments: 1, in: 200, out: 50,
				dur: 600 * time.Millisecond, known: 0.001, callSpans: []int{2, 3}, unknown: 3,
				uiDur: "600 ms", uiCost: "unknown", cliDur: "600ms", rollupDur: "600.000 ms"},
		},
		{
			key: "f", what: "a trace in two fragments: a root, and a call whose parent never arrives",
			spans: []shapeSpan{
				{n: 1, name: "invoke_agent collector", from: 0, to: 400, attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "collector"}},
				{n: 2, parent: 1, name: "chat agree-chat", kind: "client", from: 10, to: 390, attrs: genaiChat("agree-chat", 500, 40)},
				{n: 3, parent: missingParent, name: "chat agree-chat", kind: "client", from: 1000, to: 1300, attrs: genaiChat("agree-chat", 400, 30)},
			},
			// 500×2.5 + 40×10 = 1650; 400×2.5 + 30×10 = 1300: 2950 µ$.
			// The gap between the fragments is no async work of the root's:
			// nothing counts as after the root.
			want: shapeWant{root: "invoke_agent collector", spans: 3, calls: 2, fragments: 2, in: 900, out: 70,
				dur: 1300 * time.Millisecond, cost: usd(0.00295), callSpans: []int{2, 3},
				uiDur: "1.30 s", uiFragments: "2 fragments", uiCost: "$0.00295", cliDur: "1.3s (2 fragments)", cliCost: "$0.002950", rollupDur: "1300.000 ms"},
		},
		{
			key: "g", what: "a trace whose spans arrive in three export batches, children first",
			spans: []shapeSpan{
				{n: 1, name: "invoke_agent batcher", from: 0, to: 900, batch: 2, attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "batcher"}},
				{n: 2, parent: 1, name: "invoke_workflow steps", from: 50, to: 850, batch: 1, attrs: map[string]any{"gen_ai.operation.name": "invoke_workflow"}},
				{n: 3, parent: 2, name: "chat agree-chat", kind: "client", from: 100, to: 400, attrs: genaiChat("agree-chat", 700, 60)},
				{n: 4, parent: 2, name: "execute_tool fetch", from: 450, to: 800, err: "fetch timed out", attrs: map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch"}},
			},
			// 700×2.5 + 60×10 = 2350 µ$.
			want: shapeWant{root: "invoke_agent batcher", spans: 4, calls: 1, tools: 1, errors: 1, fragments: 1, in: 700, out: 60,
				dur: 900 * time.Millisecond, cost: usd(0.00235), callSpans: []int{3},
				uiDur: "900 ms", uiCost: "$0.00235", cliDur: "900ms", cliCost: "$0.002350", rollupDur: "900.000 ms"},
		},
	}
}

// with returns attrs with more key/value pairs added.
func withAttrs(attrs map[string]any, kv ...any) map[string]any {
	for i := 0; i+1 < len(kv); i += 2 {
		attrs[kv[i].(string)] = kv[i+1]
	}
	return attrs
}

// agreementSender is one SDK and transport the traces are sent through.
type agreementSender struct {
	n       int    // 1..: in the trace and span ids
	service string // service.name of its resource
	how     string
}

// agreementBase is the first trace's start: an odd nanosecond, so a store
// or SDK that drops precision shows.
var agreementBase = time.Date(2026, 3, 2, 9, 0, 0, 123456789, time.UTC)

// traceIDOf and spanIDOf give each sender's copy of a shape its own ids:
// the span number first, so the 8-digit prefixes views show differ.
func traceIDOf(sender int, key string) string {
	return fmt.Sprintf("a9ee%02d%02d%023d1", sender, int(key[0]-'a'+1), 0)
}

func spanIDOf(sender int, key string, n int) string {
	return fmt.Sprintf("%02d%02d%02d%09d1", n, sender, int(key[0]-'a'+1), 0)
}

// traceStart is when a sender's copy of a shape starts: a minute apart, so
// the list's default order (start, newest first) is known.
func traceStart(sender int, key string) time.Time {
	return agreementBase.Add(time.Duration(sender*10+int(key[0]-'a')) * time.Minute)
}

// specOf is what a sender sends: the shapes with its ids and times.
func specOf(s agreementSender, shapes []shape) senderSpec {
	spec := senderSpec{Service: s.service}
	for _, sh := range shapes {
		t0 := traceStart(s.n, sh.key)
		tr := specTrace{TraceID: traceIDOf(s.n, sh.key)}
		for _, sp := range sh.spans {
			ss := specSpan{SpanID: spanIDOf(s.n, sh.key, sp.n), Name: sp.name, Kind: sp.kind,
				Start: hrTime(t0.Add(time.Duration(sp.from) * time.Millisecond)), End: hrTime(t0.Add(time.Duration(sp.to) * time.Millisecond)),
				Attributes: sp.attrs, Error: sp.err, Batch: sp.batch}
			if ss.Kind == "" {
				ss.Kind = "internal"
			}
			if sp.parent != 0 {
				ss.ParentSpanID = spanIDOf(s.n, sh.key, sp.parent)
			}
			tr.Spans = append(tr.Spans, ss)
		}
		spec.Traces = append(spec.Traces, tr)
	}
	return spec
}

func hrTime(t time.Time) [2]int64 { return [2]int64{t.Unix(), int64(t.Nanosecond())} }

// senderSpec is the file scripts/jsagent/send.js reads (and what the Go
// sender sends): spans parents first, each with its export batch.
type senderSpec struct {
	Service string      `json:"service"`
	Traces  []specTrace `json:"traces"`
}

type specTrace struct {
	TraceID string     `json:"trace_id"`
	Spans   []specSpan `json:"spans"`
}

type specSpan struct {
	SpanID       string         `json:"span_id"`
	ParentSpanID string         `json:"parent_span_id,omitempty"`
	Name         string         `json:"name"`
	Kind         string         `json:"kind"`
	Start        [2]int64       `json:"start"` // unix seconds, nanoseconds
	End          [2]int64       `json:"end"`
	Attributes   map[string]any `json:"attributes,omitempty"`
	Error        string         `json:"error,omitempty"`
	Batch        int            `json:"batch"`
}

// batches lists a trace's batch numbers in increasing order.
func (tr specTrace) batches() []int {
	seen := map[int]bool{}
	var out []int
	for _, s := range tr.Spans {
		if !seen[s.Batch] {
			seen[s.Batch] = true
			out = append(out, s.Batch)
		}
	}
	sort.Ints(out)
	return out
}

// sortedKeys lists a span's attribute keys in order, so every send of it
// is the same request.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// unknownText is how a view names the call of want.unknown and why its
// cost is unknown (rollup.UnknownCostText's words).
func unknownText(sender int, sh shape) string {
	for _, sp := range sh.spans {
		if sp.n == sh.want.unknown {
			return fmt.Sprintf("%q (span %s) reported no token usage", sp.name, spanIDOf(sender, sh.key, sp.n)[:8])
		}
	}
	return ""
}

// listUnknownText is how a list view says why a cost is unknown: per model,
// how many calls and why (rollup.UnknownCallsText: a list row carries call
// groups, not calls, so it names no span).
func listUnknownText(sh shape) string {
	for _, sp := range sh.spans {
		if sp.n == sh.want.unknown {
			model, _ := sp.attrs["gen_ai.request.model"].(string)
			return fmt.Sprintf("1 call of %q reported no token usage", model)
		}
	}
	return ""
}

func spanIDsOf(sender int, key string, ns []int) []string {
	var out []string
	for _, n := range ns {
		out = append(out, spanIDOf(sender, key, n))
	}
	return out
}
