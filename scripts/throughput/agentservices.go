package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Instrumentation styles: which attribute keys a service's spans carry.
// Agent traffic arrives in all three today.
const (
	styleSemconv       = iota // OpenTelemetry GenAI semantic conventions (gen_ai.input.messages, …)
	styleOpenLLMetry          // Traceloop's keys (gen_ai.prompt.N.content, traceloop.*)
	styleOpenInference        // Arize's keys (llm.input_messages.N.message.*, input.value, …)
)

// Scope indexes within a service's scopes.
const (
	scopeAgent = iota
	scopeLLM
	scopeHTTP
	scopeDB
)

type scopeDef struct {
	name, version string
	attrs         []kv
}

type toolDef struct {
	name, kind, description string
	schema                  string // JSON schema of its parameters
}

type agentDef struct {
	name, id, description string
	provider, model       string
	respModel             string
	system                string // system instructions, repeated in every call it makes
	tools                 []toolDef
	reasoning             bool
}

// service is one instrumented process type: its resource (per replica),
// scopes, agents, and how it records content.
type service struct {
	name    string
	style   int
	lang    string
	capture bool // records message content
	topic   int
	weight  int
	// singleCall: its traces are mostly one model call (a classifier).
	singleCall bool
	agents     []agentDef
	scopes     []scopeDef
	resources  [][]byte // Resource message bodies, one per replica
}

type serviceSpec struct {
	name, lang, provider, model string
	style, topic, weight        int
	capture, single, reasoning  bool
	replicas                    int
	agents                      []string
	tools                       []string
}

var serviceSpecs = []serviceSpec{
	{name: "support-bot", lang: "python", provider: "openai", model: "gpt-4o", style: styleSemconv, topic: 0, weight: 22, capture: true, replicas: 12,
		agents: []string{"triage", "refund-specialist", "escalation"}, tools: []string{"lookup_order", "search_kb", "create_ticket", "send_email", "issue_refund"}},
	{name: "code-assistant", lang: "python", provider: "anthropic", model: "claude-sonnet-4-5", style: styleSemconv, topic: 1, weight: 16, capture: true, replicas: 6,
		agents: []string{"coder", "reviewer"}, tools: []string{"read_file", "run_tests", "search_code", "apply_patch", "shell"}},
	{name: "finance-analyst", lang: "python", provider: "openai", model: "gpt-4.1", style: styleOpenLLMetry, topic: 2, weight: 9, capture: true, replicas: 3,
		agents: []string{"analyst"}, tools: []string{"run_sql", "fetch_filing", "calculator", "make_chart"}},
	{name: "care-navigator", lang: "java", provider: "aws.bedrock", model: "anthropic.claude-3-5-haiku-20241022-v1:0", style: styleSemconv, topic: 3, weight: 7, capture: false, replicas: 4,
		agents: []string{"navigator", "scheduler"}, tools: []string{"find_provider", "check_coverage", "book_appointment"}},
	{name: "travel-planner", lang: "typescript", provider: "openai", model: "gpt-4o-mini", style: styleOpenInference, topic: 4, weight: 8, capture: true, replicas: 5,
		agents: []string{"planner"}, tools: []string{"search_flights", "search_hotels", "get_weather", "http_get"}},
	{name: "research-assistant", lang: "python", provider: "anthropic", model: "claude-opus-4-1", style: styleSemconv, topic: 5, weight: 8, capture: true, replicas: 3,
		agents: []string{"researcher", "summarizer"}, tools: []string{"web_search", "fetch_url", "retrieve_papers", "ask_summarizer"}},
	{name: "contract-review", lang: "python", provider: "gcp.vertex_ai", model: "gemini-2.5-pro", style: styleOpenLLMetry, topic: 6, weight: 5, capture: true, replicas: 2,
		agents: []string{"reviewer"}, tools: []string{"retrieve_clauses", "compare_versions", "redline"}},
	{name: "plant-monitor", lang: "go", provider: "openai", model: "o4-mini", style: styleSemconv, topic: 7, weight: 5, capture: false, replicas: 8, reasoning: true,
		agents: []string{"diagnostician"}, tools: []string{"query_telemetry", "run_sql", "open_work_order"}},
	{name: "email-triage", lang: "typescript", provider: "mistral_ai", model: "mistral-large-latest", style: styleOpenInference, topic: 0, weight: 6, capture: true, replicas: 4,
		agents: []string{"triager"}, tools: []string{"classify", "draft_reply", "lookup_customer"}},
	{name: "sales-copilot", lang: "python", provider: "azure.ai.openai", model: "gpt-4o", style: styleSemconv, topic: 2, weight: 6, capture: true, replicas: 3,
		agents: []string{"copilot"}, tools: []string{"crm_search", "run_sql", "send_email", "calendar_lookup"}},
	{name: "docs-qa", lang: "go", provider: "openai", model: "gpt-4.1-mini", style: styleSemconv, topic: 1, weight: 5, capture: true, replicas: 6,
		agents: []string{"answerer"}, tools: []string{"retrieve_docs", "http_get"}},
	{name: "batch-classifier", lang: "python", provider: "openai", model: "gpt-4o-mini", style: styleOpenLLMetry, topic: 3, weight: 3, capture: false, single: true, replicas: 2,
		agents: []string{"classifier"}, tools: []string{"classify"}},
}

