package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Harness describes one backend to the suite.
type Harness struct {
	// Open returns a new, EMPTY, started store (fresh file / fresh
	// database). The suite shuts it down.
	Open func(t *testing.T) store.Store
	// Reopen, if set, opens the same data as an earlier Open (the most recent
	// one) after that store was shut down (restart semantics: everything
	// acknowledged must be there exactly once). The suite shuts it down.
	Reopen func(t *testing.T) store.Store
	// New, if set, returns a new store for EMPTY data that is constructed
	// but not started (the backend's New); it must have a Start method
	// (see Starter). The lifecycle test starts and shuts it down.
	New func(t *testing.T) store.Store
	// Eventually: how long reads may lag writes (0 = read-your-writes).
	Eventually time.Duration
	Skip       Capabilities // opt-outs; the zero value runs the whole battery
	// Parallel runs RunAll's subtests at once (t.Parallel). Set it when
	// Open, Reopen and New share nothing between subtests: each Open a
	// fresh file or database, and Reopen's "most recent Open" kept per
	// top-level subtest (t.Name() up to its second "/"), not in one
	// variable. Every subtest has its own store, so only the harness can
	// make this unsafe.
	Parallel bool
}

// Capabilities lists features a backend may opt out of. Each field set to
// true skips the subtests that need that feature; the zero value runs the
// whole battery. An opt-out is a documented limitation of the backend, not a
// way to hide a failing test.
type Capabilities struct {
	// ConcurrentWriters skips the test that writes from several goroutines at
	// once.
	ConcurrentWriters bool
	// ContextCancellation skips the checks that a cancelled context makes
	// every call fail.
	ContextCancellation bool
	// TextSearch skips the TraceQuery.Text filter tests.
	TextSearch bool
}

// RunAll runs the whole conformance battery against the backend h describes.
// Subtests run one after the other (Reopen refers to the latest Open).
func RunAll(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	s := &suite{h: h}
	for _, tc := range s.tests() {
		t.Run(tc.name, func(t *testing.T) {
			if h.Parallel {
				t.Parallel()
			}
			if tc.skip {
				t.Skip("backend opted out (Harness.Skip, or no Harness.Reopen or Harness.New)")
			}
			tc.run(t)
		})
	}
}

type suite struct {
	h Harness
}

type testCase struct {
	name string
	skip bool
	run  func(t *testing.T)
}

func (s *suite) tests() []testCase {
	return []testCase{
		{name: "RoundTripKeepsEveryField", run: s.testRoundTrip},
		{name: "SummariesFollowTheBillingRule", run: s.testBillingRule},
		{name: "GetTraceOrdersByStartThenSpanID", run: s.testGetTraceOrder},
		{name: "GetTraceUnknownIsErrNotFound", run: s.testGetTraceUnknown},
		{name: "GetTraceInvalidIDIsErrBadTraceID", run: s.testGetTraceInvalidID},
		{name: "ResolveTraceIDFindsFullIDsAndUniquePrefixes", run: s.testResolveTraceID},
		{name: "WriteRejectsUnstorableSpansAndStoresNothing", run: s.testWriteInvalidIDs},
		{name: "WriteEmptyBatchIsNoop", run: s.testWriteEmpty},
		{name: "RewriteSameBatchKeepsOneCopy", run: s.testRewrite},
		{name: "OverlappingBatchesKeepOneCopy", run: s.testOverlapping},
		{name: "SpansOfOneTraceAcrossBatchesOutOfOrder", run: s.testOutOfOrder},
		{name: "SummaryTokensCountModelCallsOnly", run: s.testTokenSums},
		{name: "StartBoundsUseTheTraceStartAcrossDays", run: s.testStartAcrossDays},
		{name: "ListTracesFilters", run: s.testFilters},
		{name: "ListTracesSortAndPaginate", run: s.testSortAndPaginate},
		{name: "ListTracesDefaultPageSize", run: s.testDefaultPageSize},
		{name: "ListTracesMalformedPageTokenIsError", run: s.testBadPageToken},
		{name: "ListTracesInvalidQueryIsError", run: s.testInvalidQuery},
		{name: "ListTracesSearch", run: s.testSearch},
		{name: "ListTracesSearchAcrossDays", run: s.testSearchAcrossDays},
		{name: "ListSessions", run: s.testSessions},
		{name: "Experiments", run: s.testExperiments},
		{name: "ConcurrentWritersEachSpanOnce", skip: s.h.Skip.ConcurrentWriters, run: s.testConcurrentWriters},
		{name: "ReopenKeepsEverythingExactlyOnce", skip: s.h.Reopen == nil, run: s.testReopen},
		{name: "CanceledContextIsError", skip: s.h.Skip.ContextCancellation, run: s.testCanceled},
		{name: "PreparedBatchesWrittenTogetherKeepOneCopy", run: s.testPreparedBatches},
		{name: "LifecycleStartShutdown", skip: s.h.New == nil, run: s.testLifecycle},
		{name: "WindowReadsAgreeWithGetTrace", run: s.testWindow},
	}
}

// open opens a fresh store and registers its Shutdown.
func (s *suite) open(t *testing.T) store.Store {
	t.Helper()
	return s.track(t, s.h.Open(t))
}

func (s *suite) track(t *testing.T, st store.Store) store.Store {
	t.Helper()
	if st == nil {
		t.Fatal("harness returned a nil store")
	}
	t.Cleanup(func() {
		if err := st.Shutdown(store.WithDefaultProject(context.Background())); err != nil {
			t.Errorf("shut down store: %v", err)
		}
	})
	return st
}

