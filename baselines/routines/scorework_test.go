package routines

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/coord"
	"github.com/loomwork/loomwork/semconv"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// caseTrace is one agent run as an OTel GenAI SDK sends it: a root
// invoke_agent span naming its case (loomwork.case.id) and one chat call.
func caseTrace(n int, caseID string, at time.Time) []store.Span {
	tid := fmt.Sprintf("%08x%024x", 0x5c0e0000+n, n)
	sid := func(k int) string { return fmt.Sprintf("%016x", n*100+k) }
	root := store.Span{TraceID: tid, SpanID: sid(1), Name: "invoke_agent toy", Kind: "internal",
		StartTime: at, EndTime: at.Add(time.Second), StatusCode: store.StatusUnset, ServiceName: "toy",
		Operation: semconv.OpInvokeAgent, AgentName: "toy", ResourceAttributes: store.Attributes{"service.name": "toy"},
		Attributes: store.Attributes{semconv.AttrOperationName: semconv.OpInvokeAgent, semconv.AttrAgentName: "toy",
			semconv.AttrCaseID:        caseID,
			semconv.AttrInputMessages: `[{"role":"user","parts":[{"type":"text","content":"task of ` + caseID + `"}]}]`}}
	chat := store.Span{TraceID: tid, SpanID: sid(2), ParentSpanID: root.SpanID, Name: "chat toy-model", Kind: "client",
		StartTime: at.Add(10 * time.Millisecond), EndTime: at.Add(100 * time.Millisecond), StatusCode: store.StatusUnset,
		ServiceName: "toy", Operation: semconv.OpChat, RequestModel: "toy-model", ResponseModel: "toy-model-1",
		HasUsage: true, InputTokens: 100, OutputTokens: 20,
		Attributes: store.Attributes{semconv.AttrOperationName: semconv.OpChat, semconv.AttrRequestModel: "toy-model"}}
	return []store.Span{root, chat}
}

