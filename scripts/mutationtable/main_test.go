package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The patches and the doc are read from the repository root.
const (
	patchDir = "../mutations"
	docPath  = "../../docs/scoring.md"
	repoRoot = "../.."
)

// Every deliberate regression must still apply to the current tree: a
// refactor that moves the code a patch edits must fail here, loudly, not
// leave scripts/mutations.sh proving nothing.
func TestEveryPatchStillAppliesToTheCurrentTree(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed to check the mutation patches: %v", err)
	}
	ps, err := Patches(patchDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) == 0 {
		t.Fatalf("no patch in %s", patchDir)
	}
	for _, p := range ps {
		abs, err := filepath.Abs(filepath.Join(patchDir, p.Name+".patch"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(git, "apply", "--check", abs)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("scripts/mutations/%s.patch no longer applies (%v): %s\nrecreate it against the moved code and rerun scripts/mutations.sh", p.Name, err, out)
		}
	}
}

// The table in docs/scoring.md lists exactly the patches present: a patch
// added or removed without regenerating the table fails here.
func TestTheDocTableListsExactlyThePatches(t *testing.T) {
	ps, err := Patches(patchDir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range ps {
		want = append(want, p.Name)
	}
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Listed(string(b))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("docs/scoring.md's mutation table lists %v; scripts/mutations has %v: run scripts/mutations.sh", got, want)
	}
}

func TestReadPatchNeedsItsHeader(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bare.patch")
	if err := os.WriteFile(bad, []byte("diff --git a/x b/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPatch(bad); err == nil || !strings.Contains(err.Error(), "bare.patch") {
		t.Fatalf("err = %v, want one naming bare.patch", err)
	}
	noDiff := filepath.Join(dir, "nodiff.patch")
	if err := os.WriteFile(noDiff, []byte("Mutation: x\nLayer: y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPatch(noDiff); err == nil || !strings.Contains(err.Error(), "not a patch") {
		t.Fatalf("err = %v", err)
	}
}

// An outcome is read from what loom-eval ci --json wrote, and the table
// names the parts that caught a mutation and its cases, or says why not.
func TestOutcomesBecomeTheTable(t *testing.T) {
	dir := t.TempDir()
	write := func(name, rc, js string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name+".rc"), []byte(rc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("caught", "1\n", `{"passed":false,"failed":["replay","gate"],
		"replay":{"runs":57,"divergences":[{"case_id":"b","code":"LWR1200"},{"case_id":"a","code":"LWR1200"},{"case_id":"a","code":"LWR1100"}]},
		"fresh":{"runs":57,"changed":[],"errors":[]},
		"gate":{"failed_checks":["must_pass"],"worse":[{"case_id":"c"}],"must_pass_failing":["d"]}}`)
	write("missed", "0\n", `{"passed":true,"failed":[],"replay":{"runs":57,"divergences":[]},
		"fresh":{"runs":57,"changed":[{"case_id":"x"},{"case_id":"x"}],"errors":[]},"gate":{"failed_checks":[],"worse":[],"must_pass_failing":[]}}`)
	write("broken", "2\n", `{}`)
	write("liar", "0\n", `{"passed":false}`)

	caught, err := ReadOutcome(dir, Patch{Name: "caught", Subject: "s", Layer: "l"})
	if err != nil {
		t.Fatal(err)
	}
	if !caught.Caught || caught.Replay != "**3 of 57 runs diverged** (LWR1200 ×2, LWR1100 ×1) in 2 cases" ||
		caught.Gate != "**failed**: must_pass; worse: `c`; must-pass failing: `d`" || strings.Join(caught.Cases, ",") != "a,b,c,d" {
		t.Fatalf("outcome = %+v", caught)
	}
	missed, err := ReadOutcome(dir, Patch{Name: "missed", Subject: "s", Layer: "l", IfNotCaught: "because."})
	if err != nil {
		t.Fatal(err)
	}
	if missed.Caught || missed.Replay != "all 57 runs reproduced" || missed.Gate != "passed (2 of 57 fresh runs differ from the committed journals, in 1 cases)" {
		t.Fatalf("outcome = %+v", missed)
	}
	if _, err := ReadOutcome(dir, Patch{Name: "broken"}); err == nil || !strings.Contains(err.Error(), "exited 2") {
		t.Fatalf("err = %v, want a no-verdict error", err)
	}
	if _, err := ReadOutcome(dir, Patch{Name: "liar"}); err == nil || !strings.Contains(err.Error(), "passed=false") {
		t.Fatalf("err = %v, want the exit code and the report to disagree", err)
	}
	table := Table([]Outcome{caught, missed})
	for _, want := range []string{"| `caught` — s | l | **failed** (exit 1) | **3 of 57", "| 4: `a`, `b`, `c`, `d` |",
		"| `missed` — s | l | passed (exit 0): **not caught** | all 57 runs reproduced | passed (2 of 57", "- `missed`: because."} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	doc, err := Splice("intro\n"+BeginMarker+"\nold\n"+EndMarker+"\nrest\n", table)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(doc, "old") || !strings.HasSuffix(doc, EndMarker+"\nrest\n") {
		t.Fatalf("spliced doc:\n%s", doc)
	}
	names, err := Listed(doc)
	if err != nil || strings.Join(names, ",") != "caught,missed" {
		t.Fatalf("Listed = %v, %v", names, err)
	}
	if _, err := Splice("no markers", table); err == nil {
		t.Fatal("Splice accepted a doc without markers")
	}
}

// The recipe's later steps — fresh verdicts, regraded verdicts, rollups,
// the reranker — have their say in the table and name their cases.
func TestLaterStepsBecomeTheTable(t *testing.T) {
	dir := t.TempDir()
	js := `{"passed":false,"failed":["verdicts","rescore","rollups","reranker"],"replay":{"runs":6,"divergences":[]},
		"fresh":{"runs":6,"changed":[],"errors":[]},"gate":{"failed_checks":[],"worse":[],"must_pass_failing":[]},
		"verdicts":{"changed":[{"case_id":"a","grader":"hidden_tests","direction":"improved"},{"case_id":"b","grader":"hidden_tests","direction":"improved"}]},
		"rescore":{"passed":false,"changed":[],"verdicts":[{"case_id":"c","grader":"judge_x","direction":"regressed"}]},
		"rollups":{"runs":6,"traces":2,"diffs":[{"case_id":"d","field":"tokens_in"},{"file":"traces/sdk.otlp.jsonl","field":"tokens_in"}]},
		"reranker":{"queries":14,"changed":[{"query_id":"e"}]}}`
	if err := os.WriteFile(filepath.Join(dir, "m.json"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m.rc"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := ReadOutcome(dir, Patch{Name: "m", Subject: "s", Layer: "l"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Caught || !strings.Contains(o.Gate, "fresh verdicts: **2 improved** (`hidden_tests` ×2)") ||
		o.Rescore != "regraded verdicts: **1 regressed** (`judge_x` ×1)" ||
		o.Derived != "**rollups: 2 fields differ** (tokens_in; in runs of 1 cases and the SDK traces); **reranker: 1 of 14 queries differ**" ||
		strings.Join(o.Cases, ",") != "a,b,c,d,e" {
		t.Fatalf("outcome = %+v", o)
	}
}
