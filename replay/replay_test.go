package replay_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/runtime"
	"github.com/loomwork/loomwork/agents/runtime/bookkeeper"
	"github.com/loomwork/loomwork/agents/sandbox/sandboxtest"
	"github.com/loomwork/loomwork/agents/scripted"
	"github.com/loomwork/loomwork/replay"
)

var update = flag.Bool("update", false, "regenerate testdata/good.jsonl and the bad-*.jsonl fixtures")

// The sandbox re-executes this binary as its init helper (egress_test.go).
func TestMain(m *testing.M) { sandboxtest.Init(); goleak.VerifyTestMain(m) }

// panicTB lets fixture builders run outside a test.
type panicTB struct{ testing.TB }

func (panicTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (panicTB) Helper()                   {}
func (panicTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func fakeClock() func() time.Time {
	t := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(7 * time.Millisecond); return t }
}

func registry(t testing.TB, agents ...runtime.Agent) *runtime.Registry {
	reg := runtime.NewRegistry()
	if len(agents) == 0 {
		agents = []runtime.Agent{bookkeeper.Agent()}
	}
	for _, a := range agents {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

const runID = "bookkeeper-case-lunch-t0"

// recordRun runs the bookkeeper live with the scripted model into a journal
// at path and returns the journal's JSONL export.
func recordRun(t testing.TB, path string) []byte { return recordRunAt(t, path, 0) }

// recordRunAt records with a clock shifted by offset; t nil panics on
// failure (for building fixtures), path "" uses a temporary file.
func recordRunAt(t testing.TB, path string, offset time.Duration) []byte {
	if t == nil {
		t = &panicTB{}
	}
	if path == "" {
		dir, err := os.MkdirTemp("", "replay-fixture-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "j.db")
	}
	clock := fakeClock()
	shifted := func() time.Time { return clock().Add(offset) }
	ctx := context.Background()
	j, err := journaldb.Open(ctx, journaldb.Config{Path: path, Clock: shifted})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Shutdown(ctx)
	script, err := scripted.LoadFile("testdata/bookkeeper.script.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := scripted.New(script)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(runtime.Config{Model: m, Journal: j, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Run(ctx, bookkeeper.Agent(), runtime.Task{RunID: runID, Input: "Book the team lunch of 25.00 EUR paid in cash.", CaseID: "lunch", Trial: 0}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := j.Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Corruptions applied to good.jsonl to make the bad-*.jsonl fixtures, and
// what reading each must report.
var badFixtures = []struct {
	file     string
	corrupt  func(lines []string) []string
	wantLine int
	wantErr  error
}{
	{"bad-tampered.jsonl", func(ls []string) []string {
		ls[11] = strings.Replace(ls[11], `"amount_cents":2500`, `"amount_cents":250000`, 1)
		return ls
	}, 12, journal.ErrHashMismatch},
	{"bad-deleted.jsonl", func(ls []string) []string { return append(ls[:6:6], ls[7:]...) }, 7, journal.ErrSeqGap},
	{"bad-reordered.jsonl", func(ls []string) []string { ls[3], ls[4] = ls[4], ls[3]; return ls }, 4, journal.ErrSeqGap},
	{"bad-truncated.jsonl", func(ls []string) []string { return ls[:len(ls)-3] }, 19, journal.ErrTruncated},
	{"bad-torn.jsonl", func(ls []string) []string {
		last := len(ls) - 2
		ls[last] = ls[last][:len(ls[last])/2] // the write stopped mid-line
		return ls[:last+1]
	}, 20, journal.ErrBadLine},
	{"bad-spliced.jsonl", func(ls []string) []string {
		// Line 10 of another recording of the same run (recorded an hour
		// later): self-consistent, right seq, but chained to a different
		// line 9.
		ls[9] = splitLines(recordRunAt(nil, "", time.Hour))[9]
		return ls
	}, 10, journal.ErrChainBroken},
}

func splitLines(b []byte) []string {
	s := string(b)
	return strings.SplitAfter(s, "\n")[:strings.Count(s, "\n")]
}

func TestGenerateFixtures(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate testdata")
	}
	good := recordRun(t, filepath.Join(t.TempDir(), "j.db"))
	if err := os.WriteFile("testdata/good.jsonl", good, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, b := range badFixtures {
		out := strings.Join(b.corrupt(splitLines(good)), "")
		if err := os.WriteFile(filepath.Join("testdata", b.file), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecordingIsDeterministicAndMatchesTheCommittedFixture(t *testing.T) {
	got := recordRun(t, filepath.Join(t.TempDir(), "j.db"))
	want, err := os.ReadFile("testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("a fresh recording differs from testdata/good.jsonl; if the change is intended, run go test ./replay -run TestGenerateFixtures -update")
	}
}

func TestBadJournalsAreRejectedWithTheirLine(t *testing.T) {
	e, err := replay.New(replay.Config{Registry: registry(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range badFixtures {
		t.Run(b.file, func(t *testing.T) {
			path := filepath.Join("testdata", b.file)
			reps, err := e.ReplayFile(context.Background(), path)
			var ce *journal.CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, b.wantErr) || ce.Line != b.wantLine {
				t.Fatalf("err = %v, want %v at line %d", err, b.wantErr, b.wantLine)
			}
			if len(reps) != 0 {
				t.Fatal("a corrupt journal was partly replayed")
			}
			if want := fmt.Sprintf("%s:%d", path, b.wantLine); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not name %s", err, want)
			}
		})
	}
}

func ledgerRows(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT idempotency_key, run_id, step, account, amount_cents, memo FROM ledger_entries ORDER BY idempotency_key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, r, a, m string
		var s, c int
		if err := rows.Scan(&k, &r, &s, &a, &c, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(k, r, s, a, c, m))
	}
	return out
}

func TestReplayOfARecordedRunIsTheIdentity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.db")
	jl := filepath.Join(dir, "run.jsonl")
	if err := os.WriteFile(jl, recordRun(t, orig), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := replay.New(replay.Config{Registry: registry(t), WorkDir: filepath.Join(dir, "work"), KeepDatabases: true, Clock: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(dir, "work"), 0o755)
	reps, err := e.ReplayFile(ctx, jl)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 {
		t.Fatalf("%d reports", len(reps))
	}
	r := reps[0]
	if !r.OK() || !r.Complete || r.ModelCalls != 0 || r.MatchedEvents != r.RecordedEvents || r.RecordedEvents != 20 || r.ToolRuns != 4 {
		t.Fatalf("report = %+v (divergence %v)", r, r.Divergence)
	}
	rec, _ := journal.ReadJSONLFile(jl)
	res, _ := replay.Rescore(rec[0])
	if r.Answer != res.Answer || strings.Join(r.Citations, ",") != "policy/meals" || strings.Join(r.Documents, ",") != "policy/meals" || r.Usage != res.Usage || r.Label != "scripted" {
		t.Fatalf("replayed outcome differs from the recorded one:\n%+v\n%+v", r, res)
	}
	got, want := ledgerRows(t, r.Database), ledgerRows(t, orig)
	if len(want) != 2 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("final state differs:\nreplay %v\noriginal %v", got, want)
	}
}

func TestReplayOfTheCommittedJournalNeedsNoModel(t *testing.T) {
	e, _ := replay.New(replay.Config{Registry: registry(t)})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !reps[0].OK() || reps[0].ModelCalls != 0 || reps[0].CaseID != "lunch" {
		t.Fatalf("report = %+v", reps[0])
	}
}

// seqOf returns the seq of the n-th (from 0) event of kind for tool.
func seqOf(t *testing.T, kind journal.Kind, tool string, n int) (int64, int) {
	runs, err := journal.ReadJSONLFile("testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range runs[0].Events {
		if e.Kind == kind && e.Tool == tool {
			if n == 0 {
				return e.Seq, runs[0].LineOf(e.Seq)
			}
			n--
		}
	}
	t.Fatalf("no %s event %d for %s", kind, n, tool)
	return 0, 0
}

// withTool returns the bookkeeper with one tool's Run replaced.
func withTool(name string, run func(inner func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error)) func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error)) runtime.Agent {
	a := bookkeeper.Agent()
	for i := range a.Tools {
		if a.Tools[i].Name == name {
			a.Tools[i].Run = run(a.Tools[i].Run)
		}
	}
	return a
}

func TestChangedEffectIsReportedAsDivergenceAtItsSeq(t *testing.T) {
	// The new ledger tool books negative amounts with a different memo:
	// the second ledger call's effect is not the recorded one.
	changed := withTool("ledger_append", func(func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error)) func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
		return func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			var a struct {
				Account     string `json:"account"`
				AmountCents int64  `json:"amount_cents"`
				Memo        string `json:"memo"`
			}
			json.Unmarshal(in.Arguments, &a)
			if a.AmountCents < 0 {
				a.Memo = "refund: " + a.Memo
			}
			if err := in.Tx.Exec(ctx, `INSERT INTO ledger_entries (idempotency_key, run_id, step, account, amount_cents, memo) VALUES (?, ?, ?, ?, ?, ?)`,
				in.IdempotencyKey, in.RunID, in.Step, a.Account, a.AmountCents, a.Memo); err != nil {
				return runtime.ToolOutput{}, err
			}
			return runtime.ToolOutput{Content: "ok"}, nil
		}
	})
	e, _ := replay.New(replay.Config{Registry: registry(t, changed)})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	d := reps[0].Divergence
	wantSeq, wantLine := seqOf(t, journal.KindEffect, "ledger_append", 1)
	if d == nil || d.Code != journal.CodeMismatch || d.Seq != wantSeq || d.Field != "args_hash" || reps[0].DivergeLine != wantLine {
		t.Fatalf("divergence = %v (line %d), want LWR1100 args_hash at seq %d line %d", d, reps[0].DivergeLine, wantSeq, wantLine)
	}
	if d.Recorded == nil || d.Produced == nil || d.Recorded.Kind != journal.KindEffect || d.Recorded.CallID != "call_4" {
		t.Fatalf("divergence sides = %+v %+v", d.Recorded, d.Produced)
	}
	if !strings.HasPrefix(d.Error(), fmt.Sprintf("[LWR1100] nondeterministic run %s at seq %d: journal has effect(step=3 tool=ledger_append call=call_4", runID, wantSeq)) {
		t.Fatalf("message = %s", d)
	}
	// The first call's result (content "ok" instead of the balance) is
	// reported as a differing result before the divergence.
	if len(reps[0].ResultDiffs) != 1 || reps[0].ResultDiffs[0].CallID != "call_3" {
		t.Fatalf("result diffs = %+v", reps[0].ResultDiffs)
	}
}

func TestToolThatStopsWritingIsAKindDivergence(t *testing.T) {
	changed := withTool("ledger_append", func(func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error)) func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
		return func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
			return runtime.ToolOutput{Content: "recorded 2500 cents on meals; balance 2500 cents"}, nil
		}
	})
	e, _ := replay.New(replay.Config{Registry: registry(t, changed)})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	wantSeq, _ := seqOf(t, journal.KindEffect, "ledger_append", 0)
	d := reps[0].Divergence
	if d == nil || d.Seq != wantSeq || d.Field != "kind" || d.Produced.Kind != journal.KindToolResult {
		t.Fatalf("divergence = %v, want kind mismatch at seq %d", d, wantSeq)
	}
}

func TestChangedPureToolResultIsReportedWithoutStopping(t *testing.T) {
	changed := withTool("calculator", func(inner func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error)) func(context.Context, runtime.ToolInput) (runtime.ToolOutput, error) {
		return func(ctx context.Context, in runtime.ToolInput) (runtime.ToolOutput, error) {
			out, err := inner(ctx, in)
			out.Content += ".00"
			return out, err
		}
	})
	e, _ := replay.New(replay.Config{Registry: registry(t, changed)})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	wantSeq, wantLine := seqOf(t, journal.KindToolResult, "calculator", 0)
	if r.Divergence != nil || len(r.ResultDiffs) != 1 || !r.Complete {
		t.Fatalf("report = %+v, divergence %v", r, r.Divergence)
	}
	d := r.ResultDiffs[0]
	if d.Seq != wantSeq || d.Line != wantLine || d.Recorded != "2500" || d.Replayed != "2500.00" || d.Code != journal.CodeResultDiffers {
		t.Fatalf("diff = %+v, want seq %d line %d", d, wantSeq, wantLine)
	}
}

