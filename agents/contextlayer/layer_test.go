package contextlayer

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/internal/testtier"
)

var (
	tokOnce sync.Once
	tokVal  *Tokenizer
	tokErr  error
)

// rawTokenizer is the package's o200k_base Tokenizer, loaded once.
func rawTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tokOnce.Do(func() { tokVal, tokErr = NewTokenizer() })
	if tokErr != nil {
		t.Fatal(tokErr)
	}
	return tokVal
}

// memoCounter is the o200k_base Tokenizer with its counts remembered. A
// count is a pure function of the text, so every number the layer sees is
// the Tokenizer's own; only the repetition is gone. The layer recounts the
// same messages many times per Apply (before, after each stage, in the
// drop-oldest loop), and the BPE's regexp under -race made the measurement
// test alone take 36 s. TestTokenizerCountsKnownO200kTokens checks the
// Tokenizer itself, uncached.
type memoCounter struct {
	tok    *Tokenizer
	counts sync.Map // text -> int
}

func (m *memoCounter) Name() string { return m.tok.Name() }

func (m *memoCounter) Count(text string) int {
	if n, ok := m.counts.Load(text); ok {
		return n.(int)
	}
	n := m.tok.Count(text)
	m.counts.Store(text, n)
	return n
}

var (
	memoOnce sync.Once
	memoVal  *memoCounter
)

// tokenizer is the counter the layer's tests use: o200k_base, memoised.
func tokenizer(t testing.TB) Counter {
	t.Helper()
	tok := rawTokenizer(t)
	memoOnce.Do(func() { memoVal = &memoCounter{tok: tok} })
	return memoVal
}

func TestTokenizerCountsKnownO200kTokens(t *testing.T) {
	tok := rawTokenizer(t)
	// "hello world" is two tokens in every OpenAI BPE.
	if got := tok.Count("hello world"); got != 2 {
		t.Fatalf("Count(hello world) = %d, want 2", got)
	}
	if got := tok.Count(""); got != 0 {
		t.Fatalf("Count(\"\") = %d, want 0", got)
	}
}

func TestEstimateStaysWithinAQuarterOfTheTokenizerOnAgentTraffic(t *testing.T) {
	tok := tokenizer(t)
	run := Synthetic(40, 3, 7)
	real := ConversationTokens(tok, run.Input.System, run.Input.Messages)
	est := ConversationTokens(Estimate{}, run.Input.System, run.Input.Messages)
	ratio := float64(est) / float64(real)
	t.Logf("o200k_base %d tokens, estimate %d (ratio %.3f)", real, est, ratio)
	if ratio < 0.75 || ratio > 1.25 {
		t.Fatalf("estimate off by more than 25%%: %d vs %d", est, real)
	}
}

