package web

import (
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// agentTraceID is the trace agentTrace builds.
const agentTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// The spans of agentTrace a test looks at.
const (
	atRoot       = "a000000000000001"
	atRetrieval  = "a000000000000002"
	atChat1      = "a000000000000003" // GenAI attributes: system, user, assistant tool call
	atSearch     = "a000000000000004"
	atChat2      = "a000000000000005" // GenAI event: history with a tool call and its result
	atFetch      = "a000000000000006" // failed tool, long name
	atSubAgent   = "a000000000000007"
	atChatOI     = "a000000000000008" // OpenInference flattened messages
	atChatNone   = "a000000000000009" // content capture off
	atChatOLLM   = "a00000000000000a" // OpenLLMetry gen_ai.prompt / gen_ai.completion
	atLongToolNm = "fetch_url_with_retries_and_exponential_backoff_for_flaky_documentation_mirrors"
)

// agentTrace is a research agent's run as the collector stores it: an
// invoke_agent root, a retrieval, chat calls whose content arrives in each
// shape senders use (GenAI attributes, the inference-details event,
// OpenInference's and OpenLLMetry's flattened keys, none at all),
// execute_tool spans (one failing, with a long name) and a summarising
// sub-agent on its own service.
func agentTrace() []store.Span {
	at := func(ms int) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }
	span := func(id, parent, name, svc, op string, from, to int) store.Span {
		return store.Span{TraceID: agentTraceID, SpanID: id, ParentSpanID: parent, Name: name, Kind: "internal", ServiceName: svc,
			Operation: op, StartTime: at(from), EndTime: at(to), StatusCode: store.StatusOK,
			Attributes:         store.Attributes{semconv.AttrOperationName: op},
			ResourceAttributes: store.Attributes{"service.name": svc, "telemetry.sdk.language": "python"}}
	}
	chat := func(id, parent, svc, provider, model string, from, to int, in, out int64) store.Span {
		s := span(id, parent, "chat "+model, svc, semconv.OpChat, from, to)
		s.Kind, s.Provider, s.RequestModel, s.ResponseModel = "client", provider, model, model
		s.HasUsage, s.InputTokens, s.OutputTokens = true, in, out
		s.Attributes[semconv.AttrProviderName] = provider
		s.Attributes[semconv.AttrRequestModel] = model
		s.Attributes[semconv.AttrUsageInputTokens] = in
		s.Attributes[semconv.AttrUsageOutputTokens] = out
		return s
	}
	tool := func(id, parent, name string, from, to int, args, result string) store.Span {
		s := span(id, parent, "execute_tool "+name, "tool-runner", semconv.OpExecuteTool, from, to)
		s.ToolName, s.ToolCallID = name, "call_"+id[12:]
		s.Attributes[semconv.AttrToolName] = name
		s.Attributes[semconv.AttrToolCallArguments] = args
		if result != "" {
			s.Attributes[semconv.AttrToolCallResult] = result
		}
		return s
	}
	task := "Our uploads to the object store fail intermittently with 503s. How do I make failed uploads retry automatically, with backoff?"

	root := span(atRoot, "", "invoke_agent research-agent", "agent-api", semconv.OpInvokeAgent, 0, 8420)
	root.AgentName = "research-agent"
	root.Attributes[semconv.AttrAgentName] = "research-agent"
	root.Attributes[semconv.AttrInputMessages] = `[{"role":"user","parts":[{"type":"text","content":` + jsonQuote(task) + `}]}]`
	root.Attributes[semconv.AttrOutputMessages] = `[{"role":"assistant","parts":[{"type":"text","content":"Set retry.enabled: true and retry.backoff: exponential in uploader.yaml (docs/uploads/retries.md#configuration)."}],"finish_reason":"stop"}]`
	root.CitedDocs = []string{"docs/uploads/retries.md#configuration"}

	ret := span(atRetrieval, atRoot, "retrieval kb-docs", "retrieval-svc", semconv.OpRetrieval, 40, 410)
	ret.RetrievedDocs = []string{"docs/uploads/retries.md#configuration", "docs/uploads/errors.md", "docs/faq.md#timeouts"}
	ret.Attributes[semconv.AttrRetrievalQueryText] = "retry failed uploads backoff"
	ret.Attributes[semconv.AttrDataSourceID] = "kb-docs"

	c1 := chat(atChat1, atRoot, "agent-api", "openai", "gpt-4.1-mini", 430, 2080, 1840, 96)
	c1.Attributes[semconv.AttrSystemInstructions] = `[{"type":"text","content":"You are a documentation assistant. Answer only from the documentation you retrieve, and cite the page."}]`
	c1.Attributes[semconv.AttrInputMessages] = `[{"role":"user","parts":[{"type":"text","content":` + jsonQuote(task) + `}]}]`
	c1.Attributes[semconv.AttrOutputMessages] = `[{"role":"assistant","parts":[{"type":"text","content":"Let me search the upload docs first."},{"type":"tool_call","id":"call_0004","name":"search_docs","arguments":{"query":"upload retry backoff 503","top_k":5,"sections":["uploads","faq"]}}],"finish_reason":"tool_calls"}]`

	search := tool(atSearch, atRoot, "search_docs", 2100, 2870, `{"query":"upload retry backoff 503","top_k":5,"sections":["uploads","faq"]}`,
		`{"hits":[{"id":"docs/uploads/retries.md#configuration","score":0.91},{"id":"docs/uploads/errors.md","score":0.74}]}`)

	c2 := chat(atChat2, atRoot, "agent-api", "openai", "gpt-4.1-mini", 2900, 4580, 2630, 141)
	c2.Events = []store.Event{{Time: at(4580), Name: semconv.EventInferenceOperationDetails, Attributes: store.Attributes{
		semconv.AttrInputMessages: `[{"role":"user","parts":[{"type":"text","content":` + jsonQuote(task) + `}]},` +
			`{"role":"assistant","parts":[{"type":"tool_call","id":"call_0004","name":"search_docs","arguments":{"query":"upload retry backoff 503","top_k":5,"sections":["uploads","faq"]}}]},` +
			`{"role":"tool","parts":[{"type":"tool_call_response","id":"call_0004","response":{"hits":[{"id":"docs/uploads/retries.md#configuration","score":0.91},{"id":"docs/uploads/errors.md","score":0.74}]}}]}]`,
		semconv.AttrOutputMessages: `[{"role":"assistant","parts":[{"type":"reasoning","content":"The retries page is the best hit; fetch it to quote the exact keys."},{"type":"tool_call","id":"call_0006","name":"` + atLongToolNm + `","arguments":{"url":"https://docs.example.com/uploads/retries.html","timeout_s":5}}],"finish_reason":"tool_calls"}]`,
	}}}

	fetch := tool(atFetch, atRoot, atLongToolNm, 4600, 6010, `{"url":"https://docs.example.com/uploads/retries.html","timeout_s":5}`, "")
	fetch.StatusCode, fetch.StatusMessage = store.StatusError, "mirror timed out after 5s"
	fetch.Events = []store.Event{{Time: at(6005), Name: "exception", Attributes: store.Attributes{"exception.type": "TimeoutError", "exception.message": "mirror timed out after 5s"}}}

	sub := span(atSubAgent, atRoot, "invoke_agent summarizer", "summarizer", semconv.OpInvokeAgent, 6050, 8400)
	sub.AgentName = "summarizer"

	oi := chat(atChatOI, atSubAgent, "summarizer", "anthropic", "claude-sonnet-4-5", 6080, 7420, 3120, 188)
	for k, v := range map[string]any{
		"openinference.span.kind":               "LLM",
		"llm.input_messages.0.message.role":     "system",
		"llm.input_messages.0.message.content":  "Summarise the retrieved page for the user in two sentences, keeping config keys verbatim.",
		"llm.input_messages.1.message.role":     "user",
		"llm.input_messages.1.message.content":  "Page docs/uploads/retries.md#configuration:\nretry.enabled (bool) turns on automatic retries of failed uploads.\nretry.backoff: constant | exponential.",
		"llm.output_messages.0.message.role":    "assistant",
		"llm.output_messages.0.message.content": "Enable retry.enabled: true and choose retry.backoff: exponential; failed uploads are then retried with growing delays.",
		"llm.token_count.prompt":                int64(3120),
		"llm.token_count.completion":            int64(188),
		"input.value":                           "Summarise docs/uploads/retries.md#configuration",
		"output.value":                          "Enable retry.enabled: true and choose retry.backoff: exponential.",
		"llm.invocation_parameters":             `{"max_tokens":400,"temperature":0.2}`,
		semconv.OpenInferenceProvider:           "anthropic",
		semconv.OpenInferenceModelName:          "claude-sonnet-4-5",
	} {
		oi.Attributes[k] = v
	}

	none := chat(atChatNone, atSubAgent, "summarizer", "openai", "gpt-4o", 7450, 8050, 410, 52)

	ollm := chat(atChatOLLM, atSubAgent, "summarizer", "openai", "gpt-4o-mini", 8060, 8390, 620, 40)
	for k, v := range map[string]any{
		"gen_ai.prompt.0.role":              "system",
		"gen_ai.prompt.0.content":           "Check the answer cites a page.",
		"gen_ai.prompt.1.role":              "user",
		"gen_ai.prompt.1.content":           "Answer: Enable retry.enabled: true ... (docs/uploads/retries.md#configuration)",
		"gen_ai.completion.0.role":          "assistant",
		"gen_ai.completion.0.content":       "PASS: cites docs/uploads/retries.md#configuration.",
		"gen_ai.completion.0.finish_reason": "stop",
		"llm.request.type":                  "chat",
	} {
		ollm.Attributes[k] = v
	}
	return []store.Span{root, ret, c1, search, c2, fetch, sub, oi, none, ollm}
}

func jsonQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func TestAgentTraceConversationsOnThePage(t *testing.T) {
	st := openStore(t)
	if err := st.WriteSpans(t.Context(), agentTrace()); err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, st, Config{})
	for _, tc := range []struct {
		span   string
		want   []string
		reject []string
	}{
		{atChat1, []string{`class="role role-system"`, "You are a documentation assistant.", `class="role role-user"`, "search_docs",
			"&#34;top_k&#34;: 5", "finish: tool_calls", "3 attributes shown as the conversation above"}, []string{"no-content"}},
		{atChat2, []string{"event gen_ai.client.inference.operation.details", `class="role role-tool"`, "tool result", "call_0004",
			"reasoning", atLongToolNm, "2 attributes shown as the conversation above"}, nil},
		{atChatOI, []string{"llm.input_messages.*", "Summarise the retrieved page", "retry.backoff: exponential",
			"llm.invocation_parameters", "&#34;max_tokens&#34;: 400"}, []string{"no-content"}},
		{atChatOLLM, []string{"gen_ai.prompt.*", "Check the answer cites a page.", "PASS: cites", "finish: stop"}, nil},
		{atChatNone, []string{`id="no-content"`, "content capture is off at the sender"}, []string{`class="msg `}},
		{atSearch, nil, []string{`id="conversation"`, "no-content"}}, // a tool span: no conversation, no complaint
	} {
		code, body := get(t, ts, "/traces/"+agentTraceID+"/spans/"+tc.span+"?fragment=1")
		if code != 200 {
			t.Fatalf("span %s: status %d", tc.span, code)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("span %s: panel lacks %q", tc.span, w)
			}
		}
		for _, r := range tc.reject {
			if strings.Contains(body, r) {
				t.Errorf("span %s: panel has %q", tc.span, r)
			}
		}
	}
}

