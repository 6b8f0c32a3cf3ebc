package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// matchesSearch applies q.Search and q.Session by brute force over the
// trace's spans: store.TraceMatchesSearch evaluates every clause against
// every span's attributes, name and evidence, and the session is any
// span's ConversationID. Backends answer the same from an index (SQLite)
// or from SQL over the stored attribute JSON (ClickHouse).
func (rt *refTrace) matchesSearch(q store.TraceQuery) bool {
	if q.Session != "" && !slices.ContainsFunc(rt.spans, func(sp store.Span) bool { return sp.ConversationID == q.Session }) {
		return false
	}
	return store.TraceMatchesSearch(rt.spans, q.Search)
}

// mustSearch parses a search expression for a test case.
func mustSearch(t *testing.T, expr string) []store.SearchClause {
	t.Helper()
	c, err := store.ParseSearch(expr)
	if err != nil {
		t.Fatalf("ParseSearch(%q): %v", expr, err)
	}
	return c
}

// longValue is an attribute string longer than store.MaxSearchValue.
var longValue = strings.Repeat("lorem ipsum ", 30)

// searchData is filterData plus a trace with an attribute value too long
// to compare and one whose spans belong to two conversations.
func (s *suite) searchData(t *testing.T, st store.Store) *refModel {
	m := s.filterData(t, st)
	extra := GenerateTraces(2, 3, 77)
	for i := range extra {
		sp := &extra[i]
		if sp.TraceID == extra[0].TraceID {
			sp.Attributes["test.long_value"] = longValue
			if sp.ParentSpanID != "" {
				sp.Attributes["test.long_value"] = "short"
			}
		}
	}
	write(t, st, m, extra, 0)
	write(t, st, m, sessionTraces(), 5)
	write(t, st, m, splitTrace(), 2)
	return m
}

// splitTrace is one trace written two spans at a time, whose second
// batch alone holds a key ("test.second_batch") and a usage key with a
// value that is no integer (gen_ai.usage.input_tokens = 9000000.5, on a span
// that reports no usage): what a store keeping per-trace facts at ingest
// must fold in from a later batch, and keep apart from the integer column
// the key usually fills.
func splitTrace() []store.Span {
	spans := GenerateTraces(1, 4, 78)
	for i := range spans {
		attrs := store.Attributes{}
		for k, v := range spans[i].Attributes {
			attrs[k] = v
		}
		spans[i].Attributes = attrs
	}
	last := &spans[len(spans)-1]
	last.Attributes["test.second_batch"] = "y"
	for i := len(spans) - 1; i >= 2; i-- {
		if !spans[i].HasUsage {
			spans[i].Attributes[semconv.AttrUsageInputTokens] = 9_000_000.5
			break
		}
	}
	return spans
}

// sessionTraces are three conversations of several turns each (traces
// sharing a conversation id), the last turn of "sess-b" also carrying a
// span of "sess-c" (it is a turn of both), and one OpenInference-style
// session id with a space in it.
func sessionTraces() []store.Span {
	spans := GenerateTraces(9, 4, 91)
	conv := map[int]string{0: "sess-a", 1: "sess-b", 2: "sess-a", 3: "sess-b", 4: "sess-a", 5: "sess-b", 6: "sess c", 7: "sess c", 8: "sess-c"}
	trace := -1
	last := ""
	for i := range spans {
		sp := &spans[i]
		if sp.TraceID != last {
			trace++
			last = sp.TraceID
		}
		if sp.ConversationID == "" {
			continue
		}
		id := conv[trace]
		if trace == 5 && sp.ParentSpanID != "" {
			id = "sess-c"
		}
		sp.ConversationID = id
		// Copy the map: generated spans may share attribute maps.
		attrs := store.Attributes{}
		for k, v := range sp.Attributes {
			attrs[k] = v
		}
		delete(attrs, semconv.AttrConversationID)
		attrs[semconv.OpenInferenceSessionID] = id
		sp.Attributes = attrs
	}
	return spans
}

