package agenttrace

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/loomwork/loomwork/semconv"
)

// Generator produces OTLP batches of agent-shaped traces for load and
// restart tests: each trace is an invoke_agent root with chat, execute_tool,
// retrieval and embeddings children carrying the GenAI attributes real
// instrumentations send (about 14 per span). It is deterministic for a
// seed and never repeats a trace id.
type Generator struct {
	rng   *rand.Rand
	start time.Time
	n     uint64
}

// NewGenerator returns a generator whose traces start at start and advance
// by 50ms per trace.
func NewGenerator(seed uint64, start time.Time) *Generator {
	return &Generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), start: start}
}

var (
	models = []struct{ provider, request, response string }{
		{"openai", "gpt-4o", "gpt-4o-2024-08-06"},
		{"anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929"},
		{"aws.bedrock", "anthropic.claude-haiku", "anthropic.claude-haiku-v1"},
	}
	tools = []string{"search_docs", "run_python", "read_file", "http_get"}
)

// Batch returns one request's worth of data: traces × spansPerTrace spans
// (spansPerTrace >= 2) under one resource.
func (g *Generator) Batch(traces, spansPerTrace int) ptrace.Traces {
	if spansPerTrace < 2 {
		spansPerTrace = 2
	}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	ra := rs.Resource().Attributes()
	ra.PutStr("service.name", "research-agent")
	ra.PutStr("service.version", "1.4.0")
	ra.PutStr("telemetry.sdk.language", "go")
	ra.PutStr("telemetry.sdk.name", "opentelemetry")
	ra.PutStr("telemetry.sdk.version", "1.47.0")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(ScopeName)
	ss.Scope().SetVersion(ScopeVersion)
	spans := ss.Spans()
	spans.EnsureCapacity(traces * spansPerTrace)
	for range traces {
		g.trace(spans, spansPerTrace)
	}
	return td
}

