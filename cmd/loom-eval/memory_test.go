package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/runner"
	"github.com/loomwork/loomwork/internal/testtier"
)

func TestMemoryCommandsDistillListShowForget(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	jpath, mpath := filepath.Join(dir, "runs.db"), filepath.Join(dir, "memory.db")
	j, err := journaldb.Open(ctx, journaldb.Config{Path: jpath})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(ctx, "r1",
		journal.Record{Kind: journal.KindRunStarted, Payload: journal.RunStarted{Agent: "research", Input: "Search is broken with hyphens\nbody"}},
		journal.Record{Kind: journal.KindRunFinished, Step: 1, Payload: journal.RunFinished{Answer: "Read [docs/setup/setting-up-site-search.md#search].", Citations: []string{"docs/setup/setting-up-site-search.md"}}},
	); err != nil {
		t.Fatal(err)
	}
	j.Shutdown(ctx)
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := newTestMain(&out, &errb, nil).Run(ctx, append(args, "--db", mpath))
		return out.String() + errb.String(), err
	}
	out, err := run("memory", "distill", "r1", "--agent", "research", "--journal", jpath)
	if err != nil || !strings.Contains(out, "written") || !strings.Contains(out, `task "Search is broken with hyphens"`) {
		t.Fatalf("distill: %v\n%s", err, out)
	}
	// Distilling the same run again merges into the record.
	if out, err = run("memory", "distill", "r1", "--agent", "research", "--journal", jpath); err != nil || !strings.Contains(out, "merged") {
		t.Fatalf("distill again: %v\n%s", err, out)
	}
	out, err = run("memory", "list")
	if err != nil || !strings.Contains(out, "default/research/default") || !strings.Contains(out, "ep-r1-answer") || !strings.Contains(out, "1 records") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = run("memory", "show", "ep-r1-answer", "--agent", "research", "--json")
	var shown struct {
		Record struct {
			Hits       int      `json:"hits"`
			SourceRuns []string `json:"source_runs"`
			Provenance string   `json:"provenance"`
		} `json:"record"`
	}
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || shown.Record.Hits != 1 || shown.Record.Provenance != "r1#2" {
		t.Fatalf("show: %v\n%s", err, out)
	}
	// Nothing has decayed yet; forgetting by key deletes.
	if out, err = run("memory", "forget", "--decayed", "--agent", "research"); err != nil || !strings.Contains(out, "forgotten: 0") {
		t.Fatalf("forget --decayed: %v\n%s", err, out)
	}
	if out, err = run("memory", "forget", "ep-r1-answer", "--agent", "research"); err != nil || !strings.Contains(out, "forgotten: 1 ep-r1-answer") {
		t.Fatalf("forget: %v\n%s", err, out)
	}
	_, err = run("memory", "show", "ep-r1-answer", "--agent", "research")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitFailure {
		t.Fatalf("show of a forgotten key: %v", err)
	}
	// Bad calls name what is wrong.
	if _, err := run("memory", "show", "x"); err == nil || !strings.Contains(err.Error(), "--agent") {
		t.Fatalf("show without agent: %v", err)
	}
	if _, err := run("memory", "nap"); err == nil || !strings.Contains(err.Error(), "nap") {
		t.Fatalf("unknown subcommand: %v", err)
	}
	var out2, errb bytes.Buffer
	err = newTestMain(&out2, &errb, nil).Run(ctx, []string{"memory", "list", "--db", filepath.Join(dir, "missing.db")})
	if err == nil || !strings.Contains(err.Error(), "missing.db") {
		t.Fatalf("missing db: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); err == nil {
		t.Fatal("list created a database")
	}
}

func TestReplaceSectionKeepsTheRestOfThePage(t *testing.T) {
	f := filepath.Join(t.TempDir(), "c.md")
	os.WriteFile(f, []byte("# Page\n\ntext\n"), 0o644)
	if err := replaceSection(f, "one\n"); err != nil {
		t.Fatal(err)
	}
	if err := replaceSection(f, "two\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(f)
	want := "# Page\n\ntext\n\n" + memSectionBegin + "\ntwo\n" + memSectionEnd + "\n"
	if string(b) != want {
		t.Fatalf("page:\n%q\nwant\n%q", b, want)
	}
	if keptSection(f) != memSectionBegin+"\ntwo\n"+memSectionEnd {
		t.Fatalf("kept %q", keptSection(f))
	}
}

func TestRunWithMemoryRecallsAnEarlierRelatedRun(t *testing.T) {
	testtier.Slow(t)
	ds := shippedDatasetAbs(t)
	cases, err := filepath.Abs(filepath.Join("..", "..", "baselines", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	copyIndexCache(t, filepath.Join(".loomwork", "index"))
	ctx := context.Background()
	run := func(caseID string) runner.Result {
		t.Helper()
		var out, errb bytes.Buffer
		args := []string{"--agent", "research", "--case", cases, "--case-id", caseID, "--dataset", ds,
			"--journal", "runs.db", "--memory", "memory.db", "--json"}
		if err := newTestMain(&out, &errb, nil).runRun(ctx, args); err != nil {
			t.Fatalf("run %s: %v\n%s", caseID, err, errb.String())
		}
		var res []runner.Result
		if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res) != 1 {
			t.Fatalf("run %s: %v\n%s", caseID, err, out.String())
		}
		return res[0]
	}
	first := run("mkm-156")
	if len(first.Recalled) != 0 {
		t.Fatalf("the first run recalled %v from an empty store", first.Recalled)
	}
	second := run("mkm-207") // another question about the code-blocks page
	if strings.Join(second.Recalled, ",") != "ep-research-mkm-156-t0-answer" || second.ModelLabel != "scripted" {
		t.Fatalf("second run: %+v", second)
	}
	// Its requests carried the record in the memory tier, with provenance.
	j, err := journaldb.Open(ctx, journaldb.Config{Path: "runs.db"})
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := j.Events(ctx, second.RunID)
	j.Shutdown(ctx)
	found := false
	for _, e := range evs {
		var p journal.ModelRequest
		if e.Kind == journal.KindModelRequest && json.Unmarshal(e.Payload, &p) == nil && p.Context != nil && p.Context.Tiers != nil {
			for _, d := range p.Context.Tiers.Items {
				if d.ID == "memory:ep-research-mkm-156-t0-answer" && d.Action == "kept" && len(d.Provenance) > 0 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Fatal("no model_request admitted the recalled record")
	}
	// The same command again resumes: no model call, the same recall.
	again := run("mkm-207")
	if again.ModelCalls != 0 || strings.Join(again.Recalled, ",") != "ep-research-mkm-156-t0-answer" {
		t.Fatalf("resume: %+v", again)
	}
}

// TestMemoryUnknownSubcommandIsNamedFirst: a mistyped subcommand is
// reported as one, before --agent is checked or --db opened (it used to
// say "--agent is required", or that --db does not exist).
func TestMemoryUnknownSubcommandIsNamedFirst(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.db")
	for _, args := range [][]string{
		{"memory", "bogus"},
		{"memory", "lsit", "--agent", "research", "--db", missing},
	} {
		code, _, stderr := runCLI(t, args...)
		want := fmt.Sprintf("memory: unknown subcommand %q", args[1])
		if code != ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", args, code, stderr, ExitUsage, want)
		}
	}
}
