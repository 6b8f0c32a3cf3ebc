// Package baselines holds the committed evaluation baselines of the
// reference agents (cases, journals, trials, reports, gate policy; see
// docs/baselines.md). Its tests check that the committed journals replay as
// the identity and that no research run ever saw its own question.
package baselines_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomwork/loomwork/datasets/datasettest"
	"github.com/loomwork/loomwork/internal/testtier"

	"github.com/loomwork/loomwork/agents/coding"
	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/sandbox/sandboxtest"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/replay"
)

func TestMain(m *testing.M) {
	sandboxtest.Init() // the coding agent's sandbox re-executes this binary as its helper (without the race detector's exit sleep)
	os.Exit(m.Run())
}

// datasetDir is the judged set the baselines were recorded on: the
// repository's shipped set, or $LOOMWORK_DATASET when set (as for replay).
func datasetDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("LOOMWORK_DATASET"); d != "" {
		return d
	}
	return datasettest.ShippedDir(t)
}

func loadCases(t *testing.T) map[string]datasets.Case {
	t.Helper()
	cs, err := datasets.LoadCases("cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]datasets.Case{}
	for _, c := range cs {
		m[c.ID] = c
	}
	return m
}

func loadRuns(t *testing.T, name string) []journal.Run {
	t.Helper()
	runs, err := journal.ReadJSONLFile(filepath.Join("journals", name))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 {
		t.Fatalf("journals/%s has no runs", name)
	}
	return runs
}

// TestCommittedJournalsReplayAsTheIdentity re-runs every committed journal
// through the registered agents with the tools executed again — the real
// retrieval index and the real sandbox — and checks every event matches,
// every tool result is identical, and the trial records equal the committed
// baseline trials.
func TestCommittedJournalsReplayAsTheIdentity(t *testing.T) {
	testtier.Slow(t)
	ctx := context.Background()
	idx := &research.DatasetIndex{Dir: datasetDir(t)}
	defer idx.Close(ctx)
	sb := &coding.LazySandbox{}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		sb.Shutdown(sctx)
	}()
	reg := runtime.NewRegistry()
	if err := research.Register(reg, research.Config{Index: idx}); err != nil {
		t.Fatal(err)
	}
	if err := coding.Register(reg, coding.Config{Sandbox: sb, WorkRoot: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	eng, err := replay.New(replay.Config{Registry: reg, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	baseline, err := datasets.LoadTrials("baseline.trials.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	cases := loadCases(t)
	want := map[string]datasets.Trial{}
	for _, tr := range baseline {
		// The graders' verdicts were recorded on the replayed records
		// (loom-eval grade in scripts/baselines.sh record): one per grader
		// of the case, in its order, none an error; the rest of the record
		// is the replay's.
		c := cases[tr.CaseID]
		if len(tr.Grades) != len(c.Graders) || len(c.Graders) == 0 {
			t.Errorf("%s#%d: %d recorded grades, the case has %d graders", tr.CaseID, tr.Trial, len(tr.Grades), len(c.Graders))
		}
		for i, g := range tr.Grades {
			if i < len(c.Graders) && (g.Name != c.Graders[i].DisplayName() || g.Error != "") {
				t.Errorf("%s#%d: grade %d is %q (error %q), want the case's %q", tr.CaseID, tr.Trial, i, g.Name, g.Error, c.Graders[i].DisplayName())
			}
		}
		tr.Line, tr.Journal, tr.Grades = 0, nil, nil
		want[fmt.Sprintf("%s#%d", tr.CaseID, tr.Trial)] = tr
	}
	type job struct {
		name string
		run  journal.Run
	}
	var jobs []job
	for _, name := range []string{"research.jsonl", "coding.jsonl"} {
		if name == "coding.jsonl" && os.Geteuid() != 0 {
			if os.Getenv("CI") != "" {
				t.Fatal("replaying the coding journal needs root for the sandbox, and CI runs as root")
			}
			t.Log("skipping the coding journal: the sandbox needs root")
			continue
		}
		for _, run := range loadRuns(t, name) {
			jobs = append(jobs, job{name, run})
		}
	}
	// Each run replays on its own (its own scratch journal, workspace and
	// runtime; the index and the sandbox serve concurrent calls), so the
	// runs are replayed four at a time: a replay mostly waits for its
	// sandboxed programs to start and finish. Every run is still checked
	// event for event and record for record.
	var mu sync.Mutex
	replayErrs := map[int]error{}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name, run := jobs[i].name, jobs[i].run
				rep, err := eng.Replay(ctx, run)
				if err != nil {
					mu.Lock()
					replayErrs[i] = fmt.Errorf("%s %s: %w", name, run.ID, err)
					mu.Unlock()
					continue
				}
				if !rep.OK() || !rep.Complete || rep.MatchedEvents != rep.RecordedEvents || rep.ModelCalls != 0 {
					t.Errorf("%s %s: ok=%v complete=%v matched %d/%d divergence %v diffs %v", name, run.ID, rep.OK(), rep.Complete,
						rep.MatchedEvents, rep.RecordedEvents, rep.Divergence, rep.ResultDiffs)
					continue
				}
				got := replay.TrialRecord(&rep, false)
				got.Journal = nil
				if w, ok := want[fmt.Sprintf("%s#%d", got.CaseID, got.Trial)]; !ok || !reflect.DeepEqual(got, w) {
					t.Errorf("%s: replayed trial differs from baseline.trials.jsonl:\n got %+v\nwant %+v", run.ID, got, w)
				}
			}
		}()
	}
	for i := range jobs {
		work <- i
	}
	close(work)
	wg.Wait()
	for i := range jobs {
		if err := replayErrs[i]; err != nil {
			t.Fatal(err)
		}
	}
	if len(jobs) == 0 {
		t.Fatal("no committed run to replay")
	}
}

// TestResearchRunsNeverSawTheirOwnIssue checks every recorded research
// run of every baseline case: it ran with its case's issue excluded, and
// neither a tool result, the evidence retrieved, nor the citations contain
// that issue.
func TestResearchRunsNeverSawTheirOwnIssue(t *testing.T) {
	cases := loadCases(t)
	runs := loadRuns(t, "research.jsonl")
	seen := map[string]int{}
	for _, run := range runs {
		var started journal.RunStarted
		if err := json.Unmarshal(run.Events[0].Payload, &started); err != nil {
			t.Fatal(err)
		}
		c, ok := cases[started.CaseID]
		if !ok {
			t.Fatalf("%s: case %q is not in cases.jsonl", run.ID, started.CaseID)
		}
		seen[c.ID]++
		var own []string
		for _, tag := range c.Tags {
			if strings.HasPrefix(tag, "issue:") {
				own = append(own, tag)
			}
		}
		if len(own) != 1 {
			t.Fatalf("%s: research case without exactly one issue:N tag: %v", c.ID, c.Tags)
		}
		n := strings.TrimPrefix(own[0], "issue:")
		if !strings.Contains(string(started.Attributes), `"exclude_issues":[`+n+`]`) {
			t.Errorf("%s: run_started attributes %s do not exclude issue %s", run.ID, started.Attributes, n)
		}
		for _, e := range run.Events {
			switch e.Kind {
			case journal.KindToolResult:
				var tr journal.ToolResult
				json.Unmarshal(e.Payload, &tr)
				if strings.Contains(tr.Content, `"`+own[0]+`"`) {
					t.Errorf("%s seq %d: a %s result shows the own issue %s", run.ID, e.Seq, e.Tool, own[0])
				}
				for _, d := range tr.Documents {
					if d == own[0] {
						t.Errorf("%s seq %d: retrieved its own issue %s", run.ID, e.Seq, d)
					}
				}
			case journal.KindRunFinished:
				var fin journal.RunFinished
				json.Unmarshal(e.Payload, &fin)
				for _, d := range fin.Citations {
					if d == own[0] {
						t.Errorf("%s: cites its own issue %s", run.ID, d)
					}
				}
			}
		}
	}
	for id, c := range cases {
		if contains(c.Tags, "research") && seen[id] == 0 {
			t.Errorf("research case %s has no recorded run", id)
		}
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
