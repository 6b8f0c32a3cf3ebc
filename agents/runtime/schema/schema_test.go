package schema

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

const ledgerSchema = `{
  "type": "object",
  "description": "append a ledger entry",
  "properties": {
    "account": {"type": "string", "enum": ["cash", "bank"]},
    "amount_cents": {"type": "integer", "minimum": 1, "maximum": 1000000},
    "memo": {"type": "string", "maxLength": 8},
    "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 2}
  },
  "required": ["account", "amount_cents"],
  "additionalProperties": false
}`

func mustCompile(t testing.TB, raw string) *Schema {
	t.Helper()
	s, err := Compile(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// check validates each document and wants no error ("") or exactly want.
func check(t *testing.T, s *Schema, cases [][2]string) {
	t.Helper()
	for _, tc := range cases {
		doc, want := tc[0], tc[1]
		got := ""
		if err := s.Validate(json.RawMessage(doc)); err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", doc, got, want)
		}
	}
}

func TestValidateNamesTheOffendingField(t *testing.T) {
	check(t, mustCompile(t, ledgerSchema), [][2]string{
		{`{"account":"cash","amount_cents":5}`, ""},
		{`{"account":"cash","amount_cents":5.0}`, ""}, // a mathematical integer
		{`{"account":"cash"}`, `arguments: missing property 'amount_cents'`},
		{`{"account":"cash","amount_cents":"5"}`, `field "/amount_cents": got string, want integer`},
		{`{"account":"cash","amount_cents":2.5}`, `field "/amount_cents": got number, want integer`},
		{`{"account":"cash","amount_cents":0}`, `field "/amount_cents": minimum: got 0, want 1`},
		{`{"account":"gold","amount_cents":5}`, `field "/account": value must be one of 'cash', 'bank'`},
		{`{"account":"cash","amount_cents":5,"memo":"ninechars"}`, `field "/memo": maxLength: got 9, want 8`},
		{`{"account":"cash","amount_cents":5,"tags":["a",""]}`, `field "/tags/1": minLength: got 0, want 1`},
		{`{"account":"cash","amount_cents":5,"tags":["a","b","c"]}`, `field "/tags": maxItems: got 3, want 2`},
		{`{"account":"cash","amount_cents":5,"extra":1}`, `arguments: additional properties 'extra' not allowed`},
		{`{"amount_cents":"5"}`, `arguments: missing property 'account'; field "/amount_cents": got string, want integer`},
		{`[1]`, `arguments: got array, want object`},
		{`{"account":`, `arguments: not valid JSON: unexpected EOF`},
		{`{"account":"cash","amount_cents":5} {}`, `arguments: not valid JSON: invalid character after top-level value`},
	})
}

// Every broken rule is reported, in one order whatever the order the
// library met them in (the text is journaled and replayed byte for byte).
func TestValidateReportsEveryFieldInAStableOrder(t *testing.T) {
	s := mustCompile(t, ledgerSchema)
	doc := json.RawMessage(`{"z":1,"account":"gold","amount_cents":0,"y":2,"memo":"ninechars","tags":["a","",3],"a/b":3}`)
	want := `arguments: additional properties 'a/b', 'y', 'z' not allowed; ` +
		`field "/account": value must be one of 'cash', 'bank'; field "/amount_cents": minimum: got 0, want 1; ` +
		`field "/memo": maxLength: got 9, want 8; field "/tags": maxItems: got 3, want 2; ` +
		`field "/tags/1": minLength: got 0, want 1; field "/tags/2": got number, want string`
	for range 50 {
		if err := s.Validate(doc); err == nil || err.Error() != want {
			t.Fatalf("got  %v\nwant %s", err, want)
		}
	}
	s = mustCompile(t, `{"type":"object","properties":{"a/b":{"type":"string"},"c~d":{"type":"string"}}}`)
	check(t, s, [][2]string{{`{"a/b":1,"c~d":2}`, `field "/a~1b": got number, want string; field "/c~0d": got number, want string`}})
}

// The old hand-written validator refused these keywords at Compile; the
// library enforces them.
func TestKeywordsTheSubsetRefusedAreEnforced(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
		"path":{"type":"string","pattern":"^/"},
		"n":{"oneOf":[{"type":"string"},{"type":"integer","minimum":3}]},
		"kv":{"type":"object","additionalProperties":{"type":"string"}},
		"ref":{"$ref":"#/$defs/id"}},
		"$defs":{"id":{"type":"string","minLength":2}}}`)
	check(t, s, [][2]string{
		{`{"path":"/etc","n":"x","kv":{"a":"b"},"ref":"ab"}`, ""},
		{`{"n":4}`, ""},
		{`{"path":"etc"}`, `field "/path": 'etc' does not match pattern '^/'`},
		{`{"n":true}`, `field "/n": 'oneOf' failed, none matched; field "/n": got boolean, want integer; field "/n": got boolean, want string`},
		{`{"n":1}`, `field "/n": 'oneOf' failed, none matched; field "/n": got number, want string; field "/n": minimum: got 1, want 3`},
		{`{"kv":{"a":1}}`, `field "/kv/a": got number, want string`},
		{`{"ref":"a"}`, `field "/ref": minLength: got 1, want 2`},
	})
}

func TestCompileRefusesAnInvalidSchema(t *testing.T) {
	for doc, want := range map[string]string{
		`{"type":"strnig"}`: `at '/type'`,
		`{"minimum":"1"}`:   `at '/minimum': got string, want number`,
		`{"type":`:          `unexpected EOF`,
		`{"properties":{"a":{"$ref":"#/$defs/nope"}}}`: `not found`,
	} {
		if _, err := Compile(json.RawMessage(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", doc, err, want)
		}
	}
}

// A $ref outside the schema is refused at Compile: no request is made and
// no file is read, even when the file is there.
func TestCompileNeverLoadsAnExternalRef(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("other.json", []byte(`{"type":"string"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{srv.URL + "/s.json", "other.json", dir + "/other.json", "file://" + dir + "/other.json"} {
		_, err := Compile(json.RawMessage(`{"properties":{"a":{"$ref":"` + ref + `"}}}`))
		if err == nil || !strings.Contains(err.Error(), "no URLLoader") {
			t.Errorf("$ref %s: err = %v, want it refused", ref, err)
		}
	}
	if _, err := Compile(json.RawMessage(`{"$id":"` + srv.URL + `/root.json","$ref":"s.json"}`)); err == nil {
		t.Error("$ref relative to an http $id compiled")
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests to the server", n)
	}
	// A draft's meta-schema is built in.
	mustCompile(t, `{"$schema":"http://json-schema.org/draft-07/schema#","type":"integer","exclusiveMinimum":3}`)
}

func TestEmptySchemaAcceptsAnything(t *testing.T) {
	s := mustCompile(t, "")
	check(t, s, [][2]string{{`{"x":[1,{"y":null}]}`, ""}, {``, ""}})
}

func FuzzValidate(f *testing.F) {
	s := mustCompile(f, ledgerSchema)
	f.Add([]byte(`{"account":"cash","amount_cents":5}`))
	f.Add([]byte(`{"tags":[1,2,3]}`))
	f.Add([]byte(`1e400`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_ = s.Validate(doc) // must not panic
		_, _ = Compile(doc)
	})
}
