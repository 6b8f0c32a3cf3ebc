package main

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// msgPart is one part of a chat message, in the GenAI conventions' terms.
type msgPart struct {
	kind    string // text, tool_call, tool_call_response
	content string // text, or the tool's response
	id      string // tool call id
	name    string // tool name
	args    string // tool call arguments, a JSON object
}

type chatMsg struct {
	role  string // system, user, assistant, tool
	parts []msgPart
}

// chatCall is one model call, before a style turns it into attributes.
type chatCall struct {
	agent       *agentDef
	input       []chatMsg // without the system instructions
	output      chatMsg
	finish      string
	responseID  string
	inTok       int64
	outTok      int64
	cacheRead   int64
	cacheCreate int64
	reasoning   int64
	temperature float64
	maxTokens   int64
	topP        float64
	stream      bool
	failed      bool
	errType     string
	errMsg      string
}

// traceGen draws one trace of a service.
type traceGen struct {
	r        *rand.Rand
	p        *prose
	svc      *service
	agent    *agentDef
	tail     []string
	tailZipf zipfTable
	spans    []genSpan
	now      int64 // cursor, ns from the trace's start
	conv     string
	user     string
	session  string
	workflow string
}

func (g *traceGen) newID() [8]byte {
	var id [8]byte
	for id == ([8]byte{}) {
		v := g.r.Uint64()
		for i := range id {
			id[i] = byte(v >> (8 * i))
		}
	}
	return id
}

// dur draws a duration in ns with the given median.
func (g *traceGen) dur(median time.Duration, sigma float64, lo, hi time.Duration) int64 {
	return int64(lognormal(g.r, float64(median), sigma, int(lo), int(hi)))
}

func (g *traceGen) gap() {
	g.now += g.dur(3*time.Millisecond, 1, 50*time.Microsecond, 200*time.Millisecond)
}

// addSpan appends a span and returns its index (spans are appended when
// they start; their end is set when they end).
func (g *traceGen) addSpan(parent [8]byte, name string, kind, scope int, attrs []kv) int {
	g.spans = append(g.spans, genSpan{id: g.newID(), parent: parent, name: name, kind: kind, start: g.now, scope: scope,
		attrs: g.withTail(attrs), flags: 0x301}) // sampled, parent is local
	return len(g.spans) - 1
}

// withTail adds the long tail: a quarter of spans carry one to six rarely
// seen keys.
func (g *traceGen) withTail(attrs []kv) []kv {
	if g.r.IntN(4) != 0 {
		return attrs
	}
	for range 1 + g.r.IntN(6) {
		k := g.tail[g.tailZipf.draw(g.r)]
		var v any
		switch len(k) % 5 {
		case 0:
			v = int64(g.r.IntN(10000))
		case 1:
			v = g.r.IntN(3) == 0
		case 2:
			v = g.r.Float64()
		case 3:
			v = []string{commonWords[g.r.IntN(300)], commonWords[g.r.IntN(300)]}
		default:
			if g.r.IntN(2) == 0 {
				v = commonWords[g.r.IntN(400)]
			} else {
				v = base62(g.r, 8+g.r.IntN(16))
			}
		}
		attrs = append(attrs, kv{k, v})
	}
	return attrs
}

// tailZipf draws long-tail keys: a few common, most rare.
var tailZipf = newZipfTable(600, 1.3, 3)

// genTrace draws one trace of svc.
func genTrace(r *rand.Rand, svc *service, tail []string) []genSpan {
	g := &traceGen{r: r, svc: svc, p: newProse(r, svc.topic), tail: tail, tailZipf: tailZipf}
	g.agent = &svc.agents[r.IntN(len(svc.agents))]
	g.user = "user_" + base62(r, 12)
	if r.IntN(3) > 0 {
		g.conv = []string{"conv_", "thread_", ""}[r.IntN(3)] + uuid(r)
	}
	g.session = "sess_" + base62(r, 16)
	g.workflow = g.agent.name + "_" + []string{"flow", "graph", "pipeline"}[r.IntN(3)]
	if svc.singleCall || r.IntN(12) == 0 {
		g.singleCallTrace()
	} else {
		g.agentTrace()
	}
	return g.spans
}

