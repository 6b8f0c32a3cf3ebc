package contextlayer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ShrinkLimits bounds what a shrunk value keeps.
type ShrinkLimits struct {
	ListHead   int // list items kept (default 3)
	MaxKeys    int // object keys kept (default 32)
	StringHead int // characters kept at the start of a long string (default 200)
	StringTail int // characters kept at the end (default 80)
}

func (l ShrinkLimits) withDefaults() ShrinkLimits {
	if l.ListHead <= 0 {
		l.ListHead = 3
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = 32
	}
	if l.StringHead <= 0 {
		l.StringHead = 200
	}
	if l.StringTail < 0 {
		l.StringTail = 0
	} else if l.StringTail == 0 {
		l.StringTail = 80
	}
	return l
}

// OmittedItemsKey and OmittedKeysKey mark what shrinking removed from lists
// and objects.
const (
	OmittedItemsKey = "_omitted_items"
	OmittedKeysKey  = "_omitted_keys"
)

// ShrinkText shrinks a tool result so that it counts at most maxTokens, keeping
// JSON valid when the input is JSON. It tightens its limits step by step
// (fewer list items, shorter strings, fewer keys) and stops as soon as the
// result fits. It reports whether anything was cut.
func ShrinkText(c Counter, text string, maxTokens int, lim ShrinkLimits) (string, bool) {
	if c.Count(text) <= maxTokens {
		return text, false
	}
	lim = lim.withDefaults()
	v, err := parseOrdered(text)
	if err != nil {
		return shrinkPlain(c, text, maxTokens, lim), true
	}
	out := text
	for round := 0; round < 8; round++ {
		out = encodeOrdered(shrinkValue(v, lim))
		if c.Count(out) <= maxTokens {
			return out, true
		}
		lim.ListHead = max(1, lim.ListHead/2)
		lim.StringHead = max(16, lim.StringHead/2)
		lim.StringTail = max(0, lim.StringTail/2)
		lim.MaxKeys = max(4, lim.MaxKeys/2)
	}
	return out, true
}

func shrinkPlain(c Counter, text string, maxTokens int, lim ShrinkLimits) string {
	head, tail := lim.StringHead*4, lim.StringTail*4
	for {
		out := cutString(text, head, tail)
		if c.Count(out) <= maxTokens || head <= 16 {
			return out
		}
		head, tail = head/2, tail/2
	}
}

// cutString keeps head runes and tail runes of s around a marker.
func cutString(s string, head, tail int) string {
	r := []rune(s)
	if len(r) <= head+tail+40 {
		return s
	}
	cut := len(r) - head - tail
	return string(r[:head]) + "…[" + strconv.Itoa(cut) + " chars omitted]…" + string(r[len(r)-tail:])
}

// ordered JSON: objects keep their key order so a shrunk payload reads like
// the original.
type object []member

type member struct {
	key string
	val any
}

func parseOrdered(text string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := readValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func readValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			var obj object
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				obj = append(obj, member{k, v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %q", t)
	default:
		return tok, nil
	}
}

func shrinkValue(v any, lim ShrinkLimits) any {
	switch t := v.(type) {
	case string:
		return cutString(t, lim.StringHead, lim.StringTail)
	case []any:
		n := len(t)
		keep := n
		if n > lim.ListHead {
			keep = lim.ListHead
		}
		out := make([]any, 0, keep+1)
		for _, e := range t[:keep] {
			out = append(out, shrinkValue(e, lim))
		}
		if keep < n {
			out = append(out, object{{OmittedItemsKey, json.Number(strconv.Itoa(n - keep))}})
		}
		return out
	case object:
		keep := len(t)
		if keep > lim.MaxKeys {
			keep = lim.MaxKeys
		}
		out := make(object, 0, keep+1)
		for _, m := range t[:keep] {
			out = append(out, member{m.key, shrinkValue(m.val, lim)})
		}
		if keep < len(t) {
			out = append(out, member{OmittedKeysKey, json.Number(strconv.Itoa(len(t) - keep))})
		}
		return out
	default:
		return v
	}
}

func encodeOrdered(v any) string {
	var b bytes.Buffer
	writeOrdered(&b, v)
	return b.String()
}

func writeOrdered(b *bytes.Buffer, v any) {
	switch t := v.(type) {
	case object:
		b.WriteByte('{')
		for i, m := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(m.key)
			b.Write(kb)
			b.WriteByte(':')
			writeOrdered(b, m.val)
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeOrdered(b, e)
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(string(t))
	default:
		enc, _ := json.Marshal(t)
		b.Write(enc)
	}
}
