package clickhouse

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// Attributes kept in typed columns (schema version 5).
//
// Most of an agent span's attribute JSON repeats what the typed columns
// already hold: the operation, provider, models, agent, conversation, tool
// and call id, the token counts, the retrieved and cited documents. Stored
// twice, the JSON copy was over half of a span's bytes on disk. Since
// version 5 an attribute whose JSON value is exactly the JSON of its typed
// column's value is left out of the attributes column, and bit i of
// attributes_in_columns records that typedAttrs[i] was; a read puts it back
// from the column. Only byte-equal values are left out (a string attribute
// equal to the column's string, an int equal to the column's int, an array
// of strings equal to the column's array), so the span read back is the span
// written, down to the int/double distinction. Rows written before version 5
// have 0 there and the whole JSON.
//
// The bit of a key is part of the stored format: never reorder or remove
// an entry, only append.
var typedAttrs = [...]typedAttr{
	{key: semconv.AttrOperationName, column: "operation", kind: attrString, str: func(sp *store.Span) string { return sp.Operation }},
	{key: semconv.AttrProviderName, column: "provider", kind: attrString, str: func(sp *store.Span) string { return sp.Provider }},
	{key: semconv.AttrRequestModel, column: "request_model", kind: attrString, str: func(sp *store.Span) string { return sp.RequestModel }},
	{key: semconv.AttrResponseModel, column: "response_model", kind: attrString, str: func(sp *store.Span) string { return sp.ResponseModel }},
	{key: semconv.AttrAgentName, column: "agent_name", kind: attrString, str: func(sp *store.Span) string { return sp.AgentName }},
	{key: semconv.AttrConversationID, column: "conversation_id", kind: attrString, str: func(sp *store.Span) string { return sp.ConversationID }},
	{key: semconv.AttrToolName, column: "tool_name", kind: attrString, str: func(sp *store.Span) string { return sp.ToolName }},
	{key: semconv.AttrToolCallID, column: "tool_call_id", kind: attrString, str: func(sp *store.Span) string { return sp.ToolCallID }},
	{key: semconv.AttrUsageInputTokens, column: "input_tokens", kind: attrInt, num: func(sp *store.Span) int64 { return sp.InputTokens }},
	{key: semconv.AttrUsageOutputTokens, column: "output_tokens", kind: attrInt, num: func(sp *store.Span) int64 { return sp.OutputTokens }},
	{key: semconv.AttrUsageCacheReadInputTokens, column: "cache_read_tokens", kind: attrInt, num: func(sp *store.Span) int64 { return sp.CacheReadTokens }},
	{key: semconv.AttrUsageCacheCreationInputTokens, column: "cache_creation_tokens", kind: attrInt, num: func(sp *store.Span) int64 { return sp.CacheCreationTokens }},
	{key: semconv.AttrUsageReasoningOutputTokens, column: "reasoning_tokens", kind: attrInt, num: func(sp *store.Span) int64 { return sp.ReasoningTokens }},
	{key: semconv.AttrRetrievalDocuments, column: "retrieved_docs", kind: attrStrings, strs: func(sp *store.Span) []string { return sp.RetrievedDocs }},
	{key: semconv.AttrCitations, column: "cited_docs", kind: attrStrings, strs: func(sp *store.Span) []string { return sp.CitedDocs }},
}

type attrKind uint8

const (
	attrString  attrKind = iota // a JSON string, the column a String
	attrInt                     // a JSON integer, the column an Int64
	attrStrings                 // a non-empty JSON array of strings, the column an Array(String)
)

type typedAttr struct {
	key    string
	column string
	kind   attrKind
	str    func(*store.Span) string
	num    func(*store.Span) int64
	strs   func(*store.Span) []string
	// prefix is the key as the JSON spells it, with the colon.
	prefix []byte
}

