package datasets

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestReadLabelsAcceptsTheDocumentedFormat(t *testing.T) {
	in := `{"case_id":"c1","trial":0,"grader":"helpful","passed":true,"labeler":"ana","note":"cites the page"}

{"case_id":"c1","trial":0,"grader":"helpful","passed":false,"labeler":"ben"}
{"case_id":"c1","trial":1,"grader":"helpful","passed":false}
`
	ls, err := ReadLabels(strings.NewReader(in), "labels.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Label{
		{CaseID: "c1", Trial: 0, Grader: "helpful", Passed: true, Labeler: "ana", Note: "cites the page", Line: 1},
		{CaseID: "c1", Trial: 0, Grader: "helpful", Passed: false, Labeler: "ben", Line: 3},
		{CaseID: "c1", Trial: 1, Grader: "helpful", Passed: false, Line: 4},
	}
	if !reflect.DeepEqual(ls, want) {
		t.Fatalf("decoded %+v\nwant %+v", ls, want)
	}
}

func TestBadLabelLinesNameFileLineAndField(t *testing.T) {
	ok := `{"case_id":"a","trial":0,"grader":"g","passed":true}`
	cases := []struct {
		name, in, field, msg string
		line                 int
	}{
		{"unknown field", `{"case_id":"a","trial":0,"grader":"g","passed":true,"pass":true}`, "pass", "unknown field", 1},
		{"missing passed", `{"case_id":"a","trial":0,"grader":"g"}`, "passed", "missing", 1},
		{"missing trial", `{"case_id":"a","grader":"g","passed":true}`, "trial", "missing", 1},
		{"missing grader", `{"case_id":"a","trial":0,"passed":true}`, "grader", "missing", 1},
		{"missing case", `{"trial":0,"grader":"g","passed":true}`, "case_id", "missing", 1},
		{"null passed", `{"case_id":"a","trial":0,"grader":"g","passed":null}`, "passed", "null", 1},
		{"null trial", `{"case_id":"a","trial":null,"grader":"g","passed":true}`, "trial", "null", 1},
		{"passed as string", `{"case_id":"a","trial":0,"grader":"g","passed":"yes"}`, "passed", "wrong type", 1},
		{"fractional trial", `{"case_id":"a","trial":1.5,"grader":"g","passed":true}`, "trial", "wrong type", 1},
		{"negative trial", `{"case_id":"a","trial":-1,"grader":"g","passed":true}`, "trial", "non-negative", 1},
		{"empty grader", `{"case_id":"a","trial":0,"grader":"","passed":true}`, "grader", "non-empty", 1},
		{"empty labeler", `{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":""}`, "labeler", "non-empty", 1},
		{"padded labeler", `{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":"ana "}`, "labeler", "trailing space", 1},
		{"empty note", `{"case_id":"a","trial":0,"grader":"g","passed":true,"note":""}`, "note", "non-empty", 1},
		{"duplicate key", `{"case_id":"a","trial":0,"grader":"g","passed":true,"passed":false}`, "passed", "twice", 1},
		{"duplicate label", ok + "\n\n" + strings.Replace(ok, "true", "false", 1), "grader", "first on line 1", 3},
		{"duplicate label by one labeler",
			`{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":"ana"}` + "\n" + `{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":"ana"}`,
			"labeler", `labeler "ana"`, 2},
		{"truncated", ok + "\n" + `{"case_id":"a","tri`, "", "truncated", 2},
		{"not an object", `[1]`, "", "not a JSON object", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadLabels(strings.NewReader(c.in), "labels.jsonl")
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error = %v, want a *LineError", err)
			}
			if le.File != "labels.jsonl" || le.Line != c.line || le.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error = %q (line %d field %q), want line %d field %q containing %q", err, le.Line, le.Field, c.line, c.field, c.msg)
			}
		})
	}
}

