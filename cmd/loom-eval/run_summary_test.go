package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/scorer/rollup"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// These tests drive `loom-eval run --context-summarizer model` against the
// providertest fakes (real wire formats) with a context budget small enough
// that step 3's request is compacted with a model-made summary: the provider
// sees step 1, step 2, the summary request (no tools), then step 3.

const summaryPage = "docs/reference/code-blocks.md#custom-syntax-theme"

// summaryRunArgs are the flags of a research run whose third step needs a
// summary of steps 1–2 (600 tokens: step 2's request fits without one,
// step 3's does not).
// ds and cases are absolute (see summaryInputs).
func summaryRunArgs(ds, cases string, f *liveFake, db, jsonl, endpoint string, asJSON bool) []string {
	args := []string{"--agent", "research", "--case", cases, "--case-id", "mkm-156", "--dataset", ds,
		"--provider", f.provider, "--model", f.model, "--base-url", f.baseURL,
		"--context-budget", "600", "--context-summarizer", "model", "--journal", db, "--journal-out", jsonl}
	if endpoint != "" {
		args = append(args, "--otlp-endpoint", endpoint)
	}
	if asJSON {
		args = append(args, "--json")
	}
	return args
}

// summaryInputs returns the judged dataset and the baseline cases as
// absolute paths; call it before t.Chdir.
func summaryInputs(t *testing.T) (ds, cases string) {
	t.Helper()
	ds = shippedDatasetAbs(t)
	cases, err := filepath.Abs(filepath.Join("..", "..", "baselines", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return ds, cases
}

// enqueueSummaryRun queues the three step answers and, before step 3, the
// summary answer with usage su.
func enqueueSummaryRun(f *liveFake, us []llm.Usage, su llm.Usage) {
	f.srv.Enqueue(
		f.answer("", []llm.ToolCall{{ID: f.callID(1), Name: "search_docs",
			Arguments: json.RawMessage(`{"query":"java syntax highlighting code blocks pygments","k":5}`)}}, us[0]),
		f.answer("Let me read the code blocks page.", []llm.ToolCall{{ID: f.callID(2), Name: "read_doc",
			Arguments: json.RawMessage(`{"id":"` + summaryPage + `"}`)}}, us[1]),
		f.answer("Searched the docs for Java highlighting; the code blocks page ("+summaryPage+") covers Pygments.", nil, su),
		f.answer("Enable pymdownx.highlight with Pygments ["+summaryPage+"].", nil, us[2]),
	)
}

// decodeSpans maps what the OTLP sink received through the collector's own
// GenAI mapping, as `loom-eval serve` would store it.
func decodeSpans(t *testing.T, sink *otlpSink) []store.Span {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var out []store.Span
	for _, req := range sink.reqs {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		spans, rej, err := genai.DecodeProto(b, genai.Options{})
		if err != nil || len(rej) > 0 {
			t.Fatalf("decode OTLP: %v, rejected %v", err, rej)
		}
		out = append(out, spans...)
	}
	return out
}

func isSummarySpan(s store.Span) bool { return s.Attributes[semconv.AttrSummaryCall] == true }

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

func TestRunModelSummarizerCallIsItsOwnChatSpanAndTheRollupCountsItsTokensAndCostExactlyOnce(t *testing.T) {
	testtier.Slow(t)
	ds, cases := summaryInputs(t)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Chdir(t.TempDir())
	copyIndexCache(t, filepath.Join(".loomwork", "index"))
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			ctx := context.Background()
			key := "lw-test-key-summary-" + provider + "-5e0a7c"
			f := newLiveFake(t, provider, key)
			us := f.usages()
			su := llm.Usage{InputTokens: 733, OutputTokens: 58}
			if provider == "anthropic" {
				su.CacheReadTokens = 200
			}
			enqueueSummaryRun(f, us, su)
			sink, endpoint := startOTLPSink(t)
			var out, errb bytes.Buffer
			m := newTestMain(&out, &errb, map[string]string{f.keyEnv: key})
			if err := m.runRun(ctx, summaryRunArgs(ds, cases, f, provider+".db", provider+".jsonl", endpoint, true)); err != nil {
				t.Fatalf("run: exit %d: %v\n%s", exitCode(err, &errb), err, errb.String())
			}

			// The provider saw the summary request third, without tools.
			reqs := f.srv.Requests()
			if len(reqs) != 4 {
				t.Fatalf("the fake got %d requests, want 3 steps and 1 summary", len(reqs))
			}
			if _, tools := reqs[2].JSON()["tools"]; tools || !bytes.Contains(reqs[2].Body, []byte("You compress agent transcripts")) {
				t.Fatalf("request 3 is not the summary request:\n%s", reqs[2].Body)
			}

			// What run reports: the steps' usage as journaled, the summary
			// call apart, and the total priced from the same table.
			var res []runner.Result
			if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res) != 1 {
				t.Fatalf("output is not one JSON result: %v\n%s", err, out.String())
			}
			r := res[0]
			all := append(slices.Clone(us), su)
			wantCost := expectedCost(t, f.model, all)
			if r.ModelCalls != 3 || r.SummaryCalls != 1 || r.SummaryUsage != su || r.Usage != sumUsage(us) ||
				r.TotalUsage != sumUsage(all) || r.CostUSD == nil || !approx(*r.CostUSD, wantCost) || r.CostNote != "" {
				t.Fatalf("result = %+v (cost %v), want 3 step calls + 1 summary call costing $%.9f", r, r.CostUSD, wantCost)
			}

			// The journal is unchanged in shape: run_finished has the steps'
			// usage only, and the summary text is on step 3's request.
			checkLiveJournal(t, readJournalLines(t, provider+".jsonl"), f, []string{"search_docs", "read_doc"}, us)

			spans := decodeSpans(t, sink)
			var agentSpan, summary *store.Span
			var summaryAttempts []store.Span
			for i := range spans {
				switch {
				case spans[i].Operation == "invoke_agent":
					agentSpan = &spans[i]
				case isSummarySpan(spans[i]):
					if summary != nil {
						t.Fatal("more than one summary span for one summary call")
					}
					summary = &spans[i]
				}
			}
			if agentSpan == nil || summary == nil {
				t.Fatalf("no invoke_agent (%v) or summary span (%v) among %d spans", agentSpan != nil, summary != nil, len(spans))
			}
			for _, s := range spans {
				if s.ParentSpanID == summary.SpanID {
					summaryAttempts = append(summaryAttempts, s)
				}
			}
			a := summary.Attributes
			if summary.Operation != "chat" || summary.Provider != f.provider || summary.RequestModel != f.model ||
				summary.ResponseModel != f.respond || summary.ParentSpanID != agentSpan.SpanID || summary.Kind != "client" ||
				summary.ConversationID != "research-mkm-156-t0" || a[semconv.AttrSummaryStep] != int64(3) {
				t.Fatalf("summary span = %+v", *summary)
			}
			if !summary.HasUsage || summary.InputTokens != su.InputTokens || summary.OutputTokens != su.OutputTokens ||
				summary.CacheReadTokens != su.CacheReadTokens || summary.CostUSD == nil ||
				!approx(*summary.CostUSD, expectedCost(t, f.model, []llm.Usage{su})) {
				t.Fatalf("summary span usage/cost = %+v (cost %v)", *summary, summary.CostUSD)
			}
			// The gateway's attempt for the summary is the summary span's child.
			if len(summaryAttempts) != 1 || summaryAttempts[0].InputTokens != su.InputTokens || summaryAttempts[0].CostUSD == nil {
				t.Fatalf("gateway attempts under the summary span: %+v", summaryAttempts)
			}

			// The rollup bills four calls, the summary once: its own span is an
			// aggregate over the gateway's attempt.
			ru := rollup.Compute(spans, pricing.Default())
			tot := sumUsage(all)
			if ru.TokensIn != tot.InputTokens || ru.TokensOut != tot.OutputTokens || ru.ModelCalls != 4 ||
				ru.CostUSD == nil || !approx(*ru.CostUSD, *r.CostUSD) || !slices.Contains(ru.AggregateSpans, summary.SpanID) {
				t.Fatalf("rollup: in %d out %d, %d calls, cost %v, aggregates %v; want in %d out %d, 4 calls, $%.9f, the summary span an aggregate",
					ru.TokensIn, ru.TokensOut, ru.ModelCalls, ru.CostUSD, ru.AggregateSpans, tot.InputTokens, tot.OutputTokens, *r.CostUSD)
			}

			// Where only the runtime and the context layer trace (no gateway
			// spans), the summary span is the billed leaf: same totals.
			var noGateway []store.Span
			for _, s := range spans {
				if s.ScopeName != "github.com/loomwork/loomwork/agents/gateway" {
					noGateway = append(noGateway, s)
				}
			}
			if len(noGateway) == len(spans) {
				t.Fatal("no gateway spans were received")
			}
			rg := rollup.Compute(noGateway, pricing.Default())
			if rg.TokensIn != tot.InputTokens || rg.TokensOut != tot.OutputTokens || rg.ModelCalls != 4 ||
				rg.CostUSD == nil || !approx(*rg.CostUSD, *r.CostUSD) || len(rg.AggregateSpans) != 0 {
				t.Fatalf("rollup without gateway spans: in %d out %d, %d calls, cost %v, aggregates %v",
					rg.TokensIn, rg.TokensOut, rg.ModelCalls, rg.CostUSD, rg.AggregateSpans)
			}
		})
	}
}

