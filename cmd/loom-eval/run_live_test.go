package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/gateway/providertest"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/semconv"
)

// These tests run `loom-eval run --provider openai|anthropic` end to end
// against the providertest fakes on 127.0.0.1: real wire shapes (tool calls,
// tool results, usage blocks, error bodies), the real agents and tools, the
// real journal, and a replay of the exported journal with no key.

// liveFake is one fake provider endpoint as `run` is pointed at it.
type liveFake struct {
	provider string // --provider
	model    string // --model
	respond  string // the dated model id the provider answers with
	keyEnv   string // the variable `run` reads the key from
	srv      *providertest.Server
	baseURL  string
}

// newLiveFake starts the provider's fake (stopped by t.Cleanup) requiring key.
func newLiveFake(t *testing.T, provider, key string) *liveFake {
	t.Helper()
	switch provider {
	case "openai":
		s := providertest.NewOpenAI(t, key)
		return &liveFake{provider: provider, model: "gpt-4o-mini", respond: "gpt-4o-mini-2024-07-18",
			keyEnv: "OPENAI_API_KEY", srv: s, baseURL: s.URL + "/v1"}
	case "anthropic":
		s := providertest.NewAnthropic(t, key)
		return &liveFake{provider: provider, model: "claude-sonnet-4-5", respond: "claude-sonnet-4-5-20250929",
			keyEnv: "ANTHROPIC_API_KEY", srv: s, baseURL: s.URL}
	}
	t.Fatalf("no fake for provider %q", provider)
	return nil
}

// answer is a provider message in the provider's own shape; u is the usage
// as Loomwork normalises it, converted here to what the provider reports
// (OpenAI: cached inside prompt_tokens; Anthropic: input_tokens excludes
// both cache fields).
func (f *liveFake) answer(text string, calls []llm.ToolCall, u llm.Usage) providertest.Reply {
	if f.provider == "openai" {
		return providertest.OpenAICompletion(providertest.OpenAIAnswer{Model: f.respond, Content: text, ToolCalls: calls,
			Prompt: u.InputTokens, Completion: u.OutputTokens, Cached: u.CacheReadTokens, Reasoning: u.ReasoningTokens})
	}
	return providertest.AnthropicMessage(providertest.AnthropicAnswer{Model: f.respond, Text: text, ToolUses: calls,
		Input: u.InputTokens - u.CacheReadTokens - u.CacheCreationTokens, Output: u.OutputTokens,
		CacheRead: u.CacheReadTokens, CacheCreation: u.CacheCreationTokens})
}

// callID is a tool call id in the provider's own format.
func (f *liveFake) callID(n int) string {
	if f.provider == "openai" {
		return fmt.Sprintf("call_Lw%02dq7ZkR3mXb", n)
	}
	return fmt.Sprintf("toolu_01Lw%02dA9bQ7xYc", n)
}

// usages are per-step usages in the fields each provider really reports
// (reasoning tokens from OpenAI, cache creation from Anthropic).
func (f *liveFake) usages() []llm.Usage {
	if f.provider == "openai" {
		return []llm.Usage{
			{InputTokens: 1210, OutputTokens: 41, CacheReadTokens: 0, ReasoningTokens: 12},
			{InputTokens: 3472, OutputTokens: 38, CacheReadTokens: 1024},
			{InputTokens: 4391, OutputTokens: 96, CacheReadTokens: 3328, ReasoningTokens: 20},
		}
	}
	return []llm.Usage{
		{InputTokens: 1302, OutputTokens: 57, CacheCreationTokens: 1100},
		{InputTokens: 3590, OutputTokens: 44, CacheReadTokens: 1100, CacheCreationTokens: 2100},
		{InputTokens: 4512, OutputTokens: 118, CacheReadTokens: 3200},
	}
}

