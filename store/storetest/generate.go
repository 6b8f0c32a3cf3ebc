package storetest

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// generateEpoch is the start of the first generated trace. Fixed, so the
// same seed gives byte-identical spans on every run.
var generateEpoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

var (
	genAgents = []string{"research-agent", "coding-agent", "triage-agent", "support-agent"}
	genModels = []struct{ provider, request, response string }{
		{"openai", "gpt-4.1-mini", "gpt-4.1-mini-2025-04-14"},
		{"anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929"},
		{"openai", "gpt-4o", "gpt-4o-2024-08-06"},
		{"gcp.gemini", "gemini-2.5-flash", "gemini-2.5-flash"},
	}
	genTools    = []string{"web_search", "read_file", "run_tests", "fetch_url", "sql_query"}
	genServices = []string{"agent-api", "agent-worker", "eval-runner"}
)

// GenerateTraces returns n agent-shaped traces of spansPerTrace spans each:
// an invoke_agent root whose children alternate chat calls with
// execute_tool and retrieval spans, carrying the attributes real GenAI
// instrumentations send (~14 per span: operation, provider, models, usage,
// finish reasons, tool call ids and arguments, retrieved documents, server
// address...), the typed store.Span fields derived from them as the
// collector would, occasional tool errors with an exception event, and a
// handful of resource attribute sets shared across traces, and the OTLP
// envelope SDKs send (flags, schema URLs, scope attributes on one service,
// links between some traces, dropped counts on failed tool calls). Spans
// are in trace order; the same seed always gives the same spans.
func GenerateTraces(n, spansPerTrace int, seed int64) []store.Span {
	if n <= 0 || spansPerTrace <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6c6f6f6d776f726b))
	resources := make([]store.Attributes, len(genServices))
	for i, svc := range genServices {
		resources[i] = store.Attributes{
			"service.name":           svc,
			"service.version":        fmt.Sprintf("1.%d.0", i+3),
			"deployment.environment": "staging",
			"host.name":              fmt.Sprintf("worker-%02d", i),
			"telemetry.sdk.name":     "opentelemetry",
			"telemetry.sdk.language": "python",
			"telemetry.sdk.version":  "1.38.0",
		}
	}
	// The first service's instrumentation sets scope attributes (shared by
	// all its spans, as an SDK shares one scope), the others none.
	scopeAttrs := store.Attributes{"team": "agents", "capture_content": false}
	spans := make([]store.Span, 0, n*spansPerTrace)
	start := generateEpoch
	prevRoot := -1
	for i := 0; i < n; i++ {
		start = start.Add(time.Duration(20+rng.IntN(80)) * time.Millisecond)
		at := len(spans)
		spans = appendTrace(spans, rng, start, spansPerTrace, resources)
		// The OTLP envelope, derived without drawing from rng so the rest
		// of the data stays what it was for a seed: what the OTel SDKs send
		// (sampled, parent known local; schema URLs) and, every fourth
		// trace, a link to the previous trace's root (a retried run), in
		// another process.
		for k := at; k < len(spans); k++ {
			sp := &spans[k]
			sp.Flags = store.FlagSampled | store.FlagHasIsRemote
			sp.ScopeSchemaURL = "https://opentelemetry.io/schemas/1.37.0"
			sp.ResourceSchemaURL = "https://opentelemetry.io/schemas/1.26.0"
			if sp.ServiceName == genServices[0] {
				sp.ScopeAttributes = scopeAttrs
			}
		}
		if i%4 == 3 && prevRoot >= 0 {
			spans[at].Links = []store.Link{{
				TraceID: spans[prevRoot].TraceID, SpanID: spans[prevRoot].SpanID,
				Attributes: store.Attributes{"link.reason": "retry"},
				Flags:      store.FlagSampled | store.FlagHasIsRemote | store.FlagIsRemote,
			}}
		}
		prevRoot = at
	}
	return spans
}

func randHex(rng *rand.Rand, nbytes int) string {
	b := make([]byte, nbytes)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	// An all-zero id is invalid in OTLP; the odds are nil, but be exact.
	b[0] |= 1
	return hex.EncodeToString(b)
}