// singleCallTrace: one model call, sometimes under the HTTP request that
// made it.
func (g *traceGen) singleCallTrace() {
	var parent [8]byte
	http := -1
	if g.r.IntN(2) == 0 {
		http = g.addSpan(parent, "POST /v1/classify", kindServer, scopeHTTP, g.httpServerAttrs("/v1/classify"))
		parent = g.spans[http].id
		g.gap()
	}
	user := chatMsg{role: "user", parts: []msgPart{{kind: "text", content: g.p.sized(300, 1, 10, 6000)}}}
	call := g.newCall([]chatMsg{user}, false)
	g.chatSpan(parent, call)
	if http >= 0 {
		g.gap()
		g.spans[http].end = g.now
		g.spans[http].attrs = append(g.spans[http].attrs, kv{"http.response.status_code", int64(200)})
	}
}

// agentTrace: an agent run of one or more turns, each a model call and the
// tools it asked for, under an invoke_agent span (itself under an HTTP
// server span half the time).
func (g *traceGen) agentTrace() {
	var parent [8]byte
	http := -1
	if g.r.IntN(2) == 0 {
		route := "/api/" + g.agent.name + "/messages"
		http = g.addSpan(parent, "POST "+route, kindServer, scopeHTTP, g.httpServerAttrs(route))
		parent = g.spans[http].id
		g.gap()
	}
	var hist []chatMsg
	if g.r.IntN(3) == 0 { // earlier turns of the conversation
		for range 1 + g.r.IntN(4) {
			hist = append(hist, chatMsg{role: "user", parts: []msgPart{{kind: "text", content: g.p.sized(160, 0.9, 5, 3000)}}},
				chatMsg{role: "assistant", parts: []msgPart{{kind: "text", content: g.p.sized(500, 0.9, 10, 8000)}}})
		}
	}
	question := g.p.sized(220, 0.9, 8, 5000)
	hist = append(hist, chatMsg{role: "user", parts: []msgPart{{kind: "text", content: question}}})
	root := g.addSpan(parent, "", kindInternal, scopeAgent, nil)
	rootID := g.spans[root].id
	g.gap()
	turns := 1
	for turns < 25 && g.r.Float64() < 0.62 {
		turns++
	}
	var answer string
	var inTok, outTok int64
	for t := 0; t < turns; t++ {
		last := t == turns-1
		call := g.newCall(hist, !last)
		if !last && g.r.IntN(30) == 0 {
			// The provider refused the first attempt; the retry links to it.
			failed := *call
			failed.failed = true
			failed.errType, failed.errMsg = providerError(g.r)
			fi := g.chatSpan(rootID, &failed)
			g.gap()
			g.now += g.dur(800*time.Millisecond, 0.6, 50*time.Millisecond, 10*time.Second)
			ci := g.chatSpan(rootID, call)
			g.spans[ci].links = append(g.spans[ci].links, genLink{span: g.spans[fi].id, attrs: []kv{{"retry.attempt", int64(2)}}})
		} else {
			g.chatSpan(rootID, call)
		}
		inTok += call.inTok
		outTok += call.outTok
		hist = append(hist, call.output)
		g.gap()
		if last {
			answer = call.output.parts[0].content
			break
		}
		var results []msgPart
		for _, tc := range call.output.parts {
			if tc.kind != "tool_call" {
				continue
			}
			res := g.toolSpan(rootID, tc)
			if len(res) > 2000 { // what the agent passes back to the model
				res = res[:2000]
				for !utf8.ValidString(res) {
					res = res[:len(res)-1]
				}
			}
			results = append(results, msgPart{kind: "tool_call_response", id: tc.id, content: res})
			g.gap()
		}
		hist = append(hist, chatMsg{role: "tool", parts: results})
	}
	g.spans[root].end = g.now
	g.spans[root].name, g.spans[root].attrs = g.agentSpan(question, answer, inTok, outTok)
	g.spans[root].attrs = g.withTail(g.spans[root].attrs)
	if g.r.IntN(10) == 0 { // an online evaluation result
		g.spans[root].events = append(g.spans[root].events, genEvent{at: g.now, name: "gen_ai.evaluation.result", attrs: []kv{
			{"gen_ai.evaluation.name", []string{"relevance", "faithfulness", "toxicity", "helpfulness"}[g.r.IntN(4)]},
			{"gen_ai.evaluation.score.value", g.r.Float64()},
			{"gen_ai.evaluation.score.label", []string{"pass", "fail", "partial"}[g.r.IntN(3)]},
			{"gen_ai.evaluation.explanation", g.p.sized(150, 0.7, 20, 1000)},
		}})
	}
	if http >= 0 {
		g.gap()
		g.spans[http].end = g.now
		g.spans[http].attrs = append(g.spans[http].attrs, kv{"http.response.status_code", int64(200)})
	}
}

