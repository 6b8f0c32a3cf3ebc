package memablate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomwork/loomwork/agents/contextlayer"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/memablate"
	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/retrieval/judged"
)

func TestTaskSetGroupsRelatedQuestionsInIssueOrder(t *testing.T) {
	ds, err := judged.Load(datasettest.ShippedDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	tasks := memablate.TaskSet(ds)
	pages := map[string]int{}
	follow := 0
	for i, task := range tasks {
		if i > 0 && tasks[i-1].Issue >= task.Issue {
			t.Fatalf("tasks out of issue order at %d", i)
		}
		if task.FollowUp != (pages[task.Page] > 0) {
			t.Fatalf("%s: follow_up %v but %d earlier questions on %s", task.ID, task.FollowUp, pages[task.Page], task.Page)
		}
		pages[task.Page]++
		if task.FollowUp {
			follow++
		}
	}
	for p, n := range pages {
		if n < 2 {
			t.Fatalf("page %s has one question", p)
		}
	}
	if len(tasks) != 58 || len(pages) != 18 || follow != 40 {
		t.Fatalf("%d tasks, %d pages, %d follow-ups; want 58, 18, 40 on the shipped set", len(tasks), len(pages), follow)
	}
}

func TestAblationArms(t *testing.T) {
	testtier.Slow(t)
	ctx := context.Background()
	work := t.TempDir()
	// The first tasks in issue order, every arm on each. In make test the
	// first 8: three follow-ups on three pages, one right after its page's
	// first question (mkm-207), one after a question on another page
	// (mkm-552) and one five tasks after its page's first, with other
	// pages' records in between for recall to pass over (mkm-617). The long
	// tier runs the first 12 (five follow-ups, one page asked three times).
	limit := testtier.Pick(8, 12)
	rep, err := memablate.Run(ctx, memablate.Config{Dataset: datasettest.ShippedDir(t), Workdir: work, IndexCache: filepath.Join(work, "index"), Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	arms := map[string]memablate.Arm{}
	for _, a := range rep.Arms {
		arms[a.Name] = a
		for _, r := range a.Runs {
			if r.Label != "scripted" {
				t.Fatalf("%s %s: label %q", a.Name, r.Task, r.Label)
			}
		}
	}
	off, on, trust, stale := arms[memablate.ArmOff], arms[memablate.ArmOn], arms[memablate.ArmTrust], arms[memablate.ArmStale]
	if on.Recalls == 0 || trust.Recalls == 0 || off.Recalls != 0 || stale.Recalls != 0 {
		t.Fatalf("recalls: off %d on %d trust %d stale %d", off.Recalls, on.Recalls, trust.Recalls, stale.Recalls)
	}
	// Decayed records are forgotten: the stale arm is memory off, run by run.
	for i := range off.Runs {
		a, b := off.Runs[i], stale.Runs[i]
		if a.Success != b.Success || a.Tokens != b.Tokens || strings.Join(a.Citations, ",") != strings.Join(b.Citations, ",") {
			t.Fatalf("stale run %s differs from memory off: %+v vs %+v", a.Task, b, a)
		}
	}
	// Trusting memory skips searches: fewer tokens.
	if trust.Tokens >= off.Tokens {
		t.Fatalf("trust used %d tokens, off %d", trust.Tokens, off.Tokens)
	}
	if rep.Stale == nil || !rep.Stale.Forgotten {
		t.Fatalf("stale record: %+v", rep.Stale)
	}
	// Every request of the memory-on arm was built by tiers, journaled with
	// a report whose accounting holds; recalled memory is in the tier.
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(work, "memory-on-verify", "runs.journal.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	sawMemory := false
	for _, r := range on.Runs {
		evs, err := j.Events(ctx, r.RunID)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind != journal.KindModelRequest {
				continue
			}
			var p journal.ModelRequest
			if err := json.Unmarshal(e.Payload, &p); err != nil || p.Context == nil || p.Context.Tiers == nil {
				t.Fatalf("%s seq %d: no tier report", r.RunID, e.Seq)
			}
			if err := contextlayer.CheckReport(*p.Context.Tiers); err != nil {
				t.Fatalf("%s seq %d: %v", r.RunID, e.Seq, err)
			}
			for _, d := range p.Context.Tiers.Items {
				if d.Tier == "memory" && d.Action != "dropped" && len(d.Provenance) > 0 && strings.HasPrefix(d.Provenance[0], "memory:") {
					sawMemory = true
				}
			}
		}
	}
	if !sawMemory {
		t.Fatal("no request of the memory-on arm admitted a recalled record")
	}
	var md bytes.Buffer
	if err := memablate.WriteMarkdown(&md, rep, "cmd"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| memory off |", "utilization 75% of the window", "scripted", `"tiers"`} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("markdown lacks %q", want)
		}
	}
}
