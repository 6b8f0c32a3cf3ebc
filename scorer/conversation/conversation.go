// Package conversation reads the messages a span captured — what a model
// call was sent and what it answered — out of the shapes senders use, into
// one form: a list of input messages (system instructions first) and a
// list of output messages, each a role and parts (text, tool calls with
// their arguments, tool results, reasoning, anything else described).
//
// The shapes, in the order they are tried (input and output separately;
// the first shape that yields messages wins):
//
//   - the GenAI convention's JSON attributes gen_ai.system_instructions,
//     gen_ai.input.messages and gen_ai.output.messages (roles and parts of
//     type text, tool_call {id, name, arguments}, tool_call_response {id,
//     response}, reasoning, blob, uri, file), also read leniently in the
//     OpenAI chat shape (content strings or part lists, tool_calls,
//     tool_call_id) that some senders put there;
//   - the same attributes on a gen_ai.client.inference.operation.details
//     event;
//   - OpenInference's flattened llm.input_messages.<i>.message.* and
//     llm.output_messages.<i>.message.* (role, content, contents, tool
//     calls, tool_call_id);
//   - OpenLLMetry's flattened gen_ai.prompt.<i>.* and gen_ai.completion.<i>.*
//     (role, content, tool_calls, tool_call_id, finish_reason);
//   - OpenInference's input.value / output.value: a JSON chat request's
//     messages or a chat completion's choices when it is one, else the
//     value as one user (or assistant) text.
//
// Both the graders (scorer/grade reads a trace's task and answer from it)
// and the web UI (the span panel's conversation view) read content here, so
// they cannot disagree about what a span said. Content capture is opt-in at
// every sender: a span without any of these yields an empty Conversation.
package conversation

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Kind is what a part holds.
type Kind string

// The part kinds.
const (
	// Text is text (Part.Text).
	Text Kind = "text"
	// ToolCall is a call the model asked for (Part.ID, Part.Name,
	// Part.Arguments).
	ToolCall Kind = "tool_call"
	// ToolResult is a tool's answer to a call (Part.ID, Part.Response).
	ToolResult Kind = "tool_call_response"
	// Reasoning is the model's reasoning text (Part.Text).
	Reasoning Kind = "reasoning"
	// Other is a part this package shows but does not interpret (an image,
	// a file, a blob, a type it does not know): Part.Type is the sender's
	// type and Part.Text describes it (a URI, a file id, a size, or the
	// part's JSON).
	Other Kind = "other"
)

// Part is one piece of a message.
type Part struct {
	Kind Kind   `json:"kind"`
	Type string `json:"type,omitempty"` // the sender's type, for Other
	Text string `json:"text,omitempty"`
	// ID is a tool call's id (ToolCall), or the id of the call a result
	// answers (ToolResult).
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"` // the tool a ToolCall calls
	// Arguments are a ToolCall's arguments as sent: JSON text when they
	// were JSON (an object sent as a structure is written as JSON).
	Arguments string `json:"arguments,omitempty"`
	// Response is a ToolResult's content as sent (JSON text for a
	// structure).
	Response string `json:"response,omitempty"`
}

