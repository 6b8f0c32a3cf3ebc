package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/gate"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func build(t *testing.T, withBaseline, withGate bool) *Report {
	t.Helper()
	cases, err := datasets.LoadCases("../testdata/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cfg := scorer.DefaultConfig()
	score := func(p string) *scorer.Suite {
		tr, err := datasets.LoadTrials(p)
		if err != nil {
			t.Fatal(err)
		}
		s, err := scorer.Score(cases, tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		s.Source = filepath.Base(p)
		return s
	}
	r := &Report{Suite: score("../testdata/candidate.jsonl")}
	if withBaseline {
		r.Baseline = score("../testdata/baseline.jsonl")
		if r.Comparison, err = scorer.Compare(r.Baseline, r.Suite, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if withGate {
		p, err := loadPolicy(t, "../testdata/policy.json")
		if err != nil {
			t.Fatal(err)
		}
		r.Gate = gate.Evaluate(p, r.Suite, r.Comparison)
	}
	return r
}

// loadPolicy reads and parses a policy file (the scorer does no I/O; its
// tests do).
func loadPolicy(t *testing.T, path string) (*gate.Policy, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return gate.ParseNamed(b, path)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update and review the diff); got:\n%s", path, got)
	}
}

func TestReportsGolden(t *testing.T) {
	for _, v := range []struct {
		name           string
		baseline, gate bool
	}{{"suite", false, false}, {"compare_gate", true, true}} {
		for _, f := range Formats {
			t.Run(v.name+"."+f, func(t *testing.T) {
				var buf bytes.Buffer
				if err := Write(&buf, f, build(t, v.baseline, v.gate)); err != nil {
					t.Fatal(err)
				}
				ext := map[string]string{Text: "txt", JSON: "json", Markdown: "md", JUnit: "xml"}[f]
				golden(t, v.name+"."+ext, buf.Bytes())
			})
		}
	}
}

func TestJUnitFailsRegressionsOnlyAndSkipsMissingCases(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, JUnit, build(t, true, true)); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("JUnit output is not valid XML: %v", err)
	}
	got := map[string]string{}
	for _, c := range doc.Suites[0].Cases {
		switch {
		case c.Failure != nil:
			got[c.Name] = "failure"
		case c.Skipped != nil:
			got[c.Name] = "skipped"
		default:
			got[c.Name] = "pass"
		}
	}
	want := map[string]string{"cite-docs": "failure", "any-of-two": "pass", "flaky": "pass", "new-case": "pass", "dropped-case": "skipped", "gate": "failure"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("testcase %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func TestJSONReportCarriesScriptedLabelAndNullCosts(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, JSON, build(t, true, false)); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	cand := m["candidate"].(map[string]any)
	if cand["model_labels"].(map[string]any)["scripted"].(float64) != 6 {
		t.Errorf("model_labels = %v", cand["model_labels"])
	}
	if cand["total_cost_usd"] != nil {
		t.Errorf("total_cost_usd = %v, want null (new-case has no cost)", cand["total_cost_usd"])
	}
	if !strings.Contains(buf.String(), `"missing_from_candidate": [`) {
		t.Error("comparison lacks missing_from_candidate")
	}
}

func TestUnknownFormatIsAnError(t *testing.T) {
	if err := Write(&bytes.Buffer{}, "yaml", build(t, false, false)); err == nil {
		t.Fatal("no error for format yaml")
	}
}