// expectedCost prices usages with the table `run` uses, by the rule in
// docs/gateway.md (uncached input, cache reads, cache writes, output).
func expectedCost(t *testing.T, model string, us []llm.Usage) float64 {
	t.Helper()
	pm, _, ok := pricing.Default().Lookup(model)
	if !ok {
		t.Fatalf("no price for %s", model)
	}
	read, write := pm.Input, pm.Input
	if pm.CacheRead != nil {
		read = *pm.CacheRead
	}
	if pm.CacheWrite != nil {
		write = *pm.CacheWrite
	}
	var c float64
	for _, u := range us {
		c += (float64(u.InputTokens-u.CacheReadTokens-u.CacheCreationTokens)*pm.Input + float64(u.CacheReadTokens)*read +
			float64(u.CacheCreationTokens)*write + float64(u.OutputTokens)*pm.Output) / 1e6
	}
	return c
}

func sumUsage(us []llm.Usage) llm.Usage {
	var s llm.Usage
	for _, u := range us {
		s = s.Add(u)
	}
	return s
}

// journalLine is one event of an exported JSONL journal.
type journalLine struct {
	Run     string          `json:"run"`
	Seq     int             `json:"seq"`
	Kind    string          `json:"kind"`
	Step    int             `json:"step"`
	Tool    string          `json:"tool"`
	CallID  string          `json:"call_id"`
	Label   string          `json:"label"`
	Payload json.RawMessage `json:"payload"`
}

func readJournalLines(t *testing.T, path string) []journalLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read journal: %v", err)
	}
	var out []journalLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("journal line %d: %v", len(out)+1, err)
		}
		out = append(out, l)
	}
	return out
}

// checkLiveJournal asserts what a user reads in an exported live journal:
// every model event labelled live with the provider and dated model, the
// provider's usage per step, the tool calls in order with non-error results,
// and the summed usage on run_finished.
func checkLiveJournal(t *testing.T, lines []journalLine, f *liveFake, tools []string, us []llm.Usage) {
	t.Helper()
	var responses []llm.Response
	var called, resulted []string
	var finished struct {
		Usage llm.Usage `json:"usage"`
	}
	for _, l := range lines {
		switch l.Kind {
		case "model_request":
			if l.Label != llm.LabelLive {
				t.Errorf("seq %d model_request label %q, want live", l.Seq, l.Label)
			}
		case "model_response":
			var r llm.Response
			if err := json.Unmarshal(l.Payload, &r); err != nil {
				t.Fatalf("seq %d: %v", l.Seq, err)
			}
			if l.Label != llm.LabelLive || r.Label != llm.LabelLive || r.Provider != f.provider || r.Model != f.respond {
				t.Errorf("seq %d model_response label %q/%q provider %q model %q, want live/live %s %s",
					l.Seq, l.Label, r.Label, r.Provider, r.Model, f.provider, f.respond)
			}
			responses = append(responses, r)
		case "tool_call":
			called = append(called, l.Tool)
		case "tool_result":
			var p struct {
				Content string `json:"content"`
				IsError bool   `json:"is_error"`
			}
			json.Unmarshal(l.Payload, &p)
			if p.IsError {
				t.Errorf("seq %d: tool %s failed: %s", l.Seq, l.Tool, p.Content)
			}
			resulted = append(resulted, l.Tool)
		case "run_finished":
			json.Unmarshal(l.Payload, &finished)
		}
	}
	if len(responses) != len(us) {
		t.Fatalf("%d model responses journaled, want %d", len(responses), len(us))
	}
	for i, r := range responses {
		if r.Usage != us[i] {
			t.Errorf("step %d usage journaled %+v, provider reported %+v", i+1, r.Usage, us[i])
		}
	}
	if !slices.Equal(called, tools) || !slices.Equal(resulted, tools) {
		t.Errorf("tool calls %v, results %v; want %v", called, resulted, tools)
	}
	if finished.Usage != sumUsage(us) {
		t.Errorf("run_finished usage %+v, want %+v", finished.Usage, sumUsage(us))
	}
}