func (g *traceGen) httpServerAttrs(route string) []kv {
	return []kv{
		{"http.request.method", "POST"}, {"http.route", route}, {"url.path", route},
		{"url.scheme", "https"}, {"server.address", g.svc.name + ".agents.svc.cluster.local"},
		{"client.address", "10." + strconv.Itoa(g.r.IntN(255)) + "." + strconv.Itoa(g.r.IntN(255)) + "." + strconv.Itoa(g.r.IntN(255))},
		{"user_agent.original", userAgents[g.r.IntN(len(userAgents))]},
		{"network.protocol.version", "1.1"},
	}
}

var userAgents = []string{
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
	"python-httpx/0.28.1", "okhttp/4.12.0", "Slackbot 1.0 (+https://api.slack.com/robots)", "acme-mobile/5.3.1 (iOS 18.2)",
}

func providerError(r *rand.Rand) (string, string) {
	switch r.IntN(3) {
	case 0:
		return "overloaded_error", "Overloaded"
	case 1:
		return "rate_limit_exceeded", "Rate limit reached for requests per min (RPM): Limit " + strconv.Itoa(500*(1+r.IntN(20))) + ", Used " + strconv.Itoa(500*(1+r.IntN(20))) + ", Requested 1."
	default:
		return "timeout", "Request timed out after " + strconv.Itoa(30+r.IntN(90)) + " seconds"
	}
}

// newCall draws a model call answering hist: tool calls when wantTools,
// else a text answer.
func (g *traceGen) newCall(hist []chatMsg, wantTools bool) *chatCall {
	a := g.agent
	c := &chatCall{agent: a, input: truncateHistory(hist, 8000)}
	switch {
	case strings.HasPrefix(a.provider, "anthropic"), strings.Contains(a.model, "claude"):
		c.responseID = "msg_01" + base62(g.r, 22)
	case a.provider == "openai" || a.provider == "azure.ai.openai":
		c.responseID = "chatcmpl-" + base62(g.r, 29)
	default:
		c.responseID = uuid(g.r)
	}
	if wantTools && len(a.tools) > 0 {
		n := 1
		if x := g.r.IntN(10); x >= 7 {
			n = 2 + x%2
		}
		c.output.role = "assistant"
		if g.r.IntN(3) == 0 { // a thought before the calls
			c.output.parts = append(c.output.parts, msgPart{kind: "text", content: g.p.sized(120, 0.7, 10, 1500)})
		}
		for range n {
			t := a.tools[g.r.IntN(len(a.tools))]
			id := "call_" + base62(g.r, 24)
			if strings.Contains(a.model, "claude") {
				id = "toolu_01" + base62(g.r, 22)
			}
			c.output.parts = append(c.output.parts, msgPart{kind: "tool_call", id: id, name: t.name, args: g.toolArgs(t)})
		}
		c.finish = "tool_calls"
	} else {
		c.output = chatMsg{role: "assistant", parts: []msgPart{{kind: "text", content: g.p.sized(600, 0.9, 5, 14000)}}}
		c.finish = "stop"
		if g.r.IntN(40) == 0 {
			c.finish = "length"
		}
	}
	chars := len(a.system)
	for _, m := range hist {
		for _, p := range m.parts {
			chars += len(p.content) + len(p.args)
		}
	}
	c.inTok = int64(chars/4 + 20 + g.r.IntN(40))
	outChars := 0
	for _, p := range c.output.parts {
		outChars += len(p.content) + len(p.args)
	}
	c.outTok = int64(outChars/4 + 1 + g.r.IntN(10))
	if len(hist) > 1 && g.r.IntN(3) > 0 {
		c.cacheRead = int64(len(a.system) / 4)
	} else if g.r.IntN(8) == 0 {
		c.cacheCreate = int64(len(a.system) / 4)
	}
	if a.reasoning {
		c.reasoning = int64(64 * (1 + g.r.IntN(40)))
	}
	if g.r.IntN(10) < 7 {
		c.temperature = float64(g.r.IntN(11)) / 10
	}
	if g.r.IntN(10) < 6 {
		c.maxTokens = int64([]int{256, 512, 1024, 2048, 4096, 8192}[g.r.IntN(6)])
	}
	if g.r.IntN(5) == 0 {
		c.topP = 0.9 + float64(g.r.IntN(10))/100
	}
	c.stream = g.r.IntN(3) == 0
	return c
}

