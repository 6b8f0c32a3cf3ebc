package grade

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// A typed value, as loomwork_values.py encodes it on both sides of a code
// grader: null for None, a JSON integer for an int, a JSON string for a
// str, and [tag, payload] for the rest (floats as strings). The grader
// compares a solution's result with the expected value here, in Go, so
// neither the solution's objects nor its __eq__ take part.

// decodeValue parses one encoded value and checks its shape, so a
// malformed one (from a solution that wrote its own result lines) is an
// error rather than a comparison of garbage.
func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the value")
	}
	if err := checkValue(v, 0); err != nil {
		return nil, err
	}
	return v, nil
}

const maxValueDepth = 310

func checkValue(v any, depth int) error {
	if depth > maxValueDepth {
		return fmt.Errorf("nested deeper than %d levels", maxValueDepth)
	}
	switch v := v.(type) {
	case nil, string:
		return nil
	case json.Number:
		if _, ok := new(big.Int).SetString(string(v), 10); !ok {
			return fmt.Errorf("number %s is not an integer (floats are tagged)", v)
		}
		return nil
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return fmt.Errorf("want [tag, payload], got %s", shortJSON(v))
	}
	tag, _ := a[0].(string)
	switch tag {
	case "bool":
		if _, ok := a[1].(bool); !ok {
			return fmt.Errorf("bool %s", shortJSON(a[1]))
		}
	case "float":
		s, _ := a[1].(string)
		if _, err := parsePyFloat(s); err != nil {
			return fmt.Errorf("float %s", shortJSON(a[1]))
		}
	case "bytes":
		s, ok := a[1].(string)
		if _, err := hex.DecodeString(s); !ok || err != nil {
			return fmt.Errorf("bytes %s", shortJSON(a[1]))
		}
	case "list", "tuple", "set":
		xs, ok := a[1].([]any)
		if !ok {
			return fmt.Errorf("%s %s", tag, shortJSON(a[1]))
		}
		for _, x := range xs {
			if err := checkValue(x, depth+1); err != nil {
				return err
			}
		}
	case "dict":
		xs, ok := a[1].([]any)
		if !ok {
			return fmt.Errorf("dict %s", shortJSON(a[1]))
		}
		for _, x := range xs {
			kv, ok := x.([]any)
			if !ok || len(kv) != 2 {
				return fmt.Errorf("dict item %s", shortJSON(x))
			}
			for _, y := range kv {
				if err := checkValue(y, depth+1); err != nil {
					return err
				}
			}
		}
	default:
		return fmt.Errorf("unknown tag %s", shortJSON(a[0]))
	}
	return nil
}

func parsePyFloat(s string) (float64, error) {
	switch s {
	case "inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	case "nan":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// kind names a value's Python type, and number is its numeric text (an
// int's digits or a float's repr) when it is an int or a float.
func kind(v any) (tag, number string) {
	switch v := v.(type) {
	case nil:
		return "none", ""
	case string:
		return "str", ""
	case json.Number:
		return "int", string(v)
	}
	a := v.([]any)
	tag = a[0].(string)
	if tag == "float" {
		return tag, a[1].(string)
	}
	return tag, ""
}

// valuesEqual is Python's == on plain values, computed on their
// encodings (checked by decodeValue): same type and equal contents,
// except that an int and a float of the same value are equal (2 == 2.0,
// compared exactly, as Python does), a bool is never equal to a number,
// and NaN equals nothing. Sets and dicts match members regardless of
// order.
func valuesEqual(a, b any) bool {
	ta, na := kind(a)
	tb, nb := kind(b)
	if isNumber(ta) && isNumber(tb) {
		return numbersEqual(ta, na, tb, nb)
	}
	if ta != tb {
		return false
	}
	switch ta {
	case "none":
		return true
	case "str":
		return a.(string) == b.(string)
	}
	x, y := a.([]any), b.([]any)
	switch ta {
	case "bool":
		return x[1].(bool) == y[1].(bool)
	case "bytes":
		return x[1].(string) == y[1].(string)
	case "list", "tuple":
		xs, ys := x[1].([]any), y[1].([]any)
		if len(xs) != len(ys) {
			return false
		}
		for i := range xs {
			if !valuesEqual(xs[i], ys[i]) {
				return false
			}
		}
		return true
	case "set":
		return matchAll(x[1].([]any), y[1].([]any), valuesEqual)
	case "dict":
		return matchAll(x[1].([]any), y[1].([]any), func(p, q any) bool {
			pk, qk := p.([]any), q.([]any)
			return valuesEqual(pk[0], qk[0]) && valuesEqual(pk[1], qk[1])
		})
	}
	return false
}

func isNumber(tag string) bool { return tag == "int" || tag == "float" }

func numbersEqual(ta, a, tb, b string) bool {
	if ta == "int" && tb == "int" {
		x, _ := new(big.Int).SetString(a, 10)
		y, _ := new(big.Int).SetString(b, 10)
		return x.Cmp(y) == 0
	}
	toBig := func(tag, s string) (*big.Float, bool) {
		if tag == "int" {
			i, _ := new(big.Int).SetString(s, 10)
			return new(big.Float).SetInt(i), true
		}
		f, _ := parsePyFloat(s)
		if math.IsNaN(f) {
			return nil, false
		}
		if math.IsInf(f, 0) {
			return new(big.Float).SetInf(f < 0), true
		}
		return new(big.Float).SetFloat64(f), true
	}
	x, okx := toBig(ta, a)
	y, oky := toBig(tb, b)
	return okx && oky && x.Cmp(y) == 0
}

// matchAll says whether two collections hold equal members one to one.
// Both come sorted by encoding, so equal collections usually match in
// order; otherwise (an int key against an equal float key) each member
// is looked for among the unmatched ones.
func matchAll(xs, ys []any, eq func(a, b any) bool) bool {
	if len(xs) != len(ys) {
		return false
	}
	inOrder := true
	for i := range xs {
		if !eq(xs[i], ys[i]) {
			inOrder = false
			break
		}
	}
	if inOrder {
		return true
	}
	if len(xs) > 4096 {
		return false // too large to match out of order: unequal encodings of a big set
	}
	used := make([]bool, len(ys))
	for _, x := range xs {
		found := false
		for j, y := range ys {
			if !used[j] && eq(x, y) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func shortJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