// assertNoKey fails when key appears in any of the named byte strings.
func assertNoKey(t *testing.T, key string, where map[string][]byte) {
	t.Helper()
	for name, b := range where {
		if bytes.Contains(b, []byte(key)) {
			t.Errorf("the API key leaked into %s", name)
		}
	}
}

// journalFiles returns the SQLite journal and its WAL, if any, for key greps.
func journalFiles(t *testing.T, db string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, p := range []string{db, db + "-wal"} {
		if b, err := os.ReadFile(p); err == nil {
			out[p] = b
		}
	}
	if len(out) == 0 {
		t.Fatalf("no journal database at %s", db)
	}
	return out
}

// startOTLPSink runs a real OTLP/gRPC receiver on 127.0.0.1.
func startOTLPSink(t *testing.T) (*otlpSink, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sink := &otlpSink{}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, sink)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return sink, lis.Addr().String()
}

// gatewayCost sums llm.cost.total over the gateway's attempt spans and
// returns the received spans' wire bytes (for key greps).
func gatewayCost(t *testing.T, sink *otlpSink) (float64, int, []byte) {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var cost float64
	attempts := 0
	var wire []byte
	for _, req := range sink.reqs {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		wire = append(wire, b...)
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					for _, kv := range sp.Attributes {
						if kv.Key == "llm.cost.total" {
							cost += kv.Value.GetDoubleValue()
							attempts++
						}
					}
				}
			}
		}
	}
	return cost, attempts, wire
}