// write writes spans in batches of size (all at once when size <= 0) and
// records them in m.
func write(t *testing.T, st store.Store, m *refModel, spans []store.Span, size int) {
	t.Helper()
	if size <= 0 {
		size = len(spans)
	}
	for i := 0; i < len(spans); i += size {
		batch := spans[i:min(i+size, len(spans))]
		if err := st.WriteSpans(store.WithDefaultProject(context.Background()), batch); err != nil {
			t.Fatalf("WriteSpans(spans[%d:%d]): %v", i, i+len(batch), err)
		}
		if m != nil {
			m.add(batch...)
		}
	}
}

// eventually runs check until it returns "" or Harness.Eventually passes,
// then fails with check's last description.
func (s *suite) eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(s.h.Eventually)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s:\n%s", what, msg)
		}
		time.Sleep(min(100*time.Millisecond, s.h.Eventually/10+time.Millisecond))
	}
}

// checkTraces checks that GetTrace returns exactly the model's spans for
// every trace in m.
func (s *suite) checkTraces(t *testing.T, st store.Store, m *refModel) {
	t.Helper()
	for _, id := range m.traceIDs() {
		want := m.trace(id)
		s.eventually(t, "GetTrace("+id+") differs (want = spans written)", func() string {
			got, err := st.GetTrace(store.WithDefaultProject(context.Background()), id)
			if err != nil {
				return fmt.Sprintf("GetTrace: %v", err)
			}
			return diffSpans(want, got)
		})
	}
	// A list row carries call groups; the calls themselves are read
	// through store.CallReader (both backends have it), and are exactly
	// the billed calls the groups sum.
	cr, ok := st.(store.CallReader)
	if !ok {
		t.Errorf("%T does not implement store.CallReader", st)
		return
	}
	for _, rt := range m.summaries() {
		s.eventually(t, "TraceCalls("+rt.sum.TraceID+") differs from the billed calls", func() string {
			got, err := cr.TraceCalls(store.WithDefaultProject(context.Background()), rt.sum.TraceID)
			if err != nil {
				return fmt.Sprintf("TraceCalls: %v", err)
			}
			if len(got) != len(rt.calls) {
				return fmt.Sprintf("got %d calls, want %d", len(got), len(rt.calls))
			}
			var b strings.Builder
			for i := range got {
				diffValue(&b, fmt.Sprintf("call[%d]", i), reflect.ValueOf(rt.calls[i]), reflect.ValueOf(normCall(got[i])))
			}
			return b.String()
		})
	}
}

// normCall is c with its start in UTC.
func normCall(c store.Call) store.Call {
	c.Start = normTime(c.Start)
	return c
}

// listAll walks every page of q. It reports duplicates across pages, pages
// larger than the limit, and a next token on an empty page.
func listAll(st store.Store, q store.TraceQuery) ([]store.TraceSummary, int, error) {
	limit := q.Limit
	if limit == 0 {
		limit = store.DefaultPageSize
	}
	seen := map[string]int{}
	var all []store.TraceSummary
	pages := 0
	for {
		pages++
		if pages > 10000 {
			return nil, pages, errors.New("more than 10000 pages: the page token does not advance")
		}
		p, err := st.ListTraces(store.WithDefaultProject(context.Background()), q)
		if err != nil {
			return nil, pages, fmt.Errorf("ListTraces page %d: %w", pages, err)
		}
		if len(p.Traces) > limit {
			return nil, pages, fmt.Errorf("page %d has %d traces, limit is %d", pages, len(p.Traces), limit)
		}
		for _, tr := range p.Traces {
			if prev, dup := seen[tr.TraceID]; dup {
				return nil, pages, fmt.Errorf("trace %s on page %d was already on page %d", tr.TraceID, pages, prev)
			}
			seen[tr.TraceID] = pages
		}
		all = append(all, p.Traces...)
		if p.NextPageToken == "" {
			return all, pages, nil
		}
		if len(p.Traces) == 0 {
			return nil, pages, fmt.Errorf("page %d is empty but has a next page token", pages)
		}
		q.PageToken = p.NextPageToken
	}
}

// checkList checks that walking every page of q gives exactly the model's
// answer, in order, with equal summaries.
func (s *suite) checkList(t *testing.T, st store.Store, m *refModel, q store.TraceQuery) {
	t.Helper()
	want := m.expect(q)
	s.eventually(t, fmt.Sprintf("ListTraces(%s) differs from the reference model", describeQuery(q)), func() string {
		got, _, err := listAll(st, q)
		if err != nil {
			return err.Error()
		}
		return diffSummaries(want, got)
	})
}

func describeQuery(q store.TraceQuery) string {
	var parts []string
	add := func(k string, v any) { parts = append(parts, fmt.Sprintf("%s=%v", k, v)) }
	if !q.Start.IsZero() {
		add("start", q.Start.Format(time.RFC3339Nano))
	}
	if !q.End.IsZero() {
		add("end", q.End.Format(time.RFC3339Nano))
	}
	for _, kv := range []struct{ k, v string }{{"service", q.Service}, {"agent", q.Agent}, {"model", q.Model}, {"status", q.Status}, {"text", q.Text}, {"sort", q.SortBy}} {
		if kv.v != "" {
			add(kv.k, fmt.Sprintf("%q", kv.v))
		}
	}
	if q.MinDuration != 0 {
		add("min_duration", q.MinDuration)
	}
	if q.Ascending {
		add("ascending", true)
	}
	if q.Limit != 0 {
		add("limit", q.Limit)
	}
	return strings.Join(parts, " ")
}

func fixtureTrace(spans []store.Span, traceID string) []store.Span {
	var out []store.Span
	for _, sp := range spans {
		if sp.TraceID == traceID {
			out = append(out, sp)
		}
	}
	return out
}

// Trace ids in testdata/agent_traces.json.
const (
	fxResearch = "4bf92f3577b34da6a3ce929d0e0e4736" // every field and attribute type
	fxCoding   = "b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6" // failing tool, error root
	fxPipeline = "c0ffee00c0ffee00c0ffee00c0ffee01" // embeddings + text_completion, unicode name
	fxPartial  = "d00d0000000000000000000000000d01" // no root span
)