// truncateHistory keeps the first message and as many of the latest as
// fit in about limit characters, as instrumentations cap what they record.
func truncateHistory(hist []chatMsg, limit int) []chatMsg {
	size := func(m chatMsg) int {
		n := 0
		for _, p := range m.parts {
			n += len(p.content) + len(p.args) + 40
		}
		return n
	}
	total := 0
	for _, m := range hist {
		total += size(m)
	}
	if total <= limit || len(hist) < 3 {
		return hist
	}
	out := []chatMsg{hist[0]}
	keep := size(hist[0])
	from := len(hist)
	for from > 1 && keep+size(hist[from-1]) <= limit {
		from--
		keep += size(hist[from])
	}
	if from == len(hist) {
		from = len(hist) - 1
	}
	return append(out, hist[from:]...)
}

// chatSpan records a model call and returns its span index.
func (g *traceGen) chatSpan(parent [8]byte, c *chatCall) int {
	i := g.addSpan(parent, "", kindClient, scopeLLM, nil)
	d := g.dur(time.Duration(300+c.outTok*12)*time.Millisecond, 0.5, 60*time.Millisecond, 120*time.Second)
	if c.failed {
		d = g.dur(400*time.Millisecond, 1, 5*time.Millisecond, 60*time.Second)
	}
	g.now += d
	sp := &g.spans[i]
	sp.end = g.now
	sp.name, sp.attrs, sp.events = g.chatAttrs(c, sp.start, sp.end)
	sp.attrs = g.withTail(sp.attrs)
	if c.failed {
		sp.status, sp.statusMsg = statusError, c.errMsg
		sp.events = append(sp.events, g.exception(sp.end, pyExceptionType(c.errType), c.errMsg))
	}
	if g.r.IntN(4) == 0 && !c.failed {
		// The provider SDK's own HTTP span under the model call.
		sp := g.spans[i]
		child := genSpan{id: g.newID(), parent: sp.id, name: "POST", kind: kindClient, scope: scopeHTTP,
			start: sp.start + 200_000, end: sp.end - 100_000, flags: 0x301,
			attrs: []kv{{"http.request.method", "POST"}, {"url.full", providerURL(c.agent.provider)},
				{"server.address", providerHost(c.agent.provider)}, {"server.port", int64(443)},
				{"http.response.status_code", int64(200)}, {"network.protocol.version", "2"}}}
		g.spans = append(g.spans, child)
	}
	return i
}

func providerHost(p string) string {
	switch p {
	case "anthropic":
		return "api.anthropic.com"
	case "aws.bedrock":
		return "bedrock-runtime.us-east-1.amazonaws.com"
	case "gcp.vertex_ai":
		return "us-central1-aiplatform.googleapis.com"
	case "mistral_ai":
		return "api.mistral.ai"
	case "azure.ai.openai":
		return "acme-prod.openai.azure.com"
	default:
		return "api.openai.com"
	}
}