// TestRunLiveProviderResearchAgentJournalsLiveAnswersAndReplaysWithoutKey
// drives the research agent through both providers' wire formats: search,
// read, cited answer.
func TestRunLiveProviderResearchAgentJournalsLiveAnswersAndReplaysWithoutKey(t *testing.T) {
	testtier.Slow(t)
	ds := shippedDatasetAbs(t)
	cases, err := filepath.Abs(filepath.Join("..", "..", "baselines", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOOMWORK_DATASET", ds) // replay's registry reads the process environment
	// Replay must not find a key anywhere, not even in the process env.
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Chdir(t.TempDir())
	copyIndexCache(t, filepath.Join(".loomwork", "index"))

	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			ctx := context.Background()
			key := "lw-test-key-" + provider + "-9f3c2a7e51d04b68"
			f := newLiveFake(t, provider, key)
			us := f.usages()
			const page = "docs/reference/code-blocks.md#custom-syntax-theme"
			f.srv.Enqueue(
				f.answer("", []llm.ToolCall{{ID: f.callID(1), Name: "search_docs",
					Arguments: json.RawMessage(`{"query":"java syntax highlighting code blocks pygments","k":5}`)}}, us[0]),
				f.answer("Let me read the code blocks page.", []llm.ToolCall{{ID: f.callID(2), Name: "read_doc",
					Arguments: json.RawMessage(`{"id":"` + page + `"}`)}}, us[1]),
				f.answer("Material styles code blocks highlighted by Pygments through the Highlight extension; "+
					"enable pymdownx.highlight and pymdownx.superfences ["+page+"].", nil, us[2]),
			)
			sink, endpoint := startOTLPSink(t)
			db, jsonl := provider+".db", provider+".jsonl"
			args := []string{"--agent", "research", "--case", cases, "--case-id", "mkm-156", "--dataset", ds,
				"--provider", provider, "--model", f.model, "--base-url", f.baseURL,
				"--journal", db, "--journal-out", jsonl, "--otlp-endpoint", endpoint, "--json"}
			var out, errb bytes.Buffer
			m := newTestMain(&out, &errb, map[string]string{f.keyEnv: key})
			if err := m.runRun(ctx, args); err != nil {
				t.Fatalf("run: exit %d: %v\n%s", exitCode(err, &errb), err, errb.String())
			}
			runOut, runErr := slices.Clone(out.Bytes()), slices.Clone(errb.Bytes())
			var res []runner.Result
			if err := json.Unmarshal(runOut, &res); err != nil || len(res) != 1 {
				t.Fatalf("output is not one JSON result: %v\n%s", err, runOut)
			}
			r := res[0]
			if r.RunID != "research-mkm-156-t0" || r.ModelLabel != llm.LabelLive || r.ModelCalls != 3 || r.Reused != 0 ||
				r.Steps != 3 || r.Usage != sumUsage(us) || !slices.Contains(r.Citations, "docs/reference/code-blocks.md") ||
				!slices.Contains(r.Documents, "docs/reference/code-blocks.md") {
				t.Fatalf("result = %+v", r)
			}
			for _, d := range append(r.Documents, r.Citations...) {
				if d == "issue:156" {
					t.Fatalf("the live run retrieved or cited its own issue: %+v", r)
				}
			}

			// What the provider saw: the key in its own header, the tools in its
			// own shape, and the observations of the calls it made.
			reqs := f.srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("the fake got %d requests, want 3", len(reqs))
			}
			if provider == "openai" && reqs[0].Header.Get("Authorization") != "Bearer "+key ||
				provider == "anthropic" && reqs[0].Header.Get("X-Api-Key") != key {
				t.Fatalf("the key from %s was not sent in %s's header: %v", f.keyEnv, provider, reqs[0].Header)
			}
			if !bytes.Contains(reqs[1].Body, []byte(f.callID(1))) || !bytes.Contains(reqs[1].Body, []byte("docs/reference/code-blocks.md")) {
				t.Fatalf("request 2 does not carry the search result for %s:\n%s", f.callID(1), reqs[1].Body)
			}
			if !bytes.Contains(reqs[2].Body, []byte(f.callID(2))) || !bytes.Contains(reqs[2].Body, []byte("Pygments")) {
				t.Fatalf("request 3 does not carry the page read for %s:\n%s", f.callID(2), reqs[2].Body)
			}

			// The journal.
			lines := readJournalLines(t, jsonl)
			checkLiveJournal(t, lines, f, []string{"search_docs", "read_doc"}, us)
			for _, l := range lines {
				var p struct {
					Content string `json:"content"`
				}
				json.Unmarshal(l.Payload, &p)
				if l.Kind == "tool_result" && strings.Contains(p.Content, `"issue:156"`) {
					t.Fatalf("the search result shown to the live model holds its own issue: %s", p.Content)
				}
			}

			// Cost: the gateway priced every attempt on its span.
			cost, attempts, spans := gatewayCost(t, sink)
			if want := expectedCost(t, f.model, us); attempts != 3 || math.Abs(cost-want) > 1e-12 {
				t.Fatalf("gateway spans: %d priced attempts costing $%.9f, want 3 costing $%.9f", attempts, cost, want)
			}

			// The same command again resumes: the provider is not asked again.
			out.Reset()
			if err := m.runRun(ctx, args); err != nil {
				t.Fatalf("resume: %v\n%s", err, errb.String())
			}
			var again []runner.Result
			json.Unmarshal(out.Bytes(), &again)
			if len(again) != 1 || again[0].ModelCalls != 0 || again[0].Reused != 3 || again[0].Answer != r.Answer || f.srv.Count() != 3 {
				t.Fatalf("resume = %+v, fake requests %d", again, f.srv.Count())
			}

			// Replay with no key: recorded answers, tools executed again.
			var rout, rerr bytes.Buffer
			rm := &Main{Stdout: &rout, Stderr: &rerr, Getenv: func(string) string { return "" }}
			if err := rm.Run(ctx, []string{"replay", "--strict", "--json", jsonl}); err != nil {
				t.Fatalf("replay: %v\n%s%s", err, rout.String(), rerr.String())
			}
			var rep replayOutput
			if err := json.Unmarshal(rout.Bytes(), &rep); err != nil || !rep.OK || len(rep.Reports) != 1 {
				t.Fatalf("replay = %s", rout.String())
			}
			if p := rep.Reports[0]; p.Label != llm.LabelLive || p.ModelCalls != 0 || p.ToolRuns != 2 || !p.Complete ||
				p.MatchedEvents != p.RecordedEvents || p.Answer != r.Answer || p.Usage != sumUsage(us) {
				t.Fatalf("replay report = %+v", p)
			}
			if f.srv.Count() != 3 {
				t.Fatalf("replay reached the provider: %d requests", f.srv.Count())
			}

			where := journalFiles(t, db)
			jb, _ := os.ReadFile(jsonl)
			where["journal "+jsonl] = jb
			where["run stdout"], where["run stderr"] = runOut, runErr
			where["replay output"] = append(rout.Bytes(), rerr.Bytes()...)
			where["spans"] = spans
			assertNoKey(t, key, where)
		})
	}
}

