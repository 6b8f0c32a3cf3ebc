package sqlite

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/loomwork/loomwork/store"
)

// FuzzAppendAttrs: the ingest encoder (appendAttrs) must decode to exactly
// what store.Attributes.MarshalJSON decodes to, for any attributes a JSON
// document can describe.
func FuzzAppendAttrs(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"a":"x","n":3,"d":3.0,"b":true,"z":null}`,
		`{"arr":[1,2.5,"s",false,[],{}],"nested":{"k":{"k2":[1e300,-0.0]}}}`,
		`{"html":"<script>&amp;</script>","ctl":"\u0000\u001f\t\n\r\"\\","sep":"\u2028\u2029","emoji":"🚀 日本"}`,
		`{"big":9223372036854775807,"bigger":92233720368547758070,"tiny":1e-320,"huge":1e400}`,
		`{"bad utf8":"\xff\xfe"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var a store.Attributes
		if err := json.Unmarshal(doc, &a); err != nil {
			return
		}
		ref, err := a.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
		got, err := appendAttrs(nil, a)
		if err != nil {
			t.Fatalf("appendAttrs: %v", err)
		}
		var fromRef, fromGot store.Attributes
		if err := json.Unmarshal(ref, &fromRef); err != nil {
			t.Fatalf("decode MarshalJSON output %q: %v", ref, err)
		}
		if err := json.Unmarshal(got, &fromGot); err != nil {
			t.Fatalf("decode appendAttrs output %q: %v", got, err)
		}
		if !reflect.DeepEqual(fromRef, fromGot) {
			t.Fatalf("appendAttrs and MarshalJSON disagree\n  input      %q\n  MarshalJSON %s\n  appendAttrs %s", doc, ref, got)
		}
	})
}