func providerURL(p string) string {
	switch p {
	case "anthropic":
		return "https://api.anthropic.com/v1/messages"
	case "azure.ai.openai":
		return "https://acme-prod.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
	default:
		return "https://" + providerHost(p) + "/v1/chat/completions"
	}
}

func pyExceptionType(errType string) string {
	switch errType {
	case "overloaded_error":
		return "anthropic.InternalServerError"
	case "rate_limit_exceeded":
		return "openai.RateLimitError"
	default:
		return "httpx.ReadTimeout"
	}
}

// exception is an exception event with a stack trace of varied depth.
func (g *traceGen) exception(at int64, typ, msg string) genEvent {
	var b strings.Builder
	b.WriteString("Traceback (most recent call last):\n")
	for range 3 + g.r.IntN(20) {
		mod := identifier(g.r)
		b.WriteString("  File \"/app/.venv/lib/python3.12/site-packages/" + mod + "/" + identifier(g.r) + ".py\", line " +
			strconv.Itoa(1+g.r.IntN(2000)) + ", in " + identifier(g.r) + "\n    " + identifier(g.r) + " = " + identifier(g.r) + "(" + identifier(g.r) + ")\n")
	}
	b.WriteString(typ + ": " + msg)
	return genEvent{at: at, name: "exception", attrs: []kv{
		{"exception.type", typ}, {"exception.message", msg}, {"exception.stacktrace", b.String()}, {"exception.escaped", false},
	}}
}

// toolSpan runs one tool call: its span, its children (HTTP, SQL,
// retrieval or a sub-agent), and its result text.
func (g *traceGen) toolSpan(parent [8]byte, tc msgPart) string {
	var td toolDef
	for _, t := range g.agent.tools {
		if t.name == tc.name {
			td = t
		}
	}
	i := g.addSpan(parent, "", kindInternal, scopeAgent, nil)
	id := g.spans[i].id
	g.gap()
	failed := g.r.IntN(18) == 0
	result := g.toolChildren(id, td, tc, failed)
	g.now += g.dur(2*time.Millisecond, 1, 100*time.Microsecond, time.Second)
	sp := &g.spans[i]
	sp.end = g.now
	sp.name, sp.attrs = g.toolAttrs(td, tc, result, failed)
	sp.attrs = g.withTail(sp.attrs)
	if failed {
		typ, msg := toolError(g.r, g.p, td.kind)
		sp.status, sp.statusMsg = statusError, msg
		sp.attrs = append(sp.attrs, kv{"error.type", typ})
		sp.events = append(sp.events, g.exception(sp.end, typ, msg))
		return "Error: " + msg
	}
	return result
}

func toolError(r *rand.Rand, p *prose, kind string) (string, string) {
	switch kind {
	case "sql":
		return "psycopg.errors.UndefinedColumn", "column \"" + identifier(r) + "\" does not exist\nLINE 1: SELECT " + identifier(r) + ", " + identifier(r) + " FROM " + identifier(r) + " WHERE ..."
	case "http", "search":
		return "httpx.HTTPStatusError", "Server error '" + strconv.Itoa(500+r.IntN(5)) + " " + []string{"Internal Server Error", "Bad Gateway", "Service Unavailable", "Gateway Timeout"}[r.IntN(4)] + "' for url '" + p.url() + "'"
	case "file":
		return "FileNotFoundError", "[Errno 2] No such file or directory: '/workspace/" + identifier(r) + "/" + identifier(r) + ".py'"
	default:
		return "ValueError", p.sized(80, 0.6, 15, 400)
	}
}

