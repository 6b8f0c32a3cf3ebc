package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Attributes holds attribute values in a JSON-compatible form: string,
// int64, float64, bool, []any and map[string]any (recursively). Bytes values
// are kept as base64 strings; NaN and ±Inf doubles as the strings "NaN",
// "Inf" and "-Inf" (JSON has no spelling for them).
//
// Its JSON encoding keeps the int/double distinction exact: a double is always
// written with a decimal point or exponent (3.0, not 3), and on decoding a
// number without one is an int64. Backends store the encoding as-is, so a
// span read back equals the span written.
type Attributes map[string]any

// MarshalJSON writes keys in sorted order with type-preserving numbers.
func (a Attributes) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("null"), nil
	}
	var buf bytes.Buffer
	if err := writeValue(&buf, map[string]any(a)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *Attributes) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*a = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("decode attributes: %w", err)
	}
	norm, err := normalizeNumbers(raw)
	if err != nil {
		return fmt.Errorf("decode attributes: %w", err)
	}
	*a = Attributes(norm.(map[string]any))
	return nil
}

// normalizeNumbers turns json.Numbers into int64 (no '.', 'e' or 'E' and in
// range) or float64. A number too large for a float64 is an error: decoding
// it as ±Inf would not survive a round trip (MarshalJSON writes ±Inf as the
// strings "Inf"/"-Inf").
func normalizeNumbers(v any) (any, error) {
	switch t := v.(type) {
	case json.Number:
		s := string(t)
		if !bytes.ContainsAny([]byte(s), ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, fmt.Errorf("number %s is out of range for a double", s)
		}
		return f, nil
	case []any:
		for i := range t {
			n, err := normalizeNumbers(t[i])
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			t[i] = n
		}
		return t, nil
	case map[string]any:
		for k := range t {
			n, err := normalizeNumbers(t[k])
			if err != nil {
				return nil, fmt.Errorf("attribute %q: %w", k, err)
			}
			t[k] = n
		}
		return t, nil
	default:
		return v, nil
	}
}

func writeValue(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case string:
		b, _ := json.Marshal(t)
		buf.Write(b)
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case int:
		buf.WriteString(strconv.FormatInt(int64(t), 10))
	case int64:
		buf.WriteString(strconv.FormatInt(t, 10))
	case float64:
		switch {
		case math.IsNaN(t):
			buf.WriteString(`"NaN"`)
		case math.IsInf(t, 1):
			buf.WriteString(`"Inf"`)
		case math.IsInf(t, -1):
			buf.WriteString(`"-Inf"`)
		default:
			s := strconv.FormatFloat(t, 'g', -1, 64)
			if !bytes.ContainsAny([]byte(s), ".eE") {
				s += ".0"
			}
			buf.WriteString(s)
		}
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeValue(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			b, _ := json.Marshal(e)
			buf.Write(b)
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeValue(buf, t[k]); err != nil {
				return fmt.Errorf("attribute %q: %w", k, err)
			}
		}
		buf.WriteByte('}')
	case Attributes:
		return writeValue(buf, map[string]any(t))
	default:
		return fmt.Errorf("unsupported attribute value type %T", v)
	}
	return nil
}

// String returns the attribute as a string if it is one.
func (a Attributes) String(key string) (string, bool) {
	s, ok := a[key].(string)
	return s, ok
}
