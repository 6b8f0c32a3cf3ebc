package schema

import (
	"encoding/json"
	"errors"
	"strings"
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

func TestValidateNamesTheOffendingField(t *testing.T) {
	s, err := Compile(json.RawMessage(ledgerSchema))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ doc, want string }{
		{`{"account":"cash","amount_cents":5}`, ""},
		{`{"account":"cash","amount_cents":5.0}`, ""},
		{`{"account":"cash"}`, `field "amount_cents": is required`},
		{`{"account":"cash","amount_cents":"5"}`, `field "amount_cents": must be integer, got string`},
		{`{"account":"cash","amount_cents":2.5}`, `field "amount_cents": must be integer, got number`},
		{`{"account":"cash","amount_cents":0}`, `field "amount_cents": must be >= 1, got 0`},
		{`{"account":"gold","amount_cents":5}`, `field "account": must be one of "cash", "bank", got "gold"`},
		{`{"account":"cash","amount_cents":5,"memo":"ninechars"}`, `field "memo": must be at most 8 characters long, got 9`},
		{`{"account":"cash","amount_cents":5,"tags":["a",""]}`, `field "tags[1]": must be at least 1 characters long, got 0`},
		{`{"account":"cash","amount_cents":5,"tags":["a","b","c"]}`, `field "tags": must have at most 2 items, got 3`},
		{`{"account":"cash","amount_cents":5,"extra":1}`, `field "extra": is not an allowed property`},
		{`[1]`, `arguments: must be object, got array`},
		{`{"account":`, `arguments: not valid JSON`},
	}
	for _, tc := range cases {
		err := s.Validate(json.RawMessage(tc.doc))
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.doc, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want prefix %q", tc.doc, err, tc.want)
		}
	}
}

func TestCompileRefusesKeywordsItCannotEnforce(t *testing.T) {
	for _, doc := range []string{
		`{"type":"object","properties":{"a":{"oneOf":[{"type":"string"}]}}}`,
		`{"type":"string","pattern":"^a"}`,
		`{"type":"strnig"}`,
		`{"minimum":"1"}`,
		`{"additionalProperties":{"type":"string"}}`,
	} {
		if _, err := Compile(json.RawMessage(doc)); err == nil {
			t.Errorf("%s: compiled", doc)
		}
	}
	_, err := Compile(json.RawMessage(`{"pattern":"x"}`))
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
}

func TestEmptySchemaAcceptsAnything(t *testing.T) {
	s, err := Compile(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(json.RawMessage(`{"x":[1,{"y":null}]}`)); err != nil {
		t.Fatal(err)
	}
}

func FuzzValidate(f *testing.F) {
	s, err := Compile(json.RawMessage(ledgerSchema))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"account":"cash","amount_cents":5}`))
	f.Add([]byte(`{"tags":[1,2,3]}`))
	f.Add([]byte(`1e400`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_ = s.Validate(doc) // must not panic
		_, _ = Compile(doc)
	})
}