// TestScoreTracesTaskIsExecutedOnce: one occurrence of the score-traces
// routine proposes one task for its window; ScoreWork claims it, scores
// the window's traces (one trial per trace, the cases file's case where it
// has one, else the case built from the traces), writes the report into
// the folder named by the task key, submits under its grant and accepts.
// A second execution finds nothing to claim.
func TestScoreTracesTaskIsExecutedOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(ctx)
	day0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var spans []store.Span
	// In the window [day0-12h, day0+6h) (the first occurrence looks back First = 18h): two runs of case-a, one of case-b.
	spans = append(spans, caseTrace(1, "case-a", day0.Add(1*time.Hour))...)
	spans = append(spans, caseTrace(2, "case-a", day0.Add(2*time.Hour))...)
	spans = append(spans, caseTrace(3, "case-b", day0.Add(3*time.Hour))...)
	// After the window: not scored by this task.
	spans = append(spans, caseTrace(4, "case-a", day0.Add(7*time.Hour))...)
	if err := st.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	casesPath := filepath.Join(dir, "cases.jsonl")
	if err := os.WriteFile(casesPath, []byte(`{"id":"case-a","task":"the reviewed task of case-a"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	now := day0
	c, err := coord.Open(ctx, coord.Config{Path: filepath.Join(dir, "coord.db"), Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(ctx)
	sched := coord.Schedule{Routine: ScoreTraces, Version: 1, Calendar: "0 6 * * *", Timezone: "UTC",
		Overlap: coord.OverlapBufferOne, CatchUp: coord.CatchUpAll}
	if _, err := c.Tick(ctx, sched); err != nil {
		t.Fatal(err)
	}
	now = day0.Add(6*time.Hour + 2*time.Second)
	if occs, err := c.Tick(ctx, sched); err != nil || len(occs) != 1 {
		t.Fatalf("tick: %+v %v", occs, err)
	}
	r := &Runner{Coord: c, Routines: []Routine{Traces{Store: st, Cases: casesPath, First: 18 * time.Hour}}, Worker: "routine-runner"}
	if n, err := r.RunQueued(ctx); err != nil || n != 1 {
		t.Fatalf("inspections: %d %v", n, err)
	}
	const key = "score-traces/2026-09-30T12:00:00Z/2026-10-01T06:00:00Z"
	if ts, _ := c.Tasks(ctx, ScoreTracesKind, false); len(ts) != 1 || ts[0].Key != key || ts[0].State != coord.Pending {
		t.Fatalf("score-traces tasks: %+v", ts)
	}

	var log strings.Builder
	out := filepath.Join(dir, "reports")
	w := &ScoreWork{Coord: c, Store: st, Out: out, Worker: "scorer-1", Log: &log}
	n, err := w.RunQueued(ctx)
	t.Log("\n" + log.String())
	if err != nil || n != 1 {
		t.Fatalf("first execution: %d task(s), %v; want 1", n, err)
	}
	task, err := c.Get(ctx, key)
	if err != nil || task.State != coord.Accepted || task.Fence != 1 {
		t.Fatalf("task after execution: %+v %v", task, err)
	}
	ts, _ := c.Tasks(ctx, ScoreTracesKind, true)
	var res ScoreResult
	if err := json.Unmarshal(ts[0].Result, &res); err != nil {
		t.Fatal(err)
	}
	wantDir := filepath.Join(out, "score-traces", "2026-09-30T12:00:00Z", "2026-10-01T06:00:00Z")
	if res.Dir != wantDir || res.Trials != 3 || res.CasesFromFile != 1 || res.CasesFromTraces != 1 {
		t.Fatalf("result: %+v", res)
	}
	trials, err := os.ReadFile(filepath.Join(wantDir, TrialsFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(trials, []byte("\n")); got != 3 {
		t.Fatalf("%s has %d trials, want 3:\n%s", TrialsFile, got, trials)
	}
	var summary struct {
		Candidate struct {
			NTrials   int    `json:"n_trials"`
			NCases    int    `json:"n_cases"`
			CasesFile string `json:"cases_file"`
		} `json:"candidate"`
	}
	b, err := os.ReadFile(filepath.Join(wantDir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &summary); err != nil {
		t.Fatal(err)
	}
	if summary.Candidate.NTrials != 3 || summary.Candidate.NCases != 2 || summary.Candidate.CasesFile != casesPath {
		t.Fatalf("%s: %+v", SummaryFile, summary.Candidate)
	}
	cases, err := os.ReadFile(filepath.Join(wantDir, CasesFile))
	if err != nil || !strings.Contains(string(cases), "the reviewed task of case-a") || !strings.Contains(string(cases), "task of case-b") {
		t.Fatalf("%s: %s %v", CasesFile, cases, err)
	}

	// A second execution finds nothing to claim, and the files stay.
	if n, err := w.RunQueued(ctx); err != nil || n != 0 {
		t.Fatalf("second execution: %d task(s), %v; want 0", n, err)
	}
	if again, _ := c.Get(ctx, key); again.Fence != 1 || again.Claims != 1 {
		t.Fatalf("the task was claimed again: %+v", again)
	}
}

// TestScoreWorkFailsAMalformedTask: a score-traces task whose payload is
// not a window is failed with a reason naming the task and the field; the
// well-formed task next to it still runs.
func TestScoreWorkFailsAMalformedTask(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "traces.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(ctx)
	day0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	if err := st.WriteSpans(ctx, caseTrace(1, "case-a", day0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	c, err := coord.Open(ctx, coord.Config{Path: filepath.Join(dir, "coord.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(ctx)
	for _, spec := range []coord.TaskSpec{
		{Key: "score-traces/garbled", Kind: ScoreTracesKind, Payload: []byte(`{"since":"yesterday"}`)},
		{Key: "score-traces/backwards", Kind: ScoreTracesKind, Payload: []byte(`{"since":"2026-10-02T00:00:00Z","until":"2026-10-01T00:00:00Z","traces":1}`)},
		{Key: "score-traces/empty", Kind: ScoreTracesKind, Payload: []byte(`{"since":"2026-09-01T00:00:00Z","until":"2026-09-02T00:00:00Z","traces":1}`)},
		{Key: "score-traces/good", Kind: ScoreTracesKind, Payload: []byte(`{"since":"2026-10-01T00:00:00Z","until":"2026-10-02T00:00:00Z","traces":1}`)},
	} {
		if _, err := c.Enqueue(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	w := &ScoreWork{Coord: c, Store: st, Out: filepath.Join(dir, "reports"), Worker: "scorer-1"}
	n, err := w.RunQueued(ctx)
	if n != 1 || err == nil {
		t.Fatalf("ran %d, err %v; want 1 accepted and the malformed ones reported", n, err)
	}
	for _, want := range []string{
		`score-traces task score-traces/garbled: payload: parsing time "yesterday"`,
		"score-traces task score-traces/backwards: payload: until 2026-10-01T00:00:00Z is not after since 2026-10-02T00:00:00Z",
		"score-traces task score-traces/empty: no trace started in [2026-09-01T00:00:00Z, 2026-09-02T00:00:00Z)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for key, state := range map[string]string{"score-traces/garbled": coord.Failed, "score-traces/backwards": coord.Failed,
		"score-traces/empty": coord.Failed, "score-traces/good": coord.Accepted} {
		if task, _ := c.Get(ctx, key); task.State != state {
			t.Errorf("%s is %s (%s), want %s", key, task.State, task.Note, state)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "reports", "score-traces", "garbled")); !os.IsNotExist(err) {
		t.Errorf("a failed task wrote its folder: %v", err)
	}
}
