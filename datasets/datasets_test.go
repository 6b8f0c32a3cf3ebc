package datasets

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/store"
)

func TestReadCasesAcceptsTheDocumentedFormat(t *testing.T) {
	in := `{"id":"c1","task":"find the page on X","expected_tools":["search","fetch"],"required_evidence":["docs/x.md"],"budgets":{"ms":30000,"usd":0.05,"tokens":20000},"must_pass":true,"tags":["smoke"]}

{"id":"c2","task":"t","evidence_match":"any"}
`
	cs, err := ReadCases(strings.NewReader(in), "cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || !cs[0].MustPass || *cs[0].Budgets.USD != 0.05 || cs[1].EvidenceMatch != EvidenceAny {
		t.Fatalf("decoded %+v", cs)
	}
}

func TestBadCaseLinesNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name, in, field, msg string
		line                 int
	}{
		{"unknown field", `{"id":"a","task":"t","budget":{"ms":1}}`, "budget", "unknown field", 1},
		{"nested unknown field", `{"id":"a","task":"t","budgets":{"sec":1}}`, "sec", "unknown field", 1},
		{"wrong type", `{"id":"a","task":"t","must_pass":"yes"}`, "must_pass", "wrong type", 1},
		{"nested wrong type", `{"id":"a","task":"t","budgets":{"ms":"fast"}}`, "budgets.ms", "wrong type", 1},
		{"missing id", `{"task":"t"}`, "id", "missing", 1},
		{"empty task", `{"id":"a","task":""}`, "task", "non-empty", 1},
		{"truncated", "{\"id\":\"a\",\"task\":\"t\"}\n{\"id\":\"b\",\"ta", "", "truncated", 2},
		{"duplicate id", "{\"id\":\"a\",\"task\":\"t\"}\n{\"id\":\"a\",\"task\":\"u\"}", "id", "first on line 1", 2},
		{"duplicate key", `{"id":"a","task":"t","id":"b"}`, "id", "twice", 1},
		{"two objects on a line", `{"id":"a","task":"t"} {"id":"b","task":"t"}`, "", "trailing", 1},
		{"not an object", `["a"]`, "", "not a JSON object", 1},
		{"bad budget", `{"id":"a","task":"t","budgets":{"ms":-1}}`, "budgets.ms", "positive", 1},
		{"bad evidence mode", `{"id":"a","task":"t","evidence_match":"most"}`, "evidence_match", "most", 1},
		{"empty tool name", `{"id":"a","task":"t","expected_tools":["x",""]}`, "expected_tools[1]", "empty", 1},
		{"empty group", "{\"id\":\"a\",\"task\":\"t\",\"group\":\"tool:search\"}\n{\"id\":\"b\",\"task\":\"t\",\"group\":\"\"}", "group", "empty", 2},
		{"group with a space", `{"id":"a","task":"t","group":"tool:search "}`, "group", "character ' ' at byte 11", 1},
		{"group starting with a colon", `{"id":"a","task":"t","group":":search"}`, "group", "starting with a letter or digit", 1},
		{"group not a string", `{"id":"a","task":"t","group":3}`, "group", "wrong type", 1},
		{"group too long", `{"id":"a","task":"t","group":"` + strings.Repeat("g", 101) + `"}`, "group", "at most 100", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadCases(strings.NewReader(c.in), "cases.jsonl")
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error = %v, want a *LineError", err)
			}
			if le.File != "cases.jsonl" || le.Line != c.line || le.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error = %q (file %q line %d field %q), want line %d field %q containing %q", err, le.File, le.Line, le.Field, c.line, c.field, c.msg)
			}
		})
	}
}

func TestCaseGroupIsRead(t *testing.T) {
	cs, err := ReadCases(strings.NewReader(`{"id":"a","task":"t","group":"tool:search"}`+"\n"+`{"id":"b","task":"t"}`), "cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if cs[0].Group != "tool:search" || cs[1].Group != "" {
		t.Errorf("groups %q, %q", cs[0].Group, cs[1].Group)
	}
}

