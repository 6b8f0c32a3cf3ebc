package genai

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// refDefaultMaxAttrBytes is the default size limit of one attribute value.
// Prompt and completion content can be large; 64 KiB keeps a realistic
// message while stopping a pasted file or an embedding vector from bloating
// every read of the trace.
const refDefaultMaxAttrBytes = 64 << 10

// refTruncationMarker returns the text appended to a value cut by the mapping,
// so a reader sees that the value is incomplete and how large it was.
func refTruncationMarker(originalBytes int) string {
	return "…[truncated by loomwork: " + strconv.Itoa(originalBytes) + " bytes]"
}

// refMaxAttrKeyBytes bounds an attribute key, whenever values are bounded: a
// longer key keeps its first MaxAttrKeyBytes bytes (on a UTF-8 boundary)
// and gains a marker with its size and a hash of the whole key, so two long
// keys that share a beginning stay two keys.
const refMaxAttrKeyBytes = 1 << 10

// refBoundKey applies MaxAttrKeyBytes.
func refBoundKey(k string) string {
	if len(k) <= refMaxAttrKeyBytes {
		return k
	}
	cut := refMaxAttrKeyBytes
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(k))
	return k[:cut] + "…[key truncated by loomwork: " + strconv.Itoa(len(k)) + " bytes, sha256 " + hex.EncodeToString(sum[:6]) + "]"
}

// refConverter turns pdata values into store.Attributes values.
type refConverter struct {
	max int // size limit of one attribute value in bytes; <= 0 means none
}

// convertMap converts every entry of m. Entries whose value exceeds the
// limit are truncated and their original size recorded under
// semconv.AttrTruncatedPrefix + key. A duplicated key keeps its first value, as
// pcommon.Map.Get does. visit, if not nil, sees each kept entry. An empty map
// converts to nil.
func (c refConverter) convertMap(m pcommon.Map, visit func(k string, v pcommon.Value)) store.Attributes {
	if m.Len() == 0 {
		return nil
	}
	out := make(store.Attributes, m.Len())
	var truncated map[string]int
	m.Range(func(k string, v pcommon.Value) bool {
		k = refValidUTF8(k)
		if c.max > 0 {
			k = refBoundKey(k)
		}
		if _, dup := out[k]; dup {
			return true
		}
		if c.max > 0 {
			if size := refValueSize(v); size > c.max {
				out[k], _ = c.convert(v, c.max)
				if truncated == nil {
					truncated = make(map[string]int)
				}
				truncated[k] = size
				if visit != nil {
					visit(k, v)
				}
				return true
			}
		}
		out[k] = refPlain(v)
		if visit != nil {
			visit(k, v)
		}
		return true
	})
	for k, size := range truncated {
		out[semconv.AttrTruncatedPrefix+k] = int64(size)
	}
	return out
}

// refValueSize is the size of a value as the limit counts it: the bytes of a
// string (bytes values as their base64 text), 8 for a number or bool, and the
// sum over the elements (and keys) of an array or map.
func refValueSize(v pcommon.Value) int {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return len(v.Str())
	case pcommon.ValueTypeBytes:
		return base64.StdEncoding.EncodedLen(v.Bytes().Len())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		n := 0
		for i := 0; i < s.Len(); i++ {
			n += refValueSize(s.At(i))
		}
		return n
	case pcommon.ValueTypeMap:
		n := 0
		v.Map().Range(func(k string, e pcommon.Value) bool {
			n += len(k) + refValueSize(e)
			return true
		})
		return n
	case pcommon.ValueTypeEmpty:
		return 0
	default:
		return 8
	}
}

// refPlain converts a value without any limit.
func refPlain(v pcommon.Value) any {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return refValidUTF8(v.Str())
	case pcommon.ValueTypeInt:
		return v.Int()
	case pcommon.ValueTypeDouble:
		return refDouble(v.Double())
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeBytes:
		return base64.StdEncoding.EncodeToString(v.Bytes().AsRaw())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		out := make([]any, s.Len())
		for i := range out {
			out[i] = refPlain(s.At(i))
		}
		return out
	case pcommon.ValueTypeMap:
		m := v.Map()
		out := make(map[string]any, m.Len())
		m.Range(func(k string, e pcommon.Value) bool {
			k = refValidUTF8(k)
			if _, dup := out[k]; !dup {
				out[k] = refPlain(e)
			}
			return true
		})
		return out
	default: // empty
		return nil
	}
}

// convert converts v keeping at most budget bytes (as valueSize counts
// them); it reports whether anything was cut.
func (c refConverter) convert(v pcommon.Value, budget int) (any, bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return refCutString(refValidUTF8(v.Str()), budget)
	case pcommon.ValueTypeBytes:
		return refCutString(base64.StdEncoding.EncodeToString(v.Bytes().AsRaw()), budget)
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		size := refValueSize(v)
		if size <= budget {
			return refPlain(v), false
		}
		out := make([]any, 0, s.Len()+1)
		left := budget
		for i := 0; i < s.Len() && left > 0; i++ {
			e := s.At(i)
			es := refValueSize(e)
			if es <= left {
				out = append(out, refPlain(e))
				left -= es
				continue
			}
			if t := e.Type(); t == pcommon.ValueTypeStr || t == pcommon.ValueTypeBytes ||
				t == pcommon.ValueTypeSlice || t == pcommon.ValueTypeMap {
				cut, _ := c.convert(e, left)
				out = append(out, cut)
			}
			break
		}
		return append(out, refTruncationMarker(size)), true
	case pcommon.ValueTypeMap:
		size := refValueSize(v)
		if size <= budget {
			return refPlain(v), false
		}
		out := make(map[string]any)
		left := budget
		v.Map().Range(func(k string, e pcommon.Value) bool {
			k = refValidUTF8(k)
			if _, dup := out[k]; dup {
				return true
			}
			es := len(k) + refValueSize(e)
			if es <= left {
				out[k] = refPlain(e)
				left -= es
				return true
			}
			if left > len(k) {
				if t := e.Type(); t == pcommon.ValueTypeStr || t == pcommon.ValueTypeBytes ||
					t == pcommon.ValueTypeSlice || t == pcommon.ValueTypeMap {
					out[k], _ = c.convert(e, left-len(k))
				}
			}
			return false
		})
		out[semconv.AttrTruncated] = refTruncationMarker(size)
		return out, true
	default:
		return refPlain(v), false
	}
}

// refCutString keeps at most budget bytes of s, cut on a rune boundary, and
// appends the marker.
func refCutString(s string, budget int) (string, bool) {
	if len(s) <= budget {
		return s, false
	}
	cut := budget
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + refTruncationMarker(len(s)), true
}

// refDouble converts a double to its stored form: store.Attributes keeps NaN and
// infinities as strings, since JSON cannot spell them.
func refDouble(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return f
}

// refValidUTF8 replaces invalid UTF-8 (which protobuf senders can produce) with
// U+FFFD, so the stored text is what every reader decodes.
func refValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