// TestRunLiveProviderErrorExitsNonZeroWithTheProviderMessageAndNoKey covers
// the failures a user meets first: a request the provider refuses (400),
// a rejected key that a compatible server echoes back (401), and no key at
// all.
func TestRunLiveProviderErrorExitsNonZeroWithTheProviderMessageAndNoKey(t *testing.T) {
	ds := shippedDatasetAbs(t)
	t.Chdir(t.TempDir())
	ctx := context.Background()
	run := func(t *testing.T, f *liveFake, env map[string]string) (int, string) {
		t.Helper()
		var out, errb bytes.Buffer
		err := newTestMain(&out, &errb, env).runRun(ctx, []string{"--agent", "research", "--dataset", ds,
			"--task", "How do I enable syntax highlighting for Java code blocks?",
			"--provider", f.provider, "--model", f.model, "--base-url", f.baseURL,
			"--journal", f.provider + ".db", "--journal-out", f.provider + ".jsonl"})
		if err == nil {
			t.Fatalf("run succeeded against a failing provider:\n%s", out.String())
		}
		code := exitCode(err, &errb) // what main prints and exits with
		t.Logf("exit %d: %s", code, errb.String())
		return code, out.String() + errb.String()
	}

	t.Run("openai 400 context_length_exceeded", func(t *testing.T) {
		key := "sk-lw-test-4c1d9e0b7a2f46e3"
		f := newLiveFake(t, "openai", key)
		f.srv.Enqueue(providertest.OpenAIError(http.StatusBadRequest,
			"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
			"invalid_request_error", "messages", "context_length_exceeded", nil))
		code, msg := run(t, f, map[string]string{"OPENAI_API_KEY": key})
		if code != ExitRuntimeErr || !strings.Contains(msg, "status 400") || !strings.Contains(msg, "maximum context length is 128000 tokens") ||
			!strings.Contains(msg, "openai") {
			t.Fatalf("exit %d, output:\n%s", code, msg)
		}
		if f.srv.Count() != 1 {
			t.Fatalf("a 400 was sent %d times; it must not be retried", f.srv.Count())
		}
		where := journalFiles(t, "openai.db")
		where["output"] = []byte(msg)
		assertNoKey(t, key, where)
	})

	t.Run("anthropic 401 echoing the key", func(t *testing.T) {
		key := "sk-ant-lw-test-0b9e3f5a1c7d4e28"
		f := newLiveFake(t, "anthropic", key)
		// Accepted by the fake's own check, then refused in the provider's
		// error shape with the key in the message, as some proxies answer.
		f.srv.Enqueue(providertest.AnthropicError(http.StatusUnauthorized, "authentication_error",
			"invalid x-api-key: "+key, nil))
		code, msg := run(t, f, map[string]string{"ANTHROPIC_API_KEY": key})
		if code != ExitRuntimeErr || !strings.Contains(msg, "status 401") || !strings.Contains(msg, "authentication_error") ||
			!strings.Contains(msg, "invalid x-api-key") {
			t.Fatalf("exit %d, output:\n%s", code, msg)
		}
		where := journalFiles(t, "anthropic.db")
		where["output"] = []byte(msg)
		assertNoKey(t, key, where)
	})

	t.Run("anthropic 401 for a wrong key", func(t *testing.T) {
		f := newLiveFake(t, "anthropic", "sk-ant-the-right-key")
		wrong := "sk-ant-lw-wrong-7e2a9c4b1d6f3058"
		code, msg := run(t, f, map[string]string{"ANTHROPIC_API_KEY": wrong})
		if code != ExitRuntimeErr || !strings.Contains(msg, "status 401") || !strings.Contains(msg, "authentication_error") {
			t.Fatalf("exit %d, output:\n%s", code, msg)
		}
		assertNoKey(t, wrong, map[string][]byte{"output": []byte(msg)})
	})

	t.Run("anthropic without ANTHROPIC_API_KEY", func(t *testing.T) {
		f := newLiveFake(t, "anthropic", "sk-unused")
		code, msg := run(t, f, map[string]string{})
		if code != ExitUsage || !strings.Contains(msg, "ANTHROPIC_API_KEY") || f.srv.Count() != 0 {
			t.Fatalf("exit %d, %d requests, output:\n%s", code, f.srv.Count(), msg)
		}
	})

	// An OpenAI-compatible server at --base-url may need no key (a local
	// one), so none is demanded up front; a server that does want one
	// answers 401, which is reported as such.
	t.Run("openai-compatible server without a key", func(t *testing.T) {
		f := newLiveFake(t, "openai", "sk-the-servers-key")
		code, msg := run(t, f, map[string]string{})
		if code != ExitRuntimeErr || !strings.Contains(msg, "status 401") || !strings.Contains(msg, "Incorrect API key provided") ||
			f.srv.Count() != 1 || f.srv.Requests()[0].Header.Get("Authorization") != "" {
			t.Fatalf("exit %d, %d requests, output:\n%s", code, f.srv.Count(), msg)
		}
	})
}

