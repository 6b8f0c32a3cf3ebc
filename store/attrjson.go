package store

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// AppendJSON appends the JSON encoding of a to dst (sorted keys, doubles
// always with a decimal point or exponent, NaN/±Inf as strings, strings
// escaped as encoding/json escapes them) without per-value allocations. It
// is what MarshalJSON writes and what both store backends write on the
// ingest hot path, where attribute encoding is the largest client-side
// cost. FuzzAppendJSONMatchesReference pins it to an independent encoder.
func (a Attributes) AppendJSON(dst []byte) ([]byte, error) {
	if a == nil {
		return append(dst, "null"...), nil
	}
	return appendJSONMap(dst, a, nil, -1, nil)
}

// AppendJSONExcept is AppendJSON leaving out the members skip reports
// true for (a map whose members are all left out is "{}"). A store that
// keeps some attributes in columns of their own writes the rest this way,
// without encoding the others first and cutting them out again.
func (a Attributes) AppendJSONExcept(dst []byte, skip func(k string, v any) bool) ([]byte, error) {
	if a == nil {
		return append(dst, "null"...), nil
	}
	return appendJSONMap(dst, a, skip, -1, nil)
}

// AppendStorableJSON is AppendJSON leaving out the members skip (when not
// nil) reports true for (a map whose members are all left out is "{}": a
// store that keeps some attributes in columns of their own writes the
// rest this way), and applying CheckStorable's depth rule as it encodes: a
// value nested deeper than MaxAttributeDepth fails it with an error
// wrapping ErrTooDeep. A store that encodes a span's attribute maps this
// way checks the span with CheckStorableExceptAttributes, and walks each
// map once instead of twice (the separate check was 4% of serve's CPU on
// the agent load).
func (a Attributes) AppendStorableJSON(dst []byte, skip func(k string, v any) bool) ([]byte, error) {
	if a == nil {
		return append(dst, "null"...), nil
	}
	return appendJSONMap(dst, a, skip, MaxAttributeDepth, nil)
}

// AppendStorableJSONKeys is AppendStorableJSON that also appends to keys
// the keys of the members it writes, in the order it writes them, as a
// JSON reader decodes them (an invalid UTF-8 byte as U+FFFD, which
// AppendJSONString writes for it): what ClickHouse's JSONExtractKeys gives
// of the JSON, without parsing it again.
func (a Attributes) AppendStorableJSONKeys(dst []byte, keys []string, skip func(k string, v any) bool) ([]byte, []string, error) {
	if a == nil {
		return append(dst, "null"...), keys, nil
	}
	dst, err := appendJSONMap(dst, a, skip, MaxAttributeDepth, &keys)
	return dst, keys, err
}

// decodedKey is k as a JSON reader reads AppendJSONString's quoting of it:
// k, unless it holds invalid UTF-8, each byte of which reads as U+FFFD.
func decodedKey(k string) string {
	if utf8.ValidString(k) {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); {
		c, size := utf8.DecodeRuneInString(k[i:])
		if c == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(k[i : i+size])
		}
		i += size
	}
	return b.String()
}

// member is one map entry, sorted by key before it is written.
type member struct {
	k string
	v any
}

// appendJSONMap appends m's JSON; its values may nest at most left levels
// of arrays and maps (shallow's rule), or any number when left < 0. With
// keys, the keys written are appended to *keys (decodedKey).
func appendJSONMap(dst []byte, m map[string]any, skip func(string, any) bool, left int, keys *[]string) ([]byte, error) {
	// The entries of a span's attribute map fit on the stack: no
	// allocation, and no second map lookup per key after sorting.
	var small [24]member
	ms := small[:0]
	if len(m) > len(small) {
		ms = make([]member, 0, len(m))
	}
	for k, v := range m {
		if skip != nil && skip(k, v) {
			continue
		}
		ms = append(ms, member{k, v})
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.k, b.k) })
	dst = append(dst, '{')
	for i := range ms {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, ms[i].k)
		dst = append(dst, ':')
		if keys != nil {
			*keys = append(*keys, decodedKey(ms[i].k))
		}
		var err error
		if dst, err = appendJSONValue(dst, ms[i].v, left); err != nil {
			return nil, fmt.Errorf("attribute %q: %w", ms[i].k, err)
		}
	}
	return append(dst, '}'), nil
}

// appendJSONValue appends v's JSON; v may nest at most left levels of
// arrays and maps, or any number when left < 0.
func appendJSONValue(dst []byte, v any, left int) ([]byte, error) {
	switch v.(type) {
	case []any, map[string]any, Attributes: // as shallow counts: not []string
		if left == 0 {
			return nil, ErrTooDeep
		}
		left--
	}
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return AppendJSONString(dst, t), nil
	case bool:
		return strconv.AppendBool(dst, t), nil
	case int:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int64:
		return strconv.AppendInt(dst, t, 10), nil
	case float64:
		switch {
		case math.IsNaN(t):
			return append(dst, `"NaN"`...), nil
		case math.IsInf(t, 1):
			return append(dst, `"Inf"`...), nil
		case math.IsInf(t, -1):
			return append(dst, `"-Inf"`...), nil
		}
		start := len(dst)
		dst = strconv.AppendFloat(dst, t, 'g', -1, 64)
		for _, c := range dst[start:] {
			if c == '.' || c == 'e' || c == 'E' {
				return dst, nil
			}
		}
		return append(dst, ".0"...), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONValue(dst, e, left); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case []string:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSONString(dst, e)
		}
		return append(dst, ']'), nil
	case map[string]any:
		return appendJSONMap(dst, t, nil, left, nil)
	case Attributes:
		return appendJSONMap(dst, t, nil, left, nil)
	default:
		return nil, fmt.Errorf("unsupported attribute value type %T", v)
	}
}

const jsonHexDigits = "0123456789abcdef"

// jsonPlain[b] is whether the byte b stands for itself in a JSON string
// AppendJSONString writes: ASCII but not a control character, '"', '\\',
// '<', '>' or '&'. One load per byte where six comparisons were: most of
// what ingest quotes is plain ASCII.
var jsonPlain = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// jsonPlainByte is jsonPlain as 0 or 1, to test eight bytes with one
// branch.
var jsonPlainByte = func() (t [256]byte) {
	for b, plain := range jsonPlain {
		if plain {
			t[b] = 1
		}
	}
	return t
}()

// AppendJSONString quotes s exactly as encoding/json does with HTML
// escaping on (its default): control characters, '"', '\\', '<', '>', '&',
// U+2028 and U+2029 escaped; invalid UTF-8 replaced by \ufffd.
func AppendJSONString(dst []byte, s string) []byte {
	// Room for s unescaped at once: text runs are appended in pieces,
	// and growing by pieces copied the buffer several times.
	dst = slices.Grow(dst, len(s)+2)
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes per test while they are plain: message text is
		// most of what ingest quotes, and most of it needs no escape.
		for i+8 <= len(s) {
			w := s[i : i+8]
			if jsonPlainByte[w[0]]&jsonPlainByte[w[1]]&jsonPlainByte[w[2]]&jsonPlainByte[w[3]]&
				jsonPlainByte[w[4]]&jsonPlainByte[w[5]]&jsonPlainByte[w[6]]&jsonPlainByte[w[7]] == 0 {
				break
			}
			i += 8
		}
		if i == len(s) {
			break
		}
		b := s[i]
		if jsonPlain[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', jsonHexDigits[b>>4], jsonHexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', jsonHexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
