package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/llm"
	"github.com/loomwork/loomwork/datasets"
)

// writeRun exports one run whose model answered once with the given
// label, provider and model, as the runtime records it.
func writeRun(t *testing.T, path, runID, label, provider, model string) {
	t.Helper()
	evs := chain(t, runID, stepClock(),
		Record{Kind: KindRunStarted, Payload: RunStarted{Agent: "research", Input: "q", Model: "requested-" + model, MaxSteps: 4}},
		Record{Kind: KindModelResponse, Step: 1, Label: label,
			Payload: llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "a"}, Provider: provider, Model: model, Label: label}},
		Record{Kind: KindRunFinished, Step: 1, Payload: RunFinished{Answer: "a", Steps: 1}})
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := WriteJSONL(f, evs); err != nil {
		t.Fatal(err)
	}
}

// trialsFile writes lines as a trials file in dir and decodes it.
func trialsFile(t *testing.T, dir string, lines ...string) (string, []datasets.Trial) {
	t.Helper()
	path := filepath.Join(dir, "trials.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	trials, err := datasets.LoadTrials(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, trials
}

func lineErrors(t *testing.T, err error) map[int]*datasets.LineError {
	t.Helper()
	out := map[int]*datasets.LineError{}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("err = %v, want joined line errors", err)
	}
	for _, e := range joined.Unwrap() {
		var le *datasets.LineError
		if !errors.As(e, &le) {
			t.Fatalf("%v is not a *datasets.LineError", e)
		}
		out[le.Line] = le
	}
	return out
}

func TestCheckProvenanceRefusesLabelsAndModelsTheJournalContradicts(t *testing.T) {
	dir := t.TempDir()
	scripted, live := filepath.Join(dir, "journals", "scripted.jsonl"), filepath.Join(dir, "journals", "live.jsonl")
	writeRun(t, scripted, "s1", llm.LabelScripted, "scripted", "scripted-research-policy")
	writeRun(t, live, "l1", llm.LabelLive, "openai", "gpt-4o-2024-08-06")
	ref := func(path, run string) string {
		return `"journal":{"path":"` + path + `","run_id":"` + run + `"},"success":true}`
	}
	path, trials := trialsFile(t, dir,
		`{"case_id":"a","trial":0,"model_label":"scripted","model":"scripted-research-policy",`+ref(scripted, "s1"), // ok
		`{"case_id":"a","trial":1,"model_label":"live",`+ref(scripted, "s1"),                                        // relabelled live
		`{"case_id":"a","trial":2,"model_label":"replayed",`+ref(scripted, "s1"),                                    // relabelled replayed
		`{"case_id":"b","trial":0,"model_label":"live","model":"gpt-4o-2024-08-06",`+ref(live, "l1"),                // ok
		`{"case_id":"b","trial":1,"model_label":"replayed","model":"requested-gpt-4o-2024-08-06",`+ref(live, "l1"),  // ok: the requested model
		`{"case_id":"b","trial":2,"model_label":"scripted",`+ref(live, "l1"),                                        // a live run labelled scripted
		`{"case_id":"b","trial":3,"model_label":"live","model":"claude-opus-4",`+ref(live, "l1"),                    // model contradicts
	)
	provs, err := CheckProvenance(path, trials, SearchDirs(path))
	bad := lineErrors(t, err)
	if len(bad) != 4 {
		t.Fatalf("%d errors, want 4 (lines 2, 3, 6, 7): %v", len(bad), err)
	}
	for line, want := range map[int]struct{ field, journal, msg string }{
		2: {"model_label", scripted, `"live" contradicts journal ` + scripted + ` run s1, whose model answers are scripted (provider scripted, model scripted-research-policy): a scripted run is labelled "scripted"`},
		3: {"model_label", scripted, `"replayed" contradicts`},
		6: {"model_label", live, `"scripted" contradicts journal ` + live + ` run l1, whose model answers are live (provider openai, model gpt-4o-2024-08-06)`},
		7: {"model", live, `"claude-opus-4" contradicts`},
	} {
		le := bad[line]
		if le == nil || le.File != path || le.Field != want.field || !strings.Contains(le.Error(), want.msg) || !strings.Contains(le.Error(), want.journal) {
			t.Errorf("line %d: %v, want field %q naming %s and containing %q", line, le, want.field, want.journal, want.msg)
		}
	}
	if p := provs[0]; p.Label != llm.LabelScripted || p.File != scripted || p.RunID != "s1" || p.Models[0] != "scripted-research-policy" || p.Providers[0] != "scripted" {
		t.Errorf("provenance of line 1 = %+v", p)
	}
	if p := provs[3]; p.Label != llm.LabelLive || p.Requested != "requested-gpt-4o-2024-08-06" {
		t.Errorf("provenance of line 4 = %+v", p)
	}
}

