package scorer

import (
	"fmt"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// benchSuite: 1,000 cases × 10 trials with recorded fields.
func benchSuite(inline bool) ([]datasets.Case, []datasets.Trial) {
	cases := make([]datasets.Case, 1000)
	var trials []datasets.Trial
	for i := range cases {
		cases[i] = researchCase
		cases[i].ID = fmt.Sprintf("case-%04d", i)
		for k := 0; k < 10; k++ {
			tr := goodTrial()
			tr.CaseID, tr.Trial = cases[i].ID, k
			tr.Success = bp((i+k)%4 != 0)
			if inline {
				tr = datasets.Trial{CaseID: cases[i].ID, Trial: k, ModelLabel: "scripted", Spans: benchSpans(i*10 + k)}
			}
			trials = append(trials, tr)
		}
	}
	return cases, trials
}

// benchSpans is a 20-span agent trace: 6 chats, 6 tools, 6 retrievals.
func benchSpans(n int) []store.Span {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tid := fmt.Sprintf("%032x", n+1)
	spans := []store.Span{{TraceID: tid, SpanID: "root", Name: "invoke_agent", Operation: "invoke_agent", StartTime: t0, EndTime: t0.Add(20 * time.Second),
		Attributes: store.Attributes{semconv.AttrModelLabel: "scripted"}}}
	spans = append(spans, store.Span{TraceID: tid, SpanID: "agg", ParentSpanID: "root", Name: "chain", StartTime: t0, EndTime: t0.Add(19 * time.Second), HasUsage: true, InputTokens: 99, OutputTokens: 9})
	for i := 0; i < 18; i++ {
		s := store.Span{TraceID: tid, SpanID: fmt.Sprintf("s%02d", i), ParentSpanID: "agg", StartTime: t0.Add(time.Duration(i) * time.Second), EndTime: t0.Add(time.Duration(i+1) * time.Second)}
		switch i % 3 {
		case 0:
			s.Name, s.Operation, s.RequestModel, s.HasUsage, s.InputTokens, s.OutputTokens, s.CacheReadTokens = "chat", "chat", "claude-sonnet-4-5-20250929", true, 5000, 300, 4000
		case 1:
			s.Name, s.Operation, s.ToolName = "execute_tool search", "execute_tool", "search"
		case 2:
			s.Name, s.Operation, s.RetrievedDocs, s.CitedDocs = "retrieval", "retrieval", []string{"docs/a.md", "docs/b.md"}, []string{"docs/a.md"}
		}
		spans = append(spans, s)
	}
	return spans
}

// BenchmarkScore10kTrials scores 10,000 recorded trials (1,000 cases × 10)
// including pass@k/pass^k and two 10,000-resample bootstraps.
func BenchmarkScore10kTrials(b *testing.B) {
	cases, trials := benchSuite(false)
	cfg := DefaultConfig()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if s, err := Score(cases, trials, cfg); err != nil || s.NTrials != 10000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkScore10kTrialsInlineSpans: the same, each trial carrying a
// 20-span trace that is rolled up (critical path, cost) while scoring.
func BenchmarkScore10kTrialsInlineSpans(b *testing.B) {
	cases, trials := benchSuite(true)
	cfg := DefaultConfig()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if s, err := Score(cases, trials, cfg); err != nil || s.NTrials != 10000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompare1kCases pairs two 10k-trial suites (paired bootstrap,
// McNemar).
func BenchmarkCompare1kCases(b *testing.B) {
	cases, trials := benchSuite(false)
	cfg := DefaultConfig()
	base, _ := Score(cases, trials, cfg)
	cand, _ := Score(cases, trials, cfg)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Compare(base, cand, cfg); err != nil {
			b.Fatal(err)
		}
	}
}
