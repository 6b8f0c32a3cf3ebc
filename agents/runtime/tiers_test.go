package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/runtimetest"
	"github.com/loomwork/loomwork/internal/testtier"
)

func tierSpec() *runtime.ContextSpec {
	return &runtime.ContextSpec{Strategy: "shrink+summarise+pins", Tiers: &runtime.TierSpec{
		Window: 3000, Reserve: 500,
		Floors: map[string]int{"memory": 60, "tool_output": 900, "history": 300},
		Evidence: []runtime.TierDoc{
			{ID: "runbook:logs", Text: "Incident ids look like INC-NNNNN and appear in escalation rows.", Provenance: []string{"docs/runbook.md#ids"}, Relevance: 0.9},
			{ID: "runbook:noise", Text: strings.Repeat("Worker timings are noise for this task. ", 400), Provenance: []string{"docs/runbook.md#timings"}, Relevance: 0.2},
		},
		Memory: []runtime.TierDoc{
			{ID: "ep-run-41-answer", Text: "run run-41: answer -> the last incident was escalated on page 3", Provenance: []string{"memory:acme/log-reader/logs", "run-41#9"}, Relevance: 0.8},
		},
	}}
}

func TestTieredRequestsStayInTheWindowAndAreJournaledAndTraced(t *testing.T) {
	testtier.Slow(t) // the layer counts every request with o200k_base, CPU-heavy under -race
	t.Parallel()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	spec := tierSpec()
	m := &runtimetest.StepModel{Pages: 6}
	j := openJournal(t, "")
	res, err := contextRuntime(t, m, j, tp, spec).Run(ctx, runtimetest.LogAgent(), runtime.Task{RunID: "tier-1", Input: "Find the incident id in the logs."})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "The incident is INC-40721." {
		t.Fatalf("answer %q", res.Answer)
	}
	tok, err := contextlayer.NewTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range m.Seen {
		if n := contextlayer.ConversationTokens(tok, req.System, req.Messages); n > 2500 {
			t.Errorf("request %d counts %d tokens, over window - reserve = 2500", i+1, n)
		}
		if err := llm.ValidateOrder(req.Messages); err != nil {
			t.Errorf("request %d breaks the tool ordering rule: %v", i+1, err)
		}
		// The recalled memory is sent with its provenance.
		if !strings.Contains(req.System, "[ep-run-41-answer · memory:acme/log-reader/logs, run-41#9]") {
			t.Fatalf("request %d: memory not in the prompt:\n%s", i+1, req.System)
		}
	}
	evs, _ := j.Events(ctx, "tier-1")
	var reports []journal.TierReport
	for _, e := range evs {
		if e.Kind != journal.KindModelRequest {
			continue
		}
		var p journal.ModelRequest
		if err := json.Unmarshal(e.Payload, &p); err != nil || p.Context == nil || p.Context.Tiers == nil {
			t.Fatalf("model_request seq %d has no tier report (%v)", e.Seq, err)
		}
		if err := contextlayer.CheckReport(*p.Context.Tiers); err != nil {
			t.Fatalf("seq %d: %v", e.Seq, err)
		}
		reports = append(reports, *p.Context.Tiers)
	}
	last := reports[len(reports)-1]
	decided := map[string]string{}
	for _, d := range last.Items {
		decided[d.ID] = d.Action
	}
	if decided["instructions"] != "kept" || decided["runbook:logs"] != "kept" || decided["ep-run-41-answer"] != "kept" {
		t.Fatalf("last request's decisions: %v", decided)
	}
	if decided["runbook:noise"] == "kept" {
		t.Fatalf("the low-relevance runbook section was kept whole under pressure: %v", decided)
	}
	var chat sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "chat") {
			chat = s
		}
	}
	a := attrs(chat)
	if a["loomwork.context.tiers.window"].AsInt64() != 3000 || a["loomwork.context.tiers.used"].AsInt64() != int64(last.Used) ||
		a["loomwork.context.tiers.weakest_id"].AsString() != last.WeakestID ||
		strings.Join(a["loomwork.context.tiers.memory_ids"].AsStringSlice(), ",") != "ep-run-41-answer" {
		t.Fatalf("chat span tier attributes: %v", a)
	}

	// Resuming the finished run rebuilds every request identically.
	m2 := &runtimetest.StepModel{Pages: 6}
	got, err := contextRuntime(t, m2, j, nil, spec).Run(ctx, runtimetest.LogAgent(), runtime.Task{RunID: "tier-1", Input: "Find the incident id in the logs."})
	if err != nil || m2.Calls.Load() != 0 || got.Answer != res.Answer {
		t.Fatalf("resume: err %v, %d model calls, answer %q", err, m2.Calls.Load(), got.Answer)
	}
}

func TestTierSpecValidationNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		tiers  runtime.TierSpec
		budget int
		want   string
	}{
		{runtime.TierSpec{Window: 100, Reserve: 100}, 0, "context.tiers"},
		{runtime.TierSpec{Window: 100, Floors: map[string]int{"notes": 1}}, 0, "context.tiers.floors"},
		{runtime.TierSpec{Window: 100, Memory: []runtime.TierDoc{{ID: "a"}, {ID: "a"}}}, 0, "duplicate"},
		{runtime.TierSpec{Window: 100, Reserve: 10}, 50, "context.budget"},
	} {
		spec := &runtime.ContextSpec{Strategy: "shrink", Budget: tc.budget, Tiers: &tc.tiers}
		_, err := runtime.New(runtime.Config{Model: &runtimetest.StepModel{}, Journal: openJournal(t, ""), Context: spec})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want it to name %s", tc.tiers, err, tc.want)
		}
	}
}