func TestRunResumeAndReplayOfAModelSummarizedRunDoNotInventSummaryUsage(t *testing.T) {
	testtier.Slow(t)
	ds, cases := summaryInputs(t)
	t.Setenv("LOOMWORK_DATASET", ds) // replay's registry reads the process environment
	t.Setenv("OPENAI_API_KEY", "")
	t.Chdir(t.TempDir())
	copyIndexCache(t, filepath.Join(".loomwork", "index"))
	ctx := context.Background()
	key := "lw-test-key-summary-replay-8d2f"
	f := newLiveFake(t, "openai", key)
	us := f.usages()
	su := llm.Usage{InputTokens: 733, OutputTokens: 58}
	enqueueSummaryRun(f, us, su)
	var out, errb bytes.Buffer
	m := newTestMain(&out, &errb, map[string]string{f.keyEnv: key})
	args := summaryRunArgs(ds, cases, f, "runs.db", "runs.jsonl", "", false)
	if err := m.runRun(ctx, args); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	all := append(slices.Clone(us), su)
	tot := sumUsage(all)
	for _, want := range []string{
		fmt.Sprintf("research-mkm-156-t0 (agent research, model label live): 3 steps, 3 model calls (0 reused), tokens in %d out %d, cost $%.6f",
			tot.InputTokens, tot.OutputTokens, expectedCost(t, f.model, all)),
		"  context summaries: 1 model calls, tokens in 733 out 58 (included above)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("run output lacks %q:\n%s", want, out.String())
		}
	}

	// Resume: every answer and the summary come from the journal; nothing is
	// asked, and the summary's usage, which the journal does not hold, is
	// not made up: the cost is unknown, with the steps' part as a floor.
	out.Reset()
	if err := m.runRun(ctx, append(args, "--json")); err != nil {
		t.Fatalf("resume: %v\n%s", err, errb.String())
	}
	var res []runner.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res) != 1 {
		t.Fatalf("resume output: %v\n%s", err, out.String())
	}
	r := res[0]
	if f.srv.Count() != 4 || r.ModelCalls != 0 || r.SummaryCalls != 0 || r.SummariesReused != 1 ||
		r.SummaryUsage != (llm.Usage{}) || r.TotalUsage != sumUsage(us) || r.CostUSD != nil ||
		!approx(r.KnownCostUSD, expectedCost(t, f.model, us)) || !strings.Contains(r.CostNote, "reused from the journal") {
		t.Fatalf("resume = %+v (cost %v), provider requests %d", r, r.CostUSD, f.srv.Count())
	}

	out.Reset()
	if err := m.runRun(ctx, args); err != nil {
		t.Fatalf("resume: %v\n%s", err, errb.String())
	}
	if want := fmt.Sprintf("cost unknown (1 context summaries reused from the journal (their usage is not recorded); at least $%.6f)",
		expectedCost(t, f.model, us)); !strings.Contains(out.String(), want) {
		t.Fatalf("resume output lacks %q:\n%s", want, out.String())
	}

	// Replay with its spans exported: no summary call, no summary span, and
	// the trace's tokens are the recorded steps' only.
	sink, endpoint := startOTLPSink(t)
	var rout, rerr bytes.Buffer
	rm := &Main{Stdout: &rout, Stderr: &rerr, Getenv: func(string) string { return "" }}
	if err := rm.Run(ctx, []string{"replay", "--strict", "--json", "--otlp-endpoint", endpoint, "runs.jsonl"}); err != nil {
		t.Fatalf("replay: %v\n%s%s", err, rout.String(), rerr.String())
	}
	var rep replayOutput
	if err := json.Unmarshal(rout.Bytes(), &rep); err != nil || !rep.OK || len(rep.Reports) != 1 {
		t.Fatalf("replay = %s", rout.String())
	}
	if p := rep.Reports[0]; p.ModelCalls != 0 || p.Usage != sumUsage(us) || !p.Complete {
		t.Fatalf("replay report = %+v", p)
	}
	if f.srv.Count() != 4 {
		t.Fatalf("replay reached the provider: %d requests", f.srv.Count())
	}
	spans := decodeSpans(t, sink)
	for _, s := range spans {
		if isSummarySpan(s) {
			t.Fatalf("the replay emitted a summary span it never made: %+v", s)
		}
	}
	ru := rollup.Compute(spans, pricing.Default())
	if ru.TokensIn != sumUsage(us).InputTokens || ru.TokensOut != sumUsage(us).OutputTokens || ru.ModelCalls != 3 {
		t.Fatalf("replay rollup: in %d out %d, %d calls; want the recorded steps only", ru.TokensIn, ru.TokensOut, ru.ModelCalls)
	}
}

