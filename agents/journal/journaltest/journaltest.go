// Package journaltest is the conformance suite of the journal port
// (journal.Journal): every store runs it — journaldb (SQLite) and
// memjournal (in memory) from their tests — so what the runtime and the
// workflow rely on is checked once, against each implementation. It tests
// what a user of a journal would notice: the order and numbering of
// appended events, runs kept apart, events surviving a reopen (durable
// stores), an effect run once per idempotency key even when called twice
// or concurrently, a failed or cancelled effect leaving nothing behind and
// runnable again.
package journaltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
)

// Suite describes the store under test. The zero value of every optional
// field runs the whole battery except what it names.
type Suite struct {
	// Open opens the journal kept in dir: a new empty directory for each
	// test, or, for the reopen test, the directory of a journal the suite
	// has closed. It closes the journal when the test ends (t.Cleanup); a
	// store without files ignores dir. Required.
	Open func(t *testing.T, dir string) journal.Journal
	// Close closes a journal Open returned, before the reopen test opens
	// its directory again. nil: nothing to close.
	Close func(j journal.Journal) error
	// Durable says events survive Close and a later Open of the same
	// directory. false (an in-memory journal) skips the reopen test.
	Durable bool
}

// Run runs the battery, each check as a subtest.
func (s Suite) Run(t *testing.T) {
	t.Helper()
	if s.Open == nil {
		t.Fatal("journaltest: Suite.Open is required")
	}
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, s Suite)
	}{
		{"AppendNumbersEachRunFromOneAndChains", testAppendOrder},
		{"AppendKeepsWhatWasAsked", testAppendFields},
		{"AppendIsAllOrNothing", testAppendAtomic},
		{"UnknownRunHasNoEvents", testUnknownRun},
		{"RunsAreIsolated", testRunIsolation},
		{"ConcurrentRunsKeepTheirOwnNumbering", testConcurrentRuns},
		{"EventsSurviveReopen", testReopen},
		{"EffectAppendsItsRecord", testEffectAppends},
		{"EffectRunsOncePerKey", testEffectOnce},
		{"EffectRunsOncePerKeyConcurrently", testEffectOnceConcurrent},
		{"FailedEffectRecordsNothingAndCanBeRetried", testEffectFailure},
		{"CancelledContextRecordsNothing", testCancellation},
		{"KeyBelongsToOneRun", testKeyOwnership},
		{"MissingRunIDOrKeyIsRefused", testMissingIDs},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, s) })
	}
}

func (s Suite) open(t *testing.T) journal.Journal {
	t.Helper()
	return s.Open(t, t.TempDir())
}

// rec is a record of kind k at step with a small payload.
func rec(k journal.Kind, step int) journal.Record {
	return journal.Record{Kind: k, Step: step, Payload: map[string]int{"step": step}}
}

func mustAppend(t *testing.T, j journal.Journal, runID string, recs ...journal.Record) []journal.Event {
	t.Helper()
	evs, err := j.Append(context.Background(), runID, recs...)
	if err != nil {
		t.Fatalf("append to run %s: %v", runID, err)
	}
	if len(evs) != len(recs) {
		t.Fatalf("append of %d records to run %s returned %d events", len(recs), runID, len(evs))
	}
	return evs
}

func events(t *testing.T, j journal.Journal, runID string) []journal.Event {
	t.Helper()
	evs, err := j.Events(context.Background(), runID)
	if err != nil {
		t.Fatalf("events of run %s: %v", runID, err)
	}
	return evs
}

// checkRun fails unless evs are a whole run numbered 1..len(evs) with a
// valid hash chain, of the given kinds in order.
func checkRun(t *testing.T, runID string, evs []journal.Event, kinds ...journal.Kind) {
	t.Helper()
	if len(evs) != len(kinds) {
		t.Fatalf("run %s has %d events, want %d (%v)", runID, len(evs), len(kinds), kinds)
	}
	for i, e := range evs {
		if e.RunID != runID || e.Seq != int64(i+1) || e.Kind != kinds[i] {
			t.Fatalf("run %s event %d is run=%s seq=%d kind=%s, want run=%s seq=%d kind=%s", runID, i, e.RunID, e.Seq, e.Kind, runID, i+1, kinds[i])
		}
	}
	if err := journal.VerifyChain(evs); err != nil {
		t.Fatalf("run %s: %v", runID, err)
	}
}