func (g *Generator) trace(spans ptrace.SpanSlice, n int) {
	g.n++
	var tid pcommon.TraceID
	binary.BigEndian.PutUint64(tid[:8], g.rng.Uint64())
	binary.BigEndian.PutUint64(tid[8:], g.n)
	base := g.start.Add(time.Duration(g.n) * 50 * time.Millisecond)
	m := models[g.rng.IntN(len(models))]
	conv := fmt.Sprintf("conv-%d", g.n)

	rootID := g.spanID()
	root := spans.AppendEmpty()
	setCommon(root, tid, rootID, pcommon.SpanID{}, "invoke_agent researcher", ptrace.SpanKindInternal, base, base.Add(time.Duration(n)*400*time.Millisecond))
	a := root.Attributes()
	a.EnsureCapacity(14)
	a.PutStr(semconv.AttrOperationName, semconv.OpInvokeAgent)
	a.PutStr(semconv.AttrAgentName, "researcher")
	a.PutStr(semconv.AttrAgentID, "agent_research_01")
	a.PutStr(semconv.AttrConversationID, conv)
	a.PutStr(semconv.AttrProviderName, m.provider)
	a.PutStr(semconv.AttrRequestModel, m.request)
	cites := a.PutEmptySlice(semconv.AttrCitations)
	cites.AppendEmpty().SetStr("docs/uploads/retries.md")
	cites.AppendEmpty().SetStr("docs/config/network.md")
	root.Status().SetCode(ptrace.StatusCodeOk)

	t := base.Add(20 * time.Millisecond)
	for i := 1; i < n; i++ {
		sp := spans.AppendEmpty()
		d := time.Duration(100+g.rng.IntN(900)) * time.Millisecond
		switch i % 5 {
		case 1, 3: // chat
			setCommon(sp, tid, g.spanID(), rootID, "chat "+m.request, ptrace.SpanKindClient, t, t.Add(d))
			a := sp.Attributes()
			a.EnsureCapacity(15)
			in := int64(500 + g.rng.IntN(4000))
			a.PutStr(semconv.AttrOperationName, semconv.OpChat)
			a.PutStr(semconv.AttrProviderName, m.provider)
			a.PutStr(semconv.AttrRequestModel, m.request)
			a.PutStr(semconv.AttrResponseModel, m.response)
			a.PutStr(semconv.AttrResponseID, fmt.Sprintf("msg_%016x", g.rng.Uint64()))
			a.PutDouble(semconv.AttrRequestTemperature, 0.2)
			a.PutInt(semconv.AttrRequestMaxTokens, 4096)
			a.PutEmptySlice(semconv.AttrResponseFinishReasons).AppendEmpty().SetStr("stop")
			a.PutInt(semconv.AttrUsageInputTokens, in)
			a.PutInt(semconv.AttrUsageOutputTokens, int64(20+g.rng.IntN(600)))
			a.PutInt(semconv.AttrUsageCacheReadInputTokens, in/2)
			a.PutInt(semconv.AttrUsageCacheCreationInputTokens, int64(g.rng.IntN(200)))
			a.PutStr(semconv.AttrConversationID, conv)
			a.PutStr(semconv.AttrServerAddress, "api.example.test")
			a.PutInt(semconv.AttrServerPort, 443)
			if g.rng.IntN(20) == 0 {
				sp.Status().SetCode(ptrace.StatusCodeError)
				sp.Status().SetMessage("provider overloaded (HTTP 529)")
				a.PutStr(semconv.AttrErrorType, "overloaded_error")
			}
		case 2, 4: // tool
			tool := tools[g.rng.IntN(len(tools))]
			setCommon(sp, tid, g.spanID(), rootID, "execute_tool "+tool, ptrace.SpanKindInternal, t, t.Add(d/3))
			a := sp.Attributes()
			a.EnsureCapacity(8)
			a.PutStr(semconv.AttrOperationName, semconv.OpExecuteTool)
			a.PutStr(semconv.AttrToolName, tool)
			a.PutStr(semconv.AttrToolType, semconv.ToolTypeFunction)
			a.PutStr(semconv.AttrToolCallID, fmt.Sprintf("call_%012x", g.rng.Uint64()>>16))
			a.PutStr(semconv.AttrToolDescription, "Runs "+tool+" for the agent")
			a.PutStr(semconv.AttrToolCallArguments, fmt.Sprintf(`{"query":"item %d","limit":%d}`, g.rng.IntN(1000), 1+g.rng.IntN(20)))
			a.PutStr(semconv.AttrToolCallResult, fmt.Sprintf(`{"status":"done","rows":%d}`, g.rng.IntN(50)))
			a.PutStr(semconv.AttrConversationID, conv)
		default: // retrieval
			setCommon(sp, tid, g.spanID(), rootID, "retrieval docs-index", ptrace.SpanKindClient, t, t.Add(d/4))
			a := sp.Attributes()
			a.EnsureCapacity(7)
			a.PutStr(semconv.AttrOperationName, semconv.OpRetrieval)
			a.PutStr(semconv.AttrDataSourceID, "docs-index")
			a.PutStr(semconv.AttrRetrievalQueryText, "how does the upload retry policy work")
			a.PutInt(semconv.AttrRequestTopK, 3)
			docs := a.PutEmptySlice(semconv.AttrRetrievalDocuments)
			for k := range 3 {
				docs.AppendEmpty().SetStr(fmt.Sprintf("docs/page-%d.md", (g.rng.IntN(200)+k)%200))
			}
			a.PutStr(semconv.AttrConversationID, conv)
		}
		t = t.Add(d + 10*time.Millisecond)
	}
}

func (g *Generator) spanID() pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], g.rng.Uint64()|1)
	return id
}

func setCommon(sp ptrace.Span, tid pcommon.TraceID, id, parent pcommon.SpanID, name string, kind ptrace.SpanKind, start, end time.Time) {
	sp.SetTraceID(tid)
	sp.SetSpanID(id)
	if !parent.IsEmpty() {
		sp.SetParentSpanID(parent)
	}
	sp.SetName(name)
	sp.SetKind(kind)
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
}