func TestChangedSystemPromptDivergesAtSeqOne(t *testing.T) {
	a := bookkeeper.Agent()
	a.System = "You are an accountant."
	e, _ := replay.New(replay.Config{Registry: registry(t, a)})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if d := reps[0].Divergence; d == nil || d.Seq != 1 || reps[0].DivergeLine != 1 {
		t.Fatalf("divergence = %v", d)
	}
}

func TestUnregisteredAgentIsAnError(t *testing.T) {
	e, _ := replay.New(replay.Config{Registry: runtime.NewRegistry()})
	_, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err == nil || !strings.Contains(err.Error(), `agent "bookkeeper" is not registered`) {
		t.Fatalf("err = %v", err)
	}
}

func TestIncompleteJournalReplaysItsPrefix(t *testing.T) {
	ctx := context.Background()
	runs, err := journal.ReadJSONLFile("testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	run := runs[0]
	run.Events, run.Lines = run.Events[:12], run.Lines[:12] // crashed after the first ledger call was journaled
	e, _ := replay.New(replay.Config{Registry: registry(t)})
	r, err := e.Replay(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if r.Complete || r.Divergence != nil || r.MatchedEvents != 12 || r.ModelCalls != 0 {
		t.Fatalf("report = %+v", r)
	}
}

func TestRescoreUsesRecordedEventsOnly(t *testing.T) {
	runs, err := journal.ReadJSONLFile("testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := replay.Rescore(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !r.Rescored || r.ToolRuns != 0 || r.ModelCalls != 0 || r.Label != "scripted" || r.Agent != "bookkeeper" ||
		strings.Join(r.ToolsCalled, ",") != "search_policy,calculator,ledger_append" ||
		strings.Join(r.Citations, ",") != "policy/meals" || r.Usage.InputTokens != 2112 || r.DurationMS <= 0 {
		t.Fatalf("rescore = %+v", r)
	}
}

func TestReplaySpansCarryTheScriptedLabel(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	e, _ := replay.New(replay.Config{Registry: registry(t), TracerProvider: tp})
	reps, err := e.ReplayFile(context.Background(), "testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	chats := 0
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "loomwork.model.label" && kv.Value.AsString() != "scripted" {
				t.Fatalf("span %s labelled %q", s.Name(), kv.Value.AsString())
			}
		}
		if strings.HasPrefix(s.Name(), "chat ") {
			chats++
		}
		if s.SpanContext().TraceID().String() != reps[0].TraceID {
			t.Fatalf("span %s not in the reported trace %s", s.Name(), reps[0].TraceID)
		}
	}
	if chats != 4 {
		t.Fatalf("%d chat spans", chats)
	}
}