func (s *suite) testSearch(t *testing.T) {
	st := s.open(t)
	m := s.searchData(t, st)
	all := m.expect(store.TraceQuery{})
	cases := []struct {
		name string
		expr string
		q    store.TraceQuery // other fields, Search is set from expr
		none bool             // matches no trace
	}{
		{name: "Exists", expr: "error.type"},
		{name: "ExistsNested", expr: "nested"},
		{name: "StringEq", expr: semconv.AttrRequestModel + "=gpt-4o"},
		{name: "StringEqIsCaseSensitive", expr: semconv.AttrRequestModel + "=GPT-4O", none: true},
		{name: "StringNe", expr: semconv.AttrRequestModel + "!=gpt-4o"},
		{name: "ArrayElementEq", expr: semconv.AttrResponseFinishReasons + "=tool_calls"},
		{name: "ArrayElementNe", expr: semconv.AttrResponseFinishReasons + "!=stop"},
		{name: "IntGt", expr: semconv.AttrUsageInputTokens + ">5000"},
		{name: "UsageKeyAsDoubleInALaterBatch", expr: semconv.AttrUsageInputTokens + ">9000000.25"},
		{name: "UsageKeyAboveNegative", expr: semconv.AttrUsageInputTokens + ">-1"},
		{name: "UsageKeyBelow", expr: semconv.AttrUsageInputTokens + "<=400"},
		{name: "ExistsInALaterBatch", expr: "test.second_batch"},
		{name: "IntLeBoundary", expr: "int<=42"},
		{name: "IntLtBoundaryExcludes", expr: "int<42", none: true},
		{name: "IntEqAsDouble", expr: "int=42.0"},
		{name: "NegativeInt", expr: "neg_int<-6"},
		{name: "DoubleGe", expr: semconv.AttrRequestTemperature + ">=0.5"},
		{name: "DoubleLt", expr: semconv.AttrRequestTemperature + "<0.3"},
		{name: "DoubleWholeEqInt", expr: "double_whole=3"},
		{name: "DoubleHuge", expr: "double_huge>1e299"},
		{name: "NegativeZeroEqZero", expr: "double_neg_zero=0"},
		{name: "BigIntComparesAsDouble", expr: "big_int=9007199254740992"},
		{name: "MaxInt", expr: "max_int>=9.2e18"},
		{name: "IntArrayGt", expr: "int_array>2"},
		{name: "DoubleArrayEq", expr: "double_array=2.5"},
		{name: "NumberDoesNotMatchString", expr: "str>0", none: true},
		{name: "StringNumberEq", expr: semconv.AttrToolCallID + "=call_Q1"},
		{name: "BoolTrue", expr: "bool_true=true"},
		{name: "BoolIsNotAString", expr: "bool_true=1", none: true},
		{name: "BoolArray", expr: "bool_array=false"},
		{name: "EmptyString", expr: `empty=""`},
		{name: "StrArrayEmptyElement", expr: `str_array=""`},
		{name: "NestedValueIsNotCompared", expr: "nested=kv", none: true},
		{name: "Unicode", expr: "unicode=\"日本語 ✓ café 🚀 \x00 nul and \u2028 separator\""},
		{name: "Quotes", expr: `quotes="she said \"hi\" \\ back"`},
		{name: "HTML", expr: `html="<script>alert('x')</script>"`},
		{name: "LongValueExists", expr: "test.long_value"},
		{name: "LongValueNeverEqual", expr: "test.long_value=" + `"` + longValue[:store.MaxSearchValue] + `"`, none: true},
		{name: "LongValueNe", expr: "test.long_value!=short", none: true},
		{name: "LongValueNeOther", expr: "test.long_value!=other"},
		{name: "SpanNameExact", expr: `name:"chat gpt-4o"`},
		{name: "SpanNameCaseSensitive", expr: `name:"CHAT gpt-4o"`, none: true},
		{name: "SpanNameNotSubstring", expr: `name:chat`, none: true},
		{name: "SpanNameUnicode", expr: `name:"Résumé pipeline"`},
		{name: "Retrieved", expr: "retrieved:doc-7"},
		{name: "CitedOnly", expr: "cited:doc-3"},
		{name: "RetrievedButNotCited", expr: "cited:doc-7", none: true},
		{name: "EvidenceEitherWay", expr: "evidence:doc-11"},
		{name: "ClausesOnDifferentSpans", expr: `name:"execute_tool web_search" retrieved:doc-7 gen_ai.usage.input_tokens>=1200`},
		{name: "ClausesAllMustHold", expr: semconv.AttrRequestModel + "=gpt-4o " + semconv.AttrRequestModel + "=claude-sonnet-4-5", none: true},
		{name: "WithOtherFilters", expr: semconv.AttrOperationName + "=execute_tool", q: store.TraceQuery{Status: store.StatusError, Text: "tool"}},
		{name: "SortAndPage", expr: semconv.AttrUsageInputTokens + ">100", q: store.TraceQuery{SortBy: store.SortTokens, Limit: 3}},
		{name: "PageAscending", expr: semconv.AttrOperationName + "=chat", q: store.TraceQuery{Ascending: true, Limit: 4}},
		{name: "Session", q: store.TraceQuery{Session: "sess-a"}},
		{name: "SessionWithSpace", q: store.TraceQuery{Session: "sess c"}},
		{name: "SessionOfChildSpans", q: store.TraceQuery{Session: "sess-c", Limit: 1}},
		{name: "SessionAndSearch", expr: semconv.AttrUsageInputTokens + ">3000", q: store.TraceQuery{Session: "sess-b"}},
		{name: "SessionUnknown", q: store.TraceQuery{Session: "nobody"}, none: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := c.q
			if c.expr != "" {
				q.Search = mustSearch(t, c.expr)
			}
			switch want := m.expect(q); {
			case c.none && len(want) > 0:
				t.Fatalf("fixture problem: %s should match nothing, matches %d", c.name, len(want))
			case !c.none && len(want) == 0:
				t.Fatalf("fixture problem: %s matches nothing in the reference model", c.name)
			case len(want) == len(all):
				t.Fatalf("fixture problem: %s matches every trace", c.name)
			}
			s.checkList(t, st, m, q)
		})
	}
	t.Run("PageTokenOfOtherSearchIsRefused", func(t *testing.T) {
		q := store.TraceQuery{Search: mustSearch(t, semconv.AttrOperationName+"=chat"), Limit: 2}
		var tok string
		s.eventually(t, "a first page with a next token", func() string {
			p, err := st.ListTraces(store.WithDefaultProject(context.Background()), q)
			if err != nil {
				return err.Error()
			}
			if p.NextPageToken == "" {
				return "no next page token"
			}
			tok = p.NextPageToken
			return ""
		})
		for _, other := range []store.TraceQuery{
			{Search: mustSearch(t, semconv.AttrOperationName+"=execute_tool"), Limit: 2, PageToken: tok},
			{Search: mustSearch(t, semconv.AttrOperationName+"=chat error.type"), Limit: 2, PageToken: tok},
			{Limit: 2, PageToken: tok},
			{Search: q.Search, Session: "sess-a", Limit: 2, PageToken: tok},
		} {
			if _, err := st.ListTraces(store.WithDefaultProject(context.Background()), other); !errors.Is(err, store.ErrBadPageToken) {
				t.Errorf("ListTraces(q=%q session=%q) with a token issued for q=%q: error %v; want store.ErrBadPageToken", store.FormatSearch(other.Search), other.Session, store.FormatSearch(q.Search), err)
			}
		}
		q.PageToken = tok
		if _, err := st.ListTraces(store.WithDefaultProject(context.Background()), q); err != nil {
			t.Errorf("the same query with its own token: %v", err)
		}
	})
	t.Run("InvalidClauseIsError", func(t *testing.T) {
		for _, c := range []store.SearchClause{
			{Field: store.FieldAttr, Op: store.OpGt, Key: "x", Value: "big"},
			{Field: store.FieldAttr, Op: store.OpEq, Key: ""},
			{Field: store.FieldName, Op: store.OpNe, Value: "x"},
			{Field: store.FieldAttr, Op: store.OpEq, Key: "x", Value: strings.Repeat("v", store.MaxSearchValue+1)},
		} {
			if _, err := st.ListTraces(store.WithDefaultProject(context.Background()), store.TraceQuery{Search: []store.SearchClause{c}}); err == nil {
				t.Errorf("ListTraces(search %+v): nil error; want one naming the clause", c)
			}
		}
	})
}

