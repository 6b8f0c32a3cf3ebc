package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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
	return a.AppendJSON(nil)
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

// String returns the attribute as a string if it is one.
func (a Attributes) String(key string) (string, bool) {
	s, ok := a[key].(string)
	return s, ok
}