// buildLoomEval builds the loom-eval binary (which the sandbox re-executes
// as its init helper), needing root as the sandbox does; the tests share
// one build.
func buildLoomEval(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s needs root, and CI runs as root", t.Name())
		}
		t.Skip("needs root")
	}
	return buildShared(t, "loom-eval", "", ".") // once per test binary
}

// envWithoutKeys is this process's environment without any provider key.
func envWithoutKeys() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPENAI_API_KEY=") && !strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") {
			env = append(env, kv)
		}
	}
	return env
}

// runBinary runs bin in dir and returns its stdout, stderr and exit code.
func runBinary(t *testing.T, bin, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), 0
}

// TestRootRunCodingScriptedProviderWithTheDefaultRelativeWorkspacesRunsThePrograms
// is the regression test for the default --workspaces (.loomwork/workspaces,
// relative): the sandbox helper starts in "/", so every run_python used to
// fail with "open workspace .loomwork/workspaces/...: no such file or
// directory" while write_file (on the host) succeeded.
func TestRootRunCodingScriptedProviderWithTheDefaultRelativeWorkspacesRunsThePrograms(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // the built binary in its own folder; sandboxed programs wait
	bin := buildLoomEval(t)
	dir := t.TempDir()
	sol := coding.Solutions()[0] // a task the scripted policy plays
	stdout, stderr, code := runBinary(t, bin, dir, envWithoutKeys(), "run", "--agent", "coding", "--json", "--task", sol.Task, "--journal-out", "plain.jsonl")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var res []runner.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || len(res) != 1 {
		t.Fatalf("output: %v\n%s", err, stdout)
	}
	if r := res[0]; r.ModelLabel != llm.LabelScripted || !slices.Equal(r.Documents, []string{"output:" + sol.Expected}) ||
		!slices.Equal(r.Citations, []string{"output:" + sol.Expected}) {
		t.Fatalf("result = %+v", r)
	}
	// The program ran in the workspace under the invocation's folder.
	if m, _ := filepath.Glob(filepath.Join(dir, ".loomwork", "workspaces", "coding-*", "*.py")); len(m) == 0 {
		t.Fatalf("no program in %s/.loomwork/workspaces", dir)
	}
	// The same run on a warm pool and under a network policy: the
	// sandbox options reach `run` (a bad policy is refused naming it).
	policy := filepath.Join(dir, "egress.json")
	os.WriteFile(policy, []byte(`{"allow":[{"host":"pypi.internal.test","ports":[443]}]}`), 0o644)
	stdout, stderr, code = runBinary(t, bin, dir, envWithoutKeys(), "run", "--agent", "coding", "--json", "--task", sol.Task,
		"--sandbox-pool", "1", "--egress", policy, "--journal", "pooled.db", "--journal-out", "pooled.jsonl")
	if code != ExitOK || !strings.Contains(stdout, "output:"+sol.Expected) {
		t.Fatalf("pooled run under an egress policy: exit %d\n%s\n%s", code, stdout, stderr)
	}
	// Each execution records whether it claimed a warm sandbox: without a
	// pool every one is cold; with one (started with the run, so it fills
	// while the run starts) the first is warm.
	if starts := sandboxStarts(t, filepath.Join(dir, "plain.jsonl")); len(starts) == 0 || slices.Contains(starts, semconv.SandboxStartWarm) || slices.Contains(starts, "") {
		t.Fatalf("run_python starts without a pool: %v, want all cold", starts)
	}
	if starts := sandboxStarts(t, filepath.Join(dir, "pooled.jsonl")); len(starts) == 0 || starts[0] != semconv.SandboxStartWarm || slices.Contains(starts, "") {
		t.Fatalf("run_python starts with --sandbox-pool 1: %v, want the first warm and every one recorded", starts)
	}
	os.WriteFile(policy, []byte(`{"allow":[]}`), 0o644)
	if _, stderr, code = runBinary(t, bin, dir, envWithoutKeys(), "run", "--agent", "coding", "--task", sol.Task, "--egress", policy); code != ExitUsage || !strings.Contains(stderr, "run: --egress") {
		t.Fatalf("a bad egress policy: exit %d\n%s", code, stderr)
	}
}

