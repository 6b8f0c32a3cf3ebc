package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// AwkwardTrace returns one trace (id traceID) shaped to trip a windowed
// reader: two roots, spans whose parent never arrives (one flagged
// remote), a parent cycle (A→B→A), a span naming itself, a parent with
// many children (several pages at small limits), children starting at the
// same instant (ordered by span id), a child wholly outside its parent and
// one reaching past it, one ending before it starts, billed calls, an
// aggregate whose usage repeats its child's, and an explicit cost. The
// spans come shuffled by seed; a writer may also send some twice.
func AwkwardTrace(traceID string, seed uint64) []store.Span {
	t0 := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	id := func(prefix byte, n int) string { return fmt.Sprintf("%c%015x", prefix, n+1) }
	sp := func(spanID, parent, name string, start, end time.Duration) store.Span {
		return store.Span{TraceID: traceID, SpanID: spanID, ParentSpanID: parent, Name: name, Kind: "internal",
			StartTime: t0.Add(start), EndTime: t0.Add(end), StatusCode: store.StatusOK, ServiceName: "awkward",
			Flags: store.FlagSampled | store.FlagHasIsRemote, Attributes: store.Attributes{"step": name}}
	}
	root := sp(id('a', 0), "", "invoke_agent root", 0, 10*time.Second)
	root.Operation = semconv.OpInvokeAgent
	root2 := sp(id('a', 1), "", "second root", 12*time.Second, 13*time.Second)
	fan := sp(id('b', 0), root.SpanID, "fan out", time.Second, 9*time.Second)
	spans := []store.Span{root, root2, fan}
	for k := range 23 {
		// Pairs start at the same instant: span id breaks the tie.
		c := sp(id('c', 22-k), fan.SpanID, fmt.Sprintf("step %02d", k), time.Second+time.Duration(k/2)*300*time.Millisecond,
			time.Second+time.Duration(k/2+1)*300*time.Millisecond)
		switch k % 3 {
		case 0:
			c.Name, c.Operation, c.RequestModel, c.ResponseModel = "chat gpt-4o", semconv.OpChat, "gpt-4o", "gpt-4o-2024-08-06"
			c.HasUsage, c.InputTokens, c.OutputTokens, c.CacheReadTokens = true, 1000+int64(k), 200, 100
		case 1:
			c.Name, c.Operation, c.ToolName = "execute_tool search", semconv.OpExecuteTool, "search"
		default:
			c.StatusCode, c.StatusMessage = store.StatusError, "tool failed: timeout"
		}
		spans = append(spans, c)
	}
	// An aggregate: usage of its own, repeated by its child.
	agg := sp(id('d', 0), root.SpanID, "llm wrapper", 9*time.Second, 9500*time.Millisecond)
	agg.HasUsage, agg.InputTokens, agg.OutputTokens, agg.RequestModel = true, 50, 5, "claude-sonnet-4-5"
	inner := sp(id('d', 1), agg.SpanID, "chat claude", 9100*time.Millisecond, 9400*time.Millisecond)
	inner.Operation, inner.HasUsage, inner.InputTokens, inner.OutputTokens, inner.RequestModel = semconv.OpChat, true, 50, 5, "claude-sonnet-4-5"
	cost := 0.25
	priced := sp(id('d', 2), root.SpanID, "priced call", 9600*time.Millisecond, 9700*time.Millisecond)
	priced.Operation, priced.CostUSD = semconv.OpChat, &cost
	// Outside the parent, reaching past it, ending before starting.
	detached := sp(id('e', 0), fan.SpanID, "after the fan", 9500*time.Millisecond, 9800*time.Millisecond)
	clipped := sp(id('e', 1), agg.SpanID, "past the wrapper", 9300*time.Millisecond, 11*time.Second)
	inverted := sp(id('e', 2), root.SpanID, "inverted", 5*time.Second, 4*time.Second)
	// Parents that never arrive, one of them another process's.
	orphan := sp(id('f', 0), id('9', 0), "orphan", 2*time.Second, 3*time.Second)
	remote := sp(id('f', 1), id('9', 1), "remote child", 14*time.Second, 15*time.Second)
	remote.Flags |= store.FlagIsRemote
	orphanKid := sp(id('f', 2), orphan.SpanID, "orphan's child", 2100*time.Millisecond, 2900*time.Millisecond)
	// A parent cycle and a span naming itself.
	cycA := sp(id('0', 0), id('0', 1), "cycle a", 16*time.Second, 17*time.Second)
	cycB := sp(id('0', 1), id('0', 0), "cycle b", 16500*time.Millisecond, 16700*time.Millisecond)
	self := sp(id('1', 0), id('1', 0), "names itself", 18*time.Second, 19*time.Second)
	spans = append(spans, agg, inner, priced, detached, clipped, inverted, orphan, remote, orphanKid, cycA, cycB, self)
	rng := rand.New(rand.NewPCG(seed, 36))
	rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	return spans
}

