package suite

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaldb"
	"github.com/loomwork/loomwork/agents/research"
	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/internal/coord"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/semconv"
)

func researchCases(t *testing.T, n int) []datasets.Case {
	t.Helper()
	all, err := datasets.LoadCases("../cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out []datasets.Case
	for _, c := range all {
		for _, tag := range c.Tags {
			if tag == research.Name && len(out) < n {
				out = append(out, c)
			}
		}
	}
	return out
}

type suiteEnv struct {
	c   *coord.Coordinator
	def Definition
	w   *Worker
}

// newSuite builds a suite in root whose worker uses idx: the tests share
// one opened index (opening the corpus fits its LSA model, which is slow
// under -race on a loaded machine).
func newSuite(t *testing.T, root string, idx *research.DatasetIndex, cases []datasets.Case, trials int, lease time.Duration, opts ...func(*Definition, *WorkerConfig)) suiteEnv {
	t.Helper()
	ctx := context.Background()
	ds, err := datasets.ResolveJudged("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	def := Definition{Agent: research.Name, Trials: trials, Dir: root, AbsDir: root, Dataset: ds, IndexCache: idx.CacheDir,
		Lease: Duration(lease), CasesDigest: "test"}
	wcfg := WorkerConfig{ID: "w", Index: idx, Poll: 20 * time.Millisecond}
	for _, o := range opts {
		o(&def, &wcfg)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := coord.Open(ctx, coord.Config{Path: CoordinatorPath(root)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(ctx) })
	plan, err := Plan(research.Name, cases, trials, "cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := Enqueue(ctx, c, def, plan); err != nil {
		t.Fatal(err)
	}
	wcfg.Coord = c
	w, err := NewWorker(ctx, wcfg)
	if err != nil {
		t.Fatal(err)
	}
	return suiteEnv{c, def, w}
}

func (s suiteEnv) run(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	d := &Driver{Coord: s.c, Def: s.def, Poll: 10 * time.Millisecond}
	errc := make(chan error, 1)
	go func() { errc <- s.w.Run(ctx) }()
	p, err := d.Wait(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !p.Done() || p.Failed != 0 {
		t.Fatalf("progress %s", p)
	}
	path, err := d.Write(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(abs(s.def, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReclaimedTrialResumesFromTheDeadAttemptsJournal: a worker dies
// after journaling the first events of a trial (its attempt folder holds
// that prefix of the journal); after the lease the trial is reclaimed with
// a new fence, resumed from the prefix — the model answers in it are not
// asked again — and the suite's output is byte-identical to an
// uninterrupted run. The dead worker's grant can neither renew nor submit.
func TestReclaimedTrialResumesFromTheDeadAttemptsJournal(t *testing.T) {
	testtier.Slow(t)
	ctx := context.Background()
	root := t.TempDir()
	ds, err := datasets.ResolveJudged("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	idx := &research.DatasetIndex{Dir: ds, CacheDir: filepath.Join(root, "index")}
	defer idx.Close(ctx)
	cases := researchCases(t, 2)

	clean := newSuite(t, filepath.Join(root, "clean"), idx, cases, 2, time.Minute)
	want := clean.run(t)

	s := newSuite(t, filepath.Join(root, "crash"), idx, cases, 2, time.Second)
	// The dead worker: it claimed the first trial and journaled its first
	// four events (run start, the first model answer, ...) before dying.
	dead, err := s.c.ClaimNext(ctx, Kind, "dead-worker", time.Second)
	if err != nil || dead == nil {
		t.Fatal(dead, err)
	}
	task, _ := s.c.Get(ctx, dead.Key)
	var spec TrialSpec
	_ = json.Unmarshal(task.Payload, &spec)
	cleanTask, _ := clean.c.Get(ctx, dead.Key)
	var res Result
	if err := json.Unmarshal(cleanTask.Result, &res); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(strings.NewReader(res.Journal), "clean")
	if err != nil || len(runs) != 1 || len(runs[0].Events) < 6 {
		t.Fatalf("clean journal: %v %v", runs, err)
	}
	attempt := s.w.attemptDir(spec, dead.Fence)
	if err := os.MkdirAll(attempt, 0o755); err != nil {
		t.Fatal(err)
	}
	j, err := journaldb.Open(ctx, journaldb.Config{Path: filepath.Join(attempt, "journal.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Import(ctx, []journal.Run{{ID: spec.RunID, Events: runs[0].Events[:4]}}); err != nil {
		t.Fatal(err)
	}
	_ = j.Shutdown(ctx)

	got := s.run(t)
	if got != strings.ReplaceAll(want, "/clean/", "/crash/") {
		t.Fatalf("the resumed suite differs from the uninterrupted one:\n got %s\nwant %s", got, want)
	}
	after, _ := s.c.Get(ctx, dead.Key)
	// Fence+1 at least: on a loaded machine a heartbeat can miss too, and
	// the trial is then reclaimed once more (still resumed, still equal).
	if after.Fence < dead.Fence+1 || int64(after.Claims) != after.Fence || after.State != coord.Accepted {
		t.Fatalf("reclaimed task: %+v", after)
	}
	if _, err := s.c.Renew(ctx, *dead, time.Minute); !errors.Is(err, coord.ErrStaleGrant) {
		t.Fatalf("dead renew: %v", err)
	}
	if err := s.c.Submit(ctx, *dead, "late", []byte("late")); !errors.Is(err, coord.ErrStaleGrant) {
		t.Fatalf("dead submit: %v", err)
	}
	// The journal published for the trial is the clean one, byte for byte.
	pub, err := os.ReadFile(abs(s.def, s.def.JournalPath(spec.CaseID, spec.Trial)))
	if err != nil || string(pub) != res.Journal {
		t.Fatalf("published journal differs from the clean run's (%v)", err)
	}
}

// TestValidateRefusesAForeignRecord: the driver's check policy refuses a
// record for another (case, trial) and a journal holding another run.
func TestValidateRefusesAForeignRecord(t *testing.T) {
	def := Definition{Agent: research.Name, Trials: 1, Dir: "s", AbsDir: "/x/s", Lease: Duration(time.Second)}
	spec := TrialSpec{CaseID: "a", Trial: 0, RunID: "research-a-t0"}
	rec := `{"case_id":"b","trial":0,"model_label":"scripted","journal":{"path":"s/journals/b-t0.jsonl","run_id":"research-b-t0"},"success":false}`
	raw, _ := json.Marshal(Result{Trial: json.RawMessage(rec)})
	if _, err := validate(def, spec, raw); err == nil || !strings.Contains(err.Error(), "record names case b trial 0, the task is case a trial 0") {
		t.Fatalf("err = %v", err)
	}
	rec = `{"case_id":"a","trial":0,"model_label":"scripted","journal":{"path":"s/journals/a-t0.jsonl","run_id":"research-a-t0"},"success":false}`
	raw, _ = json.Marshal(Result{Trial: json.RawMessage(rec), Journal: "not a journal\n"})
	if _, err := validate(def, spec, raw); err == nil {
		t.Fatal("a corrupt journal passed validation")
	}
	raw, _ = json.Marshal(Result{Trial: json.RawMessage(rec)})
	if _, err := validate(def, spec, raw); err != nil {
		t.Fatalf("a failed trial without a journal: %v", err)
	}
}

// TestWorkersSendEachTrialsSpans: a suite worker with a tracer provider
// sends each trial as one trace whose invoke_agent root names its case and
// trial, with the chat spans' messages when the suite captures content;
// the trial records are the same as without tracing.
func TestWorkersSendEachTrialsSpans(t *testing.T) {
	testtier.NoRace(t, "TestReclaimedTrialResumesFromTheDeadAttemptsJournal")
	testtier.Slow(t)
	ctx := context.Background()
	root := t.TempDir()
	ds, err := datasets.ResolveJudged("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	idx := &research.DatasetIndex{Dir: ds, CacheDir: filepath.Join(root, "index")}
	defer idx.Close(ctx)
	cases := researchCases(t, 1)
	plain := newSuite(t, filepath.Join(root, "plain"), idx, cases, 2, time.Minute).run(t)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	traced := newSuite(t, filepath.Join(root, "traced"), idx, cases, 2, time.Minute, func(d *Definition, w *WorkerConfig) {
		d.CaptureContent = true
		w.TracerProvider = tp
	}).run(t)
	if traced != strings.ReplaceAll(plain, "/plain/", "/traced/") {
		t.Fatalf("tracing changed the trial records:\n got %s\nwant %s", traced, plain)
	}
	roots := map[int]bool{}
	traces := map[string]bool{}
	chatsWithContent := 0
	for _, sp := range rec.Ended() {
		traces[sp.SpanContext().TraceID().String()] = true
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		if !sp.Parent().IsValid() {
			if attrs[semconv.AttrCaseID].AsString() != cases[0].ID {
				t.Errorf("root %q: case id %v", sp.Name(), attrs[semconv.AttrCaseID])
			}
			roots[int(attrs[semconv.AttrTrial].AsInt64())] = true
		}
		if strings.HasPrefix(sp.Name(), "chat") && attrs[semconv.AttrInputMessages].AsString() != "" {
			chatsWithContent++
		}
	}
	if len(roots) != 2 || !roots[0] || !roots[1] || len(traces) != 2 {
		t.Fatalf("roots for trials %v in %d traces, want trials 0 and 1, one trace each", roots, len(traces))
	}
	if chatsWithContent == 0 {
		t.Fatal("no chat span carries its input messages")
	}
}
