package web

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Two trials of one case by a support agent instrumented with the GenAI
// conventions and content capture on, as an OTel SDK sends them: the user
// asks whether an annual plan can be refunded after 20 days. Both search
// the docs with the same query; in trial 1 the index returns a stale blog
// post first, so the runs part at that tool call: trial 1 reads the blog
// post, searches again and answers wrongly.
const (
	supportTraceA = "7a3c0d9e5b1f4a2c8e6d0b9a1c3e5f70"
	supportTraceB = "7b41e2f08c3d4b5a9e7f1c2d3b4a5c61"
	supportCase   = "refund-annual-plan"
	supportTask   = "I bought the annual plan 20 days ago. Can I still get a full refund?"
)

type traceBuilder struct {
	tid   string
	root  string
	start time.Time
	at    time.Duration
	n     int
	spans []store.Span
}

func newSupportTrace(tid string, trial int, start time.Time) *traceBuilder {
	b := &traceBuilder{tid: tid, start: start}
	b.root = b.spanID()
	b.spans = append(b.spans, store.Span{TraceID: tid, SpanID: b.root, Name: "invoke_agent support-bot", Kind: "internal",
		StartTime: start, StatusCode: store.StatusOK, ServiceName: "support-bot", Operation: semconv.OpInvokeAgent, AgentName: "support-bot",
		Attributes: store.Attributes{semconv.AttrOperationName: semconv.OpInvokeAgent, semconv.AttrAgentName: "support-bot",
			semconv.AttrCaseID: supportCase, semconv.AttrTrial: int64(trial),
			semconv.AttrInputMessages: messagesJSON("user", supportTask)}})
	return b
}

func (b *traceBuilder) spanID() string {
	b.n++
	return fmt.Sprintf("%s%04x", b.tid[:12], b.n)
}

func messagesJSON(role, text string) string {
	m, _ := json.Marshal([]map[string]any{{"role": role, "parts": []map[string]any{{"type": "text", "content": text}}}})
	return string(m)
}

func (b *traceBuilder) span(parent, name, op string, d time.Duration, attrs store.Attributes) *store.Span {
	s := store.Span{TraceID: b.tid, SpanID: b.spanID(), ParentSpanID: parent, Name: name, Kind: "internal",
		StartTime: b.start.Add(b.at), EndTime: b.start.Add(b.at + d), StatusCode: store.StatusUnset,
		ServiceName: "support-bot", Operation: op, Attributes: attrs}
	s.Attributes[semconv.AttrOperationName] = op
	b.at += d + 15*time.Millisecond
	b.spans = append(b.spans, s)
	return &b.spans[len(b.spans)-1]
}

// chat is a model call that answers with text, or asks for one tool call.
func (b *traceBuilder) chat(d time.Duration, in, out int64, answer, tool, args string) {
	var parts []map[string]any
	if answer != "" {
		parts = append(parts, map[string]any{"type": "text", "content": answer})
	}
	if tool != "" {
		parts = append(parts, map[string]any{"type": "tool_call", "id": fmt.Sprintf("call_%d", b.n), "name": tool, "arguments": json.RawMessage(args)})
	}
	outMsg, _ := json.Marshal([]map[string]any{{"role": "assistant", "parts": parts}})
	s := b.span(b.root, "chat gpt-4o", semconv.OpChat, d, store.Attributes{
		semconv.AttrRequestModel: "gpt-4o", semconv.AttrOutputMessages: string(outMsg)})
	s.Kind, s.Provider, s.RequestModel, s.ResponseModel = "client", "openai", "gpt-4o", "gpt-4o-2024-08-06"
	s.HasUsage, s.InputTokens, s.OutputTokens = true, in, out
}

