package genai

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
)

// DefaultMaxAttrBytes is the default size limit of one attribute value.
// Prompt and completion content can be large; 64 KiB keeps a realistic
// message while stopping a pasted file or an embedding vector from bloating
// every read of the trace.
const DefaultMaxAttrBytes = 64 << 10

// TruncationMarker returns the text appended to a value cut by the mapping,
// so a reader sees that the value is incomplete and how large it was.
func TruncationMarker(originalBytes int) string {
	return "…[truncated by loomwork: " + strconv.Itoa(originalBytes) + " bytes]"
}

// MaxAttrKeyBytes bounds an attribute key, whenever values are bounded: a
// longer key keeps its first MaxAttrKeyBytes bytes (on a UTF-8 boundary)
// and gains a marker with its size and a hash of the whole key, so two long
// keys that share a beginning stay two keys.
const MaxAttrKeyBytes = 1 << 10

// boundKey applies MaxAttrKeyBytes.
func boundKey(k string) string {
	if len(k) <= MaxAttrKeyBytes {
		return k
	}
	cut := MaxAttrKeyBytes
	for cut > 0 && !utf8.RuneStart(k[cut]) {
		cut--
	}
	sum := sha256.Sum256([]byte(k))
	return k[:cut] + "…[key truncated by loomwork: " + strconv.Itoa(len(k)) + " bytes, sha256 " + hex.EncodeToString(sum[:6]) + "]"
}

// valKind is the type of an OTLP AnyValue.
type valKind uint8

const (
	kindEmpty valKind = iota // unset, or a kind this mapping does not read (string_value_strindex)
	kindStr
	kindBool
	kindInt
	kindDouble
	kindBytes
	kindArray
	kindMap
)

// val is one decoded OTLP AnyValue. Strings and bytes are as sent (not yet
// UTF-8 repaired); an array's elements are elems with empty keys, a map's
// entries are elems in wire order, duplicates included.
type val struct {
	kind  valKind
	s     string  // kindStr, kindBytes (the raw bytes)
	n     int64   // kindInt; kindBool: 0 or 1
	f     float64 // kindDouble
	elems []kv    // kindArray, kindMap
	box   any     // kindStr: validUTF8(s) boxed, when the decoder shares it; else nil
}

// kv is one OTLP KeyValue.
type kv struct {
	k string
	v val
}

// get returns the first entry of a map value named k, as pcommon.Map.Get
// does.
func (v *val) get(k string) (*val, bool) {
	for i := range v.elems {
		if v.elems[i].k == k {
			return &v.elems[i].v, true
		}
	}
	return nil, false
}

// converter turns decoded values into store.Attributes values.
type converter struct {
	max int // size limit of one attribute value in bytes; <= 0 means none
}

// convertMap converts every entry of kvs. Entries whose value exceeds the
// limit are truncated and their original size recorded under
// semconv.AttrTruncatedPrefix + key. A duplicated key keeps its first value.
// visit, if not nil, sees each kept entry. An empty list converts to nil.
func (c converter) convertMap(kvs []kv, visit func(k string, v *val)) store.Attributes {
	if len(kvs) == 0 {
		return nil
	}
	// Each key is repaired and bounded once, here.
	var small [32]string
	keys := small[:0]
	if len(kvs) > len(small) {
		keys = make([]string, 0, len(kvs))
	}
	over := false
	for i := range kvs {
		k := validUTF8(kvs[i].k)
		if c.max > 0 {
			k = boundKey(k)
			over = over || valueSize(&kvs[i].v) > c.max
		}
		keys = append(keys, k)
	}
	out := make(store.Attributes, len(kvs))
	if !over {
		// The common case, no value to cut: filled last entry first, the
		// first of two entries with one key is the one that stays, without
		// looking each key up before storing it (a lookup per attribute was
		// an eighth of building the map). A map shorter than the list had
		// a duplicate, and then the general pass below decides what
		// visit sees.
		for i := len(kvs) - 1; i >= 0; i-- {
			out[keys[i]] = plain(&kvs[i].v)
		}
		if len(out) == len(kvs) {
			if visit != nil {
				for i := range kvs {
					visit(keys[i], &kvs[i].v)
				}
			}
			return out
		}
		clear(out)
	}
	var truncated map[string]int
	for i := range kvs {
		k, v := keys[i], &kvs[i].v
		if _, dup := out[k]; dup {
			continue
		}
		if c.max > 0 {
			if size := valueSize(v); size > c.max {
				out[k], _ = c.convert(v, c.max)
				if truncated == nil {
					truncated = make(map[string]int)
				}
				truncated[k] = size
				if visit != nil {
					visit(k, v)
				}
				continue
			}
		}
		out[k] = plain(v)
		if visit != nil {
			visit(k, v)
		}
	}
	for k, size := range truncated {
		out[semconv.AttrTruncatedPrefix+k] = int64(size)
	}
	return out
}