// sessionsOf is the model's answer to ListSessions: every conversation id
// of any span, summed with store.SumTurns over the model's summaries of
// its traces, most recently active first.
func (m *refModel) sessionsOf() []store.SessionSummary {
	ids := map[string]bool{}
	for _, t := range m.spans {
		for _, sp := range t {
			if sp.ConversationID != "" {
				ids[sp.ConversationID] = true
			}
		}
	}
	var out []store.SessionSummary
	for id := range ids {
		out = append(out, store.SumTurns(id, m.expect(store.TraceQuery{Session: id, Ascending: true})))
	}
	slices.SortFunc(out, func(a, b store.SessionSummary) int {
		if c := b.LastStart.Compare(a.LastStart); c != 0 {
			return c
		}
		return strings.Compare(b.SessionID, a.SessionID)
	})
	return out
}

// listAllSessions walks every page of ListSessions.
func listAllSessions(sl store.SessionLister, limit int) ([]store.SessionSummary, int, error) {
	var all []store.SessionSummary
	seen := map[string]bool{}
	q := store.SessionQuery{Limit: limit}
	for pages := 1; ; pages++ {
		if pages > 10000 {
			return nil, pages, errors.New("more than 10000 pages: the page token does not advance")
		}
		p, err := sl.ListSessions(store.WithDefaultProject(context.Background()), q)
		if err != nil {
			return nil, pages, fmt.Errorf("ListSessions page %d: %w", pages, err)
		}
		if limit > 0 && len(p.Sessions) > limit {
			return nil, pages, fmt.Errorf("page %d has %d sessions, limit is %d", pages, len(p.Sessions), limit)
		}
		for _, ss := range p.Sessions {
			if seen[ss.SessionID] {
				return nil, pages, fmt.Errorf("session %q listed twice", ss.SessionID)
			}
			seen[ss.SessionID] = true
		}
		all = append(all, p.Sessions...)
		if p.NextPageToken == "" {
			return all, pages, nil
		}
		q.PageToken = p.NextPageToken
	}
}