func TestRunCostOfAModelWithoutAPriceIsUnknownNeverZero(t *testing.T) {
	ds := shippedDatasetAbs(t)
	t.Chdir(t.TempDir())
	key := "sk-lw-local-unpriced-3a91"
	srv := providertest.NewOpenAI(t, key)
	const model = "qwen2.5-7b-instruct"
	srv.Enqueue(providertest.OpenAICompletion(providertest.OpenAIAnswer{Model: model,
		Content: "Material highlights code with Pygments.", Prompt: 1200, Completion: 30}))
	for _, asJSON := range []bool{false, true} {
		var out, errb bytes.Buffer
		args := []string{"--agent", "research", "--dataset", ds, "--task", "How do I enable syntax highlighting for Java code blocks?",
			"--run-id", "unpriced", "--provider", "openai", "--model", model, "--base-url", srv.URL + "/v1", "--journal", "runs.db"}
		if asJSON {
			args = append(args, "--json") // the same run id: resumed from the journal
		}
		if err := newTestMain(&out, &errb, map[string]string{"OPENAI_API_KEY": key}).runRun(context.Background(), args); err != nil {
			t.Fatalf("run: %v\n%s", err, errb.String())
		}
		if !asJSON {
			if want := "tokens in 1200 out 30, cost unknown (no price for " + model + ")"; !strings.Contains(out.String(), want) {
				t.Fatalf("output lacks %q:\n%s", want, out.String())
			}
			continue
		}
		if !bytes.Contains(out.Bytes(), []byte(`"cost_usd": null`)) {
			t.Fatalf("JSON cost is not null:\n%s", out.String())
		}
		var res []runner.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res) != 1 {
			t.Fatalf("output: %v\n%s", err, out.String())
		}
		if r := res[0]; r.CostUSD != nil || r.KnownCostUSD != 0 || !slices.Equal(r.UnpricedModels, []string{model}) ||
			r.TotalUsage.InputTokens != 1200 {
			t.Fatalf("result = %+v", r)
		}
	}
}