func init() {
	for i := range typedAttrs {
		a := &typedAttrs[i]
		a.prefix = append(store.AppendJSONString(nil, a.key), ':')
		// typedAttrKey spells the table out as a switch; a key it does not
		// find at its own bit is a table changed without it.
		if bit, ok := typedAttrKey(a.key); !ok || bit != i {
			panic("typedAttrKey does not find typed attribute " + a.key + " at bit " + strconv.Itoa(i))
		}
	}
}

// typedAttrKey returns the bit of an attribute key a column holds. It is
// asked for every attribute of every span written, so it is a switch,
// which Go compiles to comparisons by length and then by content: about a
// third of the cost of the map lookup it replaced (init checks that it
// agrees with typedAttrs).
func typedAttrKey(k string) (int, bool) {
	switch k {
	case semconv.AttrOperationName:
		return 0, true
	case semconv.AttrProviderName:
		return 1, true
	case semconv.AttrRequestModel:
		return 2, true
	case semconv.AttrResponseModel:
		return 3, true
	case semconv.AttrAgentName:
		return 4, true
	case semconv.AttrConversationID:
		return 5, true
	case semconv.AttrToolName:
		return 6, true
	case semconv.AttrToolCallID:
		return 7, true
	case semconv.AttrUsageInputTokens:
		return 8, true
	case semconv.AttrUsageOutputTokens:
		return 9, true
	case semconv.AttrUsageCacheReadInputTokens:
		return 10, true
	case semconv.AttrUsageCacheCreationInputTokens:
		return 11, true
	case semconv.AttrUsageReasoningOutputTokens:
		return 12, true
	case semconv.AttrRetrievalDocuments:
		return 13, true
	case semconv.AttrCitations:
		return 14, true
	}
	return 0, false
}

