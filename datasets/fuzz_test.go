package datasets

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func FuzzReadCases(f *testing.F) {
	f.Add([]byte(`{"id":"c1","task":"t","expected_tools":["a"],"required_evidence":["d"],"budgets":{"ms":1,"usd":0.1,"tokens":5},"must_pass":true,"tags":["x"]}` + "\n"))
	f.Add([]byte(`{"id":"c1","task":"t"}` + "\n" + `{"id":"c1","task":"t"}`))
	f.Add([]byte(`{"id":"c1","task":"t","id":"c2"}`))
	f.Add([]byte(`{"id":"c1","ta`))
	f.Add([]byte("\n\n[1,2]\n"))
	f.Add([]byte(`{"id":"g","task":"t","required_evidence":["d"],"graders":[{"type":"evidence_cited"},{"type":"number","name":"n","expected":96.124991,"abs_tol":0.005},{"type":"code","file":"graders/x.py"},{"type":"trace","metric":"critical_path_share","span":"chat","max":0.5,"required":false}]}`))
	f.Add([]byte(`{"id":"g","task":"t","graders":[{"type":"pairwise","rubric":"r","reference":"x"},{"type":"json_schema","name":"s","schema":{"type":"object"}},{"type":"tool_called","tool":"x","pattern":"a+","min":0,"max":2}]}`))
	f.Add([]byte(`{"id":"g","task":"t","graders":[{"type":"contains","value":"x","abs_tol":1}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		cs, err := ReadCases(bytes.NewReader(in), "fuzz.jsonl")
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, c := range cs {
			if err := c.Validate(); err != nil || seen[c.ID] {
				t.Fatalf("accepted an invalid or duplicate case %+v: %v", c, err)
			}
			seen[c.ID] = true
			// What was accepted re-encodes and decodes to the same case.
			b, _ := json.Marshal(c)
			again, err := ReadCases(bytes.NewReader(b), "re")
			if err != nil || len(again) != 1 {
				t.Fatalf("re-decode of %s: %v", b, err)
			}
			again[0].Line = c.Line
			if b2, _ := json.Marshal(again[0]); !bytes.Equal(b, b2) {
				t.Fatalf("round trip changed the case:\n%s\n%s", b, b2)
			}
		}
	})
}

func FuzzReadTrials(f *testing.F) {
	f.Add([]byte(`{"case_id":"a","trial":0,"model_label":"scripted","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","success":true,"tools_called":["s"],"evidence_retrieved":["d"],"evidence_cited":["d"],"duration_ms":12.5,"cost_usd":null,"tokens":10}` + "\n"))
	f.Add([]byte(`{"case_id":"a","trial":0,"model_label":"live","spans":[{"trace_id":"t","span_id":"s","name":"n","start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-01T00:00:01Z","attributes":{"k":1.0}}]}`))
	f.Add([]byte(`{"case_id":"a","trial":0,"model_label":"live","journal":{"path":"j","run_id":"r"},"success":false}`))
	f.Add([]byte(`{"case_id":"a","trial":-1}`))
	f.Add([]byte(`{"case_id":"a","trial":1e99,"model_label":"x"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ts, err := ReadTrials(bytes.NewReader(in), "fuzz.jsonl")
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, tr := range ts {
			if err := tr.Validate(); err != nil {
				t.Fatalf("accepted an invalid trial %+v: %v", tr, err)
			}
		}
	})
}