// testBillingRule writes the shapes whose summaries views used to disagree
// on, each trace's spans in several batches with children before their
// parents, and checks the summaries against figures computed by hand (not
// only against the model) and the tokens order.
func (s *suite) testBillingRule(t *testing.T) {
	st := s.open(t)
	t0 := time.Date(2026, 4, 2, 9, 0, 0, 0, time.UTC)
	span := func(trace, id, parent, name string, fromMS, toMS int) store.Span {
		return store.Span{TraceID: trace, SpanID: id, ParentSpanID: parent, Name: name, Kind: "internal",
			StartTime: t0.Add(time.Duration(fromMS) * time.Millisecond), EndTime: t0.Add(time.Duration(toMS) * time.Millisecond),
			StatusCode: store.StatusUnset, ServiceName: "svc"}
	}
	usage := func(sp store.Span, op string, in, out int64) store.Span {
		sp.Operation, sp.HasUsage, sp.InputTokens, sp.OutputTokens = op, true, in, out
		return sp
	}
	const (
		nested  = "a0000000000000000000000000000001" // an LLM span inside an LLM span, both 1000/100
		noOp    = "a0000000000000000000000000000002" // usage 100/20, no operation
		async   = "a0000000000000000000000000000003" // a child outliving its root
		heavier = "a0000000000000000000000000000004" // one real call of 1500/150
	)
	batches := [][]store.Span{
		{usage(span(nested, "00000000000000c1", "00000000000000b1", "openai.chat", 20, 880), semconv.OpChat, 1000, 100)},
		{usage(span(nested, "00000000000000b1", "00000000000000a1", "ChatOpenAI", 10, 900), semconv.OpChat, 1000, 100),
			usage(span(noOp, "00000000000000b2", "00000000000000a2", "llm step", 10, 90), "", 100, 20),
			span(async, "00000000000000b3", "00000000000000a3", "send telemetry", 100, 700)},
		{span(nested, "00000000000000a1", "", "chain", 0, 1000), span(noOp, "00000000000000a2", "", "agent", 0, 100),
			span(async, "00000000000000a3", "", "handle", 0, 500),
			span(heavier, "00000000000000a4", "", "agent", 0, 100), usage(span(heavier, "00000000000000b4", "00000000000000a4", "chat", 10, 90), semconv.OpChat, 1500, 150)},
	}
	for _, b := range batches {
		write(t, st, nil, b, 0)
	}
	want := map[string]struct {
		calls, in, out int64
		dur, after     time.Duration
	}{
		nested:  {1, 1000, 100, time.Second, 0},
		noOp:    {1, 100, 20, 100 * time.Millisecond, 0},
		async:   {0, 0, 0, 700 * time.Millisecond, 200 * time.Millisecond},
		heavier: {1, 1500, 150, 100 * time.Millisecond, 0},
	}
	s.eventually(t, "summaries do not follow the billing rule", func() string {
		got, _, err := listAll(st, store.TraceQuery{SortBy: store.SortTokens})
		if err != nil {
			return err.Error()
		}
		var ids []string
		var problems []string
		for _, ts := range got {
			ids = append(ids, ts.TraceID)
			w := want[ts.TraceID]
			if ts.ModelCalls != w.calls || ts.InputTokens != w.in || ts.OutputTokens != w.out || ts.Duration != w.dur || ts.AfterRoot != w.after {
				problems = append(problems, fmt.Sprintf("%s: calls %d tokens %d/%d duration %v after root %v; want %d, %d/%d, %v, %v",
					ts.TraceID, ts.ModelCalls, ts.InputTokens, ts.OutputTokens, ts.Duration, ts.AfterRoot, w.calls, w.in, w.out, w.dur, w.after))
			}
		}
		if wantOrder := []string{heavier, nested, noOp, async}; !slices.Equal(ids, wantOrder) {
			problems = append(problems, fmt.Sprintf("sort=tokens gives %v, want %v", ids, wantOrder))
		}
		return strings.Join(problems, "\n")
	})
}

func (s *suite) testRoundTrip(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	write(t, st, m, loadFixture(t, "agent_traces.json"), 0)
	s.checkTraces(t, st, m)
	s.checkList(t, st, m, store.TraceQuery{})
}

func (s *suite) testGetTraceOrder(t *testing.T) {
	st := s.open(t)
	base := loadFixture(t, "agent_traces.json")[0]
	at := time.Date(2026, 2, 11, 12, 0, 0, 5, time.UTC)
	mk := func(spanID string, start time.Time) store.Span {
		sp := base
		sp.TraceID = "0123456789abcdef0123456789abcdef"
		sp.SpanID = spanID
		sp.ParentSpanID = ""
		sp.StartTime, sp.EndTime = start, start.Add(time.Second)
		return sp
	}
	// Written out of order; three share a start time.
	spans := []store.Span{
		mk("00000000000000c3", at),
		mk("ff00000000000001", at.Add(-time.Nanosecond)),
		mk("00000000000000a1", at),
		mk("00000000000000b2", at),
		mk("0000000000000001", at.Add(time.Nanosecond)),
	}
	m := newRefModel()
	write(t, st, m, spans, 2)
	got, err := st.GetTrace(store.WithDefaultProject(context.Background()), spans[0].TraceID)
	s.eventually(t, "GetTrace order", func() string {
		got, err = st.GetTrace(store.WithDefaultProject(context.Background()), spans[0].TraceID)
		if err != nil {
			return err.Error()
		}
		var ids []string
		for _, sp := range got {
			ids = append(ids, sp.SpanID)
		}
		want := "ff00000000000001 00000000000000a1 00000000000000b2 00000000000000c3 0000000000000001"
		if strings.Join(ids, " ") != want {
			return fmt.Sprintf("span order\n  want %s\n  got  %s", want, strings.Join(ids, " "))
		}
		return ""
	})
}

