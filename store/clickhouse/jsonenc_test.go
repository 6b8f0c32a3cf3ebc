package clickhouse

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

func TestAppendAttributesMatchesMarshalJSONOnEdgeValues(t *testing.T) {
	cases := []store.Attributes{
		nil,
		{},
		{"s": "plain", "html": "<a href=\"x\">&</a>", "ctl": "\x00\x01\b\f\n\r\t\x1f", "bad": "a\xffb", "sep": "\u2028\u2029", "uni": "résumé ✓"},
		{"i": int64(-9223372036854775808), "j": 42, "f": 3.0, "g": 1e21, "h": 1.5e-7, "z": -0.0, "nan": math.NaN(), "inf": math.Inf(1), "ninf": math.Inf(-1)},
		{"b": true, "n": nil, "arr": []any{"x", int64(1), 2.5, false, nil, []any{}}, "ss": []string{"a", "\"b\""}, "nested": map[string]any{"k": store.Attributes{"deep": 1.0}}},
	}
	for _, a := range cases {
		checkAppendMatches(t, a)
	}
	for _, sp := range storetest.GenerateTraces(20, 10, 5) {
		checkAppendMatches(t, sp.Attributes)
		checkAppendMatches(t, sp.ResourceAttributes)
	}
}

func checkAppendMatches(t *testing.T, a store.Attributes) {
	t.Helper()
	want, werr := a.MarshalJSON()
	got, gerr := appendAttributes(nil, a)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("errors differ for %#v: MarshalJSON %v, appendAttributes %v", a, werr, gerr)
	}
	if string(got) != string(want) {
		t.Errorf("appendAttributes(%#v)\n got %s\nwant %s", a, got, want)
	}
}

func TestAppendAttributesRejectsUnsupportedTypes(t *testing.T) {
	if _, err := appendAttributes(nil, store.Attributes{"ch": make(chan int)}); err == nil {
		t.Error("a channel value was encoded")
	}
}

// FuzzAppendAttributesMatchesMarshalJSON checks, for arbitrary JSON-shaped
// attribute maps, that the fast encoder writes what MarshalJSON writes.
func FuzzAppendAttributesMatchesMarshalJSON(f *testing.F) {
	f.Add(`{"a":"b","n":1,"f":1.5,"l":[1,"x",true,null],"m":{"k":"<&>"}}`)
	f.Add(`{"s":"\u2028\ud800","e":1e300,"z":-0.0}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var a store.Attributes
		if err := json.Unmarshal([]byte(doc), &a); err != nil {
			return
		}
		want, werr := a.MarshalJSON()
		got, gerr := appendAttributes(nil, a)
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Fatalf("input %q:\n got %s (%v)\nwant %s (%v)", doc, got, gerr, want, werr)
		}
	})
}