func diffSessions(want, got []store.SessionSummary) string {
	var b strings.Builder
	for i := 0; i < max(len(want), len(got)); i++ {
		var w, g store.SessionSummary
		if i < len(want) {
			w = want[i]
			w.FirstStart, w.LastStart = w.FirstStart.UTC(), w.LastStart.UTC()
		}
		if i < len(got) {
			g = got[i]
			g.FirstStart, g.LastStart = g.FirstStart.UTC(), g.LastStart.UTC()
		}
		if w != g {
			fmt.Fprintf(&b, "session %d:\n  want %+v\n  got  %+v\n", i, w, g)
		}
	}
	return b.String()
}

func (s *suite) testSessions(t *testing.T) {
	st := s.open(t)
	sl, ok := st.(store.SessionLister)
	if !ok {
		t.Fatalf("%T does not implement store.SessionLister", st)
	}
	m := s.searchData(t, st)
	want := m.sessionsOf()
	if len(want) < 10 {
		t.Fatalf("fixture problem: only %d sessions", len(want))
	}
	for _, limit := range []int{0, 1, 4} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			s.eventually(t, "ListSessions differs from the model's sums of its turns", func() string {
				got, pages, err := listAllSessions(sl, limit)
				if err != nil {
					return err.Error()
				}
				if limit == 1 && pages < len(want) {
					return fmt.Sprintf("%d pages of 1 for %d sessions", pages, len(want))
				}
				return diffSessions(want, got)
			})
		})
	}
	t.Run("TotalsAreSumsOfTheBackendsOwnSummaries", func(t *testing.T) {
		got, _, err := listAllSessions(sl, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ss := range got {
			sess, err := store.ReadSession(store.WithDefaultProject(context.Background()), st, ss.SessionID)
			if err != nil {
				t.Fatalf("ReadSession(%q): %v", ss.SessionID, err)
			}
			if d := diffSessions([]store.SessionSummary{sess.SessionSummary}, []store.SessionSummary{ss}); d != "" {
				t.Errorf("ListSessions and the sum of ListTraces(session=%q) differ:\n%s", ss.SessionID, d)
			}
			for i := 1; i < len(sess.Traces); i++ {
				if sess.Traces[i].Start.Before(sess.Traces[i-1].Start) {
					t.Errorf("session %q: turn %d starts before turn %d", ss.SessionID, i, i-1)
				}
			}
		}
		for _, id := range []string{"sess-a", "sess-b", "sess c", "sess-c"} {
			sess, err := store.ReadSession(store.WithDefaultProject(context.Background()), st, id)
			if err != nil {
				t.Fatalf("ReadSession(%q): %v", id, err)
			}
			if n := len(m.expect(store.TraceQuery{Session: id})); int(sess.Turns) != n || n < 2 {
				t.Errorf("session %q: %d turns, the model has %d (want at least 2)", id, sess.Turns, n)
			}
		}
	})
	t.Run("UnknownSessionIsNotFound", func(t *testing.T) {
		if _, err := store.ReadSession(store.WithDefaultProject(context.Background()), st, "nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReadSession(nobody): %v; want store.ErrNotFound", err)
		}
	})
	t.Run("BadPageTokenIsError", func(t *testing.T) {
		p, err := st.ListTraces(store.WithDefaultProject(context.Background()), store.TraceQuery{Limit: 1})
		if err != nil || p.NextPageToken == "" {
			t.Fatalf("ListTraces: %v, token %q", err, p.NextPageToken)
		}
		for _, tok := range []string{"x", "%%", p.NextPageToken} {
			if _, err := sl.ListSessions(store.WithDefaultProject(context.Background()), store.SessionQuery{PageToken: tok}); !errors.Is(err, store.ErrBadPageToken) {
				t.Errorf("ListSessions(page_token=%q): %v; want store.ErrBadPageToken", tok, err)
			}
		}
		if _, err := sl.ListSessions(store.WithDefaultProject(context.Background()), store.SessionQuery{Limit: -1}); err == nil {
			t.Error("ListSessions(limit=-1): nil error")
		}
	})
}

