package storetest

import (
	"context"
	"testing"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// SearchProbe holds values of one stored trace that occur (almost) nowhere
// else, for the benchmarks of selective searches.
type SearchProbe struct {
	ToolCallID   string // a gen_ai.tool.call.id
	Document     string // a retrieved document id
	Conversation string // a conversation (session) id
}

// LoadSearchBench writes traces 10-span agent traces (GenerateTraces,
// 5,000 traces per WriteSpans) and returns probe values from the middle of
// them.
func LoadSearchBench(b *testing.B, s store.Store, traces int) SearchProbe {
	b.Helper()
	ctx := store.WithDefaultProject(context.Background())
	var p SearchProbe
	const chunk = 5000
	for i := 0; i < traces; i += chunk {
		spans := GenerateTraces(min(chunk, traces-i), 10, int64(4000+i))
		if err := s.WriteSpans(ctx, spans); err != nil {
			b.Fatal(err)
		}
		if i <= traces/2 && traces/2 < i+chunk {
			for _, sp := range spans[len(spans)/2:] {
				if id, ok := sp.Attributes.String(semconv.AttrToolCallID); ok && p.ToolCallID == "" {
					p.ToolCallID = id
				}
				if len(sp.RetrievedDocs) > 0 && p.Document == "" {
					p.Document = sp.RetrievedDocs[0]
				}
				if sp.ConversationID != "" && p.Conversation == "" {
					p.Conversation = sp.ConversationID
				}
			}
		}
	}
	if p.ToolCallID == "" || p.Document == "" || p.Conversation == "" {
		b.Fatalf("probe values missing: %+v", p)
	}
	return p
}

// SearchBenchCases are the searches BenchmarkSearch measures: a common and
// a selective attribute value, a numeric range, an existence test, a
// negation, an exact span name, an evidence id, a session, and a search
// sorted by tokens (which reads every match, not just a page).
func SearchBenchCases(p SearchProbe) []struct {
	Name  string
	Query store.TraceQuery
} {
	search := func(expr string) []store.SearchClause {
		c, err := store.ParseSearch(expr)
		if err != nil {
			panic(err)
		}
		return c
	}
	return []struct {
		Name  string
		Query store.TraceQuery
	}{
		{"no_filter", store.TraceQuery{}},
		{"attr_eq_common", store.TraceQuery{Search: search(semconv.AttrRequestModel + "=gpt-4o")}},
		{"attr_eq_one_trace", store.TraceQuery{Search: search(semconv.AttrToolCallID + "=" + p.ToolCallID)}},
		{"attr_gt", store.TraceQuery{Search: search(semconv.AttrUsageInputTokens + ">6150")}},
		{"attr_exists", store.TraceQuery{Search: search("error.type")}},
		{"attr_ne", store.TraceQuery{Search: search(semconv.AttrRequestModel + "!=gpt-4o")}},
		{"span_name", store.TraceQuery{Search: search(`name:"execute_tool fetch_url"`)}},
		{"evidence", store.TraceQuery{Search: search("evidence:" + p.Document)}},
		{"session", store.TraceQuery{Session: p.Conversation}},
		{"two_clauses", store.TraceQuery{Search: search(semconv.AttrRequestModel + "=gpt-4o " + semconv.AttrUsageInputTokens + ">6000")}},
		{"attr_eq_sorted_by_tokens", store.TraceQuery{Search: search(semconv.AttrRequestModel + "=gpt-4o"), SortBy: store.SortTokens}},
	}
}

// BenchmarkSearch measures one 50-trace page of each SearchBenchCases
// query, and one page of ListSessions, on a store LoadSearchBench filled.
func BenchmarkSearch(b *testing.B, s store.Store, p SearchProbe) {
	ctx := store.WithDefaultProject(context.Background())
	for _, c := range SearchBenchCases(p) {
		b.Run(c.Name, func(b *testing.B) {
			for b.Loop() {
				page, err := s.ListTraces(ctx, c.Query)
				if err != nil || len(page.Traces) == 0 {
					b.Fatalf("ListTraces: %d traces, %v", len(page.Traces), err)
				}
			}
		})
	}
	b.Run("list_sessions", func(b *testing.B) {
		sl, ok := s.(store.SessionLister)
		if !ok {
			b.Fatalf("%T does not list sessions", s)
		}
		for b.Loop() {
			page, err := sl.ListSessions(ctx, store.SessionQuery{})
			if err != nil || len(page.Sessions) == 0 {
				b.Fatalf("ListSessions: %d sessions, %v", len(page.Sessions), err)
			}
		}
	})
}