// The schema documents the Go type: the same fields, the same required
// ones (the fields without omitempty), the JSON type of each field's Go
// kind, and no others.
func TestLabelSchemaMatchesTheGoType(t *testing.T) {
	b, err := os.ReadFile("schema/label.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		AdditionalProperties *bool                     `json:"additionalProperties"`
		Required             []string                  `json:"required"`
		Properties           map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Error("additionalProperties must be false")
	}
	typ := reflect.TypeOf(Label{})
	var fromGo, requiredGo []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")
		if tag[0] == "-" {
			continue
		}
		fromGo = append(fromGo, tag[0])
		if !slices.Contains(tag[1:], "omitempty") {
			requiredGo = append(requiredGo, tag[0])
		}
		want := map[reflect.Kind]string{reflect.String: "string", reflect.Int: "integer", reflect.Bool: "boolean"}[f.Type.Kind()]
		prop, ok := s.Properties[tag[0]]
		if !ok {
			continue
		}
		if prop["type"] != want {
			t.Errorf("schema type of %s is %v, Go field %s is %s (want %q)", tag[0], prop["type"], f.Name, f.Type, want)
		}
		if want == "string" && prop["minLength"] != 1.0 {
			t.Errorf("schema %s: want minLength 1 (the decoder refuses an empty %s)", tag[0], tag[0])
		}
	}
	var fromSchema []string
	for k := range s.Properties {
		fromSchema = append(fromSchema, k)
	}
	for _, l := range [][]string{fromGo, fromSchema, requiredGo, s.Required} {
		sort.Strings(l)
	}
	if !reflect.DeepEqual(fromSchema, fromGo) || !reflect.DeepEqual(slices.Sorted(slices.Values(labelFields)), fromGo) {
		t.Errorf("schema properties %v, Go fields %v and the decoder's fields %v differ", fromSchema, fromGo, labelFields)
	}
	if !reflect.DeepEqual(s.Required, requiredGo) || !reflect.DeepEqual(s.Required, slices.Sorted(slices.Values(labelRequired))) {
		t.Errorf("schema required %v, Go fields without omitempty %v, decoder requires %v", s.Required, requiredGo, labelRequired)
	}
}

// The schema and the decoder accept and refuse the same single lines
// (what one line can show: not duplicates across lines, nor a key given
// twice, which JSON parsers silently collapse).
func TestLabelSchemaAndDecoderAgreeLineByLine(t *testing.T) {
	b, err := os.ReadFile("schema/label.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("label.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("label.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	for line, valid := range map[string]bool{
		`{"case_id":"a","trial":0,"grader":"g","passed":true}`:                                      true,
		`{"case_id":"a","trial":3,"grader":"g","passed":false,"labeler":"ana","note":"off by one"}`: true,
		`{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":"Ana María"}`:                true,
		`{"case_id":"a","trial":0,"grader":"g","passed":true,"pass":true}`:                          false,
		`{"case_id":"a","trial":0,"grader":"g"}`:                                                    false,
		`{"trial":0,"grader":"g","passed":true}`:                                                    false,
		`{"case_id":"a","trial":0,"passed":true}`:                                                   false,
		`{"case_id":"a","grader":"g","passed":true}`:                                                false,
		`{"case_id":"a","trial":0,"grader":"g","passed":null}`:                                      false,
		`{"case_id":"a","trial":null,"grader":"g","passed":true}`:                                   false,
		`{"case_id":"a","trial":0,"grader":"g","passed":"yes"}`:                                     false,
		`{"case_id":"a","trial":1.5,"grader":"g","passed":true}`:                                    false,
		`{"case_id":"a","trial":-1,"grader":"g","passed":true}`:                                     false,
		`{"case_id":"","trial":0,"grader":"g","passed":true}`:                                       false,
		`{"case_id":"a","trial":0,"grader":"","passed":true}`:                                       false,
		`{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":""}`:                         false,
		`{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":" ana"}`:                     false,
		`{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":"ana\n"}`:                    false,
		`{"case_id":"a","trial":0,"grader":"g","passed":true,"note":""}`:                            false,
		`{"case_id":"a","trial":0,"grader":"g","passed":true,"labeler":7}`:                          false,
	} {
		_, decErr := ReadLabels(strings.NewReader(line), "l.jsonl")
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		schemaErr := sch.Validate(v)
		if (decErr == nil) != valid || (schemaErr == nil) != valid {
			t.Errorf("%s: decoder %v, schema %v; want valid=%v from both", line, decErr, schemaErr, valid)
		}
	}
}

func TestAppendLabelWritesOneValidatedLineAndRefusesADuplicate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "labels.jsonl")
	ana := Label{CaseID: "c1", Trial: 2, Grader: "helpful", Passed: true, Labeler: "ana", Note: "a <b> & c"}
	line, err := AppendLabel(path, ana)
	if err != nil || line != 1 {
		t.Fatalf("first append: line %d, %v", line, err)
	}
	// The same grade by another labeler, and anonymously, are new labels.
	ben := ana
	ben.Labeler, ben.Passed, ben.Note = "ben", false, ""
	anon := ana
	anon.Labeler = ""
	for i, l := range []Label{ben, anon} {
		if line, err := AppendLabel(path, l); err != nil || line != i+2 {
			t.Fatalf("append %+v: line %d, %v", l, line, err)
		}
	}
	// Ana again, with the opposite verdict: refused, naming her line.
	again := ana
	again.Passed = false
	_, err = AppendLabel(path, again)
	var de *DuplicateLabelError
	if !errors.As(err, &de) || de.Line != 1 || !strings.Contains(err.Error(), path+":1") || !strings.Contains(err.Error(), `labeler "ana"`) {
		t.Fatalf("duplicate: %v, want a *DuplicateLabelError naming %s:1", err, path)
	}
	got, err := LoadLabels(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Note != "a <b> & c" || got[1].Passed || got[2].Labeler != "" || got[2].Line != 3 {
		t.Fatalf("file holds %+v", got)
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), `"note":"a <b> & c"`) || strings.Count(string(raw), "\n") != 3 {
		t.Errorf("file text:\n%s", raw)
	}

	// An invalid label is refused before the file is touched.
	if _, err := AppendLabel(path, Label{CaseID: "c1", Trial: -1, Grader: "g"}); err == nil || !strings.Contains(err.Error(), `field "trial"`) {
		t.Errorf("negative trial: %v", err)
	}
}

