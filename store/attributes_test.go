package store

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestAttributesKeepIntDoubleDistinction(t *testing.T) {
	in := Attributes{
		"int": int64(3), "double": 3.0, "half": 0.5, "neg": int64(-7), "max": int64(math.MaxInt64),
		"huge": 1.5e300, "arr": []any{int64(1), 2.0, "x", true}, "map": map[string]any{"k": 4.0},
		"html": "<script>alert(1)</script>", "uni": "日本語 🚀",
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Attributes
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the attributes\n  in  %#v\n  out %#v\n  json %s", in, out, b)
	}
}

// FuzzAttributesJSONRoundTrip: whatever a JSON document decodes to, encoding
// and decoding it again gives the same value (types included).
func FuzzAttributesJSONRoundTrip(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`,
		`{"a":"x","n":3,"d":3.0,"e":1e5,"b":true,"z":null}`,
		`{"arr":[1,2.5,"s",false,[],{}],"nested":{"k":{"k2":[1e300,-0.0]}}}`,
		`{"big":9223372036854775807,"bigger":92233720368547758070,"tiny":1e-320}`,
		`{"s":"\u0000<>&\u2028 🚀"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var a Attributes
		if err := json.Unmarshal(doc, &a); err != nil {
			return
		}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("marshal %#v: %v", a, err)
		}
		var back Attributes
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("decode own encoding %s: %v", b, err)
		}
		if !reflect.DeepEqual(a, back) {
			t.Fatalf("round trip changed the value\n  input   %q\n  decoded %#v\n  encoded %s\n  again   %#v", doc, a, b, back)
		}
	})
}

func TestAttributesNumberOverflowIsError(t *testing.T) {
	var a Attributes
	err := json.Unmarshal([]byte(`{"ok":1,"nested":{"x":[1,1e700]}}`), &a)
	if err == nil {
		t.Fatalf("decoding 1e700 gave %#v and no error", a)
	}
	for _, want := range []string{`"nested"`, "[1]", "1e700", "out of range"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