// tool is a tool call; docs, when given, also make a retrieval span under it.
func (b *traceBuilder) tool(d time.Duration, name, args, result string, docs ...string) {
	at := b.at
	s := b.span(b.root, "execute_tool "+name, semconv.OpExecuteTool, d, store.Attributes{
		semconv.AttrToolName: name, semconv.AttrToolCallArguments: args, semconv.AttrToolCallResult: result})
	s.ToolName, s.ToolCallID = name, fmt.Sprintf("call_%d", b.n)
	parent := s.SpanID
	if len(docs) > 0 {
		b.at = at + 5*time.Millisecond
		r := b.span(parent, "retrieval docs-index", semconv.OpRetrieval, d-10*time.Millisecond, store.Attributes{
			semconv.AttrDataSourceID: "docs-index", semconv.AttrRetrievalQueryText: queryOf(args)})
		r.RetrievedDocs = docs
		b.at = at + d + 15*time.Millisecond
	}
}

func queryOf(args string) string {
	var a struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	return a.Query
}

func (b *traceBuilder) finish(answer string, cited ...string) []store.Span {
	r := &b.spans[0]
	r.EndTime = b.start.Add(b.at)
	r.Attributes[semconv.AttrOutputMessages] = messagesJSON("assistant", answer)
	r.CitedDocs = cited
	return b.spans
}

// supportTraces returns the two trials' spans.
func supportTraces() (a, b []store.Span) {
	t0 := time.Date(2026, 3, 4, 9, 30, 0, 0, time.UTC)
	const q = `{"query":"refund annual plan"}`
	ta := newSupportTrace(supportTraceA, 0, t0)
	ta.chat(820*time.Millisecond, 1240, 38, "", "search_docs", q)
	ta.tool(140*time.Millisecond, "search_docs", q,
		`[{"id":"docs/billing/refunds.md#annual-plans","title":"Refunds for annual plans"},{"id":"docs/billing/pricing.md","title":"Pricing"}]`,
		"docs/billing/refunds.md#annual-plans", "docs/billing/pricing.md")
	ta.chat(760*time.Millisecond, 1610, 41, "", "fetch_page", `{"url":"docs/billing/refunds.md#annual-plans"}`)
	ta.tool(95*time.Millisecond, "fetch_page", `{"url":"docs/billing/refunds.md#annual-plans"}`,
		"Annual plans can be refunded in full within 30 days of purchase. After 30 days, the unused months are refunded pro rata.")
	ta.chat(1430*time.Millisecond, 2050, 96, "Yes. Annual plans can be refunded in full within 30 days of purchase, and you bought yours 20 days ago, so you can still get a full refund [docs/billing/refunds.md#annual-plans].", "", "")
	a = ta.finish("Yes. Annual plans can be refunded in full within 30 days of purchase, and you bought yours 20 days ago, so you can still get a full refund [docs/billing/refunds.md#annual-plans].",
		"docs/billing/refunds.md#annual-plans")

	tb := newSupportTrace(supportTraceB, 1, t0.Add(5*time.Minute))
	tb.chat(790*time.Millisecond, 1240, 38, "", "search_docs", q)
	tb.tool(150*time.Millisecond, "search_docs", q,
		`[{"id":"blog/2023-refund-changes.md","title":"Changes to refunds (2023)"},{"id":"docs/billing/pricing.md","title":"Pricing"}]`,
		"blog/2023-refund-changes.md", "docs/billing/pricing.md")
	tb.chat(810*time.Millisecond, 1630, 40, "", "fetch_page", `{"url":"blog/2023-refund-changes.md"}`)
	tb.tool(110*time.Millisecond, "fetch_page", `{"url":"blog/2023-refund-changes.md"}`,
		"As of March 2023, monthly plans can be refunded within 14 days. We are reviewing the policy for other plans.")
	tb.chat(900*time.Millisecond, 2010, 44, "", "search_docs", `{"query":"annual plan refund 14 days"}`)
	tb.tool(130*time.Millisecond, "search_docs", `{"query":"annual plan refund 14 days"}`,
		`[{"id":"blog/2023-refund-changes.md","title":"Changes to refunds (2023)"}]`, "blog/2023-refund-changes.md")
	tb.chat(1380*time.Millisecond, 2390, 71, "Unfortunately not: refunds are only possible within 14 days of purchase [blog/2023-refund-changes.md].", "", "")
	b = tb.finish("Unfortunately not: refunds are only possible within 14 days of purchase [blog/2023-refund-changes.md].",
		"blog/2023-refund-changes.md")
	return a, b
}