func (s *suite) testGetTraceUnknown(t *testing.T) {
	st := s.open(t)
	write(t, st, nil, loadFixture(t, "agent_traces.json"), 0)
	_, err := st.GetTrace(store.WithDefaultProject(context.Background()), "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTrace(unknown id): got error %v, want one wrapping store.ErrNotFound", err)
	}
}

func (s *suite) testGetTraceInvalidID(t *testing.T) {
	st := s.open(t)
	write(t, st, nil, loadFixture(t, "agent_traces.json"), 0)
	for _, id := range []string{
		"",
		"xyz",
		strings.ToUpper(fxResearch),        // ids are lower-case hex
		fxResearch[:31],                    // too short
		fxResearch + "0",                   // too long
		"4bf92f3577b34da6a3ce929d0e0e473g", // not hex
		"4bf92f35-77b3-4da6-a3ce-929d0e0e",
		"' OR 1=1 --",
	} {
		spans, err := st.GetTrace(store.WithDefaultProject(context.Background()), id)
		if err == nil {
			t.Errorf("GetTrace(%q) = %d spans, nil error; want an invalid-id error", id, len(spans))
			continue
		}
		if !errors.Is(err, store.ErrBadTraceID) || errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetTrace(%q): got %v, want an error wrapping store.ErrBadTraceID (and not ErrNotFound)", id, err)
		}
		if !strings.Contains(err.Error(), strconv.Quote(id)) {
			t.Errorf("GetTrace(%q): error %q does not name the id", id, err)
		}
	}
}

// Trace ids of testResolveTraceID: two share their first 31 digits, a third
// shares only 7 with them; the last two sit at the ends of the id range.
const (
	resolveA    = "5eed5eed0123456789abcdef00000001"
	resolveB    = "5eed5eed0123456789abcdef00000002"
	resolveC    = "5eed5eee00000000000000000000000c"
	resolveLow  = "00000000000000000000000000000001"
	resolveHigh = "ffffffffffffffffffffffffffffffff"
)

func (s *suite) testResolveTraceID(t *testing.T) {
	st := s.open(t)
	fixture := loadFixture(t, "agent_traces.json")
	spans := append([]store.Span(nil), fixture...)
	for i, id := range []string{resolveA, resolveB, resolveC, resolveLow, resolveHigh} {
		sp := fixture[0]
		sp.TraceID, sp.SpanID, sp.ParentSpanID = id, fmt.Sprintf("%016x", 0x5eed00+i), ""
		spans = append(spans, sp)
	}
	write(t, st, nil, spans, 0)
	ctx := store.WithDefaultProject(context.Background())
	s.eventually(t, "ResolveTraceID of a written trace", func() string {
		got, err := st.ResolveTraceID(ctx, resolveC)
		if err != nil || got != resolveC {
			return fmt.Sprintf("ResolveTraceID(%s) = %q, %v", resolveC, got, err)
		}
		return ""
	})

	t.Run("AFullIDOrAUniquePrefixResolvesToTheFullID", func(t *testing.T) {
		for in, want := range map[string]string{
			resolveA:                       resolveA,
			strings.ToUpper(resolveB):      resolveB, // upper case is accepted and lower-cased
			fxResearch:                     fxResearch,
			fxResearch[:8]:                 fxResearch,
			"5eed5eee":                     resolveC, // shares 7 digits with A and B
			"5EED5EEE0":                    resolveC, // an odd number of digits
			resolveB[:31] + "2":            resolveB,
			"00000000":                     resolveLow,  // the lowest possible bound
			"ffffffff":                     resolveHigh, // the highest possible bound
			strings.ToUpper(fxCoding)[:12]: fxCoding,
		} {
			got, err := st.ResolveTraceID(ctx, in)
			if err != nil || got != want {
				t.Errorf("ResolveTraceID(%q) = %q, %v; want %s", in, got, err, want)
			}
		}
	})
	t.Run("APrefixOfSeveralTracesIsErrAmbiguousTraceIDListingThem", func(t *testing.T) {
		for _, in := range []string{"5eed5eed", resolveA[:31], "5EED5EED0123"} {
			got, err := st.ResolveTraceID(ctx, in)
			if !errors.Is(err, store.ErrAmbiguousTraceID) {
				t.Errorf("ResolveTraceID(%q) = %q, %v; want an error wrapping store.ErrAmbiguousTraceID", in, got, err)
				continue
			}
			if msg := err.Error(); !strings.Contains(msg, strconv.Quote(in)) || !strings.Contains(msg, resolveA) || !strings.Contains(msg, resolveB) || strings.Contains(msg, resolveC) {
				t.Errorf("ResolveTraceID(%q): error %q should name the prefix and list %s and %s only", in, msg, resolveA, resolveB)
			}
		}
	})
	t.Run("AnIDOrPrefixNoTraceHasIsErrNotFound", func(t *testing.T) {
		for _, in := range []string{"5eed5eef", "5eed5eed0123456789abcdef00000003", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "0000000000000000000000000000000a"} {
			got, err := st.ResolveTraceID(ctx, in)
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("ResolveTraceID(%q) = %q, %v; want an error wrapping store.ErrNotFound", in, got, err)
				continue
			}
			if !strings.Contains(err.Error(), strconv.Quote(in)) {
				t.Errorf("ResolveTraceID(%q): error %q does not name the input", in, err)
			}
		}
	})
	t.Run("AMalformedIDOrPrefixIsErrBadTraceID", func(t *testing.T) {
		for _, in := range []string{
			"",
			"5eed5ee",        // 7 digits: shorter than the list shows
			resolveA + "0",   // 33 digits
			"5eed5eeg",       // not hex
			"5eed-5eed-0123", // not hex
			" 5eed5eed",      // not trimmed for the caller
			"' OR 1=1 --",
			"5eed5eed%",
			strings.Repeat("0", 32), // the all-zero id is never valid
		} {
			got, err := st.ResolveTraceID(ctx, in)
			if !errors.Is(err, store.ErrBadTraceID) || errors.Is(err, store.ErrNotFound) {
				t.Errorf("ResolveTraceID(%q) = %q, %v; want an error wrapping store.ErrBadTraceID", in, got, err)
				continue
			}
			if !strings.Contains(err.Error(), strconv.Quote(in)) {
				t.Errorf("ResolveTraceID(%q): error %q does not name the input", in, err)
			}
		}
	})
}