// toolArgs draws a tool call's arguments, a JSON object.
func (g *traceGen) toolArgs(t toolDef) string {
	p, r := g.p, g.r
	switch t.kind {
	case "http":
		return `{"id":` + jsonQuote(strings.ToUpper(base62(r, 3))+"-"+strconv.Itoa(10000+r.IntN(90000))) + `,"query":` + jsonQuote(p.sized(40, 0.6, 5, 300)) + `,"limit":` + strconv.Itoa(1+r.IntN(50)) + `}`
	case "sql":
		return `{"query":` + jsonQuote(g.sql()) + `,"timeout_s":` + strconv.Itoa(5+r.IntN(60)) + `}`
	case "retrieval", "search":
		return `{"query":` + jsonQuote(p.sized(60, 0.6, 5, 400)) + `,"top_k":` + strconv.Itoa(3+r.IntN(20)) + `,"filters":{"source":` + jsonQuote(commonWords[r.IntN(300)]) + `}}`
	case "file":
		return `{"path":` + jsonQuote("src/"+identifier(r)+"/"+identifier(r)+".py") + `,"start_line":` + strconv.Itoa(1+r.IntN(900)) + `,"end_line":` + strconv.Itoa(900+r.IntN(400)) + `}`
	case "shell":
		return `{"command":` + jsonQuote([]string{"pytest -x -q tests/", "go test ./...", "ls -la", "git diff --stat", "make lint"}[r.IntN(5)]+" "+identifier(r)) + `}`
	case "subagent":
		return `{"task":` + jsonQuote(p.sized(200, 0.7, 20, 2000)) + `}`
	default:
		return `{"text":` + jsonQuote(p.sized(150, 1, 5, 3000)) + `,"mode":` + jsonQuote(commonWords[r.IntN(100)]) + `}`
	}
}

