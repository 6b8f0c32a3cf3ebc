package scorer

import (
	"strings"
	"testing"

	"github.com/loomwork/loomwork/datasets"
)

// A trial that leaves its label to its spans gets theirs; one whose label
// nothing gives (a journal-backed trial whose journal was never checked)
// is refused rather than reported unlabelled.
func TestUnlabelledTrialTakesItsSpansLabelOrIsRefused(t *testing.T) {
	ts := mustScore(t, researchCase, datasets.Trial{CaseID: "c", Spans: inlineSpans(true)})
	if ts.ModelLabel != datasets.LabelScripted {
		t.Errorf("label from scripted spans = %q", ts.ModelLabel)
	}
	ts = mustScore(t, researchCase, datasets.Trial{CaseID: "c", Spans: inlineSpans(false)})
	if ts.ModelLabel != datasets.LabelLive || ts.Model != "gpt-4o-mini" {
		t.Errorf("label from unlabelled spans with a model call = %q (model %q), want live", ts.ModelLabel, ts.Model)
	}
	tr := datasets.Trial{CaseID: "c", Trial: 2, Line: 9, Success: bp(true), Journal: &datasets.JournalRef{Path: "j.jsonl", RunID: "r"}}
	_, err := ScoreTrial(&researchCase, &tr, testConfig())
	if err == nil || !strings.Contains(err.Error(), `field "model_label"`) || !strings.Contains(err.Error(), "line 9") {
		t.Fatalf("unchecked journal-backed trial without a label: err = %v", err)
	}
}

func labelledSuite(t *testing.T, label string, n int) *Suite {
	t.Helper()
	trials := suiteTrials(n, 1)
	for i := range trials {
		trials[i].ModelLabel = label
	}
	s, err := Score(nil, trials, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCompareWarnsWhenTheRunsWereProducedDifferently(t *testing.T) {
	for _, c := range []struct {
		base, cand string
		want       string // "" means no warning
	}{
		{"scripted", "scripted", ""},
		{"live", "live", ""},
		{"replayed", "replayed", ""},
		{"scripted", "live", "(baseline: scripted ×10; candidate: live ×10): a scripted run is compared with a live one"},
		{"live", "scripted", "(baseline: live ×10; candidate: scripted ×10): a scripted run is compared with a live one"},
		{"scripted", "replayed", "a scripted run is compared with a live one"},
		{"replayed", "live", "(baseline: replayed ×10; candidate: live ×10): a replayed run is compared with a live one"},
	} {
		cmp, err := Compare(labelledSuite(t, c.base, 10), labelledSuite(t, c.cand, 10), testConfig())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.want == "" && len(cmp.Warnings) != 0:
			t.Errorf("%s vs %s: unexpected warnings %q", c.base, c.cand, cmp.Warnings)
		case c.want != "" && (len(cmp.Warnings) != 1 || !strings.Contains(cmp.Warnings[0], c.want)):
			t.Errorf("%s vs %s: warnings %q, want one containing %q", c.base, c.cand, cmp.Warnings, c.want)
		}
	}
	// A baseline that mixes labels warns too, naming both sides' counts.
	mixed := labelledSuite(t, "scripted", 10)
	mixed.ModelLabels["live"] = 2
	cmp, err := Compare(mixed, labelledSuite(t, "scripted", 10), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(cmp.Warnings) != 1 || !strings.Contains(cmp.Warnings[0], "(baseline: live ×2, scripted ×10; candidate: scripted ×10): a scripted run is compared with a live one") {
		t.Errorf("mixed baseline: warnings %q", cmp.Warnings)
	}
}