func (s *suite) testWriteInvalidIDs(t *testing.T) {
	st := s.open(t)
	good := fixtureTrace(loadFixture(t, "agent_traces.json"), fxCoding)
	cases := []struct {
		name string
		edit func(sp *store.Span)
	}{
		{"EmptyTraceID", func(sp *store.Span) { sp.TraceID = "" }},
		{"UpperCaseTraceID", func(sp *store.Span) { sp.TraceID = strings.ToUpper(sp.TraceID) }},
		{"ShortTraceID", func(sp *store.Span) { sp.TraceID = sp.TraceID[:30] }},
		{"ZeroTraceID", func(sp *store.Span) { sp.TraceID = strings.Repeat("0", 32) }},
		{"NonHexSpanID", func(sp *store.Span) { sp.SpanID = "zz00000000000001" }},
		{"EmptySpanID", func(sp *store.Span) { sp.SpanID = "" }},
		{"ZeroSpanID", func(sp *store.Span) { sp.SpanID = strings.Repeat("0", 16) }},
		{"LongSpanID", func(sp *store.Span) { sp.SpanID += "00" }},
		{"BadParentSpanID", func(sp *store.Span) { sp.ParentSpanID = "not-hex-parent!!" }},
		// store.CheckStorable's other refusals: every store keeps the one
		// rule (issue 36: SQLite stored a start of 2^64−1 ns).
		{"StartAtMaxInt64", func(sp *store.Span) { sp.StartTime = time.Unix(0, math.MaxInt64).UTC() }},
		{"EndBefore1900", func(sp *store.Span) { sp.EndTime = time.Date(1899, 12, 31, 0, 0, 0, 0, time.UTC) }},
		{"AttributeTooDeep", func(sp *store.Span) {
			sp.Attributes = store.Attributes{"deep": nestedValue(store.MaxAttributeDepth + 1)}
		}},
		{"EventAttributeTooDeep", func(sp *store.Span) {
			sp.Events = []store.Event{{Name: "e", Time: sp.StartTime, Attributes: store.Attributes{"deep": nestedValue(40)}}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			batch := append([]store.Span(nil), good...)
			bad := batch[len(batch)-1]
			c.edit(&bad)
			batch[len(batch)-1] = bad
			if store.CheckStorable(&bad) == nil {
				t.Fatalf("store.CheckStorable accepts the span (%s) this case expects every store to refuse", c.name)
			}
			if err := st.WriteSpans(store.WithDefaultProject(context.Background()), batch); err == nil {
				t.Fatalf("WriteSpans with an unstorable span (%s): nil error", c.name)
			}
		})
	}
	// The deepest value the rule allows is stored and read back whole.
	t.Run("AttributeAtMaxDepthRoundTrips", func(t *testing.T) {
		st := s.open(t)
		ctx := store.WithDefaultProject(context.Background())
		spans := GenerateTraces(1, 1, 36)
		spans[0].Attributes = store.Attributes{"deep": nestedValue(store.MaxAttributeDepth)}
		if err := store.CheckStorable(&spans[0]); err != nil {
			t.Fatalf("CheckStorable at MaxAttributeDepth: %v", err)
		}
		if err := st.WriteSpans(ctx, spans); err != nil {
			t.Fatalf("WriteSpans at MaxAttributeDepth: %v", err)
		}
		if s.h.Eventually > 0 {
			time.Sleep(s.h.Eventually)
		}
		got, err := st.GetTrace(ctx, spans[0].TraceID)
		if err != nil || len(got) != 1 {
			t.Fatalf("GetTrace: %d spans, %v", len(got), err)
		}
		if d := diffSpans(spans, got); d != "" {
			t.Errorf("the span with a value %d maps deep reads back otherwise:\n%s", store.MaxAttributeDepth, d)
		}
	})
	// The valid spans of the rejected batches must not have been stored
	// either: the caller was told the batch failed.
	if s.h.Eventually > 0 {
		time.Sleep(s.h.Eventually)
	}
	if _, err := st.GetTrace(store.WithDefaultProject(context.Background()), fxCoding); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after only rejected batches, GetTrace(%s): got %v, want ErrNotFound", fxCoding, err)
	}
}

// nestedValue is maps nested depth deep around a string.
func nestedValue(depth int) any {
	var v any = "leaf"
	for range depth {
		v = map[string]any{"k": v}
	}
	return v
}

func (s *suite) testWriteEmpty(t *testing.T) {
	st := s.open(t)
	if err := st.WriteSpans(store.WithDefaultProject(context.Background()), nil); err != nil {
		t.Fatalf("WriteSpans(nil): %v", err)
	}
	if err := st.WriteSpans(store.WithDefaultProject(context.Background()), []store.Span{}); err != nil {
		t.Fatalf("WriteSpans(empty): %v", err)
	}
	page, err := st.ListTraces(store.WithDefaultProject(context.Background()), store.TraceQuery{})
	if err != nil {
		t.Fatalf("ListTraces on an empty store: %v", err)
	}
	if len(page.Traces) != 0 || page.NextPageToken != "" {
		t.Fatalf("ListTraces on an empty store: %d traces, token %q; want none", len(page.Traces), page.NextPageToken)
	}
}