// Message is one turn: a role (system, user, assistant, tool, or whatever
// the sender wrote; "" when it wrote none) and its parts.
type Message struct {
	Role         string `json:"role"`
	Name         string `json:"name,omitempty"`
	Parts        []Part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// Text joins the message's text parts with newlines (not reasoning, not
// tool calls or results).
func (m Message) Text() string {
	var out []string
	for _, p := range m.Parts {
		if p.Kind == Text && p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// Conversation is what one span captured.
type Conversation struct {
	// Input is what the call was sent: the system instructions (as one
	// message of role "system") and then the input messages.
	Input []Message `json:"input,omitempty"`
	// Output is what the call answered.
	Output []Message `json:"output,omitempty"`
	// Sources name where the messages were read, in the order read (e.g.
	// "gen_ai.input.messages", "event gen_ai.client.inference.operation.details",
	// "llm.input_messages.*", "gen_ai.prompt.*", "input.value").
	Sources []string `json:"sources,omitempty"`

	attrs  map[string]bool // span attribute keys whose content is in Input/Output
	events map[string]bool // keys of inference-details event attributes likewise
}

// Empty reports whether the span captured no messages at all.
func (c *Conversation) Empty() bool { return len(c.Input) == 0 && len(c.Output) == 0 }

// ShowsAttribute reports whether the span attribute key's content is part
// of the conversation (so a view showing the conversation need not show the
// raw value again).
func (c *Conversation) ShowsAttribute(key string) bool { return c.attrs[key] }

// ShowsEventAttribute reports the same for an attribute of a
// gen_ai.client.inference.operation.details event.
func (c *Conversation) ShowsEventAttribute(key string) bool { return c.events[key] }

// FromSpan reads the conversation a span captured. It never fails: a value
// it cannot read as messages is kept as text when it is the only content
// (input.value, output.value) and otherwise left out (the raw attribute
// stays on the span for a view to show).
func FromSpan(s *store.Span) Conversation {
	c := Conversation{attrs: map[string]bool{}, events: map[string]bool{}}
	var details []store.Attributes
	for _, e := range s.Events {
		if e.Name == semconv.EventInferenceOperationDetails {
			details = append(details, e.Attributes)
		}
	}
	// genAI reads one GenAI JSON key, from the span's attributes, else from
	// the first details event carrying it.
	genAI := func(key, defaultRole string, system bool) []Message {
		if ms := parseGenAI(s.Attributes[key], defaultRole, system); len(ms) > 0 {
			c.attrs[key] = true
			c.addSource(key)
			return ms
		}
		for _, a := range details {
			if ms := parseGenAI(a[key], defaultRole, system); len(ms) > 0 {
				c.events[key] = true
				c.addSource("event " + semconv.EventInferenceOperationDetails)
				return ms
			}
		}
		return nil
	}

	c.Input = append(c.Input, genAI(semconv.AttrSystemInstructions, "system", true)...)
	in := genAI(semconv.AttrInputMessages, "user", false)
	if len(in) == 0 {
		in = c.flattened(s.Attributes, semconv.OpenInferenceInputMessagesPrefix, openInferenceMessage)
	}
	if len(in) == 0 {
		in = c.flattened(s.Attributes, semconv.AttrPromptPrefix, openLLMetryMessage)
	}
	if len(in) == 0 {
		in = c.value(s.Attributes, semconv.OpenInferenceInputValue, "user")
	}
	c.Input = append(c.Input, in...)

	c.Output = genAI(semconv.AttrOutputMessages, "assistant", false)
	if len(c.Output) == 0 {
		c.Output = c.flattened(s.Attributes, semconv.OpenInferenceOutputMessagesPrefix, openInferenceMessage)
	}
	if len(c.Output) == 0 {
		c.Output = c.flattened(s.Attributes, semconv.AttrCompletionPrefix, openLLMetryMessage)
	}
	if len(c.Output) == 0 {
		c.Output = c.value(s.Attributes, semconv.OpenInferenceOutputValue, "assistant")
	}
	return c
}

func (c *Conversation) addSource(src string) {
	for _, s := range c.Sources {
		if s == src {
			return
		}
	}
	c.Sources = append(c.Sources, src)
}

// --- GenAI JSON ---

// decode reads an attribute value as JSON: a string holding JSON, or a
// structure the sender sent as an AnyValue (kept as []any / map[string]any).
// Numbers are kept as their literals (json.Number), so re-encoded
// arguments say what was sent.
func decode(v any) (any, bool) {
	switch t := v.(type) {
	case nil:
		return nil, false
	case string:
		dec := json.NewDecoder(strings.NewReader(t))
		dec.UseNumber()
		var out any
		if dec.Decode(&out) != nil || strings.TrimSpace(t[dec.InputOffset():]) != "" {
			return nil, false
		}
		return out, true
	default:
		return v, true
	}
}

// parseGenAI reads gen_ai.input.messages / gen_ai.output.messages (a list
// of messages) or gen_ai.system_instructions (system: a list of parts, or
// a plain string).
func parseGenAI(v any, defaultRole string, system bool) []Message {
	if v == nil {
		return nil
	}
	if s, ok := v.(string); ok && system {
		if _, isJSON := decode(s); !isJSON && strings.TrimSpace(s) != "" {
			return []Message{{Role: defaultRole, Parts: []Part{{Kind: Text, Text: s}}}}
		}
	}
	d, ok := decode(v)
	if !ok {
		return nil
	}
	return messagesOf(d, defaultRole)
}

// messagesOf reads a decoded JSON value as messages: a list of messages, a
// list of bare parts (one message of defaultRole), one message, or an
// object holding "messages".
func messagesOf(d any, defaultRole string) []Message {
	switch t := d.(type) {
	case []any:
		var out []Message
		var loose []Part // parts with no message around them
		for _, e := range t {
			m, ok := e.(map[string]any)
			if !ok {
				if s, ok := e.(string); ok && s != "" {
					loose = append(loose, Part{Kind: Text, Text: s})
				}
				continue
			}
			if isMessage(m) {
				out = append(out, messageOf(m, defaultRole))
			} else {
				loose = append(loose, partOf(m))
			}
		}
		if len(loose) > 0 {
			out = append([]Message{{Role: defaultRole, Parts: loose}}, out...)
		}
		return out
	case map[string]any:
		if ms, ok := t["messages"].([]any); ok {
			return messagesOf(ms, defaultRole)
		}
		if isMessage(t) {
			return []Message{messageOf(t, defaultRole)}
		}
	case string:
		if t != "" {
			return []Message{{Role: defaultRole, Parts: []Part{{Kind: Text, Text: t}}}}
		}
	}
	return nil
}

func isMessage(m map[string]any) bool {
	for _, k := range []string{"role", "parts", "tool_calls", "finish_reason"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	_, hasContent := m["content"]
	_, hasType := m["type"]
	return hasContent && !hasType
}

func messageOf(m map[string]any, defaultRole string) Message {
	msg := Message{Role: str(m["role"]), Name: str(m["name"]), FinishReason: str(m["finish_reason"])}
	if _, ok := m["role"]; !ok {
		msg.Role = defaultRole
	}
	toolCallID := str(m["tool_call_id"])
	switch c := m["content"].(type) {
	case string:
		if c != "" {
			if toolCallID != "" {
				msg.Parts = append(msg.Parts, Part{Kind: ToolResult, ID: toolCallID, Response: c})
			} else {
				msg.Parts = append(msg.Parts, Part{Kind: Text, Text: c})
			}
		}
	case []any:
		msg.Parts = append(msg.Parts, partsOf(c)...)
	case nil:
	default:
		msg.Parts = append(msg.Parts, Part{Kind: Other, Type: "content", Text: jsonText(c)})
	}
	if ps, ok := m["parts"].([]any); ok {
		msg.Parts = append(msg.Parts, partsOf(ps)...)
	}
	if tcs, ok := m["tool_calls"].([]any); ok {
		for _, tc := range tcs {
			if t, ok := tc.(map[string]any); ok {
				msg.Parts = append(msg.Parts, toolCallOf(t))
			}
		}
	}
	return msg
}

func partsOf(ps []any) []Part {
	var out []Part
	for _, p := range ps {
		switch t := p.(type) {
		case map[string]any:
			out = append(out, partOf(t))
		case string:
			if t != "" {
				out = append(out, Part{Kind: Text, Text: t})
			}
		}
	}
	return out
}

// partOf reads one part: the GenAI convention's types, and the OpenAI and
// Anthropic spellings of the same things.
func partOf(m map[string]any) Part {
	typ := str(m["type"])
	switch typ {
	case "text", "input_text", "output_text", "":
		if s, ok := m["content"].(string); ok {
			return Part{Kind: Text, Text: s}
		}
		if s, ok := m["text"].(string); ok {
			return Part{Kind: Text, Text: s}
		}
		if typ == "" {
			if _, ok := m["function"]; ok {
				return toolCallOf(m)
			}
		}
	case "tool_call", "function_call", "tool_use", "function", "server_tool_call":
		return toolCallOf(m)
	case "tool_call_response", "tool_result", "function_call_output", "server_tool_call_response":
		id := str(m["id"])
		if id == "" {
			id = firstStr(m, "tool_use_id", "call_id", "tool_call_id")
		}
		var resp any
		for _, k := range []string{"response", "result", "content", "output"} {
			if r, ok := m[k]; ok {
				resp = r
				break
			}
		}
		return Part{Kind: ToolResult, ID: id, Response: jsonText(resp)}
	case "reasoning", "thinking":
		return Part{Kind: Reasoning, Text: firstStr(m, "content", "thinking", "text")}
	case "uri", "image_url":
		u := firstStr(m, "uri", "url")
		if iu, ok := m["image_url"].(map[string]any); ok && u == "" {
			u = str(iu["url"])
		}
		if u == "" {
			if s, ok := m["image_url"].(string); ok {
				u = s
			}
		}
		return Part{Kind: Other, Type: typ, Text: join(str(m["modality"]), str(m["mime_type"]), u)}
	case "file":
		return Part{Kind: Other, Type: typ, Text: join(str(m["modality"]), str(m["mime_type"]), "file "+firstStr(m, "file_id", "id"))}
	case "blob":
		content := str(m["content"])
		return Part{Kind: Other, Type: typ, Text: join(str(m["modality"]), str(m["mime_type"]), strconv.Itoa(len(content))+" bytes of base64")}
	}
	return Part{Kind: Other, Type: typ, Text: jsonText(m)}
}

// toolCallOf reads a tool call: the GenAI part {id, name, arguments}, the
// OpenAI {id, function: {name, arguments}} and Anthropic {id, name, input}.
func toolCallOf(m map[string]any) Part {
	p := Part{Kind: ToolCall, ID: firstStr(m, "id", "call_id"), Name: str(m["name"])}
	args, ok := m["arguments"]
	if !ok {
		args, ok = m["input"]
	}
	if f, isFn := m["function"].(map[string]any); isFn {
		if p.Name == "" {
			p.Name = str(f["name"])
		}
		if !ok {
			args = f["arguments"]
		}
	}
	p.Arguments = jsonText(args)
	return p
}

// --- flattened shapes (OpenInference, OpenLLMetry) ---

// group is the fields of one indexed entry of a flattened list: the keys
// after "<prefix><i>.".
type group struct {
	index  int
	fields map[string]any
	keys   []string // the full attribute keys, to mark them shown
}

// groups collects the entries of the flattened list under prefix, ordered
// by index. Keys whose index is not a small non-negative number are left
// out.
func groups(a map[string]any, prefix string) []group {
	byIndex := map[int]*group{}
	for k, v := range a {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		num, field, ok := strings.Cut(rest, ".")
		if !ok || field == "" {
			continue
		}
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 || i > 1<<20 || strconv.Itoa(i) != num {
			continue
		}
		g := byIndex[i]
		if g == nil {
			g = &group{index: i, fields: map[string]any{}}
			byIndex[i] = g
		}
		g.fields[field] = v
		g.keys = append(g.keys, k)
	}
	out := make([]group, 0, len(byIndex))
	for _, g := range byIndex {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].index < out[j].index })
	return out
}

// flattened reads the messages flattened under prefix with read, marking
// the keys of every entry that made a message as shown.
func (c *Conversation) flattened(a store.Attributes, prefix string, read func(map[string]any) (Message, bool)) []Message {
	var out []Message
	for _, g := range groups(a, prefix) {
		m, ok := read(g.fields)
		if !ok {
			continue
		}
		out = append(out, m)
		for _, k := range g.keys {
			c.attrs[k] = true
		}
	}
	if len(out) > 0 {
		c.addSource(prefix + "*")
	}
	return out
}

func openInferenceMessage(f map[string]any) (Message, bool) {
	m := Message{Role: str(f[semconv.OpenInferenceMessageRole]), Name: str(f[semconv.OpenInferenceMessageName])}
	toolCallID := str(f[semconv.OpenInferenceMessageToolCallID])
	if s := str(f[semconv.OpenInferenceMessageContent]); s != "" {
		if toolCallID != "" || m.Role == "tool" {
			m.Parts = append(m.Parts, Part{Kind: ToolResult, ID: toolCallID, Response: s})
		} else {
			m.Parts = append(m.Parts, Part{Kind: Text, Text: s})
		}
	}
	for _, g := range groups(f, semconv.OpenInferenceMessageContentsPrefix) {
		typ := str(g.fields[semconv.OpenInferenceMessageContentType])
		if t, ok := g.fields[semconv.OpenInferenceMessageContentText].(string); ok && (typ == "" || typ == "text") {
			m.Parts = append(m.Parts, Part{Kind: Text, Text: t})
		} else if u := str(g.fields[semconv.OpenInferenceMessageContentImageURL]); u != "" {
			m.Parts = append(m.Parts, Part{Kind: Other, Type: typ, Text: u})
		} else if len(g.fields) > 0 {
			m.Parts = append(m.Parts, Part{Kind: Other, Type: typ, Text: jsonText(g.fields)})
		}
	}
	for _, g := range groups(f, semconv.OpenInferenceMessageToolCallsPrefix) {
		m.Parts = append(m.Parts, Part{Kind: ToolCall, ID: str(g.fields[semconv.OpenInferenceToolCallID]),
			Name:      str(g.fields[semconv.OpenInferenceToolCallFunctionName]),
			Arguments: jsonText(g.fields[semconv.OpenInferenceToolCallFunctionArguments])})
	}
	if n := str(f[semconv.OpenInferenceMessageFunctionCallName]); n != "" {
		m.Parts = append(m.Parts, Part{Kind: ToolCall, Name: n, Arguments: jsonText(f[semconv.OpenInferenceMessageFunctionCallArguments])})
	}
	return m, m.Role != "" || len(m.Parts) > 0
}

func openLLMetryMessage(f map[string]any) (Message, bool) {
	m := Message{Role: str(f[semconv.OpenLLMetryRole]), FinishReason: str(f[semconv.OpenLLMetryFinishReason])}
	toolCallID := str(f[semconv.OpenLLMetryToolCallID])
	switch c := f[semconv.OpenLLMetryContent].(type) {
	case string:
		// A multi-part message's content is its parts as JSON.
		if d, ok := decode(c); ok && strings.HasPrefix(strings.TrimSpace(c), "[") {
			if ps, ok := d.([]any); ok && len(ps) > 0 {
				if _, isPart := ps[0].(map[string]any); isPart {
					m.Parts = append(m.Parts, partsOf(ps)...)
					break
				}
			}
		}
		if c == "" {
			break
		}
		if toolCallID != "" || m.Role == "tool" {
			m.Parts = append(m.Parts, Part{Kind: ToolResult, ID: toolCallID, Response: c})
		} else {
			m.Parts = append(m.Parts, Part{Kind: Text, Text: c})
		}
	case nil:
	default:
		m.Parts = append(m.Parts, Part{Kind: Other, Type: "content", Text: jsonText(c)})
	}
	for _, g := range groups(f, semconv.OpenLLMetryToolCallsPrefix) {
		m.Parts = append(m.Parts, Part{Kind: ToolCall, ID: str(g.fields[semconv.OpenLLMetryToolCallIDField]),
			Name: str(g.fields[semconv.OpenLLMetryToolCallName]), Arguments: jsonText(g.fields[semconv.OpenLLMetryToolCallArguments])})
	}
	if n := str(f[semconv.OpenLLMetryFunctionCallPrefix+semconv.OpenLLMetryToolCallName]); n != "" {
		m.Parts = append(m.Parts, Part{Kind: ToolCall, Name: n,
			Arguments: jsonText(f[semconv.OpenLLMetryFunctionCallPrefix+semconv.OpenLLMetryToolCallArguments])})
	}
	return m, m.Role != "" || len(m.Parts) > 0
}

// --- input.value / output.value ---

// value reads OpenInference's input.value or output.value: the messages of
// a JSON chat request ({"messages": [...]}) or completion ({"choices":
// [{"message": ...}]}) when it is one, else the value as one text of role.
func (c *Conversation) value(a store.Attributes, key, role string) []Message {
	v, ok := a[key]
	if !ok {
		return nil
	}
	var out []Message
	if d, isJSON := decode(v); isJSON {
		if obj, ok := d.(map[string]any); ok {
			if ms, ok := obj["messages"].([]any); ok {
				out = messagesOf(ms, role)
			} else if chs, ok := obj["choices"].([]any); ok {
				for _, ch := range chs {
					if chm, ok := ch.(map[string]any); ok {
						if msg, ok := chm["message"].(map[string]any); ok {
							m := messageOf(msg, role)
							if m.FinishReason == "" {
								m.FinishReason = str(chm["finish_reason"])
							}
							out = append(out, m)
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		text := jsonText(v)
		if text == "" {
			return nil
		}
		out = []Message{{Role: role, Parts: []Part{{Kind: Text, Text: text}}}}
	}
	c.attrs[key] = true
	c.addSource(key)
	return out
}

// --- helpers ---

func str(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return t.String()
	case nil:
		return ""
	default:
		return jsonText(t)
	}
}

func firstStr(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s := str(m[k]); s != "" {
			return s
		}
	}
	return ""
}

// jsonText is a value as text: a string as it is, anything else as JSON
// (HTML left unescaped: a view escapes what it shows).
func jsonText(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}