// valueSize is the size of a value as the limit counts it: the bytes of a
// string (bytes values as their base64 text), 8 for a number or bool, and the
// sum over the elements (and keys) of an array or map.
func valueSize(v *val) int {
	switch v.kind {
	case kindStr:
		return len(v.s)
	case kindBytes:
		return base64.StdEncoding.EncodedLen(len(v.s))
	case kindArray:
		n := 0
		for i := range v.elems {
			n += valueSize(&v.elems[i].v)
		}
		return n
	case kindMap:
		n := 0
		for i := range v.elems {
			n += len(v.elems[i].k) + valueSize(&v.elems[i].v)
		}
		return n
	case kindEmpty:
		return 0
	default:
		return 8
	}
}

// plain converts a value without any limit.
func plain(v *val) any {
	switch v.kind {
	case kindStr:
		if v.box != nil {
			return v.box
		}
		return validUTF8(v.s)
	case kindInt:
		return v.n
	case kindDouble:
		return double(v.f)
	case kindBool:
		return v.n != 0
	case kindBytes:
		return base64.StdEncoding.EncodeToString([]byte(v.s))
	case kindArray:
		out := make([]any, len(v.elems))
		for i := range out {
			out[i] = plain(&v.elems[i].v)
		}
		return out
	case kindMap:
		out := make(map[string]any, len(v.elems))
		for i := range v.elems {
			k := validUTF8(v.elems[i].k)
			if _, dup := out[k]; !dup {
				out[k] = plain(&v.elems[i].v)
			}
		}
		return out
	default: // empty
		return nil
	}
}

// cuttable reports whether convert can shorten a value of kind k.
func cuttable(k valKind) bool {
	return k == kindStr || k == kindBytes || k == kindArray || k == kindMap
}

// convert converts v keeping at most budget bytes (as valueSize counts
// them); it reports whether anything was cut.
func (c converter) convert(v *val, budget int) (any, bool) {
	switch v.kind {
	case kindStr:
		return cutString(validUTF8(v.s), budget)
	case kindBytes:
		return cutString(base64.StdEncoding.EncodeToString([]byte(v.s)), budget)
	case kindArray:
		size := valueSize(v)
		if size <= budget {
			return plain(v), false
		}
		out := make([]any, 0, len(v.elems)+1)
		left := budget
		for i := 0; i < len(v.elems) && left > 0; i++ {
			e := &v.elems[i].v
			es := valueSize(e)
			if es <= left {
				out = append(out, plain(e))
				left -= es
				continue
			}
			if cuttable(e.kind) {
				cut, _ := c.convert(e, left)
				out = append(out, cut)
			}
			break
		}
		return append(out, TruncationMarker(size)), true
	case kindMap:
		size := valueSize(v)
		if size <= budget {
			return plain(v), false
		}
		out := make(map[string]any)
		left := budget
		for i := range v.elems {
			k, e := validUTF8(v.elems[i].k), &v.elems[i].v
			if _, dup := out[k]; dup {
				continue
			}
			es := len(k) + valueSize(e)
			if es <= left {
				out[k] = plain(e)
				left -= es
				continue
			}
			if left > len(k) && cuttable(e.kind) {
				out[k], _ = c.convert(e, left-len(k))
			}
			break
		}
		out[semconv.AttrTruncated] = TruncationMarker(size)
		return out, true
	default:
		return plain(v), false
	}
}

// cutString keeps at most budget bytes of s, cut on a rune boundary, and
// appends the marker.
func cutString(s string, budget int) (string, bool) {
	if len(s) <= budget {
		return s, false
	}
	cut := budget
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + TruncationMarker(len(s)), true
}

// double converts a double to its stored form: store.Attributes keeps NaN and
// infinities as strings, since JSON cannot spell them.
func double(f float64) any {
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

// validUTF8 replaces invalid UTF-8 (which protobuf senders can produce) with
// U+FFFD, so the stored text is what every reader decodes.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