func (s *suite) testRewrite(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	spans := append(loadFixture(t, "agent_traces.json"), GenerateTraces(5, 8, 3)...)
	write(t, st, m, spans, 0)
	s.checkList(t, st, m, store.TraceQuery{})
	// A retried batch (same spans, same batch) and a retry split differently.
	write(t, st, m, spans, 0)
	write(t, st, m, spans, 7)
	s.checkTraces(t, st, m)
	s.checkList(t, st, m, store.TraceQuery{})
}

func (s *suite) testOverlapping(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	spans := append(loadFixture(t, "agent_traces.json"), GenerateTraces(4, 10, 5)...)
	n := len(spans)
	write(t, st, m, spans[:n/2], 0)
	write(t, st, m, spans[n/3:3*n/4], 0)
	write(t, st, m, spans[n/2:], 0)
	// One batch repeating a span inside itself.
	write(t, st, m, append(spans[:3:3], spans[0], spans[1]), 0)
	s.checkTraces(t, st, m)
	s.checkList(t, st, m, store.TraceQuery{})
}

func (s *suite) testOutOfOrder(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	tr := fixtureTrace(loadFixture(t, "agent_traces.json"), fxResearch)
	// tr[0] is the root. Children arrive first, newest first, in separate
	// batches; until the root arrives the summary has no root name and the
	// service of the earliest span that did arrive.
	byName := func(id string) store.Span {
		for _, sp := range tr {
			if sp.SpanID == id {
				return sp
			}
		}
		t.Fatalf("fixture span %s missing", id)
		return store.Span{}
	}
	steps := [][]string{
		{"4d5e6f708192a3b4"},                     // last chat
		{"3c4d5e6f708192a3"},                     // retrieval, the earliest so far (service retrieval-svc)
		{"2b3c4d5e6f708192", "00f067aa0ba902b7"}, // tool, root
		{"1a2b3c4d5e6f7081"},                     // first chat
	}
	for i, ids := range steps {
		var batch []store.Span
		for _, id := range ids {
			batch = append(batch, byName(id))
		}
		write(t, st, m, batch, 0)
		want := m.expect(store.TraceQuery{})
		if i == 1 && (want[0].RootName != "" || want[0].ServiceName != "retrieval-svc") {
			t.Fatalf("reference model: before the root, want no root name and service retrieval-svc, got %+v", want[0])
		}
		if i == 2 && (want[0].RootName != "invoke_agent research-agent" || want[0].ServiceName != "agent-api") {
			t.Fatalf("reference model: after the root, want its name and service, got %+v", want[0])
		}
		s.checkList(t, st, m, store.TraceQuery{})
	}
	s.checkTraces(t, st, m)
	if got := m.expect(store.TraceQuery{})[0]; got.SpanCount != 5 {
		t.Fatalf("reference model: %d spans, want 5", got.SpanCount)
	}
}

// A trace's start is its earliest span's, even when its spans arrive in
// separate writes on either side of midnight (stores may keep per-day
// partitions of per-batch rows): a start bound after midnight must not list
// a trace that began before it.
func (s *suite) testStartAcrossDays(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	midnight := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	span := func(trace, id, parent, name string, start time.Time) store.Span {
		return store.Span{
			TraceID: trace, SpanID: id, ParentSpanID: parent, Name: name, Kind: "internal",
			StartTime: start, EndTime: start.Add(5 * time.Second), StatusCode: store.StatusOK,
			ServiceName: "night-svc",
		}
	}
	early := "0af7651916cd43dd8448eb211c80319c"
	late := "1bf7651916cd43dd8448eb211c80319d"
	write(t, st, m, []store.Span{span(early, "00f067aa0ba902b7", "", "invoke_agent nightly", midnight.Add(-10*time.Second))}, 0)
	write(t, st, m, []store.Span{span(early, "00f067aa0ba902b8", "00f067aa0ba902b7", "chat", midnight.Add(10*time.Second))}, 0)
	write(t, st, m, []store.Span{span(late, "00f067aa0ba902b9", "", "invoke_agent morning", midnight.Add(20*time.Second))}, 0)
	for _, q := range []store.TraceQuery{
		{Start: midnight},
		{End: midnight},
		{Start: midnight.Add(-time.Hour), End: midnight.Add(time.Hour), SortBy: store.SortDuration},
	} {
		if len(m.expect(q)) != 1 && q.SortBy == "" {
			t.Fatalf("reference model: %s lists %d traces, want 1", describeQuery(q), len(m.expect(q)))
		}
		s.checkList(t, st, m, q)
	}
}