func TestAppendLabelEndsAnUnterminatedLastLineAndRefusesABrokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "labels.jsonl")
	if err := os.WriteFile(path, []byte(`{"case_id":"a","trial":0,"grader":"g","passed":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	line, err := AppendLabel(path, Label{CaseID: "a", Trial: 1, Grader: "g"})
	if err != nil || line != 2 {
		t.Fatalf("append after an unterminated line: line %d, %v", line, err)
	}
	if ls, err := LoadLabels(path); err != nil || len(ls) != 2 || ls[1].Trial != 1 || ls[1].Line != 2 {
		t.Fatalf("read back %+v, %v", ls, err)
	}

	broken := filepath.Join(dir, "broken.jsonl")
	if err := os.WriteFile(broken, []byte("{\"case_id\":\"a\",\"trial\":0,\"grader\":\"g\",\"passed\":true}\n{\"case_id\":\"a\",\"trial\":1,\"grader\":\"g\",\"pased\":true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(broken)
	_, err = AppendLabel(broken, Label{CaseID: "a", Trial: 2, Grader: "g"})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || le.Field != "pased" {
		t.Fatalf("append to a broken file: %v, want the broken line 2 named", err)
	}
	if after, _ := os.ReadFile(broken); string(after) != string(before) {
		t.Error("the broken file was written to")
	}
}

// Concurrent appends of one label: exactly one is written.
func TestAppendLabelIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "labels.jsonl")
	l := Label{CaseID: "c", Trial: 0, Grader: "g", Passed: true}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wrote, dups := 0, 0
	for range 8 {
		wg.Go(func() {
			_, err := AppendLabel(path, l)
			mu.Lock()
			defer mu.Unlock()
			var de *DuplicateLabelError
			switch {
			case err == nil:
				wrote++
			case errors.As(err, &de):
				dups++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wrote != 1 || dups != 7 {
		t.Fatalf("8 concurrent appends: %d written, %d refused as duplicates", wrote, dups)
	}

}
