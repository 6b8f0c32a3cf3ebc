package workflow_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/loomwork/loomwork/agents/workflow"
)

// docExample is the example file of docs/workflow.md's "Write your own
// workflow".
func docExample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "workflow.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Write your own workflow")
	m := regexp.MustCompile("(?s)```json\n(.*?)```").FindStringSubmatch(s[max(i, 0):])
	if i < 0 || m == nil {
		t.Fatal("docs/workflow.md has no example workflow file")
	}
	return []byte(m[1])
}

// The schema documents the Go types (the same properties, unknown ones
// forbidden), the documented example and a full file validate against it,
// and files the decoder refuses for their shape are refused by it too.
func TestWorkflowSchema(t *testing.T) {
	raw, err := os.ReadFile("schema/workflow.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		AdditionalProperties *bool                      `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Defs                 struct {
			Step struct {
				AdditionalProperties *bool                      `json:"additionalProperties"`
				Properties           map[string]json.RawMessage `json:"properties"`
			} `json:"step"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	props := func(m map[string]json.RawMessage) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	fields := func(v any) []string {
		var out []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			out = append(out, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		slices.Sort(out)
		return out
	}
	if !reflect.DeepEqual(props(s.Properties), fields(workflow.File{})) || !reflect.DeepEqual(props(s.Defs.Step.Properties), fields(workflow.FileStep{})) {
		t.Fatalf("schema properties %v / %v differ from the Go fields %v / %v",
			props(s.Properties), props(s.Defs.Step.Properties), fields(workflow.File{}), fields(workflow.FileStep{}))
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties || s.Defs.Step.AdditionalProperties == nil || *s.Defs.Step.AdditionalProperties {
		t.Fatal("additionalProperties must be false for the file and its steps")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("workflow.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("workflow.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	validate := func(b []byte) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return err
		}
		return sch.Validate(v)
	}
	for name, b := range map[string][]byte{"docs example": docExample(t), "full file": []byte(okFile)} {
		if _, err := workflow.DecodeFile(name, b); err != nil {
			t.Fatalf("%s does not decode: %v", name, err)
		}
		if err := validate(b); err != nil {
			t.Fatalf("%s does not validate: %v", name, err)
		}
	}
	for _, bad := range []string{
		`{"name":"x","steps":[{"id":"a","kind":"tool","tool":"echo"}]}`,                           // no input
		`{"name":"x","steps":[{"id":"a","kind":"approval","prompt":"p","url":"http://x"}]}`,       // a field its kind does not take
		`{"name":"x","steps":[{"id":"a","kind":"tool","tool":"echo","input":"i","retry":1}]}`,     // unknown field
		`{"name":"x","steps":[{"id":"a","kind":"a2a","url":"ftp://x","input":"i"}]}`,              // not http
		`{"name":"x","steps":[{"id":"a","kind":"tool","tool":"echo","input":"i","backoff":"x"}]}`, // not a duration
	} {
		if validate([]byte(bad)) == nil {
			t.Errorf("the schema accepts %s", bad)
		}
		if _, err := workflow.DecodeFile("bad.json", []byte(bad)); err == nil {
			t.Errorf("the decoder accepts %s", bad)
		}
	}
}