func (s *suite) testTokenSums(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	write(t, st, m, loadFixture(t, "agent_traces.json"), 0)
	want := map[string]store.TraceSummary{
		// The root repeats its children's usage (3300/420): counting it
		// would double the sums.
		fxResearch: {InputTokens: 3300, OutputTokens: 420, CacheReadTokens: 400, CacheCreationTokens: 100, ReasoningTokens: 30, ModelCalls: 2, ToolCalls: 1, SpanCount: 5},
		fxCoding:   {InputTokens: 5000, OutputTokens: 800, CacheReadTokens: 4000, ModelCalls: 2, ToolCalls: 1, SpanCount: 4, ErrorCount: 2},
		// embeddings and text_completion are model calls too.
		fxPipeline: {InputTokens: 964, OutputTokens: 120, ReasoningTokens: 64, ModelCalls: 2, SpanCount: 3},
		fxPartial:  {InputTokens: 10, OutputTokens: 5, ModelCalls: 1, ToolCalls: 1, SpanCount: 2},
	}
	s.eventually(t, "token sums and counts", func() string {
		got, _, err := listAll(st, store.TraceQuery{})
		if err != nil {
			return err.Error()
		}
		var b strings.Builder
		for _, g := range got {
			w, ok := want[g.TraceID]
			if !ok {
				fmt.Fprintf(&b, "unexpected trace %s\n", g.TraceID)
				continue
			}
			type counts struct{ In, Out, CacheRead, CacheCreate, Reasoning, Model, Tool, Spans, Errors int64 }
			wc := counts{w.InputTokens, w.OutputTokens, w.CacheReadTokens, w.CacheCreationTokens, w.ReasoningTokens, w.ModelCalls, w.ToolCalls, w.SpanCount, w.ErrorCount}
			gc := counts{g.InputTokens, g.OutputTokens, g.CacheReadTokens, g.CacheCreationTokens, g.ReasoningTokens, g.ModelCalls, g.ToolCalls, g.SpanCount, g.ErrorCount}
			if wc != gc {
				fmt.Fprintf(&b, "trace %s:\n  want %+v\n  got  %+v\n", g.TraceID, wc, gc)
			}
		}
		if len(got) != len(want) {
			fmt.Fprintf(&b, "%d traces listed, want %d\n", len(got), len(want))
		}
		return b.String()
	})
}

// filterData writes the fixtures plus generated traces and returns the
// model.
func (s *suite) filterData(t *testing.T, st store.Store) *refModel {
	m := newRefModel()
	write(t, st, m, loadFixture(t, "agent_traces.json"), 0)
	write(t, st, m, GenerateTraces(40, 6, 11), 64)
	return m
}

func (s *suite) testFilters(t *testing.T) {
	st := s.open(t)
	m := s.filterData(t, st)
	all := m.expect(store.TraceQuery{})
	mid := all[len(all)/2].Start
	later := all[len(all)/4].Start
	fixtureDay := time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		q    store.TraceQuery
		text bool // needs text search
		none bool // matches no trace
	}{
		{name: "None", q: store.TraceQuery{}},
		{name: "StartInclusive", q: store.TraceQuery{Start: mid}},
		{name: "EndExclusive", q: store.TraceQuery{End: mid}},
		{name: "StartAndEnd", q: store.TraceQuery{Start: mid, End: later}},
		{name: "FixtureDayOnly", q: store.TraceQuery{Start: fixtureDay, End: fixtureDay.Add(24 * time.Hour)}},
		{name: "ServiceOfRoot", q: store.TraceQuery{Service: "agent-worker"}},
		{name: "ServiceOfAnyChildSpan", q: store.TraceQuery{Service: "retrieval-svc"}},
		{name: "AgentOfChildSpan", q: store.TraceQuery{Agent: "triage-agent"}},
		{name: "RequestModel", q: store.TraceQuery{Model: "claude-sonnet-4-5"}},
		{name: "ResponseModel", q: store.TraceQuery{Model: "gpt-4o-2024-08-06"}},
		{name: "StatusOK", q: store.TraceQuery{Status: store.StatusOK}},
		{name: "StatusError", q: store.TraceQuery{Status: store.StatusError}},
		{name: "MinDuration", q: store.TraceQuery{MinDuration: 12 * time.Second}},
		{name: "MinDurationExactBoundary", q: store.TraceQuery{MinDuration: 30 * time.Second}}, // fxCoding lasts exactly 30s
		{name: "TextCaseInsensitive", q: store.TraceQuery{Text: "WEB_search"}, text: true},
		{name: "TextUnicodeCaseInsensitive", q: store.TraceQuery{Text: "RÉSUMÉ"}, text: true},
		{name: "TextMatchesChildSpanName", q: store.TraceQuery{Text: "fetch_url"}, text: true},
		{name: "TextPercentIsLiteral", q: store.TraceQuery{Text: "%"}, text: true, none: true},
		{name: "TextUnderscoreIsLiteral", q: store.TraceQuery{Text: "H_U"}, text: true}, // fetc(h_u)rl
		{name: "ServiceStatusAndDuration", q: store.TraceQuery{Service: "agent-api", Status: store.StatusOK, MinDuration: 5 * time.Second}},
		{name: "AgentModelAndTime", q: store.TraceQuery{Agent: "research-agent", Model: "gpt-4o", Start: fixtureDay}},
		{name: "AllFiltersAtOnce", q: store.TraceQuery{Start: fixtureDay, End: fixtureDay.Add(30 * 24 * time.Hour), Service: "agent-worker", Agent: "coding-agent", Model: "claude-sonnet-4-5", Status: store.StatusError, MinDuration: time.Second, Text: "RUN_TESTS"}, text: true},
		{name: "NoMatch", q: store.TraceQuery{Agent: "nobody"}, none: true},
		{name: "FilterAndSortAndPage", q: store.TraceQuery{Status: store.StatusOK, SortBy: store.SortTokens, Limit: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.text && s.h.Skip.TextSearch {
				t.Skip("backend opted out of text search")
			}
			// Guard the fixtures: a filter case must select a proper subset.
			switch want := m.expect(c.q); {
			case c.none && len(want) > 0:
				t.Fatalf("fixture problem: %s should match nothing, matches %d", c.name, len(want))
			case !c.none && len(want) == 0:
				t.Fatalf("fixture problem: %s matches nothing in the reference model", c.name)
			case c.name != "None" && len(want) == len(all):
				t.Fatalf("fixture problem: %s matches every trace", c.name)
			}
			s.checkList(t, st, m, c.q)
		})
	}
}