// toolKind says what a tool's arguments, result and child spans look like.
var toolKind = map[string]string{
	"lookup_order": "http", "search_kb": "retrieval", "create_ticket": "http", "send_email": "http", "issue_refund": "http",
	"read_file": "file", "run_tests": "shell", "search_code": "retrieval", "apply_patch": "file", "shell": "shell",
	"run_sql": "sql", "fetch_filing": "http", "calculator": "calc", "make_chart": "calc",
	"find_provider": "sql", "check_coverage": "http", "book_appointment": "http",
	"search_flights": "http", "search_hotels": "http", "get_weather": "http", "http_get": "http",
	"web_search": "search", "fetch_url": "http", "retrieve_papers": "retrieval", "ask_summarizer": "subagent",
	"retrieve_clauses": "retrieval", "compare_versions": "calc", "redline": "file",
	"query_telemetry": "sql", "open_work_order": "http",
	"classify": "calc", "draft_reply": "calc", "lookup_customer": "sql",
	"crm_search": "http", "calendar_lookup": "http", "retrieve_docs": "retrieval",
}

func scopesFor(style int, lang string) []scopeDef {
	switch {
	case lang == "go":
		return []scopeDef{{"github.com/acme/agentkit", "v1.4.2", nil}, {"github.com/acme/agentkit/llm", "v1.4.2", nil},
			{"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", "0.63.0", nil}, {"github.com/XSAM/otelsql", "0.40.0", nil}}
	case lang == "java":
		return []scopeDef{{"io.opentelemetry.spring-ai-1.0", "2.18.0-alpha", nil}, {"io.opentelemetry.aws-sdk-2.2", "2.18.0-alpha", nil},
			{"io.opentelemetry.java-http-client", "2.18.0-alpha", nil}, {"io.opentelemetry.jdbc", "2.18.0-alpha", nil}}
	case style == styleOpenLLMetry:
		return []scopeDef{{"opentelemetry.instrumentation.langchain", "0.47.3", nil}, {"opentelemetry.instrumentation.openai", "0.47.3", nil},
			{"opentelemetry.instrumentation.requests", "0.58b0", nil}, {"opentelemetry.instrumentation.sqlalchemy", "0.58b0", nil}}
	case style == styleOpenInference:
		return []scopeDef{{"openinference.instrumentation.langchain", "0.1.51", nil}, {"openinference.instrumentation.openai", "0.1.31", nil},
			{"@opentelemetry/instrumentation-undici", "0.14.0", nil}, {"@opentelemetry/instrumentation-pg", "0.55.0", nil}}
	default:
		return []scopeDef{{"opentelemetry.instrumentation.openai_agents", "0.3.1", []kv{{"instrumentation.mode", "auto"}}},
			{"opentelemetry.instrumentation.openai_v2", "2.2b0", nil},
			{"opentelemetry.instrumentation.httpx", "0.58b0", nil}, {"opentelemetry.instrumentation.psycopg", "0.58b0", nil}}
	}
}

// makeServices builds the services from seed: names and shapes are fixed,
// system prompts, tool descriptions and replica resources are drawn.
func makeServices(seed uint64) []*service {
	out := make([]*service, len(serviceSpecs))
	for i, sp := range serviceSpecs {
		r := rand.New(rand.NewPCG(seed, uint64(i)*0x9e3779b97f4a7c15+1))
		p := newProse(r, sp.topic)
		s := &service{name: sp.name, style: sp.style, lang: sp.lang, capture: sp.capture, topic: sp.topic,
			weight: sp.weight, singleCall: sp.single, scopes: scopesFor(sp.style, sp.lang)}
		var tools []toolDef
		for _, t := range sp.tools {
			tools = append(tools, toolDef{name: t, kind: toolKind[t], description: p.sized(90, 0.5, 20, 400), schema: toolSchema(r, p, t)})
		}
		for _, a := range sp.agents {
			ad := agentDef{name: a, id: "asst_" + base62(r, 24), description: p.sized(80, 0.6, 20, 300),
				provider: sp.provider, model: sp.model, respModel: respModel(sp.model, r), reasoning: sp.reasoning}
			var b strings.Builder
			b.WriteString("You are " + a + ", an assistant for " + sp.name + ". ")
			p.text(&b, lognormal(r, 700, 0.7, 150, 5000))
			ad.system = b.String()
			// Each agent uses most of the service's tools.
			for _, t := range tools {
				if r.IntN(5) > 0 || len(ad.tools) == 0 {
					ad.tools = append(ad.tools, t)
				}
			}
			s.agents = append(s.agents, ad)
		}
		version := fmt.Sprintf("%d.%d.%d", 1+r.IntN(4), r.IntN(20), r.IntN(30))
		for k := range sp.replicas {
			s.resources = append(s.resources, resourceFor(r, s, version, k))
		}
		out[i] = s
	}
	return out
}

