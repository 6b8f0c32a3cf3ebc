package main

import (
	"strconv"
	"strings"
)

// The attributes of agent, model-call and tool spans in each
// instrumentation style.

// messagesJSON renders messages in the GenAI conventions' JSON form.
func messagesJSON(msgs []chatMsg, finish string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"` + m.role + `","parts":[`)
		for j, p := range m.parts {
			if j > 0 {
				b.WriteByte(',')
			}
			switch p.kind {
			case "tool_call":
				b.WriteString(`{"type":"tool_call","id":"` + p.id + `","name":"` + p.name + `","arguments":` + p.args + `}`)
			case "tool_call_response":
				b.WriteString(`{"type":"tool_call_response","id":"` + p.id + `","response":` + jsonQuote(p.content) + `}`)
			default:
				b.WriteString(`{"type":"text","content":` + jsonQuote(p.content) + `}`)
			}
		}
		b.WriteByte(']')
		if finish != "" {
			b.WriteString(`,"finish_reason":"` + finish + `"`)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

func textOf(m chatMsg) string {
	var parts []string
	for _, p := range m.parts {
		if p.content != "" {
			parts = append(parts, p.content)
		}
	}
	return strings.Join(parts, "\n")
}

func (g *traceGen) agentSpan(question, answer string, inTok, outTok int64) (string, []kv) {
	a := g.agent
	switch g.svc.style {
	case styleOpenLLMetry:
		attrs := []kv{{"traceloop.span.kind", "workflow"}, {"traceloop.entity.name", g.workflow}, {"traceloop.workflow.name", g.workflow},
			{"traceloop.association.properties.user_id", g.user}, {"traceloop.association.properties.session_id", g.session}}
		if g.svc.capture {
			attrs = append(attrs, kv{"traceloop.entity.input", `{"inputs":{"input":` + jsonQuote(question) + `},"tags":[],"metadata":{}}`},
				kv{"traceloop.entity.output", `{"outputs":{"output":` + jsonQuote(answer) + `}}`})
		}
		return g.workflow + ".workflow", attrs
	case styleOpenInference:
		attrs := []kv{{"openinference.span.kind", "AGENT"}, {"session.id", g.session}, {"user.id", g.user},
			{"metadata", `{"agent":"` + a.name + `","tenant":"` + strings.ToLower(base62(g.r, 6)) + `","ls_run_depth":0}`}}
		if g.svc.capture {
			attrs = append(attrs, kv{"input.value", question}, kv{"input.mime_type", "text/plain"},
				kv{"output.value", answer}, kv{"output.mime_type", "text/plain"})
		}
		return "AgentExecutor", attrs
	default:
		attrs := []kv{{"gen_ai.operation.name", "invoke_agent"}, {"gen_ai.agent.name", a.name}, {"gen_ai.agent.id", a.id},
			{"gen_ai.provider.name", a.provider}, {"gen_ai.request.model", a.model}, {"user.id", g.user}, {"session.id", g.session},
			{"gen_ai.usage.input_tokens", inTok}, {"gen_ai.usage.output_tokens", outTok}}
		if g.conv != "" {
			attrs = append(attrs, kv{"gen_ai.conversation.id", g.conv})
		}
		if g.r.IntN(3) == 0 {
			attrs = append(attrs, kv{"gen_ai.agent.description", a.description})
		}
		return "invoke_agent " + a.name, attrs
	}
}

func (g *traceGen) chatAttrs(c *chatCall, start, end int64) (string, []kv, []genEvent) {
	a := c.agent
	out := []chatMsg{c.output}
	switch g.svc.style {
	case styleOpenLLMetry:
		attrs := []kv{{"llm.request.type", "chat"}, {"gen_ai.system", a.provider}, {"gen_ai.request.model", a.model},
			{"llm.is_streaming", c.stream}, {"traceloop.workflow.name", g.workflow},
			{"traceloop.association.properties.session_id", g.session}}
		if !c.failed {
			attrs = append(attrs, kv{"gen_ai.response.model", a.respModel}, kv{"gen_ai.response.id", c.responseID},
				kv{"gen_ai.usage.prompt_tokens", c.inTok}, kv{"gen_ai.usage.completion_tokens", c.outTok},
				kv{"llm.usage.total_tokens", c.inTok + c.outTok})
			if c.cacheRead > 0 {
				attrs = append(attrs, kv{"gen_ai.usage.cache_read_input_tokens", c.cacheRead})
			}
		}
		if c.maxTokens > 0 {
			attrs = append(attrs, kv{"gen_ai.request.max_tokens", c.maxTokens})
		}
		if c.temperature > 0 {
			attrs = append(attrs, kv{"gen_ai.request.temperature", c.temperature})
		}
		if g.svc.capture {
			i := 0
			attrs = append(attrs, kv{"gen_ai.prompt.0.role", "system"}, kv{"gen_ai.prompt.0.content", a.system})
			for _, m := range c.input {
				i++
				pre := "gen_ai.prompt." + strconv.Itoa(i) + "."
				attrs = append(attrs, kv{pre + "role", m.role}, kv{pre + "content", textOf(m)})
				for j, p := range m.parts {
					if p.kind == "tool_call" {
						tp := pre + "tool_calls." + strconv.Itoa(j) + "."
						attrs = append(attrs, kv{tp + "id", p.id}, kv{tp + "name", p.name}, kv{tp + "arguments", p.args})
					}
				}
			}
			if !c.failed {
				attrs = append(attrs, kv{"gen_ai.completion.0.role", "assistant"}, kv{"gen_ai.completion.0.finish_reason", c.finish},
					kv{"gen_ai.completion.0.content", textOf(c.output)})
				for j, p := range c.output.parts {
					if p.kind == "tool_call" {
						tp := "gen_ai.completion.0.tool_calls." + strconv.Itoa(j) + "."
						attrs = append(attrs, kv{tp + "id", p.id}, kv{tp + "name", p.name}, kv{tp + "arguments", p.args})
					}
				}
			}
		}
		return strings.SplitN(a.provider, ".", 2)[0] + ".chat", attrs, nil
	case styleOpenInference:
		params := `{"model":"` + a.model + `","temperature":` + strconv.FormatFloat(c.temperature, 'f', 1, 64) + `,"stream":` + strconv.FormatBool(c.stream) + `}`
		attrs := []kv{{"openinference.span.kind", "LLM"}, {"llm.model_name", a.model}, {"llm.provider", a.provider},
			{"llm.system", strings.SplitN(a.provider, "_", 2)[0]}, {"llm.invocation_parameters", params},
			{"session.id", g.session}, {"user.id", g.user}}
		if !c.failed {
			attrs = append(attrs, kv{"llm.token_count.prompt", c.inTok}, kv{"llm.token_count.completion", c.outTok},
				kv{"llm.token_count.total", c.inTok + c.outTok})
		}
		if g.svc.capture {
			attrs = append(attrs, kv{"input.value", `{"messages":` + messagesJSON(c.input, "") + `}`}, kv{"input.mime_type", "application/json"},
				kv{"llm.input_messages.0.message.role", "system"}, kv{"llm.input_messages.0.message.content", a.system})
			for i, m := range c.input {
				pre := "llm.input_messages." + strconv.Itoa(i+1) + ".message."
				attrs = append(attrs, kv{pre + "role", m.role}, kv{pre + "content", textOf(m)})
			}
			if !c.failed {
				attrs = append(attrs, kv{"output.value", messagesJSON(out, c.finish)}, kv{"output.mime_type", "application/json"},
					kv{"llm.output_messages.0.message.role", "assistant"}, kv{"llm.output_messages.0.message.content", textOf(c.output)})
				for j, p := range c.output.parts {
					if p.kind == "tool_call" {
						tp := "llm.output_messages.0.message.tool_calls." + strconv.Itoa(j) + ".tool_call."
						attrs = append(attrs, kv{tp + "id", p.id}, kv{tp + "function.name", p.name}, kv{tp + "function.arguments", p.args})
					}
				}
			}
		}
		name := "ChatOpenAI"
		if strings.Contains(a.provider, "mistral") {
			name = "ChatMistralAI"
		}
		return name, attrs, nil
	default:
		attrs := []kv{{"gen_ai.operation.name", "chat"}, {"gen_ai.provider.name", a.provider}, {"gen_ai.request.model", a.model},
			{"server.address", providerHost(a.provider)}, {"server.port", int64(443)}}
		if g.r.IntN(2) == 0 {
			attrs = append(attrs, kv{"gen_ai.agent.name", a.name})
		}
		if g.conv != "" && g.r.IntN(5) > 0 {
			attrs = append(attrs, kv{"gen_ai.conversation.id", g.conv})
		}
		if c.temperature > 0 {
			attrs = append(attrs, kv{"gen_ai.request.temperature", c.temperature})
		}
		if c.maxTokens > 0 {
			attrs = append(attrs, kv{"gen_ai.request.max_tokens", c.maxTokens})
		}
		if c.topP > 0 {
			attrs = append(attrs, kv{"gen_ai.request.top_p", c.topP})
		}
		if c.stream {
			attrs = append(attrs, kv{"gen_ai.request.stream", true})
		}
		if c.failed {
			attrs = append(attrs, kv{"error.type", c.errType})
		} else {
			attrs = append(attrs, kv{"gen_ai.response.id", c.responseID}, kv{"gen_ai.response.model", a.respModel},
				kv{"gen_ai.response.finish_reasons", []string{c.finish}},
				kv{"gen_ai.usage.input_tokens", c.inTok}, kv{"gen_ai.usage.output_tokens", c.outTok})
			if c.cacheRead > 0 {
				attrs = append(attrs, kv{"gen_ai.usage.cache_read.input_tokens", c.cacheRead})
			}
			if c.cacheCreate > 0 {
				attrs = append(attrs, kv{"gen_ai.usage.cache_creation.input_tokens", c.cacheCreate})
			}
			if c.reasoning > 0 {
				attrs = append(attrs, kv{"gen_ai.usage.reasoning.output_tokens", c.reasoning})
			}
		}
		var events []genEvent
		if g.svc.capture {
			content := []kv{{"gen_ai.system_instructions", `[{"type":"text","content":` + jsonQuote(a.system) + `}]`},
				{"gen_ai.input.messages", messagesJSON(c.input, "")}}
			if !c.failed {
				content = append(content, kv{"gen_ai.output.messages", messagesJSON(out, c.finish)})
			}
			if g.r.IntN(5) == 0 {
				// Content on the inference-details event instead of the span.
				events = append(events, genEvent{at: end, name: "gen_ai.client.inference.operation.details", attrs: content})
			} else {
				attrs = append(attrs, content...)
			}
		}
		if c.stream && !c.failed {
			events = append(events, genEvent{at: start + (end-start)/5, name: "gen_ai.first_token", attrs: []kv{{"gen_ai.response.time_to_first_chunk", float64(end-start) / 5e9}}})
		}
		return "chat " + a.model, attrs, events
	}
}

func (g *traceGen) toolAttrs(td toolDef, tc msgPart, result string, failed bool) (string, []kv) {
	switch g.svc.style {
	case styleOpenLLMetry:
		attrs := []kv{{"traceloop.span.kind", "tool"}, {"traceloop.entity.name", td.name},
			{"traceloop.entity.path", g.workflow + "." + g.agent.name}, {"traceloop.workflow.name", g.workflow}}
		if g.svc.capture {
			attrs = append(attrs, kv{"traceloop.entity.input", `{"args":[],"kwargs":` + tc.args + `}`})
			if !failed {
				attrs = append(attrs, kv{"traceloop.entity.output", jsonQuote(result)})
			}
		}
		return td.name + ".tool", attrs
	case styleOpenInference:
		attrs := []kv{{"openinference.span.kind", "TOOL"}, {"tool.name", td.name}, {"tool.description", td.description},
			{"tool.parameters", td.schema}, {"tool_call.id", tc.id}}
		if g.svc.capture {
			attrs = append(attrs, kv{"input.value", tc.args}, kv{"input.mime_type", "application/json"})
			if !failed {
				attrs = append(attrs, kv{"output.value", result}, kv{"output.mime_type", "text/plain"})
			}
		}
		return td.name, attrs
	default:
		attrs := []kv{{"gen_ai.operation.name", "execute_tool"}, {"gen_ai.tool.name", td.name}, {"gen_ai.tool.call.id", tc.id},
			{"gen_ai.tool.type", []string{"function", "function", "extension", "datastore"}[len(td.name)%4]}}
		if g.r.IntN(3) == 0 {
			attrs = append(attrs, kv{"gen_ai.tool.description", td.description})
		}
		if g.svc.capture {
			attrs = append(attrs, kv{"gen_ai.tool.call.arguments", tc.args})
			if !failed && g.r.IntN(10) < 7 {
				attrs = append(attrs, kv{"gen_ai.tool.call.result", result})
			}
		}
		return "execute_tool " + td.name, attrs
	}
}