// A link to a span inside a collapsed subtree of a big trace opens the page
// holding it, its ancestors expanded and its row highlighted; paging keeps
// the selection.
func TestSelectedSpanIsRevealedAndKeptAcrossPages(t *testing.T) {
	testtier.NoRace(t, "TestBrowserReportComparisonAndItsTraces")
	testtier.Slow(t)
	ts, spans := sharedBigTraceServer(t)
	deep := spans[len(spans)-1] // the last step of the last sub-agent
	code, body := get(t, ts, "/traces/"+spans[0].TraceID+"?span="+deep.SpanID)
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	if !strings.Contains(body, `selected" data-span="`+deep.SpanID+`"`) {
		t.Fatalf("the selected span's row is not on the page or not highlighted")
	}
	if !strings.Contains(body, `id="wf-prev"`) || !strings.Contains(body, "span="+deep.SpanID) {
		t.Errorf("the selected span sits on a later page: the pager should be there and its links keep span=")
	}
	_, first := get(t, ts, "/traces/"+spans[0].TraceID+"?span="+deep.SpanID+"&p=1&t="+deep.ParentSpanID)
	if strings.Contains(first, `selected" data-span="`) {
		t.Errorf("page 1 does not hold the selected row, yet a row is highlighted")
	}
	if !strings.Contains(first, `data-selected="`+deep.SpanID+`"`) {
		t.Errorf("page 1 forgot the selection")
	}
}