// windowFixture writes the traces the window tests read: an awkward trace
// in shuffled batches with some spans sent twice, and two generated agent
// traces. It returns their ids.
func windowFixture(t *testing.T, st store.Store) []string {
	t.Helper()
	const awkward = "a1a2a3a4a5a6a7a8a9aaabacadaeaf01"
	spans := AwkwardTrace(awkward, 1)
	write(t, st, nil, spans, 7)
	write(t, st, nil, append(spans[3:9:9], spans[3]), 0) // again, and a copy inside one batch
	gen := GenerateTraces(2, 30, 11)
	write(t, st, nil, gen, 13)
	return []string{awkward, gen[0].TraceID, gen[len(gen)-1].TraceID}
}

// canonicalNodes are spans' nodes in canonical order, child counts set.
func canonicalNodes(spans []store.Span, keep func(*store.Span) bool) []store.SpanNode {
	kids := map[string]int64{}
	for i := range spans {
		if spans[i].ParentSpanID != spans[i].SpanID {
			kids[spans[i].ParentSpanID]++
		}
	}
	out := []store.SpanNode{}
	for _, i := range store.CanonicalOrder(spans) {
		if keep(&spans[i]) {
			n := store.NodeOf(&spans[i])
			n.Children = kids[n.SpanID]
			out = append(out, n)
		}
	}
	return out
}

// jsonDiff returns "" when got and want marshal to the same JSON, else both.
func jsonDiff(got, want any) string {
	g, err1 := json.Marshal(got)
	w, err2 := json.Marshal(want)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("marshal: %v %v", err1, err2)
	}
	if string(g) == string(w) {
		return ""
	}
	return fmt.Sprintf("got  %s\nwant %s", clip(string(g)), clip(string(w)))
}

func clip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}

// allNodes pages q through SpanNodes at limit and checks no page is over it.
func allNodes(t *testing.T, w store.WindowReader, traceID string, q store.NodeQuery) []store.SpanNode {
	t.Helper()
	ctx := store.WithDefaultProject(context.Background())
	out := []store.SpanNode{}
	for pages := 0; ; pages++ {
		page, err := w.SpanNodes(ctx, traceID, q)
		if err != nil {
			t.Fatalf("SpanNodes(%s, %+v): %v", traceID, q, err)
		}
		if q.Limit > 0 && len(page.Nodes) > q.Limit {
			t.Fatalf("SpanNodes(%+v): %d nodes, over the limit", q, len(page.Nodes))
		}
		out = append(out, page.Nodes...)
		if page.NextPageToken == "" {
			return out
		}
		if pages > 1000 {
			t.Fatalf("SpanNodes(%+v): no last page after 1000 pages", q)
		}
		q.PageToken = page.NextPageToken
	}
}

