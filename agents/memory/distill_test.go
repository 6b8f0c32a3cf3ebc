package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
)

func render(recs []Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "  %-10s salience=%.2f  %s\n", r.Kind, r.Salience, r.Text)
	}
	return b.String()
}

func TestDistillReferenceRetriedWorkflow(t *testing.T) {
	// The reference design's retrying workflow: 7 events, one procedure.
	events := []Event{
		{Step: "diagnose", Kind: "started"}, {Step: "diagnose", Kind: "failed"}, {Step: "diagnose", Kind: "retried"},
		{Step: "diagnose", Kind: "started"}, {Step: "diagnose", Kind: "succeeded"},
		{Step: "report", Kind: "started"}, {Step: "report", Kind: "succeeded"},
	}
	got := Distill(events, "run-42", at(0))
	if want := "  procedural salience=0.90  when diagnose fails, retry the step\n"; render(got) != want {
		t.Fatalf("%d memories from %d events:\n%s", len(got), len(events), render(got))
	}
}

func TestDistillReferenceRichEvents(t *testing.T) {
	events := []Event{
		{Step: "diagnose", Kind: "failed", Detail: map[string]string{"error": "log backend unavailable"}},
		{Step: "diagnose", Kind: "succeeded", Detail: map[string]string{"value": "ok", "remedy": "roll back deploy 812 and retry"}},
		{Step: "report", Kind: "succeeded", Detail: map[string]string{"outcome": "PR 41 opened, awaiting review"}},
		{Step: "approve_deploy", Kind: "approval_required", Detail: map[string]string{"decision": "require_approval"}},
	}
	want := "  procedural salience=0.90  when diagnose fails, roll back deploy 812 and retry\n" +
		"  episodic   salience=0.70  run run-43: report -> PR 41 opened, awaiting review\n" +
		"  semantic   salience=0.85  policy boundary: approve_deploy -> require_approval\n"
	if got := render(Distill(events, "run-43", at(0))); got != want {
		t.Fatalf("got:\n%swant:\n%s", got, want)
	}
}

// TestDistillFromAJournal reads a real journal chain: an agent's failed
// then good tool call, a policy boundary and the finish.
func TestDistillFromAJournal(t *testing.T) {
	recs := []journal.Record{
		{Kind: journal.KindRunStarted, Payload: journal.RunStarted{Agent: "research", Input: "q"}},
		{Kind: journal.KindToolResult, Step: 1, Tool: "read_doc", CallID: "c1", Payload: journal.ToolResult{Content: "no such doc", IsError: true}},
		{Kind: journal.KindToolResult, Step: 2, Tool: "read_doc", CallID: "c2", Payload: journal.ToolResult{Content: "text"}},
		{Kind: journal.KindDecision, Step: 3, Tool: "deploy", CallID: "c3", Payload: map[string]any{"tool": "deploy", "verdict": map[string]any{"decision": "deny"}}},
		{Kind: journal.KindRunFinished, Step: 3, Payload: journal.RunFinished{Answer: "Set retries in config.\nSee [docs/config.md#retries].", Citations: []string{"docs/config.md"}}},
	}
	var events []journal.Event
	var prev *journal.Event
	for i, r := range recs {
		e, err := journal.Next("run-7", prev, r, time.Unix(int64(i), 0))
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
		prev = &events[len(events)-1]
	}
	evs, err := FromJournal(journal.Run{ID: "run-7", Events: events})
	if err != nil {
		t.Fatal(err)
	}
	got := Distill(evs, "run-7", at(0))
	want := "  procedural salience=0.90  when read_doc fails, call read_doc again with corrected arguments\n" +
		"  semantic   salience=0.85  policy boundary: deploy -> deny\n" +
		"  episodic   salience=0.70  run run-7: answer -> task \"q\": Set retries in config. [docs/config.md#retries]\n"
	if render(got) != want {
		t.Fatalf("got:\n%swant:\n%s", render(got), want)
	}
	if got[0].Provenance != "run-7#2,run-7#3" {
		t.Fatalf("provenance %q", got[0].Provenance)
	}
	// Written through the policy, all three are kept.
	s := open(t, "")
	for _, r := range got {
		if o, _, err := s.Write(context.Background(), scope, r); err != nil || o != Written {
			t.Fatalf("%s: %v %v", r.Key, o, err)
		}
	}
}

// DistillRun writes what a finished run yields through the write policy
// and says what became of each record: a run distilled again merges into
// what it wrote the first time instead of adding records.
func TestDistillRunWritesThroughThePolicy(t *testing.T) {
	ctx := context.Background()
	var events []journal.Event
	var prev *journal.Event
	for i, r := range []journal.Record{
		{Kind: journal.KindRunStarted, Payload: journal.RunStarted{Agent: "research", Input: "how do I set retries?"}},
		{Kind: journal.KindToolResult, Step: 1, Tool: "read_doc", CallID: "c1", Payload: journal.ToolResult{Content: "no such doc", IsError: true}},
		{Kind: journal.KindToolResult, Step: 2, Tool: "read_doc", CallID: "c2", Payload: journal.ToolResult{Content: "text"}},
		{Kind: journal.KindRunFinished, Step: 3, Payload: journal.RunFinished{Answer: "Set retries in config [docs/config.md].", Citations: []string{"docs/config.md"}}},
	} {
		e, err := journal.Next("run-9", prev, r, time.Unix(int64(i), 0))
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
		prev = &events[len(events)-1]
	}
	run := journal.Run{ID: "run-9", Events: events}
	s := open(t, "")
	outcomes := func(ds []Distilled) string {
		var b strings.Builder
		for _, d := range ds {
			fmt.Fprintf(&b, "%s %s %.2f %s -> %s %s\n", d.Key, d.Kind, d.Salience, d.Outcome, d.Into, d.Text)
		}
		return b.String()
	}
	first, err := s.DistillRun(ctx, scope, run, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].Kind != Procedural || first[1].Kind != Episodic {
		t.Fatalf("first distillation:\n%s", outcomes(first))
	}
	for _, d := range first {
		if d.Outcome != Written {
			t.Fatalf("first distillation:\n%s", outcomes(first))
		}
	}
	recs, err := s.Records(ctx, scope)
	if err != nil || len(recs) != 2 {
		t.Fatalf("records after the first distillation: %d, %v", len(recs), err)
	}
	again, err := s.DistillRun(ctx, scope, run, at(60))
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range again {
		if d.Outcome != Merged || d.Into != first[i].Key {
			t.Fatalf("distilled again:\n%s", outcomes(again))
		}
	}
	if recs, err := s.Records(ctx, scope); err != nil || len(recs) != 2 {
		t.Fatalf("records after distilling again: %d, %v", len(recs), err)
	}
}