func TestShrinkKeepsListHeadAndCountsOmittedItemsInValidJSON(t *testing.T) {
	tok := tokenizer(t)
	var rows []string
	for i := 0; i < 50; i++ {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"name":"row number %d with some text"}`, i, i))
	}
	in := `{"query":"x","rows":[` + strings.Join(rows, ",") + `]}`
	out, cut := ShrinkText(tok, in, 120, ShrinkLimits{ListHead: 3})
	if !cut {
		t.Fatal("expected the payload to be shrunk")
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("shrunk payload is not valid JSON: %v\n%s", err, out)
	}
	list := v["rows"].([]any)
	last := list[len(list)-1].(map[string]any)
	kept := len(list) - 1
	if got := int(last[OmittedItemsKey].(float64)); got != 50-kept {
		t.Fatalf("_omitted_items = %d, want %d (kept %d)", got, 50-kept, kept)
	}
	if first := list[0].(map[string]any); first["id"].(float64) != 0 {
		t.Fatalf("head of the list not kept: %v", first)
	}
	if !strings.HasPrefix(out, `{"query":"x","rows":`) {
		t.Fatalf("key order not preserved: %s", out[:40])
	}
	if n := tok.Count(out); n > 120 {
		t.Fatalf("shrunk to %d tokens, limit 120", n)
	}
}

func TestShrinkLongStringKeepsHeadAndTailAroundAMarker(t *testing.T) {
	tok := tokenizer(t)
	long := "BEGIN " + strings.Repeat("lorem ipsum dolor sit amet ", 400) + " END"
	in, _ := json.Marshal(map[string]string{"log": long})
	out, cut := ShrinkText(tok, string(in), 150, ShrinkLimits{})
	if !cut {
		t.Fatal("expected a cut")
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	s := v["log"]
	if !strings.HasPrefix(s, "BEGIN") || !strings.HasSuffix(s, "END") || !strings.Contains(s, "chars omitted]") {
		t.Fatalf("want head, marker and tail; got %q", s)
	}
	// Plain text too.
	outPlain, _ := ShrinkText(tok, long, 100, ShrinkLimits{})
	if !strings.HasPrefix(outPlain, "BEGIN") || !strings.HasSuffix(outPlain, "END") || tok.Count(outPlain) > 100 {
		t.Fatalf("plain text shrink: %d tokens: %.80q", tok.Count(outPlain), outPlain)
	}
}

func TestPinsAreCollectedBeforeShrinkingSoADeepIdentifierSurvives(t *testing.T) {
	tok := tokenizer(t)
	run := Synthetic(40, 3, 1)
	for _, strategy := range []string{"shrink", "shrink+summarise"} {
		cfg, _ := Preset(strategy, 4000)
		l, err := New(cfg, tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := l.Apply(context.Background(), run.Input)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(flatten(out), run.Identifier) {
			t.Fatalf("%s: expected the identifier to be lost without pins (the test would prove nothing otherwise)", strategy)
		}
	}
	cfg, _ := Preset("shrink+summarise+pins", 4000)
	l, _ := New(cfg, tok, nil)
	out, err := l.Apply(context.Background(), run.Input)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(flatten(out), run.Identifier) {
		t.Fatal("pinned identifier lost")
	}
	if len(out.Report.PinsRestored) == 0 || out.Report.PinsRestored[0].Value != run.Identifier || out.Report.PinsRestored[0].Source != "tool:call_03" {
		t.Fatalf("pin report = %+v, want %s from tool:call_03", out.Report.PinsRestored, run.Identifier)
	}
	if out.Report.TokensAfter > 4000 {
		t.Fatalf("over budget: %d", out.Report.TokensAfter)
	}
}

func TestExplicitPinsFromTaskAndToolWinOverPatternPins(t *testing.T) {
	tok := tokenizer(t)
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "do it"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "fetch", Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: `{"data":[` + strings.Repeat(`{"x":"filler text here"},`, 200) + `{"x":1}],"_pin":["build 7731 green"]}`},
		{Role: llm.RoleAssistant, Content: "ok"},
		{Role: llm.RoleUser, Content: "continue"},
	}
	l, _ := New(Config{Budget: 300, Shrink: true, Summarize: true, Pin: true, MaxPinTokens: 40}, tok, nil)
	out, err := l.Apply(context.Background(), Input{Messages: msgs, Pins: []string{"customer ACME-991"}})
	if err != nil {
		t.Fatal(err)
	}
	text := flatten(out)
	for _, want := range []string{"build 7731 green", "customer ACME-991"} {
		if !strings.Contains(text, want) {
			t.Errorf("explicit pin %q lost:\n%s", want, text)
		}
	}
}

// anthropicOrderError converts messages to Anthropic turns (tool results fold
// into the next user turn) and applies Anthropic's rule: each tool_result
// must answer a tool_use of the immediately preceding assistant turn.
func anthropicOrderError(msgs []llm.Message) error {
	type turn struct {
		role    string
		uses    map[string]bool
		results []string
	}
	var turns []turn
	for _, m := range msgs {
		role := "user"
		if m.Role == llm.RoleAssistant {
			role = "assistant"
		}
		if len(turns) == 0 || turns[len(turns)-1].role != role {
			turns = append(turns, turn{role: role, uses: map[string]bool{}})
		}
		tr := &turns[len(turns)-1]
		for _, tc := range m.ToolCalls {
			tr.uses[tc.ID] = true
		}
		if m.Role == llm.RoleTool {
			tr.results = append(tr.results, m.ToolCallID)
		}
	}
	for i, tr := range turns {
		for _, id := range tr.results {
			if i == 0 || !turns[i-1].uses[id] {
				return fmt.Errorf("turn %d: tool_result %s without tool_use in the previous turn", i, id)
			}
		}
	}
	return nil
}

func TestCompactedRequestsKeepBothProvidersToolOrderingRules(t *testing.T) {
	tok := Estimate{} // the rule does not depend on the counter; the estimate keeps -race fast
	rng := rand.New(rand.NewPCG(3, 4))
	// Every trial runs every strategy; the suite runs the first 20 of the
	// long tier's 60 random conversations (same seed, so the same 20).
	for trial := 0; trial < testtier.Pick(20, 60); trial++ {
		// Turns with 1–3 parallel tool calls and results of random size.
		msgs := []llm.Message{{Role: llm.RoleUser, Content: "task"}}
		for s := 0; s < 12; s++ {
			n := 1 + rng.IntN(3)
			var calls []llm.ToolCall
			for k := 0; k < n; k++ {
				calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("c%d_%d", s, k), Name: "t", Arguments: json.RawMessage(`{"k":1}`)})
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: "thinking", ToolCalls: calls})
			for _, c := range calls {
				msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Content: strings.Repeat("data ", 20+rng.IntN(300))})
			}
		}
		for _, strategy := range StrategyNames() {
			budget := 300 + rng.IntN(2500)
			cfg, _ := Preset(strategy, budget)
			cfg.RecentShare = 0.2 + 0.6*rng.Float64()
			l, err := New(cfg, tok, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := l.Apply(context.Background(), Input{Messages: msgs})
			if err != nil {
				t.Fatalf("trial %d %s budget %d: %v", trial, strategy, budget, err)
			}
			if err := llm.ValidateOrder(out.Messages); err != nil {
				t.Fatalf("trial %d %s: OpenAI rule: %v", trial, strategy, err)
			}
			if err := anthropicOrderError(out.Messages); err != nil {
				t.Fatalf("trial %d %s: Anthropic rule: %v", trial, strategy, err)
			}
		}
	}
}

func TestRecentWindowMovesBackToTheAssistantTurnThatMadeTheCalls(t *testing.T) {
	tok := tokenizer(t)
	big := strings.Repeat("word ", 300)
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "task"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "t", Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleTool, ToolCallID: "a", Content: big},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "b1", Name: "t", Arguments: json.RawMessage(`{}`)}, {ID: "b2", Name: "t", Arguments: json.RawMessage(`{}`)}}},
		{Role: llm.RoleTool, ToolCallID: "b1", Content: big},
		{Role: llm.RoleTool, ToolCallID: "b2", Content: "small"},
	}
	// The window budget fits only the last tool result: the boundary must
	// move back to the assistant turn with calls b1, b2.
	l, _ := New(Config{Budget: 500, Summarize: true, RecentShare: 0.05}, tok, nil)
	out, err := l.Apply(context.Background(), Input{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if out.Report.Summary == nil {
		t.Fatal("expected a summary")
	}
	// task, summary, then the verbatim window opens on the assistant turn.
	if out.Messages[2].Role != llm.RoleAssistant || out.Messages[2].ToolCalls[0].ID != "b1" {
		t.Fatalf("window opens on %+v, want the assistant turn with b1", out.Messages[2])
	}
	if s := out.Report.Summary; s.FromIndex != 1 || s.ToIndex != 2 || strings.Join(s.ToolCallIDs, ",") != "a" {
		t.Fatalf("summary provenance = %+v, want messages 1–2 with call a", s)
	}
	if !strings.HasPrefix(out.Messages[1].Content, SummaryPrefix) || !strings.Contains(out.Messages[1].Content, "tool calls a") {
		t.Fatalf("summary message lacks its provenance: %q", out.Messages[1].Content)
	}
}

type recordingModel struct {
	reqs  []llm.Request
	reply string
	label string
}

func (m *recordingModel) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	m.reqs = append(m.reqs, req)
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: m.reply}, Label: m.label, Provider: "scripted"}, nil
}

func TestModelSummaryIsUsedWhenConfiguredAndLabelledWhenScripted(t *testing.T) {
	tok := tokenizer(t)
	run := Synthetic(20, 3, 2)
	model := &recordingModel{reply: "Checked 20 shards; shard 3 row 12 cites INC-40721.", label: llm.LabelScripted}
	l, _ := New(Config{Budget: 3000, Shrink: true, Summarize: true}, tok, ModelSummarizer{Model: model})
	out, err := l.Apply(context.Background(), run.Input)
	if err != nil {
		t.Fatal(err)
	}
	if len(model.reqs) != 1 {
		t.Fatalf("model called %d times, want 1", len(model.reqs))
	}
	if len(model.reqs[0].Tools) != 0 || llm.ValidateOrder(model.reqs[0].Messages) != nil {
		t.Fatal("summary request must carry no tools and be well ordered")
	}
	if out.Report.Summary == nil || out.Report.Summary.By != "model" {
		t.Fatalf("summary report = %+v", out.Report.Summary)
	}
	if !strings.Contains(flatten(out), "(scripted summary) Checked 20 shards") {
		t.Fatal("scripted summary not labelled as scripted in the context")
	}
}

func TestConfigValidateNamesTheBadKey(t *testing.T) {
	err := Config{Budget: 0, RecentShare: 1.5}.Validate()
	if err == nil || !strings.Contains(err.Error(), "budget must be a positive") || !strings.Contains(err.Error(), "recent_share") {
		t.Fatalf("Validate() = %v", err)
	}
	if _, err := Preset("nope", 10); err == nil || !strings.Contains(err.Error(), `unknown context strategy "nope"`) {
		t.Fatalf("Preset(nope) = %v", err)
	}
}

func TestMeasurementShowsOnlyPinningKeepsBothAtFourThousandTokens(t *testing.T) {
	tok := tokenizer(t)
	run := Synthetic(40, 3, 1)
	rows, err := Measure(context.Background(), tok, run, StrategyNames(), []int{4000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]MeasureRow{}
	for _, r := range rows {
		by[r.Strategy] = r
		if r.TokensUsed > r.Budget {
			t.Errorf("%s used %d tokens over its %d budget", r.Strategy, r.TokensUsed, r.Budget)
		}
	}
	if r := by["truncate"]; r.IdentifierRetained || r.HistoryRetained > 0.2 {
		t.Errorf("truncate: %+v, want the identifier lost and most history gone", r)
	}
	if r := by["shrink+summarise"]; r.IdentifierRetained || r.HistoryRetained < 0.9 {
		t.Errorf("shrink+summarise: %+v, want history kept and identifier lost", r)
	}
	if r := by["shrink+summarise+pins"]; !r.IdentifierRetained || r.HistoryRetained < 0.9 || r.PinTokens == 0 || r.PinTokens > 60 {
		t.Errorf("shrink+summarise+pins: %+v, want both kept for a few dozen tokens", r)
	}
}

func FuzzShrinkTextKeepsJSONValid(f *testing.F) {
	f.Add(`{"a":[1,2,3,4,5,6,7,8],"b":"`+strings.Repeat("x", 500)+`"}`, 20)
	f.Add(`[[[[1]]],{"k":null,"z":true}]`, 3)
	f.Add(`not json at all `+strings.Repeat("y ", 300), 10)
	f.Add(`{"_pin":"A-12","n":1.5e300}`, 1)
	tok := Estimate{}
	f.Fuzz(func(t *testing.T, in string, limit int) {
		if limit < 1 || limit > 10000 {
			return
		}
		out, _ := ShrinkText(tok, in, limit, ShrinkLimits{})
		if json.Valid([]byte(in)) && !json.Valid([]byte(out)) {
			t.Fatalf("valid JSON in, invalid out:\nin  %q\nout %q", in, out)
		}
	})
}