// testSearchAcrossDays pages through searches, newest first, over traces
// spread across days, with one long trace whose spans start over two days
// after it (a backend may look for a page's matches in time windows, and
// such a trace's spans lie in every window): every page, common and rare
// matches, order comparisons, negations and evidence.
func (s *suite) testSearchAcrossDays(t *testing.T) {
	st := s.open(t)
	m := newRefModel()
	spans := GenerateTraces(40, 6, 4242)
	trace, last := -1, ""
	for i := range spans {
		if spans[i].TraceID != last {
			trace++
			last = spans[i].TraceID
		}
		shift := time.Duration(trace) * 71 * time.Minute
		spans[i].StartTime, spans[i].EndTime = spans[i].StartTime.Add(shift), spans[i].EndTime.Add(shift)
		for e := range spans[i].Events {
			spans[i].Events[e].Time = spans[i].Events[e].Time.Add(shift)
		}
	}
	long := GenerateTraces(1, 60, 4343)
	shift := spans[len(spans)-1].StartTime.Add(-90 * time.Minute).Sub(long[0].StartTime)
	for i := range long {
		at := shift + time.Duration(i)*50*time.Minute
		long[i].StartTime, long[i].EndTime = long[i].StartTime.Add(at), long[i].EndTime.Add(at)
		for e := range long[i].Events {
			long[i].Events[e].Time = long[i].Events[e].Time.Add(at)
		}
	}
	write(t, st, m, append(spans, long...), 97)
	var callID, doc string
	for _, sp := range spans[len(spans)/3:] {
		if id, ok := sp.Attributes.String(semconv.AttrToolCallID); ok && callID == "" {
			callID = id
		}
		if len(sp.RetrievedDocs) > 0 && doc == "" {
			doc = sp.RetrievedDocs[0]
		}
	}
	for _, expr := range []string{
		semconv.AttrOperationName + "=chat",
		semconv.AttrRequestModel + "=gpt-4o",
		semconv.AttrToolCallID + "=" + callID,
		semconv.AttrUsageInputTokens + ">5000",
		semconv.AttrUsageInputTokens + "=" + fmt.Sprint(spans[1].InputTokens),
		"error.type",
		semconv.AttrRequestModel + "!=gpt-4o",
		`name:"execute_tool web_search"`,
		"evidence:" + doc,
	} {
		q := store.TraceQuery{Search: mustSearch(t, expr), Limit: 4}
		if n := len(m.expect(q)); n == 0 {
			t.Fatalf("fixture problem: %s matches no trace", expr)
		} else if n < 4 {
			q.Limit = 1 // a page per match
		}
		s.checkList(t, st, m, q)
	}
}