func (s *suite) testSortAndPaginate(t *testing.T) {
	st := s.open(t)
	m := s.filterData(t, st)
	for _, key := range []string{store.SortStart, store.SortDuration, store.SortSpans, store.SortErrors, store.SortTokens} {
		for _, asc := range []bool{false, true} {
			name := key + "/desc"
			if asc {
				name = key + "/asc"
			}
			t.Run(name, func(t *testing.T) {
				q := store.TraceQuery{SortBy: key, Ascending: asc, Limit: 7}
				s.checkList(t, st, m, q)
				_, pages, err := listAll(st, q)
				if err != nil {
					t.Fatal(err)
				}
				if pages <= 2 {
					t.Fatalf("walked %d pages; the test needs more than 2", pages)
				}
			})
		}
	}
	t.Run("DefaultSortIsNewestFirst", func(t *testing.T) {
		got, _, err := listAll(st, store.TraceQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Start.After(got[i-1].Start) {
				t.Fatalf("trace %d (%s) starts after trace %d (%s) in the default order", i, got[i].Start, i-1, got[i-1].Start)
			}
		}
	})
}

func (s *suite) testDefaultPageSize(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	write(t, st, m, GenerateTraces(store.DefaultPageSize+7, 2, 21), 100)
	s.eventually(t, "first page with the zero query", func() string {
		p, err := st.ListTraces(store.WithDefaultProject(context.Background()), store.TraceQuery{})
		if err != nil {
			return err.Error()
		}
		if len(p.Traces) != store.DefaultPageSize || p.NextPageToken == "" {
			return fmt.Sprintf("got %d traces and token %q; want %d and a token", len(p.Traces), p.NextPageToken, store.DefaultPageSize)
		}
		return ""
	})
	s.checkList(t, st, m, store.TraceQuery{})
	s.checkList(t, st, m, store.TraceQuery{Limit: 1})
}

func (s *suite) testBadPageToken(t *testing.T) {
	st := s.open(t)
	m := s.filterData(t, st)
	_ = m
	var valid string
	s.eventually(t, "a first page with a next token", func() string {
		p, err := st.ListTraces(store.WithDefaultProject(context.Background()), store.TraceQuery{Limit: 3})
		if err != nil {
			return err.Error()
		}
		if p.NextPageToken == "" {
			return "no next page token for a 3-trace page of a bigger store"
		}
		valid = p.NextPageToken
		return ""
	})
	for _, tok := range []string{
		"not a token",
		"%%%%",
		"AAAA",
		"////////////////////////////////////////////////",
		valid[:len(valid)/2],
		strings.Repeat("A", 10000),
		"\x00\xff",
	} {
		p, err := st.ListTraces(store.WithDefaultProject(context.Background()), store.TraceQuery{Limit: 3, PageToken: tok})
		if !errors.Is(err, store.ErrBadPageToken) {
			t.Errorf("ListTraces(page_token=%.40q): %d traces and error %v; want an error wrapping store.ErrBadPageToken", tok, len(p.Traces), err)
		}
	}
}

func (s *suite) testInvalidQuery(t *testing.T) {
	st := s.open(t)
	write(t, st, nil, loadFixture(t, "agent_traces.json"), 0)
	for _, q := range []store.TraceQuery{
		{SortBy: "bogus"},
		{Status: "maybe"},
		{Limit: -1},
		{MinDuration: -time.Second},
	} {
		if _, err := st.ListTraces(store.WithDefaultProject(context.Background()), q); err == nil {
			t.Errorf("ListTraces(%s): nil error; want an error naming the bad field", describeQuery(q))
		}
	}
}

func (s *suite) testConcurrentWriters(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	shared := GenerateTraces(6, 5, 999)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		own := GenerateTraces(15, 7, int64(100+w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every writer also writes the shared traces, split differently.
			spans := append(append([]store.Span(nil), own...), shared...)
			size := 13 + 8*w
			for i := 0; i < len(spans); i += size {
				batch := spans[i:min(i+size, len(spans))]
				if err := st.WriteSpans(store.WithDefaultProject(context.Background()), batch); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
				mu.Lock()
				m.add(batch...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.checkTraces(t, st, m)
	s.checkList(t, st, m, store.TraceQuery{})
}

func (s *suite) testReopen(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	spans := append(loadFixture(t, "agent_traces.json"), GenerateTraces(20, 6, 31)...)
	write(t, st, m, spans, 50)
	if err := st.Shutdown(store.WithDefaultProject(context.Background())); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	st2 := s.track(t, s.h.Reopen(t))
	s.checkTraces(t, st2, m)
	s.checkList(t, st2, m, store.TraceQuery{})
	// Retried after the restart: still one copy, summaries unchanged.
	write(t, st2, m, spans[:77], 0)
	more := GenerateTraces(3, 4, 32)
	write(t, st2, m, more, 0)
	s.checkTraces(t, st2, m)
	s.checkList(t, st2, m, store.TraceQuery{})
}

func (s *suite) testCanceled(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	spans := loadFixture(t, "agent_traces.json")
	ctx, cancel := context.WithCancel(store.WithDefaultProject(context.Background()))
	cancel()
	if err := st.WriteSpans(ctx, spans); err == nil {
		t.Error("WriteSpans with a cancelled context: nil error")
	}
	// Whatever a cancelled write did, a retry leaves exactly one copy.
	write(t, st, m, spans, 0)
	if _, err := st.GetTrace(ctx, fxResearch); err == nil {
		t.Error("GetTrace with a cancelled context: nil error")
	}
	if _, err := st.ListTraces(ctx, store.TraceQuery{}); err == nil {
		t.Error("ListTraces with a cancelled context: nil error")
	}
	if _, err := st.ResolveTraceID(ctx, fxResearch[:8]); err == nil {
		t.Error("ResolveTraceID with a cancelled context: nil error")
	}
	s.checkTraces(t, st, m)
	s.checkList(t, st, m, store.TraceQuery{})
}