func TestBadTrialLinesNameFileLineAndField(t *testing.T) {
	ok := `{"case_id":"a","trial":0,"model_label":"scripted","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","success":true}`
	cases := []struct {
		name, in, field, msg string
		line                 int
	}{
		{"missing trial index", `{"case_id":"a","model_label":"live","trace_id":"x","success":true}`, "trial", "missing", 1},
		{"missing label, only a trace id", `{"case_id":"a","trial":0,"trace_id":"x","success":true}`, "model_label", "required unless a journal reference or inline spans", 1},
		{"no provenance", `{"case_id":"a","trial":0,"model_label":"live","success":true}`, "trace_id", "journal", 1},
		{"no success", `{"case_id":"a","trial":0,"model_label":"live","journal":{"path":"j","run_id":"r"}}`, "success", "required", 1},
		{"success as string", `{"case_id":"a","trial":0,"model_label":"live","trace_id":"x","success":"true"}`, "success", "wrong type", 1},
		{"duplicate trial", ok + "\n" + ok, "trial", "duplicate trial 0", 2},
		{"negative cost", `{"case_id":"a","trial":0,"model_label":"live","trace_id":"x","success":true,"cost_usd":-1}`, "cost_usd", "non-negative", 1},
		{"span unknown field", `{"case_id":"a","trial":0,"model_label":"live","spans":[{"trace_id":"t","span_id":"s","name":"n","start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z","colour":1}]}`, "colour", "unknown", 1},
		{"span of another trace", `{"case_id":"a","trial":0,"model_label":"live","trace_id":"x","spans":[{"trace_id":"y","span_id":"s","name":"n","start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z"}]}`, "spans[0].trace_id", "differs", 1},
		{"journal without run", `{"case_id":"a","trial":0,"model_label":"live","journal":{"path":"j"},"success":true}`, "journal", "run_id", 1},
		{"truncated last line", ok + "\n" + `{"case_id":"a","trial":1,"model_`, "", "truncated", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTrials(strings.NewReader(c.in), "trials.jsonl")
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error = %v, want a *LineError", err)
			}
			if le.Line != c.line || le.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error = %q (line %d field %q), want line %d field %q containing %q", err, le.Line, le.Field, c.line, c.field, c.msg)
			}
		})
	}
}

// A trial whose journal or spans say what produced it may leave the label
// out: the decoder keeps it empty for the provenance check to fill in
// (journal.CheckProvenance, scorer.ScoreTrial).
func TestTrialLabelIsOptionalWhenProvenanceGivesIt(t *testing.T) {
	tr, err := ReadTrials(strings.NewReader(`{"case_id":"a","trial":0,"journal":{"path":"j.jsonl","run_id":"r"},"success":true}`), "t")
	if err != nil {
		t.Fatal(err)
	}
	if tr[0].ModelLabel != "" || tr[0].Journal.RunID != "r" {
		t.Fatalf("decoded %+v", tr[0])
	}
}

func TestTrialWithNullCostKeepsCostUnknown(t *testing.T) {
	tr, err := ReadTrials(strings.NewReader(`{"case_id":"a","trial":3,"model_label":"scripted","trace_id":"x","success":false,"cost_usd":null}`), "t")
	if err != nil {
		t.Fatal(err)
	}
	if tr[0].CostUSD != nil || tr[0].Trial != 3 || *tr[0].Success {
		t.Fatalf("decoded %+v", tr[0])
	}
}

// The schema files document the Go types: every JSON field must appear in
// the schema and vice versa, and unknown fields must be forbidden.
func TestSchemaFilesMatchTheGoTypes(t *testing.T) {
	check := func(file string, typ reflect.Type) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			AdditionalProperties *bool                     `json:"additionalProperties"`
			Required             []string                  `json:"required"`
			Properties           map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if s.AdditionalProperties == nil || *s.AdditionalProperties {
			t.Errorf("%s: additionalProperties must be false", file)
		}
		var fromSchema, fromGo []string
		for k := range s.Properties {
			fromSchema = append(fromSchema, k)
		}
		for i := 0; i < typ.NumField(); i++ {
			if name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]; name != "-" {
				fromGo = append(fromGo, name)
			}
		}
		sort.Strings(fromSchema)
		sort.Strings(fromGo)
		if !reflect.DeepEqual(fromSchema, fromGo) {
			t.Errorf("%s properties %v\n  differ from %s fields %v", file, fromSchema, typ, fromGo)
		}
	}
	check("schema/case.schema.json", reflect.TypeOf(Case{}))
	check("schema/trial.schema.json", reflect.TypeOf(Trial{}))
	check("schema/span.schema.json", reflect.TypeOf(store.Span{}))
}