func (g *traceGen) sql() string {
	r := g.r
	cols := []string{}
	for range 1 + r.IntN(6) {
		cols = append(cols, identifier(r))
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + identifier(r) + " WHERE " + identifier(r) + " = '" + commonWords[r.IntN(400)] + "'"
	if r.IntN(2) == 0 {
		q += " AND created_at > '2025-" + twoDigits(1+r.IntN(12)) + "-" + twoDigits(1+r.IntN(28)) + "'"
	}
	if r.IntN(2) == 0 {
		q += " ORDER BY " + cols[0] + " DESC"
	}
	return q + " LIMIT " + strconv.Itoa(10*(1+r.IntN(20)))
}

// toolChildren records the spans a tool makes and returns its result.
func (g *traceGen) toolChildren(parent [8]byte, td toolDef, tc msgPart, failed bool) string {
	p, r := g.p, g.r
	switch td.kind {
	case "http", "search":
		method := []string{"GET", "GET", "POST"}[r.IntN(3)]
		url := p.url()
		host := url[len("https://"):]
		host = host[:strings.IndexByte(host, '/')]
		i := g.addSpan(parent, method, kindClient, scopeHTTP, []kv{{"http.request.method", method}, {"url.full", url},
			{"server.address", host}, {"server.port", int64(443)}, {"network.protocol.version", "1.1"}})
		g.now += g.dur(180*time.Millisecond, 1, 2*time.Millisecond, 30*time.Second)
		g.spans[i].end = g.now
		code := int64(200)
		if failed {
			code = int64(500 + r.IntN(5))
			g.spans[i].status = statusError
			g.spans[i].attrs = append(g.spans[i].attrs, kv{"error.type", strconv.Itoa(int(code))})
		}
		g.spans[i].attrs = append(g.spans[i].attrs, kv{"http.response.status_code", code}, kv{"http.response.body.size", int64(200 + r.IntN(200000))})
		var b strings.Builder
		b.WriteString(`{"results":[`)
		for k := range 1 + r.IntN(6) {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"title":` + jsonQuote(p.sized(50, 0.5, 10, 200)) + `,"url":` + jsonQuote(p.url()) + `,"snippet":` + jsonQuote(p.sized(220, 0.6, 20, 1200)) + `}`)
		}
		b.WriteString(`]}`)
		return b.String()
	case "sql":
		sys := []string{"postgresql", "postgresql", "mysql", "clickhouse"}[r.IntN(4)]
		table := identifier(r)
		q := g.sql()
		i := g.addSpan(parent, "SELECT "+table, kindClient, scopeDB, []kv{{"db.system.name", sys}, {"db.namespace", g.svc.name},
			{"db.collection.name", table}, {"db.operation.name", "SELECT"}, {"db.query.text", q},
			{"server.address", sys + "-" + strconv.Itoa(r.IntN(3)) + ".db.internal"}, {"server.port", int64(5432)}})
		g.now += g.dur(25*time.Millisecond, 1.2, 300*time.Microsecond, 20*time.Second)
		rows := r.IntN(40)
		g.spans[i].end = g.now
		g.spans[i].attrs = append(g.spans[i].attrs, kv{"db.response.returned_rows", int64(rows)})
		var b strings.Builder
		b.WriteString("[")
		for k := range min(rows, 12) {
			if k > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"id":` + strconv.Itoa(r.IntN(1_000_000)) + `,"name":` + jsonQuote(names[r.IntN(len(names))]+" "+commonWords[r.IntN(300)]) +
				`,"amount":` + strconv.FormatFloat(r.Float64()*5000, 'f', 2, 64) + `,"status":` + jsonQuote([]string{"open", "closed", "pending"}[r.IntN(3)]) + `}`)
		}
		b.WriteString("]")
		return b.String()
	case "retrieval":
		index := g.svc.name + "-" + []string{"kb", "docs", "papers"}[r.IntN(3)]
		i := g.addSpan(parent, "retrieval "+index, kindClient, scopeAgent, nil)
		g.now += g.dur(60*time.Millisecond, 0.8, time.Millisecond, 10*time.Second)
		var docs strings.Builder
		var result strings.Builder
		docs.WriteString("[")
		n := 3 + r.IntN(8)
		for k := range n {
			if k > 0 {
				docs.WriteByte(',')
				result.WriteString("\n\n")
			}
			id := "doc_" + base62(r, 10)
			docs.WriteString(`{"id":"` + id + `","score":` + strconv.FormatFloat(0.4+r.Float64()*0.6, 'f', 4, 64) + `}`)
			result.WriteString("[" + id + "] " + p.sized(300, 0.6, 30, 2000))
		}
		docs.WriteString("]")
		g.spans[i].end = g.now
		attrs := []kv{{"gen_ai.operation.name", "retrieval"}, {"gen_ai.data_source.id", index},
			{"gen_ai.request.top_k", int64(n)}, {"gen_ai.retrieval.documents", docs.String()}}
		if g.svc.capture {
			attrs = append(attrs, kv{"gen_ai.retrieval.query.text", p.sized(60, 0.6, 5, 400)})
		}
		g.spans[i].attrs = g.withTail(attrs)
		return result.String()
	case "subagent":
		sub := &g.svc.agents[r.IntN(len(g.svc.agents))]
		saved := g.agent
		g.agent = sub
		i := g.addSpan(parent, "invoke_agent "+sub.name, kindInternal, scopeAgent, []kv{{"gen_ai.operation.name", "invoke_agent"},
			{"gen_ai.agent.name", sub.name}, {"gen_ai.agent.id", sub.id}})
		user := chatMsg{role: "user", parts: []msgPart{{kind: "text", content: tc.args}}}
		call := g.newCall([]chatMsg{user}, false)
		g.chatSpan(g.spans[i].id, call)
		g.spans[i].end = g.now
		g.agent = saved
		return call.output.parts[0].content
	case "file":
		g.now += g.dur(4*time.Millisecond, 1, 100*time.Microsecond, time.Second)
		var b strings.Builder
		g.p.code(&b)
		return b.String()
	case "shell":
		g.now += g.dur(2*time.Second, 1, 20*time.Millisecond, 120*time.Second)
		var b strings.Builder
		for range 1 + r.IntN(30) {
			b.WriteString([]string{"PASS ", "ok   ", "FAIL ", "--- ", "=== RUN "}[r.IntN(5)] + identifier(r) + "/" + identifier(r) + " (" + strconv.FormatFloat(r.Float64()*3, 'f', 2, 64) + "s)\n")
		}
		return b.String()
	default:
		g.now += g.dur(10*time.Millisecond, 1, 100*time.Microsecond, 2*time.Second)
		return p.sized(120, 1, 2, 2000)
	}
}

func jsonQuote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