// appendValueJSON appends the JSON the column's value would have as an
// attribute, and reports false when it cannot stand for one: an empty
// array, or a string that is not valid UTF-8 (its JSON holds U+FFFD where
// the column holds the original bytes, so the two decode differently).
func (a *typedAttr) appendValueJSON(dst []byte, sp *store.Span) ([]byte, bool) {
	switch a.kind {
	case attrString:
		v := a.str(sp)
		return store.AppendJSONString(dst, v), utf8.ValidString(v)
	case attrInt:
		return strconv.AppendInt(dst, a.num(sp), 10), true
	default:
		v := a.strs(sp)
		if len(v) == 0 {
			return dst, false
		}
		dst = append(dst, '[')
		for i, s := range v {
			if !utf8.ValidString(s) {
				return dst, false
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = store.AppendJSONString(dst, s)
		}
		return append(dst, ']'), true
	}
}

// holds reports whether the column holds v, the value of a.key in
// sp.Attributes, exactly as restoreTypedAttrs would put it back: the same
// string (valid UTF-8), the same integer, the same non-empty strings.
// encode leaves such attributes out of the JSON it writes; a value that
// differs in any way (a double, an int stored as a string) stays in.
func (a *typedAttr) holds(sp *store.Span, v any) bool {
	switch a.kind {
	case attrString:
		s, ok := v.(string)
		return ok && s == a.str(sp) && utf8.ValidString(s)
	case attrInt:
		switch n := v.(type) {
		case int64:
			return n == a.num(sp)
		case int:
			return int64(n) == a.num(sp)
		}
		return false
	default:
		arr, ok := v.([]any)
		want := a.strs(sp)
		if !ok || len(want) == 0 || len(arr) != len(want) {
			return false
		}
		for i, e := range arr {
			s, ok := e.(string)
			if !ok || s != want[i] || !utf8.ValidString(s) {
				return false
			}
		}
		return true
	}
}

// appendElidedJSON appends the JSON of sp.Attributes without the members
// a typed column of sp holds (typedAttr.holds), and returns the bits of
// those left out: what elideTypedAttrs makes of the whole JSON, without
// writing the members first. It applies CheckStorable's depth rule
// (AppendStorableJSON; a member left out is a string, an integer or an
// array of strings, never too deep).
// The keys of the members it writes are appended to keys
// (AppendStorableJSONKeys).
func appendElidedJSON(dst []byte, keys []string, sp *store.Span) ([]byte, []string, uint32, error) {
	var mask uint32
	dst, keys, err := sp.Attributes.AppendStorableJSONKeys(dst, keys, func(k string, v any) bool {
		bit, ok := typedAttrKey(k)
		if !ok || !typedAttrs[bit].holds(sp, v) {
			return false
		}
		mask |= 1 << bit
		return true
	})
	return dst, keys, mask, err
}

// value is the attribute the column stands for, as decoding its JSON gives
// it (store.Attributes' UnmarshalJSON: strings, int64, []any).
func (a *typedAttr) value(sp *store.Span) any {
	switch a.kind {
	case attrString:
		return a.str(sp)
	case attrInt:
		return a.num(sp)
	default:
		v := a.strs(sp)
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out
	}
}

// elideTypedAttrs removes from js, the JSON object AppendJSON wrote for
// sp.Attributes, every top-level member that typedAttrs says a column of sp
// holds byte for byte, compacting js in place. It returns the shortened
// JSON and the bits of the members removed. scratch is reused memory.
func elideTypedAttrs(js []byte, sp *store.Span, scratch []byte) ([]byte, uint32, []byte) {
	if len(js) < 2 || js[0] != '{' {
		return js, 0, scratch
	}
	var mask uint32
	w := 1 // write position: js[:w] is the kept output
	kept := 0
	i := 1
	for i < len(js) && js[i] != '}' {
		start := i
		end := memberEnd(js, i)
		member := js[start:end]
		drop := false
		if bit, ok := typedAttrOf(member); ok {
			a := &typedAttrs[bit]
			var fits bool
			scratch, fits = a.appendValueJSON(scratch[:0], sp)
			if fits && bytes.Equal(member[len(a.prefix):], scratch) {
				drop = true
				mask |= 1 << bit
			}
		}
		if !drop {
			if kept > 0 {
				js[w] = ','
				w++
			}
			w += copy(js[w:], member)
			kept++
		}
		i = end
		if i < len(js) && js[i] == ',' {
			i++
		}
	}
	if mask == 0 {
		return js, 0, scratch
	}
	js[w] = '}'
	return js[:w+1], mask, scratch
}

// typedAttrOf returns the bit of the key a member "key":value starts with.
func typedAttrOf(member []byte) (int, bool) {
	// A key with an escape in it is no typed key: the first quote after
	// the opening one ends it.
	end := bytes.IndexByte(member[1:], '"')
	if end < 0 {
		return 0, false
	}
	return typedAttrKey(string(member[1 : 1+end]))
}

// memberEnd returns the index just past the object member starting at i
// (a key string, a colon and a value), where a ',' or the closing '}' of
// the enclosing object follows. js is valid JSON written by AppendJSON.
func memberEnd(js []byte, i int) int {
	depth := 0
	inStr := false
	for ; i < len(js); i++ {
		c := js[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			// Most strings have no escape: jump to the closing quote when
			// no backslash comes before it.
			if q := bytes.IndexByte(js[i+1:], '"'); q >= 0 && bytes.IndexByte(js[i+1:i+1+q], '\\') < 0 {
				i += 1 + q
				continue
			}
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// restoreTypedAttrs puts back into sp.Attributes the attributes mask says
// were left out for their columns (read after sp's typed fields).
func restoreTypedAttrs(sp *store.Span, mask uint32) {
	if mask == 0 {
		return
	}
	if sp.Attributes == nil {
		sp.Attributes = store.Attributes{}
	}
	for i := range typedAttrs {
		if mask&(1<<i) != 0 {
			sp.Attributes[typedAttrs[i].key] = typedAttrs[i].value(sp)
		}
	}
}