// TestRootRunLiveProviderCodingAgentRunsTheModelsProgramInTheSandbox runs
// the built loom-eval binary (the sandbox re-executes it as its init helper)
// with the key in its environment: the model writes a program and runs it in
// one turn (two tool calls in one message), then answers citing the output.
func TestRootRunLiveProviderCodingAgentRunsTheModelsProgramInTheSandbox(t *testing.T) {
	testtier.Slow(t)
	t.Parallel() // the built binary in its own folders; sandboxed programs wait
	bin := buildLoomEval(t)
	baseEnv := envWithoutKeys()
	exe := func(t *testing.T, dir string, env []string, args ...string) (string, string, int) {
		t.Helper()
		return runBinary(t, bin, dir, env, args...)
	}

	const task = "Write and run a Python program that prints the 90th Fibonacci number, with F(1) = F(2) = 1."
	const program = "a, b = 1, 1\nfor _ in range(88):\n    a, b = b, a + b\nprint(b)\n"
	const fib90 = "2880067194370816120"
	for _, provider := range []string{"openai", "anthropic"} {
		t.Run(provider, func(t *testing.T) {
			dir := t.TempDir()
			key := "lw-test-key-" + provider + "-61be0d93c4a7f215"
			f := newLiveFake(t, provider, key)
			us := f.usages()[:2]
			write, _ := json.Marshal(map[string]string{"path": "fib.py", "content": program})
			f.srv.Enqueue(
				f.answer("I'll write the program and run it.", []llm.ToolCall{
					{ID: f.callID(1), Name: "write_file", Arguments: write},
					{ID: f.callID(2), Name: "run_python", Arguments: json.RawMessage(`{"path":"fib.py"}`)},
				}, us[0]),
				f.answer("The 90th Fibonacci number is "+fib90+" [output:"+fib90+"].", nil, us[1]),
			)
			runID := "coding-live-" + provider
			stdout, stderr, code := exe(t, dir, append(slices.Clone(baseEnv), f.keyEnv+"="+key),
				"run", "--agent", "coding", "--task", task, "--run-id", runID,
				"--provider", provider, "--model", f.model, "--base-url", f.baseURL,
				"--journal", "runs.db", "--journal-out", "runs.jsonl")
			if code != ExitOK {
				t.Fatalf("run exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			sum := sumUsage(us)
			for _, want := range []string{
				runID + " (agent coding, model label live): 2 steps, 2 model calls (0 reused)",
				fmt.Sprintf("tokens in %d out %d", sum.InputTokens, sum.OutputTokens),
				"retrieved: output:" + fib90, "cited:     output:" + fib90,
			} {
				if !strings.Contains(stdout, want) {
					jb, _ := os.ReadFile(filepath.Join(dir, "runs.jsonl"))
					t.Fatalf("stdout lacks %q:\n%s\n%s", want, stdout, jb)
				}
			}
			// The program's output reached the model as the tool result.
			if reqs := f.srv.Requests(); len(reqs) != 2 || !bytes.Contains(reqs[1].Body, []byte(fib90)) ||
				!bytes.Contains(reqs[1].Body, []byte(f.callID(2))) {
				t.Fatalf("the model was not shown the program's output (%d requests)", len(reqs))
			}
			jsonl := filepath.Join(dir, "runs.jsonl")
			checkLiveJournal(t, readJournalLines(t, jsonl), f, []string{"write_file", "run_python"}, us)

			// Replay with no key in the environment: the program runs again in
			// the sandbox and prints the same thing; the provider is not asked.
			rout, rerr, rcode := exe(t, dir, baseEnv, "replay", "--strict", "--json", "runs.jsonl")
			if rcode != ExitOK {
				t.Fatalf("replay exit %d\n%s\n%s", rcode, rout, rerr)
			}
			var rep replayOutput
			if err := json.Unmarshal([]byte(rout), &rep); err != nil || !rep.OK || len(rep.Reports) != 1 {
				t.Fatalf("replay = %s", rout)
			}
			if p := rep.Reports[0]; p.Label != llm.LabelLive || p.ModelCalls != 0 || p.ToolRuns != 2 || !p.Complete ||
				p.MatchedEvents != p.RecordedEvents || !slices.Contains(p.Documents, "output:"+fib90) {
				t.Fatalf("replay report = %+v", p)
			}
			if f.srv.Count() != 2 {
				t.Fatalf("replay reached the provider: %d requests", f.srv.Count())
			}

			where := journalFiles(t, filepath.Join(dir, "runs.db"))
			jb, _ := os.ReadFile(jsonl)
			where["journal"] = jb
			where["run stdout"], where["run stderr"] = []byte(stdout), []byte(stderr)
			where["replay output"] = []byte(rout + rerr)
			assertNoKey(t, key, where)
		})
	}
}

// sandboxStarts reads a journal's run_python results: how each execution
// started (loomwork.sandbox.start; "" where not recorded), in order.
func sandboxStarts(t *testing.T, path string) []string {
	t.Helper()
	runs, err := journal.ReadJSONLFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range runs {
		for _, e := range r.Events {
			if e.Kind != journal.KindToolResult || e.Tool != "run_python" {
				continue
			}
			var tr journal.ToolResult
			if err := json.Unmarshal(e.Payload, &tr); err != nil {
				t.Fatal(err)
			}
			out = append(out, tr.Attrs[semconv.AttrSandboxStart])
		}
	}
	return out
}