func appendTrace(spans []store.Span, rng *rand.Rand, start time.Time, k int, resources []store.Attributes) []store.Span {
	traceID := randHex(rng, 16)
	svc := rng.IntN(len(genServices))
	agent := genAgents[rng.IntN(len(genAgents))]
	model := genModels[rng.IntN(len(genModels))]
	conv := "conv_" + randHex(rng, 6)
	scope := "opentelemetry.instrumentation.openai_v2"

	root := store.Span{
		TraceID:        traceID,
		SpanID:         randHex(rng, 8),
		Name:           "invoke_agent " + agent,
		Kind:           "internal",
		StartTime:      start,
		StatusCode:     store.StatusOK,
		ServiceName:    genServices[svc],
		ScopeName:      scope,
		ScopeVersion:   "0.52b1",
		Operation:      semconv.OpInvokeAgent,
		Provider:       model.provider,
		RequestModel:   model.request,
		AgentName:      agent,
		ConversationID: conv,
		Attributes: store.Attributes{
			semconv.AttrOperationName:    semconv.OpInvokeAgent,
			semconv.AttrProviderName:     model.provider,
			semconv.AttrAgentName:        agent,
			semconv.AttrAgentID:          "asst_" + randHex(rng, 8),
			semconv.AttrAgentDescription: "Answers questions with cited evidence",
			semconv.AttrConversationID:   conv,
			semconv.AttrRequestModel:     model.request,
			semconv.AttrCaseID:           fmt.Sprintf("case-%04d", rng.IntN(5000)),
			semconv.AttrTrial:            int64(rng.IntN(5)),
		},
		ResourceAttributes: resources[svc],
	}
	spans = append(spans, root)
	rootIdx := len(spans) - 1

	t := start.Add(time.Duration(1+rng.IntN(3)) * time.Millisecond)
	var sumIn, sumOut int64
	hadError := false
	for j := 1; j < k; j++ {
		var sp store.Span
		switch {
		case j%2 == 1 || j == k-1:
			sp = genChat(rng, model.provider, model.request, model.response, conv, agent)
			sumIn += sp.InputTokens
			sumOut += sp.OutputTokens
		case j%6 == 4:
			sp = genRetrieval(rng)
		default:
			sp = genTool(rng)
			hadError = hadError || sp.IsError()
		}
		sp.TraceID = traceID
		sp.SpanID = randHex(rng, 8)
		sp.ParentSpanID = root.SpanID
		sp.ServiceName = genServices[svc]
		sp.ScopeName = scope
		sp.ScopeVersion = "0.52b1"
		sp.ResourceAttributes = resources[svc]
		sp.StartTime = t
		sp.EndTime = t.Add(sp.EndTime.Sub(time.Time{}))
		for e := range sp.Events {
			sp.Events[e].Time = t.Add(sp.Events[e].Time.Sub(time.Time{}))
		}
		t = sp.EndTime.Add(time.Duration(rng.IntN(2000)) * time.Microsecond)
		spans = append(spans, sp)
	}
	// Some instrumentations repeat the children's usage on the agent span;
	// store summaries must not count it twice.
	r := &spans[rootIdx]
	r.EndTime = t.Add(time.Millisecond)
	if sumIn > 0 && rng.IntN(2) == 0 {
		r.HasUsage = true
		r.InputTokens, r.OutputTokens = sumIn, sumOut
		r.Attributes[semconv.AttrUsageInputTokens] = sumIn
		r.Attributes[semconv.AttrUsageOutputTokens] = sumOut
	}
	if hadError && rng.IntN(2) == 0 {
		r.StatusCode = store.StatusError
		r.StatusMessage = "tool call failed"
	}
	return spans
}

// genChat, genTool and genRetrieval return a span whose EndTime (and event
// times) hold offsets from the zero time; appendTrace places them.
func genChat(rng *rand.Rand, provider, reqModel, respModel, conv, agent string) store.Span {
	in := int64(200 + rng.IntN(6000))
	out := int64(20 + rng.IntN(800))
	cached := int64(0)
	if rng.IntN(3) == 0 {
		cached = in / 2
	}
	sp := store.Span{
		Name:            "chat " + reqModel,
		Kind:            "client",
		StatusCode:      store.StatusUnset,
		Operation:       semconv.OpChat,
		Provider:        provider,
		RequestModel:    reqModel,
		ResponseModel:   respModel,
		AgentName:       agent,
		ConversationID:  conv,
		HasUsage:        true,
		InputTokens:     in,
		OutputTokens:    out,
		CacheReadTokens: cached,
		EndTime:         time.Time{}.Add(time.Duration(300+rng.IntN(4000)) * time.Millisecond),
		Attributes: store.Attributes{
			semconv.AttrOperationName:             semconv.OpChat,
			semconv.AttrProviderName:              provider,
			semconv.AttrRequestModel:              reqModel,
			semconv.AttrResponseModel:             respModel,
			semconv.AttrResponseID:                "chatcmpl-" + randHex(rng, 12),
			semconv.AttrRequestTemperature:        float64(rng.IntN(11)) / 10,
			semconv.AttrRequestMaxTokens:          int64(4096),
			semconv.AttrResponseFinishReasons:     []any{"stop"},
			semconv.AttrUsageInputTokens:          in,
			semconv.AttrUsageOutputTokens:         out,
			semconv.AttrUsageCacheReadInputTokens: cached,
			semconv.AttrConversationID:            conv,
			semconv.AttrServerAddress:             "api." + provider + ".example",
			semconv.AttrServerPort:                int64(443),
		},
	}
	if rng.IntN(4) == 0 {
		sp.Attributes[semconv.AttrResponseFinishReasons] = []any{"tool_calls"}
	}
	if rng.IntN(3) == 0 {
		cost := float64(in)*2.5e-6 + float64(out)*1e-5
		sp.CostUSD = &cost
		sp.Attributes[semconv.AttrCost] = cost
	}
	return sp
}

