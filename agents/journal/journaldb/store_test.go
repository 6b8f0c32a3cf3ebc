package journaldb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/agents/journal/journaltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// stepClock is an injected clock that advances one millisecond per reading.
func stepClock() func() time.Time {
	t := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(time.Millisecond); return t }
}

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), "journal.db"), Clock: stepClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func TestAppendAllocatesGapFreeSeqAndChainsHashes(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for i := 0; i < 3; i++ {
		if _, err := s.Append(ctx, "r1", journal.Record{Kind: journal.KindToolCall, Step: i, Payload: map[string]int{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, "r2", journal.Record{Kind: journal.KindRunStarted}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].Seq != 1 || evs[2].Seq != 3 || evs[1].Prev != evs[0].Hash {
		t.Fatalf("events = %+v", evs)
	}
	if err := journal.VerifyChain(evs); err != nil {
		t.Fatal(err)
	}
	r2, _ := s.Events(ctx, "r2")
	if len(r2) != 1 || r2[0].Seq != 1 || r2[0].Prev != "" {
		t.Fatalf("second run does not start its own chain: %+v", r2)
	}
}

func TestSeqContinuesAfterReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(ctx, Config{Path: path, Clock: stepClock()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "r", journal.Record{Kind: journal.KindRunStarted}, journal.Record{Kind: journal.KindModelRequest}); err != nil {
		t.Fatal(err)
	}
	s.Shutdown(ctx)
	s, err = Open(ctx, Config{Path: path, Clock: stepClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	evs, err := s.Append(ctx, "r", journal.Record{Kind: journal.KindModelResponse})
	if err != nil {
		t.Fatal(err)
	}
	if evs[0].Seq != 3 {
		t.Fatalf("seq after reopen = %d, want 3", evs[0].Seq)
	}
	if err := s.Verify(ctx, "r"); err != nil {
		t.Fatal(err)
	}
}

func TestJournalRowsCannotBeUpdatedOrDeleted(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if _, err := s.Append(ctx, "r", journal.Record{Kind: journal.KindRunStarted}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `UPDATE journal_events SET payload='{}'`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("update: %v", err)
	}
	if _, err := s.DB().ExecContext(ctx, `DELETE FROM journal_events`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("delete: %v", err)
	}
}

const ledgerDDL = `CREATE TABLE IF NOT EXISTS ledger (key TEXT PRIMARY KEY, amount INTEGER NOT NULL)`

// withSQL adapts an effect that writes the store's tables: it finds the
// journal.SQLTx capability as a tool does.
func withSQL(fn func(ctx context.Context, tx journal.SQLTx) (journal.Record, error)) journal.EffectFunc {
	return func(ctx context.Context, tx journal.EffectTx) (journal.Record, error) {
		sqlTx, ok := tx.(journal.SQLTx)
		if !ok {
			return journal.Record{}, fmt.Errorf("effect transaction %T has no SQL", tx)
		}
		return fn(ctx, sqlTx)
	}
}

func TestAppendEffectCommitsEffectWithItsEvents(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if err := s.EnsureSchema(ctx, ledgerDDL); err != nil {
		t.Fatal(err)
	}
	call := journal.EffectCall{Step: 1, Tool: "ledger", CallID: "c1", Key: "k1"}
	evs, err := s.AppendEffect(ctx, "r", call, withSQL(func(ctx context.Context, tx journal.SQLTx) (journal.Record, error) {
		if err := tx.Exec(ctx, `INSERT INTO ledger(key, amount) VALUES (?, ?)`, tx.Key(), 42); err != nil {
			return journal.Record{}, err
		}
		return journal.Record{Kind: journal.KindToolResult, Step: 1, Tool: "ledger", CallID: "c1", Payload: journal.ToolResult{Content: "ok"}}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Kind != journal.KindEffect || evs[0].Tool != "ledger" || evs[0].CallID != "c1" || evs[1].Kind != journal.KindToolResult {
		t.Fatalf("events = %+v", evs)
	}
	var eff journal.Effect
	json.Unmarshal(evs[0].Payload, &eff)
	if eff.Key != "k1" || !strings.Contains(eff.Statement, "INSERT INTO ledger") || string(eff.Args) != `["k1",42]` {
		t.Fatalf("effect payload = %+v", eff)
	}
	var n int
	s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger`).Scan(&n)
	if n != 1 {
		t.Fatalf("ledger rows = %d", n)
	}
}

func TestFailedOrPanickingEffectLeavesNoTrace(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	if err := s.EnsureSchema(ctx, ledgerDDL); err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]journal.EffectFunc{
		"error": withSQL(func(ctx context.Context, tx journal.SQLTx) (journal.Record, error) {
			tx.Exec(ctx, `INSERT INTO ledger(key, amount) VALUES ('e', 1)`)
			return journal.Record{}, errors.New("downstream refused")
		}),
		"panic": withSQL(func(ctx context.Context, tx journal.SQLTx) (journal.Record, error) {
			tx.Exec(ctx, `INSERT INTO ledger(key, amount) VALUES ('p', 1)`)
			panic("boom")
		}),
	} {
		_, err := s.AppendEffect(ctx, "r", journal.EffectCall{Step: 1, Tool: "t", CallID: name, Key: name}, fn)
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		var pe *journal.PanicError
		if name == "panic" && !errors.As(err, &pe) {
			t.Fatalf("panic not converted: %v", err)
		}
	}
	var n int
	s.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM ledger`).Scan(&n)
	evs, _ := s.Events(ctx, "r")
	if n != 0 || len(evs) != 0 {
		t.Fatalf("rolled-back effects left %d rows and %d events", n, len(evs))
	}
}

// insertNote is an effect with one statement, counting its calls.
func insertNote(calls *int) journal.EffectFunc {
	return withSQL(func(ctx context.Context, tx journal.SQLTx) (journal.Record, error) {
		*calls++
		if err := tx.Exec(ctx, `INSERT INTO notes(v) VALUES ('x')`); err != nil {
			return journal.Record{}, err
		}
		return journal.Record{Kind: journal.KindToolResult, Payload: journal.ToolResult{Content: "noted", Key: tx.Key()}}, nil
	})
}

func notes(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.DB().QueryRow(`SELECT COUNT(*) FROM notes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSameEffectKeyRunsOnceAndAnswersWithItsEvents(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	s.EnsureSchema(ctx, `CREATE TABLE IF NOT EXISTS notes (v TEXT)`)
	calls := 0
	call := journal.EffectCall{Step: 1, Tool: "t", CallID: "c", Key: "same"}
	first, err := s.AppendEffect(ctx, "r", call, insertNote(&calls))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.AppendEffect(ctx, "r", call, insertNote(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || notes(t, s) != 1 {
		t.Fatalf("the effect ran %d times and left %d rows, want 1 and 1", calls, notes(t, s))
	}
	if len(again) != 2 || again[0].Hash != first[0].Hash || again[1].Hash != first[1].Hash {
		t.Fatalf("the second call answered %+v, want the recorded %+v", again, first)
	}
}

// A journal written before the completing record carried its key (or a
// run whose marker is missing for any reason) still never applies a
// statement twice: the statement's own key refuses it.
func TestStatementKeyRefusesARepeatWithoutTheCompletingMarker(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	s.EnsureSchema(ctx, `CREATE TABLE IF NOT EXISTS notes (v TEXT)`)
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO notes(v) VALUES ('x')`); err != nil {
		t.Fatal(err)
	}
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	eff, _ := journal.Next("r", nil, journal.Record{Kind: journal.KindEffect, Payload: journal.Effect{Key: "old", Statement: "INSERT INTO notes(v) VALUES ('x')", Args: json.RawMessage("[]")}}, time.Now())
	res, _ := journal.Next("r", &eff, journal.Record{Kind: journal.KindToolResult}, time.Now())
	if err := errors.Join(insertEvent(ctx, tx, eff, "old#0"), insertEvent(ctx, tx, res, ""), tx.Commit()); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if _, err := s.AppendEffect(ctx, "r", journal.EffectCall{Key: "old"}, insertNote(&calls)); err == nil {
		t.Fatal("a second application of a recorded statement was accepted")
	}
	if n := notes(t, s); n != 1 {
		t.Fatalf("notes rows = %d, want 1", n)
	}
}

// An imported run's effects are recognised like written ones: calling an
// imported key again answers with the imported events.
func TestImportedEffectRunsOnce(t *testing.T) {
	ctx := context.Background()
	src := openTemp(t)
	src.EnsureSchema(ctx, `CREATE TABLE IF NOT EXISTS notes (v TEXT)`)
	calls := 0
	call := journal.EffectCall{Step: 1, Tool: "t", CallID: "c", Key: "imported"}
	if _, err := src.Append(ctx, "r", journal.Record{Kind: journal.KindRunStarted}); err != nil {
		t.Fatal(err)
	}
	want, err := src.AppendEffect(ctx, "r", call, insertNote(&calls))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := src.Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(&buf, "")
	if err != nil {
		t.Fatal(err)
	}
	dst := openTemp(t)
	dst.EnsureSchema(ctx, `CREATE TABLE IF NOT EXISTS notes (v TEXT)`)
	if err := dst.Import(ctx, runs); err != nil {
		t.Fatal(err)
	}
	got, err := dst.AppendEffect(ctx, "r", call, insertNote(&calls))
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || len(got) != 2 || got[1].Hash != want[1].Hash {
		t.Fatalf("the imported effect ran again (%d calls) or answered %+v, want %+v", calls, got, want)
	}
}

func TestConformance(t *testing.T) {
	journaltest.Suite{
		Open: func(t *testing.T, dir string) journal.Journal {
			s, err := Open(context.Background(), Config{Path: filepath.Join(dir, "journal.db"), Clock: stepClock()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Shutdown(context.Background()) })
			return s
		},
		Close:   func(j journal.Journal) error { return j.(*Store).Shutdown(context.Background()) },
		Durable: true,
	}.Run(t)
}

func TestExportImportRoundTripKeepsHashes(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for _, k := range []journal.Kind{journal.KindRunStarted, journal.KindModelRequest, journal.KindModelResponse, journal.KindRunFinished} {
		if _, err := s.Append(ctx, "r", journal.Record{Kind: k, Label: "scripted", Payload: map[string]string{"k": string(k), "html": "<&>"}}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := s.Export(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	runs, err := journal.ReadJSONL(bytes.NewReader(buf.Bytes()), "x.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || len(runs[0].Events) != 4 || runs[0].LineOf(4) != 4 {
		t.Fatalf("runs = %+v", runs)
	}
	s2 := openTemp(t)
	if err := s2.Import(ctx, runs); err != nil {
		t.Fatal(err)
	}
	if err := s2.Import(ctx, runs); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second import: %v", err)
	}
	var again bytes.Buffer
	if err := s2.Export(ctx, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatalf("export after import differs:\n%s\n%s", buf.Bytes(), again.Bytes())
	}
}