// sameEvents fails unless got and want are the same events (by hash).
func sameEvents(t *testing.T, what string, got, want []journal.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Hash != want[i].Hash {
			t.Fatalf("%s: event %d is seq %d hash %.12s, want seq %d hash %.12s", what, i, got[i].Seq, got[i].Hash, want[i].Seq, want[i].Hash)
		}
	}
}

func testAppendOrder(t *testing.T, s Suite) {
	j := s.open(t)
	a := mustAppend(t, j, "r", rec(journal.KindRunStarted, 0))
	b := mustAppend(t, j, "r", rec(journal.KindModelRequest, 1), rec(journal.KindModelResponse, 1))
	got := events(t, j, "r")
	checkRun(t, "r", got, journal.KindRunStarted, journal.KindModelRequest, journal.KindModelResponse)
	sameEvents(t, "Events after three appends", got, append(a, b...))
	for i, e := range got {
		if want := []int{0, 1, 1}[i]; e.Step != want {
			t.Fatalf("event %d has step %d, want %d", i, e.Step, want)
		}
	}
}

func testAppendFields(t *testing.T, s Suite) {
	j := s.open(t)
	want := journal.Record{Kind: journal.KindToolResult, Step: 3, Tool: "calculator", CallID: "call_1", ArgsHash: "abc", Label: "scripted",
		Payload: journal.ToolResult{Content: "4 <&>", Documents: []string{"doc/1"}}}
	mustAppend(t, j, "r", want)
	got := events(t, j, "r")
	if len(got) != 1 {
		t.Fatalf("run has %d events, want 1", len(got))
	}
	e := got[0]
	if e.Kind != want.Kind || e.Step != want.Step || e.Tool != want.Tool || e.CallID != want.CallID || e.ArgsHash != want.ArgsHash || e.Label != want.Label {
		t.Fatalf("stored %+v, appended %+v", e, want)
	}
	var tr journal.ToolResult
	if err := json.Unmarshal(e.Payload, &tr); err != nil || tr.Content != "4 <&>" || len(tr.Documents) != 1 {
		t.Fatalf("payload %s decodes to %+v (%v)", e.Payload, tr, err)
	}
}

func testAppendAtomic(t *testing.T, s Suite) {
	j := s.open(t)
	mustAppend(t, j, "r", rec(journal.KindRunStarted, 0))
	for name, bad := range map[string]journal.Record{
		"a record without a kind": {},
		"a seal":                  {Kind: journal.KindSeal},
	} {
		if _, err := j.Append(context.Background(), "r", rec(journal.KindModelRequest, 1), bad); err == nil {
			t.Fatalf("a batch holding %s was appended", name)
		}
	}
	checkRun(t, "r", events(t, j, "r"), journal.KindRunStarted)
	mustAppend(t, j, "r", rec(journal.KindModelRequest, 1))
	checkRun(t, "r", events(t, j, "r"), journal.KindRunStarted, journal.KindModelRequest)
}

func testUnknownRun(t *testing.T, s Suite) {
	j := s.open(t)
	mustAppend(t, j, "r", rec(journal.KindRunStarted, 0))
	if evs := events(t, j, "nobody"); len(evs) != 0 {
		t.Fatalf("an unknown run has %d events", len(evs))
	}
}

func testRunIsolation(t *testing.T, s Suite) {
	j := s.open(t)
	mustAppend(t, j, "a", rec(journal.KindRunStarted, 0))
	mustAppend(t, j, "b", rec(journal.KindRunStarted, 0))
	mustAppend(t, j, "a", rec(journal.KindModelRequest, 1))
	mustAppend(t, j, "b", rec(journal.KindModelRequest, 1), rec(journal.KindModelResponse, 1))
	checkRun(t, "a", events(t, j, "a"), journal.KindRunStarted, journal.KindModelRequest)
	checkRun(t, "b", events(t, j, "b"), journal.KindRunStarted, journal.KindModelRequest, journal.KindModelResponse)
}

