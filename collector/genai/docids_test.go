package genai

import (
	"slices"
	"testing"
)

var docIDSeeds = []string{
	`[{"id":"doc_1","score":0.93},{"id":"doc_2","score":1e-3}]`,
	`[ {"id" : " doc_1 ", "score": -0.5, "ok": true, "x": null, "f": false } , {"score":1} ]`,
	`["a", " b ", ""]`,
	`[]`, ` [ ] `, `[{}]`,
	`[{"id":"a","id":"b"}]`, `[{"id":"a","id":5}]`, `[{"id":5}]`, `[{"id":null}]`,
	`[{"id":"a\u0062"}]`, `[{"id":"a"},]`, `[{"id":"a"}] x`, `[{"id":"a" "b":1}]`,
	`[{"id":"a","n":01}]`, `[{"id":"a","n":1.}]`, `[{"id":"a","n":-}]`, `[{"id":"a","n":1e}]`, `[{"id":"a","n":1E+5}]`,
	`[{"id":"a","m":{"k":1}}]`, `[{"id":"a","l":[1]}]`, `[1, 2]`, `[null]`, `["a", 1]`,
	"[{\"id\":\"\xff\"}]", "[{\"id\":\"a\tb\"}]", `[{"ID":"a"}]`, `[{"id":"日本"}]`, `[ {"id":"x"} ,{"id":"y"}]`,
	`[{"id":"a","t":tru}]`, `[{"id":"a"`, `[`, ``, `null`,
}

// The fast scan, where it answers, answers as encoding/json does.
func TestScanDocumentIDsMatchesEncodingJSON(t *testing.T) {
	answered := 0
	for _, in := range docIDSeeds {
		got, ok := scanDocumentIDs([]byte(in))
		if !ok {
			continue
		}
		answered++
		if want := decodeDocumentIDs([]byte(in)); !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%s: scan %q, encoding/json %q", in, got, want)
		}
	}
	if answered < 8 {
		t.Errorf("the scan answered %d of the seeds; it should take the common shapes", answered)
	}
	if _, ok := scanDocumentIDs([]byte(`[{"id":"doc_1","score":0.93},{"id":"doc_2","score":0.5}]`)); !ok {
		t.Error("the common shape went to encoding/json")
	}
}

func FuzzScanDocumentIDs(f *testing.F) {
	for _, s := range docIDSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := scanDocumentIDs([]byte(in))
		if !ok {
			return
		}
		if want := decodeDocumentIDs([]byte(in)); !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Fatalf("%q: scan %q, encoding/json %q", in, got, want)
		}
	})
}