func TestCheckProvenanceDerivesAMissingLabelAndModel(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, filepath.Join(dir, "j", "s.jsonl"), "s1", llm.LabelScripted, "scripted", "scripted-coding-policy")
	writeRun(t, filepath.Join(dir, "j", "l.jsonl"), "l1", llm.LabelLive, "anthropic", "claude-sonnet-4-5")
	// Relative paths the current directory (the package) does not hold:
	// they resolve from the trials file's folder.
	path, trials := trialsFile(t, dir,
		`{"case_id":"a","trial":0,"journal":{"path":"j/s.jsonl","run_id":"s1"},"success":true}`,
		`{"case_id":"b","trial":0,"journal":{"path":"j/l.jsonl","run_id":"l1"},"success":false}`)
	if _, err := CheckProvenance(path, trials, SearchDirs(path)); err != nil {
		t.Fatal(err)
	}
	if a, b := trials[0], trials[1]; a.ModelLabel != datasets.LabelScripted || a.Model != "scripted-coding-policy" ||
		b.ModelLabel != datasets.LabelLive || b.Model != "claude-sonnet-4-5" {
		t.Errorf("derived: %q %q and %q %q", a.ModelLabel, a.Model, b.ModelLabel, b.Model)
	}
	// Only as given: the same file does not resolve.
	_, trials = trialsFile(t, dir, `{"case_id":"a","trial":0,"journal":{"path":"j/s.jsonl","run_id":"s1"},"success":true}`)
	if _, err := CheckProvenance(path, trials, []string{""}); err == nil {
		t.Error("a path relative to the trials file resolved from the current directory")
	}
}

// A trials file recorded at a repository's root names its journals from
// there (baselines/baseline.trials.jsonl names baselines/journals/…): read
// from inside baselines/, they resolve from a folder above the trials
// file's (issue 40).
func TestCheckProvenanceFindsJournalsNamedFromAFolderAboveTheTrialsFile(t *testing.T) {
	root := t.TempDir()
	writeRun(t, filepath.Join(root, "baselines", "journals", "s.jsonl"), "s1", llm.LabelScripted, "scripted", "scripted-coding-policy")
	path, trials := trialsFile(t, filepath.Join(root, "baselines"),
		`{"case_id":"a","trial":0,"journal":{"path":"baselines/journals/s.jsonl","run_id":"s1"},"success":true}`)
	if _, err := CheckProvenance(path, trials, SearchDirs(path)); err != nil {
		t.Fatal(err)
	}
	if trials[0].ModelLabel != datasets.LabelScripted {
		t.Errorf("label %q, want it derived from the journal", trials[0].ModelLabel)
	}
}

func TestCheckProvenanceRefusesMissingJournalsAndRuns(t *testing.T) {
	dir := t.TempDir()
	j := filepath.Join(dir, "s.jsonl")
	writeRun(t, j, "s1", llm.LabelScripted, "scripted", "scripted-research-policy")
	corrupt := filepath.Join(dir, "corrupt.jsonl")
	b, _ := os.ReadFile(j)
	os.WriteFile(corrupt, []byte(strings.Replace(string(b), `"answer":"a"`, `"answer":"b"`, 1)), 0o644)
	path, trials := trialsFile(t, dir,
		`{"case_id":"a","trial":0,"model_label":"scripted","journal":{"path":"gone/nope.jsonl","run_id":"s1"},"success":true}`,
		`{"case_id":"a","trial":1,"model_label":"scripted","journal":{"path":"gone/nope.jsonl","run_id":"s2"},"success":true}`,
		`{"case_id":"a","trial":2,"model_label":"scripted","journal":{"path":"s.jsonl","run_id":"s9"},"success":true}`,
		`{"case_id":"a","trial":3,"model_label":"scripted","journal":{"path":"corrupt.jsonl","run_id":"s1"},"success":true}`)
	_, err := CheckProvenance(path, trials, SearchDirs(path))
	bad := lineErrors(t, err)
	if len(bad) != 3 {
		t.Fatalf("%d errors, want 3 (the missing journal once, the missing run, the corrupt journal): %v", len(bad), err)
	}
	if le := bad[1]; le == nil || le.Field != "journal.path" || !strings.Contains(le.Error(), "journal gone/nope.jsonl: file does not exist (tried gone/nope.jsonl, "+filepath.Join(dir, "gone/nope.jsonl")) ||
		!errors.Is(le, os.ErrNotExist) {
		t.Errorf("missing journal: %v", le)
	}
	if le := bad[3]; le == nil || le.Field != "journal.run_id" || !strings.Contains(le.Error(), `run "s9" is not in journal s.jsonl (it holds 1 runs)`) {
		t.Errorf("missing run: %v", le)
	}
	var ce *CorruptionError
	if le := bad[4]; le == nil || le.Field != "journal.path" || !errors.As(le, &ce) || !strings.Contains(le.Error(), "content hash mismatch") {
		t.Errorf("corrupt journal: %v", le)
	}
}