func testConcurrentRuns(t *testing.T, s Suite) {
	j := s.open(t)
	const runs, appends = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, runs)
	for r := range runs {
		wg.Go(func() {
			for i := range appends {
				if _, err := j.Append(context.Background(), fmt.Sprint("run-", r), rec(journal.KindToolCall, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	kinds := make([]journal.Kind, appends)
	for i := range kinds {
		kinds[i] = journal.KindToolCall
	}
	for r := range runs {
		checkRun(t, fmt.Sprint("run-", r), events(t, j, fmt.Sprint("run-", r)), kinds...)
	}
}

func testReopen(t *testing.T, s Suite) {
	if !s.Durable {
		t.Skip("the store does not outlive its process (Suite.Durable is false)")
	}
	dir := t.TempDir()
	j := s.Open(t, dir)
	mustAppend(t, j, "r", rec(journal.KindRunStarted, 0), rec(journal.KindModelRequest, 1))
	calls := 0
	call := journal.EffectCall{Step: 1, Tool: "t", CallID: "c", Key: "r/durable"}
	want, err := j.AppendEffect(context.Background(), "r", call, counted(&calls, "done"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Close != nil {
		if err := s.Close(j); err != nil {
			t.Fatalf("close: %v", err)
		}
	}
	j = s.Open(t, dir)
	checkRun(t, "r", events(t, j, "r"), journal.KindRunStarted, journal.KindModelRequest, journal.KindToolResult)
	evs := mustAppend(t, j, "r", rec(journal.KindRunFinished, 1))
	if evs[0].Seq != 4 {
		t.Fatalf("the first append after reopening got seq %d, want 4", evs[0].Seq)
	}
	got, err := j.AppendEffect(context.Background(), "r", call, counted(&calls, "again"))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("an effect completed before the reopen ran again after it (%d calls)", calls)
	}
	sameEvents(t, "the effect called again after reopening", got, want)
}

// counted is an effect that counts its calls and completes with a
// tool_result saying content.
func counted(calls *int, content string) journal.EffectFunc {
	return func(_ context.Context, tx journal.EffectTx) (journal.Record, error) {
		*calls++
		return journal.Record{Kind: journal.KindToolResult, Step: 1, Tool: "t", CallID: "c",
			Payload: journal.ToolResult{Content: content, Key: tx.Key()}}, nil
	}
}

func testEffectAppends(t *testing.T, s Suite) {
	j := s.open(t)
	mustAppend(t, j, "r", rec(journal.KindToolCall, 1))
	var seen string
	fn := func(_ context.Context, tx journal.EffectTx) (journal.Record, error) {
		seen = tx.Key()
		return journal.Record{Kind: journal.KindToolResult, Step: 1, Tool: "t", CallID: "c", Payload: journal.ToolResult{Content: "ok"}}, nil
	}
	evs, err := j.AppendEffect(context.Background(), "r", journal.EffectCall{Step: 1, Tool: "t", CallID: "c", Key: "r/k"}, fn)
	if err != nil {
		t.Fatal(err)
	}
	if seen != "r/k" {
		t.Fatalf("the effect saw key %q, want r/k", seen)
	}
	if len(evs) == 0 || evs[len(evs)-1].Kind != journal.KindToolResult || evs[len(evs)-1].Seq != 2 {
		t.Fatalf("AppendEffect returned %+v, want the tool_result last, at seq 2", evs)
	}
	got := events(t, j, "r")
	checkRun(t, "r", got, journal.KindToolCall, journal.KindToolResult)
	sameEvents(t, "Events after the effect", got[1:], evs)
}

func testEffectOnce(t *testing.T, s Suite) {
	j := s.open(t)
	calls := 0
	call := journal.EffectCall{Step: 1, Tool: "t", CallID: "c", Key: "r/once"}
	first, err := j.AppendEffect(context.Background(), "r", call, counted(&calls, "first"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := j.AppendEffect(context.Background(), "r", call, counted(&calls, "second"))
	if err != nil {
		t.Fatalf("calling a completed key again: %v", err)
	}
	if calls != 1 {
		t.Fatalf("the effect ran %d times for one key", calls)
	}
	sameEvents(t, "the second call's answer", second, first)
	checkRun(t, "r", events(t, j, "r"), journal.KindToolResult)
}

func testEffectOnceConcurrent(t *testing.T, s Suite) {
	j := s.open(t)
	const callers = 8
	var calls atomic.Int32
	fn := func(_ context.Context, tx journal.EffectTx) (journal.Record, error) {
		calls.Add(1)
		return journal.Record{Kind: journal.KindToolResult, Payload: journal.ToolResult{Content: "ok", Key: tx.Key()}}, nil
	}
	answers := make([][]journal.Event, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			answers[i], errs[i] = j.AppendEffect(context.Background(), "r", journal.EffectCall{Key: "r/race"}, fn)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
		sameEvents(t, fmt.Sprintf("caller %d's answer", i), answers[i], answers[0])
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d concurrent calls with one key ran the effect %d times", callers, n)
	}
	checkRun(t, "r", events(t, j, "r"), journal.KindToolResult)
}

func testEffectFailure(t *testing.T, s Suite) {
	j := s.open(t)
	refused := errors.New("downstream refused")
	call := journal.EffectCall{Step: 1, Tool: "t", CallID: "c", Key: "r/flaky"}
	_, err := j.AppendEffect(context.Background(), "r", call, func(context.Context, journal.EffectTx) (journal.Record, error) {
		return journal.Record{}, refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("a failing effect returned %v, want its error", err)
	}
	_, err = j.AppendEffect(context.Background(), "r", call, func(context.Context, journal.EffectTx) (journal.Record, error) {
		panic("boom")
	})
	if pe := (*journal.PanicError)(nil); !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("a panicking effect returned %v, want a *journal.PanicError", err)
	}
	if evs := events(t, j, "r"); len(evs) != 0 {
		t.Fatalf("failed effects left %d events", len(evs))
	}
	calls := 0
	if _, err := j.AppendEffect(context.Background(), "r", call, counted(&calls, "ok")); err != nil || calls != 1 {
		t.Fatalf("retrying a failed key: %v (%d calls), want it to run once", err, calls)
	}
	checkRun(t, "r", events(t, j, "r"), journal.KindToolResult)
}

func testCancellation(t *testing.T, s Suite) {
	j := s.open(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.Append(cancelled, "r", rec(journal.KindRunStarted, 0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("append under a cancelled context returned %v, want context.Canceled", err)
	}
	calls := 0
	call := journal.EffectCall{Key: "r/cancel"}
	if _, err := j.AppendEffect(cancelled, "r", call, counted(&calls, "x")); !errors.Is(err, context.Canceled) || calls != 0 {
		t.Fatalf("an effect under a cancelled context returned %v after %d calls, want context.Canceled and none", err, calls)
	}
	// Cancelled while the effect runs: the effect finishes, but its record
	// is not stored, so the call is not complete.
	ctx, cancel := context.WithCancel(context.Background())
	_, err := j.AppendEffect(ctx, "r", call, func(_ context.Context, tx journal.EffectTx) (journal.Record, error) {
		cancel()
		return journal.Record{Kind: journal.KindToolResult, Payload: journal.ToolResult{Content: "late", Key: tx.Key()}}, nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("an effect whose context ended while it ran returned %v, want context.Canceled", err)
	}
	if evs := events(t, j, "r"); len(evs) != 0 {
		t.Fatalf("cancelled appends left %d events", len(evs))
	}
	if _, err := j.AppendEffect(context.Background(), "r", call, counted(&calls, "ok")); err != nil || calls != 1 {
		t.Fatalf("the call after cancellation: %v (%d calls), want it to run once", err, calls)
	}
}

func testKeyOwnership(t *testing.T, s Suite) {
	j := s.open(t)
	calls := 0
	if _, err := j.AppendEffect(context.Background(), "a", journal.EffectCall{Key: "shared"}, counted(&calls, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.AppendEffect(context.Background(), "b", journal.EffectCall{Key: "shared"}, counted(&calls, "b")); err == nil {
		t.Fatal("run b completed a key run a had completed")
	}
	if calls != 1 || len(events(t, j, "b")) != 0 {
		t.Fatalf("the refused call ran (%d calls) or left events in run b", calls)
	}
}

func testMissingIDs(t *testing.T, s Suite) {
	j := s.open(t)
	calls := 0
	if _, err := j.Append(context.Background(), "", rec(journal.KindRunStarted, 0)); err == nil {
		t.Fatal("an append without a run id was accepted")
	}
	if _, err := j.AppendEffect(context.Background(), "", journal.EffectCall{Key: "k"}, counted(&calls, "x")); err == nil {
		t.Fatal("an effect without a run id was accepted")
	}
	if _, err := j.AppendEffect(context.Background(), "r", journal.EffectCall{}, counted(&calls, "x")); err == nil {
		t.Fatal("an effect without an idempotency key was accepted")
	}
	if calls != 0 || len(events(t, j, "r")) != 0 {
		t.Fatalf("refused calls ran (%d) or left events", calls)
	}
}
