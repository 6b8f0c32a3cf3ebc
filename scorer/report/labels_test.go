package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
)

// scriptedAgainstLive is the report of the test candidate, relabelled as a
// live run, against the scripted test baseline.
func scriptedAgainstLive(t *testing.T) *Report {
	t.Helper()
	cases, err := datasets.LoadCases("../testdata/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cfg := scorer.DefaultConfig()
	score := func(path, label string) *scorer.Suite {
		tr, err := datasets.LoadTrials(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := range tr {
			if label != "" {
				tr[i].ModelLabel = label
			}
		}
		s, err := scorer.Score(cases, tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		s.Source = path
		return s
	}
	r := &Report{Baseline: score("../testdata/baseline.jsonl", ""), Suite: score("../testdata/candidate.jsonl", datasets.LabelLive)}
	if r.Comparison, err = scorer.Compare(r.Baseline, r.Suite, cfg); err != nil {
		t.Fatal(err)
	}
	return r
}

// Every format shows both sides' labels and the warning that a scripted
// baseline is compared with a live candidate.
func TestScriptedAgainstLiveWarnsInEveryFormat(t *testing.T) {
	r := scriptedAgainstLive(t)
	const warning = "model labels differ (baseline: scripted ×6; candidate: live ×6): a scripted run is compared with a live one"
	if len(r.Comparison.Warnings) != 1 || !strings.HasPrefix(r.Comparison.Warnings[0], warning) {
		t.Fatalf("warnings = %q", r.Comparison.Warnings)
	}
	out := map[string]string{}
	for _, f := range Formats {
		var buf bytes.Buffer
		if err := Write(&buf, f, r); err != nil {
			t.Fatal(err)
		}
		out[f] = buf.String()
	}
	for f, want := range map[string][]string{
		Text:     {"  model labels: baseline scripted ×6; candidate live ×6\n", "  WARNING: " + warning},
		Markdown: {"| model labels | baseline scripted ×6; candidate live ×6 |\n", "> ⚠️ **Warning:** " + warning},
	} {
		for _, w := range want {
			if !strings.Contains(out[f], w) {
				t.Errorf("%s report lacks %q:\n%s", f, w, out[f])
			}
		}
	}

	var j struct {
		Baseline struct {
			ModelLabels map[string]int `json:"model_labels"`
		} `json:"baseline"`
		Candidate struct {
			ModelLabels map[string]int `json:"model_labels"`
		} `json:"candidate"`
		Comparison struct{ Warnings []string } `json:"comparison"`
	}
	if err := json.Unmarshal([]byte(out[JSON]), &j); err != nil {
		t.Fatal(err)
	}
	if j.Baseline.ModelLabels["scripted"] != 6 || j.Candidate.ModelLabels["live"] != 6 ||
		len(j.Comparison.Warnings) != 1 || !strings.HasPrefix(j.Comparison.Warnings[0], warning) {
		t.Errorf("JSON report: baseline labels %v, candidate labels %v, warnings %q", j.Baseline.ModelLabels, j.Candidate.ModelLabels, j.Comparison.Warnings)
	}

	var doc junitSuites
	if err := xml.Unmarshal([]byte(out[JUnit]), &doc); err != nil {
		t.Fatal(err)
	}
	props := map[string]string{}
	for _, p := range doc.Suites[0].Properties {
		props[p.Name] = p.Value
	}
	if props["model_labels"] != "live ×6" || props["baseline_model_labels"] != "scripted ×6" || !strings.HasPrefix(props["warning"], warning) {
		t.Errorf("JUnit properties = %v", props)
	}
}
