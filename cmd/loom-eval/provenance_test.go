package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/internal/testtier"
)

// rewriteTrials writes the committed baseline trials to dir/name with each
// trial's fields edited by edit, and returns the new file's absolute path.
// Call it from the repository root.
func rewriteTrials(t *testing.T, dir, name string, edit func(i int, tr map[string]any)) string {
	t.Helper()
	b, err := os.ReadFile("baselines/baseline.trials.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var tr map[string]any
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatal(err)
		}
		edit(i, tr)
		nb, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(nb)
		out.WriteByte('\n')
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The case: a trials file relabelled "live" over the committed
// scripted journals used to gate against the scripted baseline without a
// word. Score and gate now refuse it, naming the file, line, field and
// journal.
func TestRelabelledLiveTrialsOverScriptedJournalsAreRefused(t *testing.T) {
	testtier.Slow(t)
	t.Chdir("../..") // the baseline trials name their journals from the repository root
	dir := t.TempDir()
	relabelled := rewriteTrials(t, dir, "relabelled.trials.jsonl", func(_ int, tr map[string]any) { tr["model_label"] = "live" })
	unchanged := rewriteTrials(t, dir, "unchanged.trials.jsonl", func(int, map[string]any) {})
	for _, args := range [][]string{
		{"score", relabelled, "--cases", "baselines/cases.jsonl", "--against", "baselines/baseline.trials.jsonl"},
		{"gate", "--policy", "baselines/policy.json", "--cases", "baselines/cases.jsonl", "--candidate", relabelled, "--baseline", "baselines/baseline.trials.jsonl"},
		{"gate", "--policy", "baselines/policy.json", "--cases", "baselines/cases.jsonl", "--candidate", unchanged, "--baseline", relabelled},
	} {
		_, code, err := scorerCLI(t, args...)
		if code != ExitUsage || err == nil {
			t.Fatalf("%v: exit %d, err %v; want exit %d", args, code, err, ExitUsage)
		}
		msg := err.Error()
		for _, want := range []string{
			relabelled + `:1: field "model_label": "live" contradicts journal baselines/journals/coding.jsonl run coding-coding-roman-t0, whose model answers are scripted`,
			relabelled + `:73: field "model_label": "live" contradicts journal baselines/journals/research.jsonl`,
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("%v: error lacks %q:\n%s", args[0], want, msg)
			}
		}
	}
	// The same trials as recorded pass: it is the label that is refused.
	if _, code, err := scorerCLI(t, "gate", "--policy", "baselines/policy.json", "--cases", "baselines/cases.jsonl",
		"--candidate", unchanged, "--baseline", "baselines/baseline.trials.jsonl"); code != ExitOK {
		t.Fatalf("the unchanged copy: exit %d, err %v", code, err)
	}
}

func TestTrialsNamingAMissingJournalOrRunAreRefused(t *testing.T) {
	testtier.Slow(t)
	t.Chdir("../..")
	dir := t.TempDir()
	path := rewriteTrials(t, dir, "trials.jsonl", func(i int, tr map[string]any) {
		j := tr["journal"].(map[string]any)
		switch i {
		case 4:
			j["path"] = "baselines/journals/gone.jsonl"
		case 80:
			j["run_id"] = "research-no-such-run"
		}
	})
	_, code, err := scorerCLI(t, "score", path)
	if code != ExitUsage || err == nil {
		t.Fatalf("exit %d, err %v; want exit %d", code, err, ExitUsage)
	}
	for _, want := range []string{
		path + `:5: field "journal.path": journal baselines/journals/gone.jsonl: file does not exist (tried baselines/journals/gone.jsonl, ` + filepath.Join(dir, "baselines/journals/gone.jsonl"),
		path + `:81: field "journal.run_id": run "research-no-such-run" is not in journal baselines/journals/research.jsonl (it holds 42 runs)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// A trials file may leave the label to its journals: it gets theirs, and a
// relative journal path resolves from the trials file's folder too.
func TestUnlabelledTrialsGetTheirJournalsLabel(t *testing.T) {
	testtier.Slow(t)
	t.Chdir("../..")
	dir := t.TempDir()
	for _, j := range []string{"coding.jsonl", "research.jsonl"} {
		b, err := os.ReadFile(filepath.Join("baselines/journals", j))
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(dir, "journals"), 0o755)
		if err := os.WriteFile(filepath.Join(dir, "journals", j), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := rewriteTrials(t, dir, "trials.jsonl", func(_ int, tr map[string]any) {
		delete(tr, "model_label")
		delete(tr, "model")
		j := tr["journal"].(map[string]any)
		j["path"] = strings.TrimPrefix(j["path"].(string), "baselines/") // journals/…, next to the trials file
	})
	out, code, err := scorerCLI(t, "score", path, "--no-cases", "--format", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %v", code, err)
	}
	var r struct {
		Candidate struct {
			ModelLabels map[string]int `json:"model_labels"`
			Cases       []struct {
				Results []struct {
					Model string `json:"model"`
				} `json:"results"`
			} `json:"cases"`
		} `json:"candidate"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Candidate.ModelLabels) != 1 || r.Candidate.ModelLabels["scripted"] != 114 {
		t.Errorf("model_labels = %v, want scripted ×114", r.Candidate.ModelLabels)
	}
	models := map[string]int{}
	for _, c := range r.Candidate.Cases {
		for _, tr := range c.Results {
			models[tr.Model]++
		}
	}
	if models["scripted-coding-policy"] != 72 || models["scripted-research-policy"] != 42 {
		t.Errorf("models = %v", models)
	}
}

// An honestly labelled live run compared with the scripted baseline is
// scored, and the report says what is being compared with what.
func TestLiveAgainstScriptedBaselineWarns(t *testing.T) {
	testtier.Slow(t)
	t.Chdir("../..")
	live := rewriteTrials(t, t.TempDir(), "live.trials.jsonl", func(i int, tr map[string]any) {
		delete(tr, "journal") // a live run of our own, traced, not the scripted journals
		tr["trace_id"] = fmt.Sprintf("%032x", i+1)
		tr["model_label"], tr["model"] = "live", "gpt-4o"
	})
	args := []string{"score", live, "--cases", "baselines/cases.jsonl", "--against", "baselines/baseline.trials.jsonl"}
	const warning = "model labels differ (baseline: scripted ×114; candidate: live ×114): a scripted run is compared with a live one"
	for format, want := range map[string]string{
		"text":     "  model labels: baseline scripted ×114; candidate live ×114\n  WARNING: " + warning,
		"markdown": "> ⚠️ **Warning:** " + warning,
		"json":     `"warnings": [` + "\n      \"" + warning,
		"junit":    `<property name="warning" value="` + warning,
	} {
		out, code, err := scorerCLI(t, append(args, "--format", format)...)
		if code != ExitOK {
			t.Fatalf("%s: exit %d: %v", format, code, err)
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s report lacks %q:\n%s", format, want, out)
		}
	}
}