func (s *suite) testWindow(t *testing.T) {
	st := s.open(t)
	w, ok := st.(store.WindowReader)
	if !ok {
		t.Skip("backend does not implement store.WindowReader")
	}
	ctx := store.WithDefaultProject(context.Background())
	for _, traceID := range windowFixture(t, st) {
		ref, err := st.GetTrace(ctx, traceID)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("HeadIsSummarize/"+traceID[:8], func(t *testing.T) {
			if n, err := w.TraceSize(ctx, traceID); err != nil || n != int64(len(ref)) {
				t.Errorf("TraceSize = %d, %v; want %d spans", n, err, len(ref))
			}
			head, err := w.TraceHead(ctx, traceID)
			if err != nil {
				t.Fatal(err)
			}
			if d := jsonDiff(head, store.Summarize(ref)); d != "" {
				t.Errorf("TraceHead differs from Summarize(GetTrace):\n%s", d)
			}
			// Kept copies (a store may keep the head) follow new spans.
			extra := ref[len(ref)-1]
			extra.SpanID, extra.Attributes = "77777777777777a1", nil
			extra.Project, extra.Retention = "", 0
			write(t, st, nil, []store.Span{extra}, 0)
			head, err = w.TraceHead(ctx, traceID)
			if err != nil {
				t.Fatal(err)
			}
			all, _ := st.GetTrace(ctx, traceID)
			if d := jsonDiff(head, store.Summarize(all)); d != "" {
				t.Errorf("after one more span, TraceHead differs from Summarize(GetTrace):\n%s", d)
			}
			ref = all
		})
		t.Run("SpanPagesAreGetTrace/"+traceID[:8], func(t *testing.T) {
			for _, limit := range []int{1, 7, 0} {
				var got []store.Span
				tok := ""
				for {
					page, err := w.SpanPage(ctx, traceID, tok, limit)
					if err != nil {
						t.Fatalf("SpanPage(limit %d): %v", limit, err)
					}
					if limit > 0 && len(page.Spans) > limit {
						t.Fatalf("SpanPage(limit %d): %d spans", limit, len(page.Spans))
					}
					got = append(got, page.Spans...)
					if tok = page.NextPageToken; tok == "" {
						break
					}
				}
				if d := jsonDiff(got, ref); d != "" {
					t.Fatalf("SpanPage pages at limit %d differ from GetTrace:\n%s", limit, d)
				}
			}
		})
		t.Run("GetSpanIsTheStoredSpan/"+traceID[:8], func(t *testing.T) {
			for _, k := range []int{0, len(ref) / 2, len(ref) - 1} {
				got, err := w.GetSpan(ctx, traceID, ref[k].SpanID)
				if err != nil {
					t.Fatal(err)
				}
				if d := jsonDiff(got, ref[k]); d != "" {
					t.Errorf("GetSpan(%s):\n%s", ref[k].SpanID, d)
				}
			}
			if _, err := w.GetSpan(ctx, traceID, "0123456789abcdef"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("GetSpan(unknown span) = %v, want ErrNotFound", err)
			}
		})
		t.Run("ChildrenPageInCanonicalOrderWithCounts/"+traceID[:8], func(t *testing.T) {
			for i := range ref {
				parent := ref[i].SpanID
				want := canonicalNodes(ref, func(sp *store.Span) bool { return sp.ParentSpanID == parent && sp.SpanID != parent })
				for _, limit := range []int{3, 0} {
					got := allNodes(t, w, traceID, store.NodeQuery{Parent: parent, Limit: limit})
					if d := jsonDiff(got, want); d != "" {
						t.Fatalf("children of %s (%s) at limit %d:\n%s", parent, ref[i].Name, limit, d)
					}
				}
			}
			// A parent that never arrived still lists the spans naming it.
			for i := range ref {
				if p := ref[i].ParentSpanID; p != "" && !slices.ContainsFunc(ref, func(sp store.Span) bool { return sp.SpanID == p }) {
					want := canonicalNodes(ref, func(sp *store.Span) bool { return sp.ParentSpanID == p })
					if d := jsonDiff(allNodes(t, w, traceID, store.NodeQuery{Parent: p}), want); d != "" {
						t.Errorf("children of the missing parent %s:\n%s", p, d)
					}
				}
			}
		})
		t.Run("NodesByIDAndText/"+traceID[:8], func(t *testing.T) {
			ids := []string{ref[len(ref)-1].SpanID, ref[0].SpanID, "00000000000000ff"}
			want := canonicalNodes(ref, func(sp *store.Span) bool { return sp.SpanID == ids[0] || sp.SpanID == ids[1] })
			if d := jsonDiff(allNodes(t, w, traceID, store.NodeQuery{IDs: ids}), want); d != "" {
				t.Errorf("nodes by id:\n%s", d)
			}
			for _, text := range []string{"CHAT", "Search", "timeout", ref[1].SpanID[4:12], "no such text"} {
				folded := store.FoldText(text)
				want := canonicalNodes(ref, func(sp *store.Span) bool { n := store.NodeOf(sp); return n.MatchesText(folded) })
				if d := jsonDiff(allNodes(t, w, traceID, store.NodeQuery{Text: text, Limit: 4}), want); d != "" {
					t.Errorf("nodes matching %q:\n%s", text, d)
				}
			}
		})
		t.Run("BonesAreEverySpanOnce/"+traceID[:8], func(t *testing.T) {
			bones, err := w.TraceBones(ctx, traceID)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for i := range ref {
				ids[ref[i].SpanID] = true
			}
			var want []store.Bone
			for i := range ref {
				want = append(want, store.BoneOf(&ref[i]))
			}
			for _, l := range [][]store.Bone{bones, want} {
				slices.SortFunc(l, func(a, b store.Bone) int { return strings.Compare(a.SpanID, b.SpanID) })
				for i := range l {
					if ids[l[i].ParentSpanID] || l[i].ParentSpanID == "" {
						l[i].Flags = 0 // only the flags of spans whose parent is absent are promised
					}
				}
			}
			if d := jsonDiff(bones, want); d != "" {
				t.Errorf("TraceBones:\n%s", d)
			}
		})
	}
	t.Run("ChildCountsOfABigFanOutFollowNewSpans", func(t *testing.T) {
		// 10,300 spans: a root with 10,000 children, one of them with 299:
		// sizes at which a store may count big parents its own way.
		const id = "f0f1f2f3f4f5f6f7f8f9fafbfcfdfe03"
		t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
		mk := func(span, parent string, k int) store.Span {
			return store.Span{TraceID: id, SpanID: span, ParentSpanID: parent, Name: "s", Kind: "internal", StatusCode: store.StatusOK,
				StartTime: t0.Add(time.Duration(k) * time.Millisecond), EndTime: t0.Add(time.Duration(k+1) * time.Millisecond)}
		}
		root := mk("e000000000000001", "", 0)
		spans := []store.Span{root}
		for k := range 10_000 {
			spans = append(spans, mk(fmt.Sprintf("c%015x", k+1), root.SpanID, k))
		}
		for k := range 299 {
			spans = append(spans, mk(fmt.Sprintf("d%015x", k+1), spans[1].SpanID, k))
		}
		write(t, st, nil, spans, 2_000)
		check := func(wantRoot, wantKid int64) {
			t.Helper()
			page, err := w.SpanNodes(ctx, id, store.NodeQuery{IDs: []string{root.SpanID, spans[1].SpanID, spans[2].SpanID}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, n := range page.Nodes {
				got[n.SpanID] = n.Children
			}
			if got[root.SpanID] != wantRoot || got[spans[1].SpanID] != wantKid || got[spans[2].SpanID] != 0 {
				t.Fatalf("child counts %v, want root %d, first child %d, second 0", got, wantRoot, wantKid)
			}
		}
		check(10_000, 299)
		write(t, st, nil, []store.Span{mk("c100000000000001", root.SpanID, 5), mk("d100000000000001", spans[1].SpanID, 6)}, 0)
		check(10_001, 300)
	})
	t.Run("DerivedKeepsTheLatestPerTraceAndKind", func(t *testing.T) {
		id := windowFixtureIDs(t, st)
		if _, _, ok, err := w.LoadDerived(ctx, id, "k1"); err != nil || ok {
			t.Fatalf("LoadDerived before any save = ok %v, err %v; want nothing", ok, err)
		}
		for i, data := range []string{`{"a":1}`, `{"a":2}`} {
			if err := w.SaveDerived(ctx, id, "k1", int64(10+i), []byte(data)); err != nil {
				t.Fatal(err)
			}
			got, n, ok, err := w.LoadDerived(ctx, id, "k1")
			if err != nil || !ok || string(got) != data || n != int64(10+i) {
				t.Fatalf("LoadDerived after saving %s for 10+%d spans = %q, %d, %v, %v", data, i, got, n, ok, err)
			}
		}
		if _, _, ok, err := w.LoadDerived(ctx, id, "k2"); err != nil || ok {
			t.Errorf("LoadDerived(another kind) = ok %v, err %v; want nothing", ok, err)
		}
		other := store.WithProject(context.Background(), "other")
		if _, _, ok, err := w.LoadDerived(other, id, "k1"); ok {
			t.Errorf("another project loads the default project's derived data (err %v)", err)
		}
	})
	t.Run("ErrorsNameWhatIsWrong", func(t *testing.T) {
		id := windowFixtureIDs(t, st)
		other := store.WithProject(context.Background(), "other")
		if _, err := w.TraceSize(other, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("TraceSize from another project = %v, want ErrNotFound", err)
		}
		if _, err := w.TraceHead(other, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("TraceHead from another project = %v, want ErrNotFound", err)
		}
		if _, err := w.SpanPage(other, id, "", 0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("SpanPage from another project = %v, want ErrNotFound", err)
		}
		if _, err := w.GetSpan(other, id, "a000000000000001"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetSpan from another project = %v, want ErrNotFound", err)
		}
		if _, err := w.TraceBones(ctx, "ffffffffffffffffffffffffffffff00"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("TraceBones(unknown trace) = %v, want ErrNotFound", err)
		}
		if _, err := w.TraceHead(ctx, "XYZ"); !errors.Is(err, store.ErrBadTraceID) {
			t.Errorf("TraceHead(XYZ) = %v, want ErrBadTraceID", err)
		}
		if _, err := w.SpanPage(ctx, id, "not-a-token", 0); !errors.Is(err, store.ErrBadPageToken) {
			t.Errorf("SpanPage(bad token) = %v, want ErrBadPageToken", err)
		}
		if _, err := w.SpanNodes(ctx, id, store.NodeQuery{Parent: "a000000000000001", PageToken: "bad"}); !errors.Is(err, store.ErrBadPageToken) {
			t.Errorf("SpanNodes(bad token) = %v, want ErrBadPageToken", err)
		}
		for _, q := range []store.NodeQuery{{}, {Parent: "xyz"}, {Parent: "a000000000000001", Text: "x"}, {Text: "x", Limit: store.MaxSpanPage + 1}} {
			if _, err := w.SpanNodes(ctx, id, q); err == nil {
				t.Errorf("SpanNodes(%+v) = nil error, want one naming the mistake", q)
			}
		}
		if _, err := w.SpanPage(ctx, id, "", -1); err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("SpanPage(limit -1) = %v, want an error naming the limit", err)
		}
	})
}

// windowFixtureIDs writes the awkward trace alone and returns its id.
func windowFixtureIDs(t *testing.T, st store.Store) string {
	t.Helper()
	const id = "b1b2b3b4b5b6b7b8b9babbbcbdbebf02"
	write(t, st, nil, AwkwardTrace(id, 2), 0)
	return id
}