func resourceFor(r *rand.Rand, s *service, version string, replica int) []byte {
	pod := s.name + "-" + strings.ToLower(base62(r, 10)) + "-" + strings.ToLower(base62(r, 5))
	sdk := map[string][2]string{"python": {"python", "1.37.0"}, "go": {"go", "1.38.0"}, "typescript": {"nodejs", "2.1.0"}, "java": {"java", "1.54.1"}}[s.lang]
	attrs := []kv{
		{"service.name", s.name},
		{"service.version", version},
		{"service.namespace", "agents"},
		{"service.instance.id", uuid(r)},
		{"deployment.environment.name", []string{"production", "production", "production", "staging"}[replica%4]},
		{"telemetry.sdk.name", "opentelemetry"},
		{"telemetry.sdk.language", sdk[0]},
		{"telemetry.sdk.version", sdk[1]},
		{"host.name", pod},
		{"host.arch", "amd64"},
		{"os.type", "linux"},
		{"process.pid", int64(1 + r.IntN(60000))},
		{"process.runtime.name", map[string]string{"python": "cpython", "go": "go", "typescript": "nodejs", "java": "OpenJDK Runtime Environment"}[s.lang]},
		{"k8s.namespace.name", "agents-" + []string{"prod", "prod", "prod", "staging"}[replica%4]},
		{"k8s.pod.name", pod},
		{"k8s.node.name", "ip-10-" + strconv.Itoa(r.IntN(255)) + "-" + strconv.Itoa(r.IntN(255)) + "-" + strconv.Itoa(r.IntN(255)) + ".ec2.internal"},
		{"cloud.provider", "aws"},
		{"cloud.region", []string{"us-east-1", "eu-west-1", "ap-southeast-2"}[replica%3]},
		{"container.id", hexString(r, 32)},
	}
	if s.lang == "python" {
		attrs = append(attrs, kv{"process.runtime.version", "3.12." + strconv.Itoa(r.IntN(10))})
	}
	var res []byte
	res = appendAttributes(res, 1, attrs)
	return res
}

func respModel(model string, r *rand.Rand) string {
	switch {
	case strings.HasPrefix(model, "gpt-"), strings.HasPrefix(model, "o4"):
		return model + "-2025-0" + strconv.Itoa(1+r.IntN(9)) + "-" + twoDigits(1+r.IntN(28))
	case strings.HasPrefix(model, "claude"):
		return model + "-2025" + twoDigits(1+r.IntN(12)) + twoDigits(1+r.IntN(28))
	default:
		return model
	}
}

// toolSchema is a JSON schema of a tool's parameters, as agent frameworks
// send with every call (openinference records it on every tool span).
func toolSchema(r *rand.Rand, p *prose, tool string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	n := 1 + r.IntN(5)
	var req []string
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		name := identifier(r)
		typ := []string{"string", "integer", "boolean", "number", "array"}[r.IntN(5)]
		b.WriteString(jsonQuote(name) + `:{"type":"` + typ + `","description":` + jsonQuote(p.sized(50, 0.5, 10, 200)) + `}`)
		if r.IntN(2) == 0 {
			req = append(req, jsonQuote(name))
		}
	}
	b.WriteString(`},"required":[` + strings.Join(req, ",") + `],"title":` + jsonQuote(tool) + `}`)
	return b.String()
}

const b62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func base62(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = b62[r.IntN(62)]
	}
	return string(b)
}

func hexString(r *rand.Rand, n int) string {
	const hx = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = hx[r.IntN(16)]
	}
	return string(b)
}

func uuid(r *rand.Rand) string {
	h := hexString(r, 32)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-" + h[16:20] + "-" + h[20:]
}

// longTailKeys are attribute keys a few spans carry: feature flags,
// tenant and experiment metadata, framework internals. Drawn with a Zipf
// distribution, so a handful are common and most are rare.
func longTailKeys(seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 77))
	prefixes := []string{"app.", "custom.", "tenant.", "feature_flag.", "experiment.", "langgraph.", "langchain.metadata.",
		"request.", "user.", "billing.", "ab_test.", "workflow.", "queue.", "cache.", "guardrails.", "rag.", "eval.", "prompt.template."}
	seen := map[string]bool{}
	var out []string
	for len(out) < 600 {
		k := prefixes[r.IntN(len(prefixes))] + syllables[r.IntN(len(syllables))]
		if r.IntN(2) == 0 {
			k += "." + syllables[r.IntN(len(syllables))]
		}
		if r.IntN(4) == 0 {
			k += "_" + commonWords[r.IntN(200)]
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