func genTool(rng *rand.Rand) store.Span {
	tool := genTools[rng.IntN(len(genTools))]
	callID := "call_" + randHex(rng, 10)
	sp := store.Span{
		Name:       "execute_tool " + tool,
		Kind:       "internal",
		StatusCode: store.StatusOK,
		Operation:  semconv.OpExecuteTool,
		ToolName:   tool,
		ToolCallID: callID,
		EndTime:    time.Time{}.Add(time.Duration(5+rng.IntN(900)) * time.Millisecond),
		Attributes: store.Attributes{
			semconv.AttrOperationName:     semconv.OpExecuteTool,
			semconv.AttrToolName:          tool,
			semconv.AttrToolType:          semconv.ToolTypeFunction,
			semconv.AttrToolCallID:        callID,
			semconv.AttrToolDescription:   "Runs " + tool + " in the sandbox",
			semconv.AttrToolCallArguments: fmt.Sprintf(`{"query":"item %d","limit":%d}`, rng.IntN(1000), 1+rng.IntN(20)),
			semconv.AttrToolCallResult:    fmt.Sprintf(`{"status":"done","rows":%d}`, rng.IntN(50)),
			semconv.AttrSandboxID:         "sbx-" + randHex(rng, 4),
			semconv.AttrSandboxExitCode:   int64(0),
			"code.function.name":          "tools." + tool,
			"thread.id":                   int64(1 + rng.IntN(16)),
		},
	}
	if rng.IntN(20) == 0 {
		sp.StatusCode = store.StatusError
		sp.StatusMessage = tool + ": upstream returned 503"
		sp.Attributes[semconv.AttrErrorType] = "UpstreamUnavailable"
		sp.Attributes[semconv.AttrSandboxExitCode] = int64(1)
		sp.Events = []store.Event{{
			Time: time.Time{}.Add(sp.EndTime.Sub(time.Time{}) / 2),
			Name: "exception",
			Attributes: store.Attributes{
				"exception.type":    "UpstreamUnavailable",
				"exception.message": "503 Service Unavailable",
				"exception.escaped": false,
			},
			// The SDK's attribute limit cut the stack trace.
			DroppedAttributesCount: 1,
		}}
		sp.DroppedAttributesCount = 2
	}
	return sp
}

func genRetrieval(rng *rand.Rand) store.Span {
	docs := make([]string, 3+rng.IntN(5))
	docList := make([]any, len(docs))
	for i := range docs {
		docs[i] = fmt.Sprintf("doc-%05d", rng.IntN(100000))
		docList[i] = docs[i]
	}
	cited := []string{docs[0]}
	return store.Span{
		Name:          "retrieval kb-main",
		Kind:          "client",
		StatusCode:    store.StatusUnset,
		Operation:     semconv.OpRetrieval,
		RetrievedDocs: docs,
		CitedDocs:     cited,
		EndTime:       time.Time{}.Add(time.Duration(10+rng.IntN(200)) * time.Millisecond),
		Attributes: store.Attributes{
			semconv.AttrOperationName:      semconv.OpRetrieval,
			semconv.AttrDataSourceID:       "kb-main",
			semconv.AttrRetrievalQueryText: "how does the checkout retry policy work",
			semconv.AttrRetrievalDocuments: docList,
			semconv.AttrCitations:          []any{cited[0]},
			"db.system.name":               "bleve",
			semconv.AttrRetrievalMode:      "hybrid",
			semconv.AttrRetrievalK:         int64(len(docs)),
			semconv.AttrRetrievalLatencyMS: 12.5,
			semconv.AttrServerAddress:      "127.0.0.1",
			semconv.AttrServerPort:         int64(8081),
		},
	}
}

// GenerateConversation returns turns agent traces (GenerateTraces shapes,
// spansPerTurn spans each) of one conversation with one agent: every span
// that carries a conversation id carries id, every agent span the first
// turn's agent, and the turns start gap apart from start, as a user
// answering an agent would.
func GenerateConversation(id string, turns, spansPerTurn int, seed int64, start time.Time, gap time.Duration) []store.Span {
	spans := GenerateTraces(turns, spansPerTurn, seed)
	turn := -1
	last := ""
	var shift time.Duration
	agent := spans[0].AgentName
	for i := range spans {
		sp := &spans[i]
		if sp.AgentName != "" && sp.AgentName != agent {
			if sp.ParentSpanID == "" {
				sp.Name = "invoke_agent " + agent
			}
			sp.AgentName = agent
		}
		if sp.TraceID != last {
			turn++
			last = sp.TraceID
			shift = start.Add(time.Duration(turn) * gap).Sub(sp.StartTime)
		}
		sp.StartTime, sp.EndTime = sp.StartTime.Add(shift), sp.EndTime.Add(shift)
		for e := range sp.Events {
			sp.Events[e].Time = sp.Events[e].Time.Add(shift)
		}
		if sp.ConversationID != "" {
			sp.ConversationID = id
			attrs := make(store.Attributes, len(sp.Attributes))
			for k, v := range sp.Attributes {
				attrs[k] = v
			}
			attrs[semconv.AttrConversationID] = id
			if _, ok := attrs[semconv.AttrAgentName]; ok {
				attrs[semconv.AttrAgentName] = agent
			}
			sp.Attributes = attrs
		}
	}
	return spans
}
