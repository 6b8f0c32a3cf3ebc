// Package citest builds small baselines folders for tests of the CI recipe:
// a few of the committed cases with their committed journals and baseline
// trials, so a test runs the real recipe in seconds instead of the whole
// suite's minute.
package citest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/scorer"
	"github.com/loomwork/loomwork/scorer/report"
)

// Subset writes, into a new temporary folder, the baselines folder src
// (cases.jsonl with the code graders' files, baseline.trials.jsonl,
// journals/*.jsonl, policy.json) restricted to the cases ids, and returns
// it. Every id must be a case of
// src with recorded runs.
func Subset(t testing.TB, src string, ids ...string) string {
	t.Helper()
	dst := t.TempDir()
	cases, err := datasets.LoadCases(filepath.Join(src, "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []datasets.Case
	for _, c := range cases {
		if slices.Contains(ids, c.ID) {
			kept = append(kept, c)
		}
	}
	if len(kept) != len(ids) {
		t.Fatalf("citest: %d of the cases %v are in %s", len(kept), ids, src)
	}
	WriteJSONL(t, filepath.Join(dst, "cases.jsonl"), kept)
	// A code grader's file is read beside the case file: copy the kept
	// cases' graders (the coding cases' hidden tests).
	for _, c := range kept {
		for _, g := range c.Graders {
			if g.Type != datasets.GraderCode {
				continue
			}
			to := filepath.Join(dst, filepath.FromSlash(g.File))
			if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, g.Source, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	trials, err := datasets.LoadTrials(filepath.Join(src, "baseline.trials.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The trials name their journals (checked for provenance): point them
	// at the subset's copies, relative to the trials file, so a copy of the
	// folder is self-contained.
	var keptTrials []datasets.Trial
	for _, tr := range trials {
		if slices.Contains(ids, tr.CaseID) {
			if tr.Journal != nil {
				j := *tr.Journal
				j.Path = filepath.Join("journals", filepath.Base(j.Path))
				tr.Journal = &j
			}
			keptTrials = append(keptTrials, tr)
		}
	}
	WriteJSONL(t, filepath.Join(dst, "baseline.trials.jsonl"), keptTrials)

	files, err := filepath.Glob(filepath.Join(src, "journals", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dst, "journals"), 0o755); err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, f := range files {
		rs, err := journal.ReadJSONLFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var evs [][]journal.Event
		for _, r := range rs {
			var st journal.RunStarted
			if err := json.Unmarshal(r.Events[0].Payload, &st); err != nil {
				t.Fatalf("%s: run %s: %v", f, r.ID, err)
			}
			if slices.Contains(ids, st.CaseID) {
				evs = append(evs, r.Events)
			}
		}
		if len(evs) == 0 {
			continue
		}
		runs += len(evs)
		out, err := os.Create(filepath.Join(dst, "journals", filepath.Base(f)))
		if err != nil {
			t.Fatal(err)
		}
		if err := journal.WriteJSONL(out, evs...); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if runs == 0 {
		t.Fatalf("citest: no recorded run of %v in %s", ids, src)
	}
	// The committed report of the subset's baseline, as
	// `scripts/baselines.sh record` writes it (`score --format json`).
	cfg := scorer.DefaultConfig()
	rep, err := report.Evaluate(context.Background(), cfg, report.Inputs{Cases: kept, Candidate: report.Trials{Source: "baseline.trials.jsonl", Trials: keptTrials}})
	if err != nil {
		t.Fatal(err)
	}
	rf, err := os.Create(filepath.Join(dst, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := report.Write(rf, report.JSON, rep); err != nil {
		t.Fatal(err)
	}
	if err := rf.Close(); err != nil {
		t.Fatal(err)
	}
	// The recipe's derived baselines: the kept cases' rollups and judge
	// verdicts, and the case-independent files whole.
	filterLines(t, filepath.Join(src, "rollups.jsonl"), filepath.Join(dst, "rollups.jsonl"), ids)
	filterLines(t, filepath.Join(src, "judge.jsonl"), filepath.Join(dst, "judge.jsonl"), ids)
	for _, f := range []string{"rerank.json", "ablation/reranker.json"} {
		copyFile(t, filepath.Join(src, f), filepath.Join(dst, f))
	}
	traces, err := filepath.Glob(filepath.Join(src, "traces", "*.otlp.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range traces {
		copyFile(t, f, filepath.Join(dst, "traces", filepath.Base(f)))
	}
	if b, err := os.ReadFile(filepath.Join(src, "policy.json")); err == nil {
		if err := os.WriteFile(filepath.Join(dst, "policy.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// WriteJSONL writes one JSON value per line.
func WriteJSONL[T any](t testing.TB, path string, vs []T) {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// filterLines copies the JSON lines of src whose "case_id" is one of ids,
// or that have none (not a case's), to dst.
func filterLines(t testing.TB, src, dst string, ids []string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var v struct {
			CaseID string `json:"case_id"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if v.CaseID == "" || slices.Contains(ids, v.CaseID) {
			out.WriteString(line)
		}
	}
	if err := os.WriteFile(dst, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
