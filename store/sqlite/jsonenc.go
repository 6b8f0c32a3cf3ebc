package sqlite

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/loomwork/loomwork/store"
)

// appendAttrs appends a's JSON in the encoding store.Attributes defines
// (doubles always with a '.' or exponent, NaN/±Inf as strings), so
// store.Attributes.UnmarshalJSON reads it back exactly. It is the ingest hot
// path: unlike Attributes.MarshalJSON it encodes strings without
// allocating.
// FuzzAppendAttrs checks it decodes to the same value as MarshalJSON.
func appendAttrs(dst []byte, a store.Attributes) ([]byte, error) {
	if a == nil {
		return append(dst, "null"...), nil
	}
	return appendValue(dst, map[string]any(a))
}

func appendValue(dst []byte, v any) ([]byte, error) {
	var err error
	switch t := v.(type) {
	case nil:
		dst = append(dst, "null"...)
	case string:
		dst = appendString(dst, t)
	case bool:
		dst = strconv.AppendBool(dst, t)
	case int:
		dst = strconv.AppendInt(dst, int64(t), 10)
	case int64:
		dst = strconv.AppendInt(dst, t, 10)
	case float64:
		switch {
		case math.IsNaN(t):
			dst = append(dst, `"NaN"`...)
		case math.IsInf(t, 1):
			dst = append(dst, `"Inf"`...)
		case math.IsInf(t, -1):
			dst = append(dst, `"-Inf"`...)
		default:
			start := len(dst)
			dst = strconv.AppendFloat(dst, t, 'g', -1, 64)
			whole := true
			for _, c := range dst[start:] {
				if c == '.' || c == 'e' || c == 'E' {
					whole = false
					break
				}
			}
			if whole {
				dst = append(dst, ".0"...)
			}
		}
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendValue(dst, e); err != nil {
				return nil, err
			}
		}
		dst = append(dst, ']')
	case []string:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, e)
		}
		dst = append(dst, ']')
	case map[string]any:
		// Sorted keys: spans then share long identical runs, which
		// compresses to about 5% less than in map order.
		var arr [32]string
		keys := arr[:0]
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			if dst, err = appendValue(dst, t[k]); err != nil {
				return nil, fmt.Errorf("attribute %q: %w", k, err)
			}
		}
		dst = append(dst, '}')
	case store.Attributes:
		return appendValue(dst, map[string]any(t))
	default:
		return nil, fmt.Errorf("unsupported attribute value type %T", v)
	}
	return dst, nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; control characters and the line separators U+2028
// and U+2029 are escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
